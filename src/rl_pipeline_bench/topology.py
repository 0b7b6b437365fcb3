"""Measurement-contract topology for the framework backends, checked before any lease.

The contract fixes, per framework, the GPU split (two training, two inference),
the Megatron parallel layout, the LoRA shape and SkyRL's batch/worker pairs. A
suite that asks for something the framework cannot satisfy fails here with a
ConfigError naming the config key, before a GPU is reserved.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .config import ConfigError, Suite, get_suite

FRAMEWORK_BACKENDS = ("art", "skyrl")

#: Models whose native support (ART's registry, SkyRL's Megatron bridge) the contract covers.
SUPPORTED_MODELS: dict[str, tuple[str, ...]] = {
    "art": ("Qwen/Qwen3.5-35B-A3B",),
    "skyrl": ("Qwen/Qwen3.5-35B-A3B",),
}
REQUIRED_GPUS = 4
TRAIN_GPUS = 2
INFERENCE_GPUS = 2
CONTRACT_LORA_RANK = 8
LORA_ALPHA = 32
#: SkyRL batch (groups per update) -> number of parallel generation workers.
SKYRL_WORKERS = {4: 12, 1: 3}
SKYRL_STALENESS = 4
ART_MAX_POLICY_AGE = 4
ART_PACKED_SEQUENCE_LENGTH = 131072
ART_MAX_SEQ_LENGTH = 131072


@dataclass(frozen=True)
class Topology:
    """Training-side Megatron layout plus the inference GPU count."""

    train_gpus: int
    inference_gpus: int
    tp: int
    cp: int
    ep: int
    pp: int = 1
    etp: int = 1

    @property
    def dp(self) -> int:
        return self.train_gpus // (self.tp * self.cp * self.pp)

    def problems(self) -> list[str]:
        """Why Megatron could not lay this out (empty when it can)."""
        out: list[str] = []
        for name in ("tp", "cp", "ep", "pp", "etp", "train_gpus", "inference_gpus"):
            if getattr(self, name) < 1:
                out.append(f"{name} must be >= 1 (got {getattr(self, name)})")
        if out:
            return out
        model_parallel = self.tp * self.cp * self.pp
        if self.train_gpus % model_parallel:
            out.append(f"{self.train_gpus} training GPUs are not a multiple of TP*CP*PP = {model_parallel}")
        # Expert parallelism is carved out of the TP*CP*DP ranks of one pipeline stage.
        elif (self.tp * self.cp * self.dp) % (self.etp * self.ep):
            out.append(
                f"EP*ETP = {self.ep * self.etp} does not divide TP*CP*DP = {self.tp * self.cp * self.dp} "
                f"on {self.train_gpus} training GPUs"
            )
        return out

    def label(self) -> str:
        return f"TP{self.tp} CP{self.cp} EP{self.ep} DP{self.dp}"


ART_TOPOLOGY = Topology(train_gpus=TRAIN_GPUS, inference_gpus=INFERENCE_GPUS, tp=1, cp=2, ep=2)
SKYRL_TOPOLOGY = Topology(train_gpus=TRAIN_GPUS, inference_gpus=INFERENCE_GPUS, tp=1, cp=1, ep=2)


def contract_topology(backend: str) -> Topology:
    if backend == "art":
        return ART_TOPOLOGY
    if backend == "skyrl":
        return SKYRL_TOPOLOGY
    raise ConfigError(f"backend '{backend}' has no framework topology (framework backends: {', '.join(FRAMEWORK_BACKENDS)})")


def lora_rank(suite: Suite) -> int:
    return int(suite.get("rank", CONTRACT_LORA_RANK))


def is_supplemental(suite: Suite) -> bool:
    """A LoRA rank other than the contract's 8 is a supplemental variant, reported apart."""
    return lora_rank(suite) != CONTRACT_LORA_RANK


def variant_label(suite: Suite, backend: str) -> str:
    """Label a report shows for this (suite, backend): contract or supplemental variant."""
    parts = []
    if backend == "skyrl":
        b = skyrl_batch(suite)
        parts.append(f"B{b}/workers{SKYRL_WORKERS[b]}")
    rank = lora_rank(suite)
    parts.append(f"rank {rank}" + (" (supplemental)" if rank != CONTRACT_LORA_RANK else ""))
    return ", ".join(parts)


def skyrl_batch(suite: Suite) -> int:
    return int(suite.get("skyrl_batch_size", 4))


def skyrl_workers(suite: Suite) -> int:
    b = skyrl_batch(suite)
    if b not in SKYRL_WORKERS:
        raise ConfigError(
            f"config key 'suites/{suite.name}/skyrl_batch_size': {b} is not a contract batch "
            f"(allowed: {', '.join(map(str, sorted(SKYRL_WORKERS)))})"
        )
    return SKYRL_WORKERS[b]


def suite_problems(config: dict[str, Any], suite: Suite, backend: str) -> list[str]:
    """Every reason this suite cannot run `backend` under the contract, each naming its key."""
    if backend not in FRAMEWORK_BACKENDS:
        return []
    key = f"suites/{suite.name}"
    out: list[str] = []
    gpus = suite.get("gpus")
    if gpus is None:
        out.append(f"config key '{key}/gpus': missing; {backend} needs {REQUIRED_GPUS} GPUs")
    elif int(gpus) != REQUIRED_GPUS:
        out.append(
            f"config key '{key}/gpus': {backend} needs exactly {REQUIRED_GPUS} GPUs "
            f"({TRAIN_GPUS} training + {INFERENCE_GPUS} inference), got {gpus}"
        )
    if suite.get("device") != "cuda":
        out.append(f"config key '{key}/device': {backend} runs on cuda only, got '{suite.get('device')}'")
    model_name = suite.get("model")
    model = (config.get("models") or {}).get(model_name)
    supported = SUPPORTED_MODELS[backend]
    if model is None:
        out.append(f"config key '{key}/model': unknown model '{model_name}'")
    elif model.get("repo_id") not in supported:
        out.append(
            f"config key '{key}/model': {backend} does not support model '{model_name}' "
            f"(repo {model.get('repo_id')}); supported: {', '.join(supported)}"
        )
    elif model.get("source") != "hub" or not model.get("revision"):
        out.append(f"config key 'models/{model_name}': {backend} needs a pinned hub snapshot (source: hub, revision)")
    rank = lora_rank(suite)
    if rank < 1:
        out.append(f"config key '{key}/rank': LoRA rank must be >= 1, got {rank}")
    if backend == "skyrl" and skyrl_batch(suite) not in SKYRL_WORKERS:
        out.append(
            f"config key '{key}/skyrl_batch_size': {skyrl_batch(suite)} is not a contract batch "
            f"(allowed: {', '.join(map(str, sorted(SKYRL_WORKERS)))})"
        )
    topo = contract_topology(backend)
    for p in topo.problems():
        out.append(f"{backend} topology {topo.label()}: {p}")
    if gpus is not None and int(gpus) == REQUIRED_GPUS and topo.train_gpus + topo.inference_gpus != int(gpus):
        out.append(f"config key '{key}/gpus': topology uses {topo.train_gpus + topo.inference_gpus} GPUs, suite leases {gpus}")
    return out


def preflight(config: dict[str, Any], suite: Suite | str | None, backend: str) -> None:
    """Raise ConfigError listing every contract problem; call before the lease."""
    if not isinstance(suite, Suite):
        suite = get_suite(config, suite)
    problems = suite_problems(config, suite, backend)
    if problems:
        raise ConfigError(f"suite '{suite.name}' cannot run {backend}:\n  " + "\n  ".join(problems))

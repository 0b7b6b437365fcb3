"""Run-spec checks against a backend's descriptor, run at DAG time and before any lease.

A backend's descriptor (rl_pipeline_bench.backends) fixes what its runs need: the
device, the GPU count and split, the Megatron parallel layout (`topology.Topology`), the
supported models, plus its own checks (e.g. SkyRL's batch/worker pairs). They read
the resolved run spec (rl_pipeline_bench.settings.spec.RunSpec), which the workflow builds for
every suite before planning; a suite that asks for something the backend cannot satisfy
fails here with a ConfigError naming the config key, before a GPU is reserved.
"""

from __future__ import annotations

from typing import Any

from ..records.configfile import ConfigError
from . import context_fit, get
from .topology import CONTRACT_LORA_RANK, lora_rank


def variant_label(spec: Any, backend: str) -> str:
    """Label a report shows for this (run spec, backend): its own variant parts, then the LoRA rank."""
    desc = get(backend)
    parts = list(desc.variant(spec)) if desc.variant else []
    rank = lora_rank(spec)
    parts.append(f"rank {rank}" + (" (supplemental)" if rank != CONTRACT_LORA_RANK else ""))
    return ", ".join(parts)


def suite_problems(spec: Any, backend: str) -> list[str]:
    """Every reason this run spec cannot run `backend` (its descriptor's needs), each naming its config key."""
    desc = get(backend)
    key = f"suites/{spec.suite_name}"
    out: list[str] = []
    gpus = spec.get("gpus")
    if desc.gpus is not None:
        split = (f" ({desc.topology.train_gpus} training + {desc.topology.inference_gpus} inference)"
                 if desc.topology is not None else "")
        if gpus is None:
            out.append(f"config key '{key}/gpus': missing; {backend} needs {desc.gpus} GPUs")
        elif int(gpus) != desc.gpus:
            out.append(f"config key '{key}/gpus': {backend} needs exactly {desc.gpus} GPUs{split}, got {gpus}")
    if spec.device not in desc.devices:
        out.append(f"config key '{key}/device': {backend} runs on {' or '.join(desc.devices)} only, got '{spec.device}'")
    model = spec.model
    model_name = model.get("name")
    if desc.models is not None and model.get("repo_id") not in desc.models:
        out.append(
            f"config key '{key}/model': {backend} does not support model '{model_name}' "
            f"(repo {model.get('repo_id')}); supported: {', '.join(desc.models)}"
        )
    elif model.get("source") not in desc.model_sources or (model.get("source") == "hub" and not model.get("revision")):
        out.append(f"config key 'models/{model_name}': {backend} needs a model of source {' or '.join(desc.model_sources)}"
                   + (" pinned to a revision" if "hub" in desc.model_sources else ""))
    rank = lora_rank(spec)
    if rank < 1:
        out.append(f"config key '{key}/rank': LoRA rank must be >= 1, got {rank}")
    for check in desc.suite_checks:
        out.extend(check(spec))
    out.extend(context_fit.problems(spec, backend))  # every backend: the longest call fits the model
    topo = desc.topology
    if topo is not None:
        for p in topo.problems():
            out.append(f"{backend} topology {topo.label()}: {p}")
        if desc.gpus is not None and topo.train_gpus + topo.inference_gpus != desc.gpus:
            out.append(f"{backend} topology uses {topo.train_gpus + topo.inference_gpus} GPUs, its runs lease {desc.gpus}")
    return out


def preflight(spec: Any, backend: str) -> None:
    """Raise ConfigError listing every contract problem of this run spec for `backend`; call before the lease."""
    problems = suite_problems(spec, backend)
    if problems:
        raise ConfigError(f"suite '{spec.suite_name}' cannot run {backend}:\n  " + "\n  ".join(problems))

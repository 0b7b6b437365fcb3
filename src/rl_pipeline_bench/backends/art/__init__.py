"""ART backend: native PipelineTrainer driver (runs inside the ART image, four GPUs).

Its native config is built in `.config`; `run(ctx)` imports ART lazily,
so this package (and the registry) imports without openpipe-art.
"""

from __future__ import annotations

from ..descriptor import framework_backend
from .contract import MAX_POLICY_AGE, REASON_CODES, TOPOLOGY, autotuner_reasons


def run(ctx) -> None:
    """Run one benchmark through ART's own asynchronous pipeline; raise on failure."""
    from .driver import run as _run

    _run(ctx)


def support_native_config(spec) -> dict:
    """The native settings `bench preflight` asks the installed ART about (support.py)."""
    from .config import build_art_config

    return build_art_config(spec)


def package_homes() -> dict:
    """vLLM and Megatron-Core live in ART's own runtime venvs (runtimes.py), read at run time."""
    from .runtimes import package_homes as homes

    return homes()


def trainer_ranks(spec) -> list[int]:
    """ART's train call is timed once per step at the controller, recorded as rank 0."""
    return [0]


BACKEND = framework_backend(
    name="art",
    summary="ART's native PipelineTrainer on MegatronBackend (ART image, four GPUs)",
    run=run,
    topology=TOPOLOGY,
    models=("Qwen/Qwen3.5-35B-A3B",),
    trainer_ranks=trainer_ranks,
    native_support=support_native_config,
    staleness_limit=lambda spec: MAX_POLICY_AGE,
    evidence_checks=(autotuner_reasons,),
    reason_codes=REASON_CODES,
    packages=("openpipe-art", "vllm", "megatron-core"),
    package_homes=package_homes,
    env_prefixes=("ART_", "VLLM_", "MEGATRON_"),
)

"""ART backend: native PipelineTrainer driver (runs inside the ART image, four GPUs).

Its native config is built in `.config`; its `driver.run(ctx)` imports ART lazily,
so this package (and the registry) imports without openpipe-art.
"""

from __future__ import annotations

from ..framework.backend import framework_backend
from .contract import MAX_POLICY_AGE, REASON_CODES, TOPOLOGY, autotuner_reasons

BACKEND = framework_backend(
    name="art",
    framework="openpipe-art",
    summary="ART's native PipelineTrainer on MegatronBackend (ART image, four GPUs)",
    topology=TOPOLOGY,
    models=("Qwen/Qwen3.5-35B-A3B",),
    native_config="config:build_art_config",
    # vLLM and Megatron-Core live in ART's own runtime venvs (runtimes.py), read at run time.
    package_homes="runtimes:package_homes",
    staleness_limit=lambda spec: MAX_POLICY_AGE,
    evidence_checks=(autotuner_reasons,),
    reason_codes=REASON_CODES,
    packages=("vllm", "megatron-core"),
    env_prefixes=("ART_", "VLLM_", "MEGATRON_"),
)

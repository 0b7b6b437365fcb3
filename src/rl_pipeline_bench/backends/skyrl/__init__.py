"""SkyRL backend: native fully asynchronous trainer driver (runs inside the SkyRL image, four GPUs).

Its native config is built in `.config`; `run(ctx)` imports SkyRL lazily,
so this package (and the registry) imports without skyrl.
"""

from __future__ import annotations

from ..descriptor import framework_backend
from .contract import STALENESS, SUITE_SCHEMA, TOPOLOGY, batch_problems, variant
from .host import HOST_HOOKS


def run(ctx) -> None:
    """Run one benchmark through SkyRL's own asynchronous pipeline; raise on failure."""
    from .driver import run as _run

    _run(ctx)


def support_native_config(spec) -> dict:
    """The native settings `bench preflight` asks the installed SkyRL about (support.py)."""
    from .config import build_skyrl_config

    return build_skyrl_config(spec)


def trainer_ranks(spec) -> list[int]:
    """SkyRL's run_training phase gives one native training interval per step, recorded as rank 0."""
    return [0]


BACKEND = framework_backend(
    name="skyrl",
    summary="SkyRL's native fully asynchronous trainer on Megatron (SkyRL image, four GPUs)",
    run=run,
    topology=TOPOLOGY,
    models=("Qwen/Qwen3.5-35B-A3B",),
    trainer_ranks=trainer_ranks,
    native_support=support_native_config,
    staleness_limit=lambda spec: STALENESS,
    suite_checks=(batch_problems,),
    packages=("skyrl", "skyrl-train", "vllm", "megatron-core"),
    env_prefixes=("SKYRL_", "VLLM_", "MEGATRON_"),
    run_variables={"SKYRL_USE_CUDA_COMPAT": "SkyRL's packaged CUDA compatibility libraries on or off",
                   "SKYRL_CUDA_COMPAT_SUBDIR": "where those libraries are"},
    host_hooks=HOST_HOOKS,
    suite_schema=SUITE_SCHEMA,
    variant=variant,
)

"""SkyRL backend: native fully asynchronous trainer driver (runs inside the SkyRL image, four GPUs).

Its native config is built in `.config`; its `driver.run(ctx)` imports SkyRL lazily,
so this package (and the registry) imports without skyrl.
"""

from __future__ import annotations

from ..framework.backend import framework_backend
from .contract import STALENESS, SUITE_SCHEMA, TOPOLOGY, batch_problems, variant
from .host import HOST_HOOKS

BACKEND = framework_backend(
    name="skyrl",
    framework="skyrl",
    summary="SkyRL's native fully asynchronous trainer on Megatron (SkyRL image, four GPUs)",
    topology=TOPOLOGY,
    models=("Qwen/Qwen3.5-35B-A3B",),
    native_config="config:build_skyrl_config",
    staleness_limit=lambda spec: STALENESS,
    suite_checks=(batch_problems,),
    packages=("skyrl-train", "vllm", "megatron-core"),
    env_prefixes=("SKYRL_", "VLLM_", "MEGATRON_"),
    run_variables={"SKYRL_USE_CUDA_COMPAT": "SkyRL's packaged CUDA compatibility libraries on or off",
                   "SKYRL_CUDA_COMPAT_SUBDIR": "where those libraries are",
                   "RL_BENCH_SKYRL_SOURCE": "the SkyRL source tree of a native prefix (containers/skyrl/env.sh)",
                   "RL_BENCH_SKYRL_CUDA_COMPAT": "SkyRL's packaged CUDA compatibility libraries (host hook cuda-compat)"},
    host_hooks=HOST_HOOKS,
    suite_schema=SUITE_SCHEMA,
    variant=variant,
)

"""SkyRL's host-environment hook: its packaged CUDA compatibility libraries, opt-in per host.

The SkyRL image ships NVIDIA's CUDA forward-compatibility libraries inside its venv
(`SKYRL_CUDA_COMPAT_SUBDIR` in containers/skyrl/pins.env). Only hosts qualified for
them may put them first on LD_LIBRARY_PATH, as containers/skyrl/env.sh does with
SKYRL_USE_CUDA_COMPAT=1; the descriptor declares this as the host hook `cuda-compat`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping

from ..descriptor import HostHook


def cuda_compat_env(env: dict[str, str], pins: Mapping[str, str]) -> dict[str, str]:
    """SkyRL's packaged NVIDIA compatibility libraries first on LD_LIBRARY_PATH."""
    subdir = pins.get("SKYRL_CUDA_COMPAT_SUBDIR")
    if not subdir:
        raise RuntimeError("containers/skyrl/pins.env has no SKYRL_CUDA_COMPAT_SUBDIR")
    found = sorted(Path(sys.prefix).glob(f"lib/python*/site-packages/{subdir}"))
    if not found:
        raise RuntimeError(f"skyrl host hook cuda-compat: {sys.prefix} has no site-packages/{subdir}")
    libs = str(found[0])
    return dict(env, LD_LIBRARY_PATH=f"{libs}:{env['LD_LIBRARY_PATH']}" if env.get("LD_LIBRARY_PATH") else libs,
                RL_BENCH_SKYRL_CUDA_COMPAT=libs, SKYRL_USE_CUDA_COMPAT="1")


HOST_HOOKS = {
    "cuda-compat": HostHook(
        summary="SkyRL's packaged CUDA compatibility libraries first on LD_LIBRARY_PATH (only on hosts qualified for them)",
        apply=cuda_compat_env,
    ),
}

"""The environment interface every benchmark adapter implements."""

from __future__ import annotations

import importlib.metadata
import os
import time
from typing import Any, Protocol

import numpy as np

INSTALL_HINT = "install the eval extra: `uv sync --extra eval` (docs/evaluation.md)"
#: Where Debian-like systems put OSMesa (Debian's libosmesa6), MuJoCo's CPU renderer.
OSMESA_LIBRARIES = ("/usr/lib/x86_64-linux-gnu/libOSMesa.so.8", "/usr/lib/x86_64-linux-gnu/libOSMesa.so.6",
                    "/usr/lib/aarch64-linux-gnu/libOSMesa.so.8", "/usr/lib64/libOSMesa.so.8")


class EnvUnavailable(RuntimeError):
    """What a benchmark needs is not on this machine; the message says what and where to get it."""


class EvalEnv(Protocol):
    action_dim: int
    render_s: float  # seconds spent rendering camera observations in step() since the last reset()

    def reset(self, scenario: int, scenario_seed: int, seed: int) -> dict[str, Any]:
        """Put the task in held-out scenario `scenario`; return the first observation."""

    def step(self, action: np.ndarray) -> tuple[dict[str, Any], bool]:
        """Apply one action; return (observation, task succeeded)."""

    def close(self) -> None: ...


def package_versions(*names: str) -> dict[str, str | None]:
    """Installed versions of the named distributions (None where not installed)."""
    out = {}
    for n in names:
        try:
            out[n] = importlib.metadata.version(n)
        except importlib.metadata.PackageNotFoundError:
            out[n] = None
    return out


def require_packages(benchmark: str, names: tuple[str, ...], hint: str) -> dict[str, str | None]:
    versions = package_versions(*names)
    missing = [n for n, v in versions.items() if v is None]
    if missing:
        raise EnvUnavailable(f"{benchmark} evaluation needs the package(s) {', '.join(missing)}, not installed here; {hint}")
    return versions


def select_renderer(spec: dict) -> str:
    """MuJoCo's off-screen backend for a suite: MUJOCO_GL if set, else EGL where the suite leases GPUs and
    OSMesa where it does not; set for this process and the episode workers it starts."""
    gl = os.environ.get("MUJOCO_GL") or ("egl" if spec.get("gpus") else "osmesa")
    os.environ["MUJOCO_GL"] = gl
    os.environ["PYOPENGL_PLATFORM"] = gl  # robosuite's import sets it to egl when unset; it must name the same backend
    if gl == "osmesa" and not any(os.path.exists(p) for p in OSMESA_LIBRARIES):
        raise EnvUnavailable("MUJOCO_GL=osmesa needs the OSMesa library (Debian: `apt-get install libosmesa6`; "
                             "`.ci/setup_eval.sh` installs it); on a GPU machine set MUJOCO_GL=egl")
    return gl


class RenderClock:
    """Seconds a robosuite simulator spends in `MjSim.render` (what its camera sensors call every step).

    robosuite's hard reset builds a new `MjSim`, so `watch(sim)` wraps the render method of the
    sim in use after every reset (that instance only, no library code changed) and zeroes the count.
    """

    def __init__(self) -> None:
        self.seconds = 0.0

    def watch(self, sim: Any) -> None:
        self.seconds = 0.0
        if getattr(sim, "_render_clock", None) is self:
            return
        render = sim.render

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return render(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        sim.render = timed
        sim._render_clock = self

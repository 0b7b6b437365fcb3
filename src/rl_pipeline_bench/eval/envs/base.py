"""The environment interface every benchmark adapter implements."""

from __future__ import annotations

import importlib.metadata
from typing import Any, Protocol

import numpy as np


class EnvUnavailable(RuntimeError):
    """What a benchmark needs is not on this machine; the message says what and where to get it."""


class EvalEnv(Protocol):
    action_dim: int

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

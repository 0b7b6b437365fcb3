"""Evaluation environments, one module per benchmark, behind one small interface.

`preflight(spec, config)` checks, before any work, what a benchmark needs on this
machine (packages, assets) and names what is missing; `list_tasks(spec, config)`
enumerates the suite's tasks; `open_env(spec, config, task)` returns an `EvalEnv`.
Imports of the simulators happen inside these functions, so the rest of the
package works without them.
"""

from __future__ import annotations

import importlib
from typing import Any

from ...records.configfile import ConfigError
from ..protocol import TaskRef
from .base import EvalEnv, EnvUnavailable  # noqa: F401  (re-exported)

_MODULES = {"robosuite": "robosuite_env", "libero": "libero_env", "robotwin": "robotwin_env"}


def _module(benchmark: str):
    if benchmark not in _MODULES:
        raise ConfigError(f"unknown benchmark '{benchmark}' (known: {', '.join(_MODULES)})")
    return importlib.import_module(f"{__name__}.{_MODULES[benchmark]}")


def preflight(spec: dict, config: dict) -> dict[str, Any]:
    """Refuse before work (EnvUnavailable naming the missing thing); return environment facts."""
    return _module(spec["benchmark"]).preflight(spec, config)


def list_tasks(spec: dict, config: dict) -> list[TaskRef]:
    return _module(spec["benchmark"]).list_tasks(spec, config)


def open_env(spec: dict, config: dict, task: TaskRef) -> EvalEnv:
    return _module(spec["benchmark"]).open_env(spec, config, task)

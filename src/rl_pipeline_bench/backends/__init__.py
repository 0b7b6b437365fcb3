"""Backend registry: each backend is a subpackage exposing `run(ctx)`.

Imports are lazy so that the reference backend never needs ART or SkyRL installed,
and a framework driver is only imported where it actually runs.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ..config import BACKENDS, check_member


def get_backend(name: str) -> ModuleType:
    check_member("backend", name, BACKENDS)
    module = importlib.import_module(f"{__name__}.{name}")
    if not callable(getattr(module, "run", None)):
        raise RuntimeError(f"backend '{name}' does not define run(ctx)")
    return module


def trainer_ranks(module: ModuleType, suite) -> list[int]:
    """Trainer ranks the contract expects in trainer_intervals.parquet for this backend."""
    fn = getattr(module, "trainer_ranks", None)
    return list(fn(suite)) if callable(fn) else [0]

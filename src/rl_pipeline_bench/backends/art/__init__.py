"""ART backend: native PipelineTrainer driver (runs inside the ART image, four GPUs).

`run(ctx)` imports ART lazily, so this package imports without openpipe-art.
"""

from __future__ import annotations

from .config import build_art_config


def run(ctx) -> None:
    """Run one benchmark through ART's own asynchronous pipeline; raise on failure."""
    from .driver import run as _run

    _run(ctx)


def trainer_ranks(suite) -> list[int]:
    """ART's train log gives one native trainer interval per step, recorded as rank 0."""
    return [0]


__all__ = ["build_art_config", "run", "trainer_ranks"]

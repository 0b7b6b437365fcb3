"""SkyRL backend: native fully asynchronous trainer driver (runs inside the SkyRL image, four GPUs).

`run(ctx)` imports SkyRL lazily, so this package imports without skyrl.
"""

from __future__ import annotations

from .config import build_skyrl_config, to_cli_overrides


def run(ctx) -> None:
    """Run one benchmark through SkyRL's own asynchronous pipeline; raise on failure."""
    from .driver import run as _run

    _run(ctx)


def trainer_ranks(suite) -> list[int]:
    """SkyRL's tracker gives one native training interval per step, recorded as rank 0."""
    return [0]


__all__ = ["build_skyrl_config", "run", "to_cli_overrides", "trainer_ranks"]

"""Scheduled evaluation: the checkpoints saved under a training run's directory.

RLinf saves `.../actor/global_step_N`; every such directory found (at any depth)
is a checkpoint to evaluate, ordered by step. Evidence targets are keyed by the
checkpoint, so one that was evaluated already is never evaluated again.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..records.configfile import ConfigError

PATTERN = re.compile(r"^global_step_(\d+)$")


def find_checkpoints(root: str | Path) -> list[Path]:
    root = Path(root).expanduser()
    if not root.is_dir():
        raise ConfigError(f"eval_checkpoints_dir {root}: no such directory")
    found = [p for p in root.rglob("global_step_*") if p.is_dir() and PATTERN.match(p.name)]
    return sorted(found, key=lambda p: (int(PATTERN.match(p.name).group(1)), str(p)))

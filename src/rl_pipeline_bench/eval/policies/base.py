"""The policy interface: observation -> action chunk, greedy (no sampling)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol

import numpy as np


class Policy(Protocol):
    """A greedy policy. `act` returns an action chunk of shape (k, action_dim), k >= 1;
    the runner executes the chunk's actions in order before asking again."""

    def reset(self, task: str, language: str) -> None: ...

    def act(self, observation: dict[str, Any]) -> np.ndarray: ...


@dataclass(frozen=True)
class PolicyRef:
    """What to load, picklable for worker processes: a built-in kind or a checkpoint path."""

    policy_id: str
    kind: str                       # a built-in policy's name (loader.BUILTIN) or "checkpoint"
    path: str | None = None         # checkpoint directory (kind "checkpoint")
    entry_point: str | None = None  # "module:function" that builds a Policy from `path`

    def as_dict(self) -> dict:
        return asdict(self)

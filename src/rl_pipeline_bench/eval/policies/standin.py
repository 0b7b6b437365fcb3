"""The stand-in policy: an all-zero action every step.

OpenVLA-OFT weights are not reachable from this project's machines, so a LIBERO evaluation
here needs a policy that is plainly not one: with robosuite's OSC_POSE controller (LIBERO's)
a zero action asks for no end-effector motion and a half-open gripper. Its success rate is
a floor for the benchmark's episodes (a task solved by doing nothing would show up here),
never a reproduction of the paper's rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class ZeroAction:
    def __init__(self, action_dim: int = 7):
        self.action_dim = int(action_dim)

    def reset(self, task: str, language: str) -> None:
        pass

    def act(self, observation: dict[str, Any]) -> np.ndarray:
        return np.zeros((1, self.action_dim))

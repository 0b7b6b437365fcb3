"""A scripted greedy baseline for robosuite Lift: reach above the cube, descend, grasp, lift.

It reads only the simulator's state observations (`robot0_eef_pos`, `cube_pos`) and
decides from them alone, so it is deterministic; it exists to exercise the
evaluation pipeline, not as a learned policy.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class ScriptedLift:
    def __init__(self, gain: float = 10.0, hover: float = 0.05, tolerance: float = 0.01,
                 grasp_steps: int = 12, lift_speed: float = 0.5):
        self.gain, self.hover, self.tolerance = gain, hover, tolerance
        self.grasp_steps, self.lift_speed = grasp_steps, lift_speed
        self.reset("Lift", "")

    def reset(self, task: str, language: str) -> None:
        if task != "Lift":
            raise ValueError(f"the scripted Lift policy cannot act in task '{task}'")
        self._phase, self._grasped = "approach", 0

    def act(self, observation: dict[str, Any]) -> np.ndarray:
        eef = np.asarray(observation["robot0_eef_pos"], dtype=float)
        cube = np.asarray(observation["cube_pos"], dtype=float)
        action = np.zeros(7)
        if self._phase == "approach":
            target = cube + np.array([0.0, 0.0, self.hover])
            if np.linalg.norm((target - eef)[:2]) < self.tolerance and abs(target[2] - eef[2]) < 2 * self.tolerance:
                self._phase = "descend"
        if self._phase == "descend":
            target = cube
            if np.linalg.norm(target - eef) < self.tolerance:
                self._phase = "grasp"
        if self._phase in ("approach", "descend"):
            action[:3] = np.clip((target - eef) * self.gain, -1.0, 1.0)
            action[6] = -1.0  # open
        elif self._phase == "grasp":
            action[6] = 1.0
            self._grasped += 1
            if self._grasped >= self.grasp_steps:
                self._phase = "lift"
        else:
            action[2], action[6] = self.lift_speed, 1.0
        return action[None, :]

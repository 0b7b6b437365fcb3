"""Scripted greedy policies from state observations: robosuite Lift, and LIBERO-Object's pick-and-place.

They read only the simulator's state observations (end-effector and object positions)
and decide from them alone, so they are deterministic. They exercise the evaluation
pipeline with episodes that really succeed; they are not learned policies and the
report labels them "scripted". Actions are robosuite OSC_POSE deltas (position in
[-1, 1], about 5 cm a step at 1; no rotation) and the gripper (-1 open, +1 closed).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np


UP = np.array([0.0, 0.0, 1.0])


def _reach(phase: str, obj: np.ndarray, eef: np.ndarray, hover: float, height: float, tolerance: float,
           z_tolerance: float) -> tuple[str, np.ndarray | None]:
    """The first two phases of a top-down grasp: above the object ("above"), then down to it ("descend");
    returns the phase after this observation ("grasp" once there) and the target (None from "grasp" on)."""
    if phase == "above":
        target = obj + hover * UP
        if np.linalg.norm((target - eef)[:2]) < tolerance and abs(target[2] - eef[2]) < z_tolerance:
            phase = "descend"
    if phase == "descend":
        target = obj + height * UP
        if np.linalg.norm(target - eef) < tolerance:
            phase = "grasp"
    return phase, (target if phase in ("above", "descend") else None)


def _toward(target: np.ndarray, eef: np.ndarray, gain: float, gripper: float) -> np.ndarray:
    """One action chunk of one action: move the end effector toward `target`, gripper as given."""
    action = np.zeros(7)
    action[:3] = np.clip((target - eef) * gain, -1.0, 1.0)
    action[6] = gripper
    return action[None, :]


class ScriptedLift:
    """robosuite Lift: reach above the cube, descend, grasp, lift."""

    def __init__(self, gain: float = 10.0, hover: float = 0.05, tolerance: float = 0.01,
                 grasp_steps: int = 12, lift_speed: float = 0.5):
        self.gain, self.hover, self.tolerance = gain, hover, tolerance
        self.grasp_steps, self.lift_speed = grasp_steps, lift_speed
        self.reset("Lift", "")

    def reset(self, task: str, language: str) -> None:
        if task != "Lift":
            raise ValueError(f"the scripted Lift policy cannot act in task '{task}'")
        self._phase, self._grasped = "above", 0

    def act(self, observation: dict[str, Any]) -> np.ndarray:
        eef = np.asarray(observation["robot0_eef_pos"], dtype=float)
        cube = np.asarray(observation["cube_pos"], dtype=float)
        self._phase, target = _reach(self._phase, cube, eef, self.hover, 0.0, self.tolerance, 2 * self.tolerance)
        if target is not None:
            return _toward(target, eef, self.gain, -1.0)
        if self._phase == "grasp":
            self._grasped += 1
            if self._grasped >= self.grasp_steps:
                self._phase = "lift"
            return _toward(eef, eef, self.gain, 1.0)
        action = _toward(eef, eef, self.gain, 1.0)
        action[0, 2] = self.lift_speed
        return action


class ScriptedPickPlace:
    """LIBERO-Object's "pick up the X and place it in the basket": above X, down, grasp, up, over the basket, release.

    The object comes from the instruction (`X` -> observation `X_1_pos`), the basket from
    `basket_1_pos`. A top-down grasp at a fixed height above the object's origin: it
    succeeds for the cans of that suite (alphabet soup, bbq sauce, tomato sauce) and not
    for its boxes and bottles, which it makes no attempt to handle.
    """

    INSTRUCTION = re.compile(r"pick up the (?P<object>[a-z ]+) and place it in the basket")

    def __init__(self, gain: float = 10.0, hover: float = 0.12, grasp_height: float = 0.02,
                 tolerance: float = 0.008, grasp_steps: int = 15, carry_height: float = 0.30,
                 release_height: float = 0.20):
        self.gain, self.hover, self.grasp_height, self.tolerance = gain, hover, grasp_height, tolerance
        self.grasp_steps, self.carry_height, self.release_height = grasp_steps, carry_height, release_height
        self._object = None

    def reset(self, task: str, language: str) -> None:
        m = self.INSTRUCTION.fullmatch(language.strip().lower())
        if m is None:
            raise ValueError(f"the scripted pick-and-place policy acts only in LIBERO-Object's 'pick up the X and "
                             f"place it in the basket' tasks, not '{language}'")
        self._object = m.group("object").replace(" ", "_") + "_1_pos"
        self._phase, self._count = "above", 0

    def act(self, observation: dict[str, Any]) -> np.ndarray:
        eef = np.asarray(observation["robot0_eef_pos"], dtype=float)
        obj = np.asarray(observation[self._object], dtype=float)
        basket = np.asarray(observation["basket_1_pos"], dtype=float)
        self._phase, target = _reach(self._phase, obj, eef, self.hover, self.grasp_height, self.tolerance, 0.02)
        if target is not None:
            return _toward(target, eef, self.gain, -1.0)
        if self._phase == "grasp":
            self._count += 1
            if self._count > self.grasp_steps:
                self._phase = "lift"
            return _toward(eef, eef, self.gain, 1.0)
        if self._phase == "lift":
            target = np.array([eef[0], eef[1], self.carry_height])
            if eef[2] > self.carry_height - 0.05:
                self._phase = "carry"
            return _toward(target, eef, self.gain, 1.0)
        if self._phase == "carry":
            target = basket + self.carry_height * UP
            if np.linalg.norm((target - eef)[:2]) < 0.015:
                self._phase = "lower"
            return _toward(target, eef, self.gain, 1.0)
        if self._phase == "lower":
            target = basket + self.release_height * UP
            if abs(target[2] - eef[2]) < 0.02:
                self._phase = "release"
            return _toward(target, eef, self.gain, 1.0)
        return _toward(eef, eef, self.gain, -1.0)

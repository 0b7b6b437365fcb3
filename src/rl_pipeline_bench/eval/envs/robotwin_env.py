"""RoboTwin 2.0: suite definitions and horizon groups here; episodes are not executed.

`rlinf-robotwin-runtime` 0.1.3 installs on Python 3.11 (SAPIEN 3.0.0b1), but it
pins numpy 1.26.4, scipy 1.10.1 and torch 2.8.0, which this project's locked
environment cannot hold, and its assets come only from the Hub dataset
`TianxingChen/RoboTwin2.0`. An evaluation would need a worker running in the
runtime's own environment; that worker is not built, so preflight stops before
any work and says so. Tasks, step limits (the runtime's `_eval_step_limit.yml`)
and horizon grouping are in `benchmarks.yaml`; aggregation is shared.
"""

from __future__ import annotations

from typing import Any

from .. import benchmarks
from ..protocol import TaskRef
from .base import EnvUnavailable

ASSETS_REPO = "TianxingChen/RoboTwin2.0"


def _not_executable(config: dict) -> EnvUnavailable:
    assets = config.get("robotwin_assets")
    return EnvUnavailable(
        "RoboTwin 2.0 episodes are not executed by this project: rlinf-robotwin-runtime needs its own Python 3.11 "
        "environment (numpy 1.26.4, torch 2.8.0, SAPIEN 3.0.0b1) and the assets of the Hub dataset "
        f"'{ASSETS_REPO}' (robotwin_assets={assets or 'not given'}), and no worker bridging that environment exists "
        "yet. Suite definitions, horizon groups and aggregation are available (docs/evaluation.md: RoboTwin 2.0).")


def preflight(spec: dict, config: dict) -> dict[str, Any]:
    raise _not_executable(config)


def list_tasks(spec: dict, config: dict) -> list[TaskRef]:
    known = benchmarks.robotwin_tasks()
    return [TaskRef(suite_task=t, task_index=0, task=t, language="") for t in spec["tasks"] if t in known]


def open_env(spec: dict, config: dict, task: TaskRef):
    raise _not_executable(config)

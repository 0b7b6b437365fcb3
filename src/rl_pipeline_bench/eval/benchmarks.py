"""Benchmark facts (suites, tasks, max steps, horizon groups) read from package data.

Every number carries the place it comes from (`benchmarks.yaml`); nothing else in
the code base repeats them.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import yaml

from ..records.configfile import ConfigError

BENCHMARKS = ("robosuite", "libero", "robotwin")


@functools.cache
def facts() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("data/benchmarks.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


@functools.cache
def paper_reference() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("data/paper_reference.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def robotwin_tasks() -> dict[str, dict[str, Any]]:
    """RoboTwin task -> {horizon, max_steps}, in the seed's horizon order."""
    out = {}
    for horizon, group in facts()["robotwin"]["horizons"].items():
        for task, steps in group["tasks"].items():
            out[task] = {"horizon": horizon, "max_steps": int(steps)}
    return out


def task_limits(benchmark: str, task: str) -> tuple[int, str]:
    """(max steps, source of that number) for one task; ConfigError naming the known ones."""
    f = facts()
    if benchmark == "robosuite":
        known = f["robosuite"]["tasks"]
        if task not in known:
            raise ConfigError(f"unknown robosuite evaluation task '{task}' (known: {', '.join(known)})")
        return int(known[task]["max_steps"]), known[task]["max_steps_source"]
    if benchmark == "libero":
        known = f["libero"]["suites"]
        if task not in known:
            raise ConfigError(f"unknown LIBERO suite '{task}' (LIBERO has: {', '.join(known)})")
        return int(known[task]["max_steps"]), known[task]["max_steps_source"]
    if benchmark == "robotwin":
        known = robotwin_tasks()
        if task not in known:
            raise ConfigError(f"unknown RoboTwin task '{task}' (known in the seed's horizon groups: {', '.join(known)})")
        return known[task]["max_steps"], f["robotwin"]["max_steps_source"]
    raise ConfigError(f"unknown benchmark '{benchmark}' (known: {', '.join(BENCHMARKS)})")


def group_of(benchmark: str, task_or_suite: str) -> str:
    """The reporting group of a task: LIBERO suite label, RoboTwin horizon, robosuite task."""
    if benchmark == "libero":
        return facts()["libero"]["suites"][task_or_suite]["label"]
    if benchmark == "robotwin":
        return robotwin_tasks()[task_or_suite]["horizon"]
    return task_or_suite

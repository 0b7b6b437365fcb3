"""The probes' reference tables (targets, GPU peaks, all-reduce expectations), kept as data.

The numbers live in `probes/data/*.yaml` with their sources beside them, so a new GPU
or a changed target is a data edit, never a code change. This module only reads and
looks them up; judging a value against a target is `judge`.
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path
from typing import Any

import yaml

DATA_DIR = Path(__file__).with_name("data")

_COMPARE = {
    ">": lambda v, t: v > t,
    ">=": lambda v, t: v >= t,
    "<": lambda v, t: v < t,
    "<=": lambda v, t: v <= t,
}


@functools.cache
def _load(name: str) -> dict[str, Any]:
    path = DATA_DIR / f"{name}.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping at the top level")
    return data


def targets() -> dict[str, dict[str, Any]]:
    """Target key -> {label, comparison, threshold, unit, statistic, source}."""
    return dict(_load("targets")["targets"])


def target(key: str) -> dict[str, Any]:
    table = targets()
    if key not in table:
        raise KeyError(f"unknown target {key!r} (known: {', '.join(sorted(table))})")
    return table[key]


def judge(key: str, value: float | None) -> bool | None:
    """True (met), False (not met) or None (no value to judge) for one target."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None
    t = target(key)
    return bool(_COMPARE[t["comparison"]](float(value), float(t["threshold"])))


def target_text(key: str) -> str:
    """'> 70 %' style text of a target, for tables and figure labels."""
    t = target(key)
    return f"{t['comparison']} {t['threshold']:g} {t['unit']}"


def gpu_peaks() -> list[dict[str, Any]]:
    return list(_load("gpu_peaks")["gpus"])


def gpu_peak(device_name: str | None) -> dict[str, Any] | None:
    """The first peak row whose `match` regex is found in the NVML device name."""
    if not device_name:
        return None
    for row in gpu_peaks():
        if re.search(row["match"], device_name):
            return row
    return None


def allreduce_expectations() -> list[dict[str, Any]]:
    return list(_load("allreduce_expectations")["expectations"])

"""Evaluation evidence checked the way run evidence is: every problem is "code: detail".

A summary is `complete` only when its list of problems is empty. The codes are
`EVAL_REASON_CODES` (docs/validation.md lists them; a test keeps that page complete).
An episode whose `success` is not a real boolean counts as unsuccessful, so a forged
column (float NaN, the string "False", the number 5) can never raise a success rate.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from . import benchmarks

#: code -> meaning, for every problem an evaluation summary can name.
EVAL_REASON_CODES = {
    "run_missing": "a planned run has no episodes",
    "run_not_completed": "a run's manifest status is not 'completed' (it failed, or is still running)",
    "episode_count": "a task of a run has more or fewer episodes than the plan's scenarios_per_task",
    "episode_duplicated": "an episode (task, task index, scenario, run) is recorded more than once",
    "episode_not_in_plan": "an episode's task, task index, scenario, run or group is not one the eval plan holds",
    "success_not_bool": "an episode's success is not true or false (NaN, the string 'False', the number 5); "
                        "it counts as unsuccessful",
    "steps_invalid": "an episode's steps or max_steps is missing, not a whole number, or negative",
    "steps_above_max": "an episode took more steps than its max_steps",
    "max_steps_mismatch": "an episode's max_steps differs from the spec's max steps for its task",
}

_SHOWN = 5  # episodes named in one reason's detail


def is_real_bool(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_))


def successes(success: pd.Series) -> pd.Series:
    """True exactly where the value is a real boolean True (anything else counts as unsuccessful)."""
    return success.map(lambda v: bool(v) if is_real_bool(v) else False).astype(bool)


def _where(episodes: pd.DataFrame, mask: pd.Series) -> str:
    rows = episodes[mask].head(_SHOWN)
    named = ", ".join(f"{r.suite_task} task {r.task_index} scenario {r.scenario} run {r.run}" for r in rows.itertuples())
    more = int(mask.sum()) - len(rows)
    return named + (f" and {more} more" if more > 0 else "")


def _whole(col: pd.Series) -> tuple[pd.Series, pd.Series]:
    """(values as float, mask of values that are not whole non-negative numbers)."""
    num = pd.to_numeric(col.map(lambda v: None if isinstance(v, (bool, np.bool_)) else v), errors="coerce")
    bad = num.isna() | ~np.isfinite(num.fillna(0)) | (num < 0) | (num.fillna(0) % 1 != 0)
    return num, bad


def episode_reasons(episodes: pd.DataFrame, spec: dict[str, Any], planned_runs: list[int]) -> list[str]:
    """What keeps these episodes from being the whole, honest plan of `spec` (empty: nothing)."""
    out: list[str] = []
    for r in planned_runs:
        if not (episodes["run"] == r).any():
            out.append(f"run_missing: run {r} has no episodes")

    bool_ok = episodes["success"].map(is_real_bool).astype(bool)
    if not bool_ok.all():
        kinds = sorted({type(v).__name__ for v in episodes.loc[~bool_ok, "success"]})
        out.append(f"success_not_bool: {int((~bool_ok).sum())} episode(s) with success of type {', '.join(kinds)} "
                   f"({_where(episodes, ~bool_ok)})")

    limits = {str(k): int(v) for k, v in spec["max_steps"].items()}
    benchmark = spec["benchmark"]
    task_index, bad_index = _whole(episodes["task_index"])
    in_plan = (episodes["suite_task"].isin(list(spec["tasks"]))
               & episodes["scenario"].isin(range(spec["scenarios_per_task"]))
               & episodes["run"].isin(planned_runs)
               & ~bad_index & (benchmark == "libero" or (task_index == 0)))  # only LIBERO suites hold several tasks
    if spec.get("task_indices") is not None:  # a LIBERO suite cut to some of its tasks
        in_plan &= task_index.isin(spec["task_indices"])
    groups = {t: benchmarks.group_of(benchmark, t) for t in spec["tasks"]}
    in_plan &= episodes["group"] == episodes["suite_task"].map(groups)
    if not in_plan.all():
        out.append(f"episode_not_in_plan: {int((~in_plan).sum())} episode(s) outside the plan of eval suite "
                   f"'{spec['eval_suite']}' ({_where(episodes, ~in_plan)})")

    steps, bad_steps = _whole(episodes["steps"])
    max_steps, bad_max = _whole(episodes["max_steps"])
    bad = bad_steps | bad_max
    if bad.any():
        out.append(f"steps_invalid: {int(bad.sum())} episode(s) ({_where(episodes, bad)})")
    above = ~bad & (steps > max_steps)
    if above.any():
        out.append(f"steps_above_max: {int(above.sum())} episode(s) ({_where(episodes, above)})")
    planned_max = episodes["suite_task"].map(limits)
    mismatch = ~bad & planned_max.notna() & (max_steps != planned_max)
    if mismatch.any():
        out.append(f"max_steps_mismatch: {int(mismatch.sum())} episode(s) ({_where(episodes, mismatch)})")

    dup = episodes.duplicated(["suite_task", "task_index", "scenario", "run"])
    if dup.any():
        out.append(f"episode_duplicated: {int(dup.sum())} duplicated episode(s) (same task, scenario and run)")
    expected = spec["scenarios_per_task"]
    counts = episodes.groupby(["suite_task", "task_index", "run"]).size()
    for (st, ti, r), n in counts[counts != expected].items():
        out.append(f"episode_count: {st} task {ti} run {r}: {n} episodes, expected {expected}")
    return out


def run_reasons(run: Any, directory: str, status: Any) -> list[str]:
    """A run's manifest must say it completed."""
    if status == "completed":
        return []
    return [f"run_not_completed: run {run} ({directory}) has status {status!r}"]

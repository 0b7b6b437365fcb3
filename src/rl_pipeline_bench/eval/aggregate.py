"""Success rates under the RLinf protocol: per run first, then mean ± std over runs.

A run's success rate of a task is its successful episodes over its planned
scenarios; a group's (LIBERO suite, RoboTwin horizon) and the overall rate pool
that run's episodes of the group (every task has the same N, so this equals the
mean over tasks). Across runs: the mean and the sample standard deviation
(ddof=1; none with a single run). A crashed episode is unsuccessful; an episode
missing from the evidence, or any other problem of the evidence (eval.validate),
makes the summary incomplete, and is named.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from . import benchmarks
from .validate import episode_reasons, successes
from ..records.formats import schema_of

SCHEMA = schema_of("eval-summary")


def _mean_std(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    s = pd.Series(values, dtype=float)
    std = float(s.std(ddof=1)) if len(s) > 1 else None
    return float(s.mean()), (None if std is not None and math.isnan(std) else std)


def _over_runs(per_run: pd.DataFrame, keys: list[str]) -> list[dict[str, Any]]:
    out = []
    for key, g in per_run.groupby(keys, sort=False) if keys else [((), per_run)]:
        mean, std = _mean_std(list(g["success_rate"]))
        row = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
        row.update(success_rate_mean=mean, success_rate_std=std, runs=int(g["run"].nunique()),
                   episodes=int(g["episodes"].sum()), successes=int(g["successes"].sum()),
                   crashed=int(g["crashed"].sum()),
                   per_run={int(r): float(v) for r, v in zip(g["run"], g["success_rate"])})
        out.append(row)
    return out


def _per_run(episodes: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    g = episodes.groupby(keys + ["run"], sort=False)
    df = g.agg(episodes=("success", "size"), successes=("success", "sum"),
               crashed=("error", lambda e: int(e.notna().sum()))).reset_index()
    df["success_rate"] = df["successes"] / df["episodes"]
    return df


def paper_groups(benchmark: str) -> dict[str, list[str]]:
    """Paper column -> our groups (RoboTwin reports Long and Extra-Long together)."""
    if benchmark == "robotwin":
        return dict(benchmarks.facts()["robotwin"]["paper_groups"])
    return {}


def summarize(episodes: pd.DataFrame, spec: dict[str, Any], policy_id: str,
              planned_runs: list[int] | None = None, run_problems: list[str] | None = None) -> dict[str, Any]:
    """Episodes of every run of one (eval suite, policy) -> the summary dict.

    `run_problems` are the runs' own problems (validate.run_reasons); the episodes'
    are added here (validate.episode_reasons). Any problem makes the summary incomplete.
    """
    planned_runs = planned_runs or list(range(1, spec["runs"] + 1))
    problems = list(run_problems or []) + episode_reasons(episodes, spec, planned_runs)
    episodes = episodes.copy()
    episodes["success"] = successes(episodes["success"]) & episodes["error"].isna()

    task_keys = ["group", "suite_task", "task_index", "task"]
    per_task = _over_runs(_per_run(episodes, task_keys), task_keys)
    per_group = _over_runs(_per_run(episodes, ["group"]), ["group"])
    overall = _over_runs(_per_run(episodes.assign(_all="all"), ["_all"]), ["_all"])
    for row in overall:
        row.pop("_all", None)
    pooled = []
    for column, groups in paper_groups(spec["benchmark"]).items():
        sub = episodes[episodes["group"].isin(groups)]
        if len(sub):
            rows = _over_runs(_per_run(sub.assign(_c=column), ["_c"]), ["_c"])
            for row in rows:
                row["column"] = row.pop("_c")
            pooled.extend(rows)
    return {
        "schema": SCHEMA,
        "eval_suite": spec["eval_suite"],
        "spec_hash": spec["hash"],
        "benchmark": spec["benchmark"],
        "policy_id": policy_id,
        "protocol": {k: spec.get(k) for k in ("protocol", "tasks", "task_indices", "scenarios_per_task", "runs", "seed",
                                              "max_steps", "camera_size", "greedy")},
        "complete": not problems,
        "problems": problems,
        "per_task": per_task,
        "per_group": per_group,
        "paper_columns": pooled,
        "overall": overall[0] if overall else None,
    }

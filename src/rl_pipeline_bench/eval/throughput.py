"""Evaluation throughput from episode evidence, and the wall time of a full protocol projected from it.

Seed 002 says rollouts are bound by environment rendering; these figures say by how much on the
machine an evaluation ran on: simulator build time, reset time, environment steps per second
of one worker (time inside `env.step`) and the share of that time spent rendering the cameras.
Each is a ratio of sums over the episodes that did not crash. The projection replays the
runner's own pool (`protocol.chunks_of`, chunks taken in order by the first free worker) with
every episode running to its max steps (a policy that never succeeds: the upper bound), one
worker per core at the measured per-worker rate, simulator time only (a policy's inference adds
to it), and the runs one after another (each `eval_run` job takes all the cores).
"""

from __future__ import annotations

import heapq
from typing import Any

import pandas as pd

from . import benchmarks, protocol


def _total(df: pd.DataFrame, column: str) -> float:
    return float(pd.to_numeric(df[column], errors="coerce").sum())


def measured(episodes: pd.DataFrame) -> dict[str, Any] | None:
    """Throughput figures of these episodes; None where none has timings (crashed, or evidence without them)."""
    if episodes.empty or "step_s" not in episodes.columns:
        return None
    ok = episodes[episodes["error"].isna() & episodes["step_s"].notna() & (episodes["steps"] > 0)]
    if ok.empty:
        return None
    steps, step_s = int(ok["steps"].sum()), _total(ok, "step_s")
    builds = episodes[pd.to_numeric(episodes["env_build_s"], errors="coerce") > 0]
    return {
        "episodes": int(len(ok)),
        "steps": steps,
        "env_builds": int(len(builds)),
        "env_build_s": float(builds["env_build_s"].mean()) if len(builds) else None,
        "reset_s": float(pd.to_numeric(ok["reset_s"], errors="coerce").mean()),
        "step_s": step_s / steps,
        "steps_per_s_per_worker": steps / step_s if step_s > 0 else None,
        "render_share": _total(ok, "render_s") / step_s if step_s > 0 else None,
        "policy_s_per_step": _total(ok, "policy_s") / steps,
    }


def _makespan(costs: list[float], workers: int) -> float:
    """Wall time of chunks taken in order by the first free of `workers` processes."""
    free = [0.0] * max(1, min(workers, len(costs)))
    for cost in costs:
        heapq.heappush(free, heapq.heappop(free) + cost)
    return max(free) if costs else 0.0


def project(figures: dict[str, Any], tasks: int, scenarios: int, runs: int, max_steps: int,
            cores: int) -> dict[str, Any]:
    """Projected wall time of `tasks` x `scenarios` x `runs` episodes of up to `max_steps` steps on `cores` cores."""
    refs = [protocol.TaskRef(suite_task="projected", task_index=i, task=f"task{i}", language="") for i in range(tasks)]
    plan = {"eval_suite": "projected", "runs": 1, "scenarios_per_task": scenarios, "seed": 0,
            "benchmark": "projected", "max_steps": {"projected": max_steps}}
    chunks = protocol.chunks_of(protocol.plan(plan, refs, 1), cores)
    episode_s = figures["reset_s"] + max_steps * figures["step_s"]
    per_run = _makespan([figures["env_build_s"] + len(c) * episode_s for c in chunks], cores)
    return {"cores": cores, "episodes": tasks * scenarios * runs, "steps": tasks * scenarios * runs * max_steps,
            "env_builds": len(chunks) * runs, "episode_s": episode_s, "wall_s": runs * per_run,
            "wall_h": runs * per_run / 3600.0}


def protocol_projection(figures: dict[str, Any] | None, cores: list[int] | None = None) -> dict[str, Any] | None:
    """The full protocol of benchmarks.yaml's `libero.projection` on each of `cores` (default: its own counts)."""
    if not figures or figures.get("env_build_s") is None or not figures.get("steps_per_s_per_worker"):
        return None
    facts = benchmarks.facts()
    target = facts["libero"]["projection"]
    scenarios, runs = facts["protocol"]["scenarios_per_task"], facts["protocol"]["runs"]
    max_steps, source = benchmarks.task_limits("libero", target["suite"])
    rows = [project(figures, target["tasks"], scenarios, runs, max_steps, n) for n in (cores or target["cores"])]
    return {"suite": target["suite"], "tasks": target["tasks"], "scenarios_per_task": scenarios, "runs": runs,
            "max_steps": max_steps, "max_steps_source": source, "rows": rows,
            "assumes": "every episode runs to its max steps; one worker per core at the measured per-worker rate; "
                       "simulator time only (policy inference not included); runs one after another"}


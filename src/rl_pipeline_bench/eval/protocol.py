"""The episode plan of one evaluation run, its seeds and its shares for the worker pool (pure functions).

A scenario is a held-out initial condition: LIBERO's init state number, or the
seed of a robosuite/RoboTwin scene, the same in every run. The run seed seeds
everything else random in an episode (simulator RNG, a policy's own RNG), so with a
deterministic simulator and a greedy policy, runs differ only where the
simulator or the policy hardware is nondeterministic.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass


def derive_seed(*parts: object) -> int:
    """A 31-bit seed that is a pure function of its parts."""
    digest = hashlib.sha256("|".join(map(str, parts)).encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


@dataclass(frozen=True)
class TaskRef:
    """One task of an eval suite: `group` is the LIBERO suite / RoboTwin horizon / robosuite task."""

    suite_task: str     # the name in the eval suite's `tasks` (LIBERO suite, RoboTwin or robosuite task)
    task_index: int     # position inside suite_task (LIBERO's task id; 0 otherwise)
    task: str           # the task's own name
    language: str       # its instruction ('' where the benchmark has none)


@dataclass(frozen=True)
class Episode:
    suite_task: str
    task_index: int
    task: str
    scenario: int
    run: int
    scenario_seed: int
    seed: int
    max_steps: int

    def as_dict(self) -> dict:
        return asdict(self)


def plan(spec: dict, tasks: list[TaskRef], run: int) -> list[Episode]:
    """Every episode of run `run` (1-based): each task x scenarios_per_task, in a fixed order."""
    if not 1 <= run <= spec["runs"]:
        raise ValueError(f"run {run} is outside 1..{spec['runs']} for eval suite '{spec['eval_suite']}'")
    out = []
    for t in tasks:
        for scenario in range(spec["scenarios_per_task"]):
            out.append(Episode(
                suite_task=t.suite_task, task_index=t.task_index, task=t.task, scenario=scenario, run=run,
                scenario_seed=derive_seed(spec["seed"], spec["benchmark"], t.suite_task, t.task_index, scenario),
                seed=derive_seed(spec["seed"], spec["benchmark"], t.suite_task, t.task_index, scenario, "run", run),
                max_steps=int(spec["max_steps"][t.suite_task]),
            ))
    return out


def chunks_of(episodes: list[Episode], workers: int) -> list[list[Episode]]:
    """Split each task's episodes into contiguous shares so that about `workers` shares exist in all."""
    by_task: dict[tuple, list[Episode]] = {}
    for ep in episodes:
        by_task.setdefault((ep.suite_task, ep.task_index), []).append(ep)
    per_task = max(1, -(-workers // max(1, len(by_task))))
    out = []
    for eps in by_task.values():
        n = min(per_task, len(eps))
        size = -(-len(eps) // n)
        out.extend(eps[i:i + size] for i in range(0, len(eps), size))
    return out

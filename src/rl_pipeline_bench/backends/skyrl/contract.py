"""SkyRL's share of the measurement contract: its layout, batch/worker pairs and staleness."""

from __future__ import annotations

from typing import Any

from ...records.configfile import ConfigError
from ..plan_capacity import PlanDemand
from ..topology import Topology

#: Megatron TP1 CP1 EP2 DP2 on two training GPUs, two inference GPUs.
TOPOLOGY = Topology(train_gpus=2, inference_gpus=2, tp=1, cp=1, ep=2)
#: SkyRL batch (groups per update) -> number of parallel generation workers.
WORKERS = {4: 12, 1: 3}
STALENESS = 4
#: The suite key selecting the batch variant (B4 is the contract, B1 the single-group variant).
SUITE_SCHEMA = {"skyrl_batch_size": {"enum": sorted(WORKERS)}}


def skyrl_batch(spec: Any) -> int:
    return int(spec.get("skyrl_batch_size", 4))


def _batch_problem(spec: Any) -> str | None:
    b = skyrl_batch(spec)
    if b in WORKERS:
        return None
    return (f"config key 'suites/{spec.suite_name}/skyrl_batch_size': {b} is not a contract batch "
            f"(allowed: {', '.join(map(str, sorted(WORKERS)))})")


def skyrl_workers(spec: Any) -> int:
    problem = _batch_problem(spec)
    if problem:
        raise ConfigError(problem)
    return WORKERS[skyrl_batch(spec)]


def batch_problems(spec: Any) -> list[str]:
    problem = _batch_problem(spec)
    return [problem] if problem else []


def variant(spec: Any) -> list[str]:
    return [f"B{skyrl_batch(spec)}/workers{skyrl_workers(spec)}"]


def plan_demand(spec: Any, workload: Any) -> PlanDemand:
    """SkyRL trains B plan groups a step (fewer than N*B offered, it trains fewer steps:
    fully_async_trainer.py:424-427) and submits at most (step + staleness) * B before step
    `step` trains (_compute_capacity_unlocked, fully_async_trainer.py:181-187)."""
    b, n = skyrl_batch(spec), spec.trained_updates
    return PlanDemand(n * b, (n + STALENESS) * b,
                      f"SkyRL trains {b} group(s) a step and generates up to {STALENESS} steps ahead")

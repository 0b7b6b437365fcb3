"""ART's share of the measurement contract: its layout, limits, the plan it takes and its own validity checks."""

from __future__ import annotations

import math
from typing import Any, Mapping

from ..plan_capacity import PlanDemand
from ..topology import Topology

#: Megatron TP1 CP2 EP2 on two training GPUs, two inference GPUs.
TOPOLOGY = Topology(train_gpus=2, inference_gpus=2, tp=1, cp=2, ep=2)
MAX_POLICY_AGE = 4
PACKED_SEQUENCE_LENGTH = 131072

#: The online autotuner's start and growth settings (art.PipelineAutotuneConfig; openpipe-art 0.5.23's
#: defaults, set explicitly so the plan is sized by the bounds ART applies, and checked by support.py).
AUTOTUNER_BOUNDS = {
    "initial_min_groups_per_packed_sequence": 8,
    "initial_max_groups_per_packed_sequence": 8,
    "warmup_ignore_steps": 3,
    "window_steps": 4,
    "target_group_increase_fraction": 0.2,
    "target_group_max_increase": 64,
}

REASON_CODES = {"autotuner_unhealthy": "an ART run's online autotuner was not healthy (settings rows, profile)"}


def autotuner_reasons(manifest: Mapping[str, Any]) -> list[str]:
    """ART's contract includes online autotuning; a run whose autotuner was not healthy is not that contract.

    The driver records `art_autotuner` from ART's own records (pipeline_settings/* train-log
    rows and the pipeline_tuner/ profile JSON; metrics.autotuner_health).
    """
    health = manifest.get("art_autotuner")
    if not isinstance(health, dict) or health.get("healthy") is not True:
        problems = "; ".join(health.get("problems") or []) if isinstance(health, dict) else ""
        return ["autotuner_unhealthy: the ART run's online autotuner was not healthy (manifest art_autotuner)"
                + (f": {problems}" if problems else "")]
    return []


def autotuner_batch_bounds(n: int, bounds: Mapping[str, Any] = AUTOTUNER_BOUNDS, packed_sequences: int = TOPOLOGY.dp) -> list[int]:
    """The most plan groups ART's online autotuner can put in each of steps 1..n.

    It starts at initial_max_groups_per_packed_sequence x the packed sequences a step fills
    (build_initial_settings, art/pipeline_tuner/autotune.py:1123-1166; one per data-parallel
    rank: distributed_service.py:1670-1678), first decides once warmup_ignore_steps plus
    window_steps steps have trained, then every window_steps steps (maybe_decide, autotune.py:192-207),
    and raises its target by at most max(1, min(target_group_max_increase, ceil(target x
    target_group_increase_fraction))) per decision (_adaptive_target_groups, autotune.py:838-895).
    A step takes at most its target (max_batch_size, PipelineTrainer._collect_batch).
    """
    target = int(bounds["initial_max_groups_per_packed_sequence"]) * max(1, int(packed_sequences))
    last_decision, out = int(bounds["warmup_ignore_steps"]), []
    for step in range(1, n + 1):
        out.append(target)
        if step > int(bounds["warmup_ignore_steps"]) and step - last_decision >= int(bounds["window_steps"]):
            target += max(1, min(int(bounds["target_group_max_increase"]),
                                 math.ceil(target * float(bounds["target_group_increase_fraction"]))))
            last_decision = step
    return out


def plan_demand(spec: Any, workload: Any) -> PlanDemand:
    """The plan groups an ART run of N steps can take: its autotuner's fastest growth, then
    MAX_POLICY_AGE steps of the last batch run ahead (the mean policy-age limit)."""
    bounds = autotuner_batch_bounds(spec.trained_updates)
    needed = sum(bounds)
    return PlanDemand(needed, needed + MAX_POLICY_AGE * bounds[-1],
                      f"ART's online autotuner takes up to {bounds[0]} groups a step from step 1 and may grow to "
                      f"{bounds[-1]} by step {len(bounds)}")

"""ART's share of the measurement contract: its layout, limits and its own validity checks."""

from __future__ import annotations

from typing import Any, Mapping

from ..topology import Topology

#: Megatron TP1 CP2 EP2 on two training GPUs, two inference GPUs.
TOPOLOGY = Topology(train_gpus=2, inference_gpus=2, tp=1, cp=2, ep=2)
MAX_POLICY_AGE = 4
PACKED_SEQUENCE_LENGTH = 131072

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

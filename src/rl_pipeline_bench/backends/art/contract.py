"""ART's share of the measurement contract: its layout, limits and its own validity checks."""

from __future__ import annotations

from typing import Any, Mapping

from ...topology import Topology

#: Megatron TP1 CP2 EP2 on two training GPUs, two inference GPUs.
TOPOLOGY = Topology(train_gpus=2, inference_gpus=2, tp=1, cp=2, ep=2)
MAX_POLICY_AGE = 4
PACKED_SEQUENCE_LENGTH = 131072

REASON_CODES = {"autotuner_unhealthy": "an ART run recorded no healthy online-autotuner metrics"}


def autotuner_reasons(manifest: Mapping[str, Any]) -> list[str]:
    """ART's contract includes online autotuning; a run without its metrics is not that contract."""
    health = manifest.get("art_autotuner")
    if not isinstance(health, dict) or not health.get("available"):
        return ["autotuner_unhealthy: the ART run recorded no online-autotuner metrics (manifest art_autotuner)"]
    return []

"""A suite's probe settings: the top-level `probes:` defaults with the suite's own overrides on top.

`merged_probe_settings` is what the config says (schema-shaped: what a run spec records);
`probe_settings` adds what follows from the suite: NCCL on a CUDA suite (one rank per
GPU unless `world_size` says otherwise), gloo with two ranks on a CPU suite, and the
checkpoint probe loading onto the suite's device.
"""

from __future__ import annotations

import copy
from typing import Any

SECTIONS = ("telemetry", "allreduce", "storage", "checkpoint")


def merged_probe_settings(config: dict[str, Any], suite_settings: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Defaults with the suite's overrides, key by key (a new dict; the config is not changed)."""
    merged = copy.deepcopy(config["probes"])
    for section, overrides in (suite_settings.get("probes") or {}).items():
        merged[section].update(copy.deepcopy(overrides))
    return merged


def probe_settings(config: dict[str, Any], suite_settings: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Resolved probe settings for one suite, with the choices the suite's device implies."""
    merged = merged_probe_settings(config, suite_settings)
    cuda = suite_settings["device"] == "cuda"
    ar = merged["allreduce"]
    ar["backend"] = "nccl" if cuda else "gloo"
    if ar["world_size"] is None:
        ar["world_size"] = int(suite_settings["gpus"]) if cuda else 2
    merged["checkpoint"]["device"] = "cuda" if cuda else "cpu"
    return merged

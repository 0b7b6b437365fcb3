"""A suite's probe settings: the top-level `probes:` defaults with the suite's own overrides on top.

`merged_probe_settings` is what the config says (schema-shaped); `probe_settings` adds
what follows from the suite: NCCL on a CUDA suite (one rank per GPU unless `world_size`
says otherwise), gloo with two ranks on a CPU suite, the checkpoint probe loading onto
the suite's device (its LoRA shape is its own setting, `probes.checkpoint.lora_rank/lora_alpha`).

In the run spec (rl_pipeline_bench.settings.spec, docs/run-spec.md) the resolved settings are
split: what changes a probe's work (sizes, iterations, ranks, the sampler's interval) is
hashed under `settings.probes`, the scratch directories included (they decide which filesystem
is measured); how long a probe may take (`PLACEMENT`: the timeouts) is recorded unhashed under
`about.probes`, like `gpu_sets`.
"""

from __future__ import annotations

import copy
from typing import Any

SECTIONS = ("telemetry", "allreduce", "storage", "checkpoint")

#: Keys that bound a probe's time without changing what it measures: not hashed. The storage and
#: checkpoint directories are hashed: the directory decides which filesystem is measured.
PLACEMENT = {"telemetry": (), "allreduce": ("timeout_s",), "storage": ("timeout_s",), "checkpoint": ()}
#: Keys `probe_settings` derives from the suite; they are not config keys.
DERIVED = {"telemetry": (), "allreduce": ("backend",), "storage": (), "checkpoint": ("device",)}


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


def split_for_spec(resolved: dict[str, dict[str, Any]]) -> tuple[dict, dict]:
    """(hashed, placement) halves of resolved probe settings, for a spec's `settings` and `about`."""
    hashed = {s: {k: v for k, v in resolved[s].items() if k not in PLACEMENT[s]} for s in SECTIONS}
    placement = {s: {k: resolved[s][k] for k in PLACEMENT[s]} for s in SECTIONS}
    return hashed, placement


def join_from_spec(hashed: dict[str, dict[str, Any]], placement: dict[str, dict[str, Any]]) -> dict[str, dict]:
    """The resolved probe settings back from a spec's two halves."""
    return {s: {**copy.deepcopy(hashed[s]), **copy.deepcopy(placement.get(s) or {})} for s in SECTIONS}


def config_section(resolved: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Resolved settings as a config's `probes:` section (the derived keys dropped)."""
    return {s: {k: copy.deepcopy(v) for k, v in resolved[s].items() if k not in DERIVED[s]} for s in SECTIONS}

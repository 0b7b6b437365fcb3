"""Checkpoint probe: safetensors save/load of a (tiny, randomly initialised) model snapshot and its LoRA adapter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probe_fixtures import tiny_snapshot
from rl_pipeline_bench.probes.checkpoint import run_checkpoint_probe
from rl_pipeline_bench.probes.storage import StorageProbeError


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory) -> Path:
    return tiny_snapshot(tmp_path_factory.mktemp("tiny"), weights=True)


def test_save_and_load_times_of_model_and_adapter(snapshot, tmp_path):
    out = tmp_path / "ckpt"
    record = run_checkpoint_probe(snapshot, out, lora_rank=8, lora_alpha=32, log=lambda m: None)
    json.dumps(record, allow_nan=False)
    model = record["model"]
    assert model["shards"] == 1 and model["bytes"] == (snapshot / "model.safetensors").stat().st_size
    assert model["save_s"] > 0 and model["load_s"] > 0 and model["tensors"] > 0
    adapter = record["adapter"]
    assert adapter["parameters"] == 21504 and adapter["tensors"] == 24  # peft's layout for this model
    assert adapter["save_s"] > 0 and adapter["load_s"] > 0
    assert adapter["target_parameters"] and "q_proj" in adapter["target_modules"]
    assert record["scratch_removed"] and not out.exists()  # created for the probe, removed afterwards


def test_snapshot_without_weights_is_refused(tmp_path):
    with pytest.raises(StorageProbeError, match="no \\*.safetensors"):
        run_checkpoint_probe(tiny_snapshot(tmp_path / "cfg"), tmp_path / "o", lora_rank=8, lora_alpha=32)

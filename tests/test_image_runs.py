"""What a container run mounts and passes in (no engine needed; the pipeline test runs it for real)."""

from __future__ import annotations

import pytest

from rl_pipeline_bench import image_runs, images, provenance
from rl_pipeline_bench.backends import get
from rl_pipeline_bench.container_run import CONTROL_ENV, ContainerRunError


def _model(tmp_path):
    hf_home = tmp_path / "hf_home"
    (hf_home / "hub").mkdir(parents=True)
    return {"hf_home": str(hf_home), "snapshot_path": str(hf_home / "hub" / "snap")}


def test_mounts_are_evidence_rw_and_cache_inputs_lease_ro(tmp_path):
    model = _model(tmp_path)
    inputs = []
    for name in ("spec.json", "model.json", "plan.parquet"):
        (tmp_path / name).write_text("{}")
        inputs.append(tmp_path / name)
    lease = tmp_path / "lease.json"
    lease.write_text("{}")
    evidence = tmp_path / "results" / "evidence"
    mounts = image_runs.run_mounts(evidence, model, [*inputs, inputs[0]], str(lease))
    by_path = {m.path_inside: m.read_only for m in mounts}
    assert by_path == {str(evidence.resolve()): False, str((tmp_path / "hf_home").resolve()): True,
                       **{str(p.resolve()): True for p in inputs}, str(lease.resolve()): True}
    assert all(m.source == m.path_inside for m in mounts), "host paths are kept, so every path passed in is valid inside"
    with pytest.raises(ContainerRunError, match="does not exist"):
        image_runs.run_mounts(evidence, model, [tmp_path / "missing.json"])


def test_environment_carries_the_baked_hashes_cache_and_lease(tmp_path):
    model = _model(tmp_path)
    labels = {images.LABEL_RECIPE: "r" * 64, images.LABEL_SOURCE: "s" * 64}
    env = image_runs.container_environment(labels, model, str(tmp_path / "lease.json"))
    assert env[provenance.BAKED_RECIPE_ENV] == "r" * 64 and env[provenance.BAKED_SOURCE_ENV] == "s" * 64
    assert env["HF_HOME"] == model["hf_home"] and env["HF_HUB_OFFLINE"] == "1"
    assert env["RL_BENCH_LEASE_RECORD"] == str((tmp_path / "lease.json").resolve())
    assert "RL_BENCH_LEASE_RECORD" not in image_runs.container_environment(labels, model)
    assert image_runs.inside_container({CONTROL_ENV: "/rl-bench/control/container.json"})
    assert not image_runs.inside_container({})


def test_container_names_are_engine_safe_and_framework_runs_share_ipc():
    assert image_runs.container_name("20261201T08Z-smoke/x:y") == "rl-bench-20261201T08Z-smoke-x-y"
    assert get("reference").container_network == "none" and not get("reference").container_host_config
    for name in ("art", "skyrl"):
        assert get(name).container_host_config == {"ipc_mode": "host"} and get(name).container_network == "host"

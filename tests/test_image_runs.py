"""What a container run mounts and passes in (no engine needed; the pipeline test runs it for real)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl_pipeline_bench.runs import image_runs
from rl_pipeline_bench.provenance import images, recipes as provenance
from rl_pipeline_bench.backends import get, registered
from rl_pipeline_bench.runs.container_run import CONTROL_ENV, ContainerRunError


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
    assert "CUDA_VISIBLE_DEVICES" not in env
    leased = image_runs.container_environment(labels, model, None, ["GPU-aaaa", "GPU-bbbb"])
    assert leased["CUDA_VISIBLE_DEVICES"] == "GPU-aaaa,GPU-bbbb", "the lease's UUIDs, as on the host"


def test_a_run_in_the_image_or_a_pod_runs_in_place_never_nested():
    assert image_runs.in_place({CONTROL_ENV: "/rl-bench/control/container.json"})
    assert image_runs.in_place({"RL_BENCH_RUNTIME": "container"}), "a Kubernetes pod of the image: ENV says container"
    assert not image_runs.in_place({"RL_BENCH_RUNTIME": "native"}) and not image_runs.in_place({})


def test_the_inner_run_is_the_same_run_with_absolute_paths_and_the_host_s_run_id(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("spec.json", "model.json", "plan.parquet", "image.json"):
        (tmp_path / name).write_text("{}")
    host = image_runs.HostRun(None, "reference", "multi_turn", 2, _model(tmp_path), Path("model.json"),
                              Path("results/evidence"), Path("results/attempts.jsonl"), Path("image.json"),
                              plan=Path("plan.parquet"), recipe_record=Path("missing-recipe.json"))
    args = host.inner_args("RUN-1", tmp_path / "spec.json")
    flags = dict(zip(args[1::2], args[2::2]))
    assert args[0] == "run" and flags["--run-id"] == "RUN-1" and flags["--trial"] == "2"
    assert flags["--evidence-root"] == str(tmp_path / "results/evidence")
    assert flags["--attempts-index"] == str(tmp_path / "results/attempts.jsonl")
    assert flags["--model-record"] == str(tmp_path / "model.json") and flags["--plan"] == str(tmp_path / "plan.parquet")
    assert "--run-json" not in flags, "the host writes run.json, once the container's evidence says completed"
    assert "--recipe-record" not in flags, "a record that does not exist is neither passed nor mounted"
    assert host.inputs(tmp_path / "spec.json") == [tmp_path / "spec.json", Path("model.json"), Path("plan.parquet"),
                                                   Path("image.json")]


def test_container_names_are_engine_safe_and_framework_runs_share_ipc():
    assert image_runs.container_name("20261201T08Z-smoke/x:y") == "rl-bench-20261201T08Z-smoke-x-y"
    assert get("reference").container_network == "none" and not get("reference").container_host_config
    frameworks = [b.name for b in registered() if b.framework]
    assert {"art", "skyrl"} <= set(frameworks)
    for name in frameworks:
        assert get(name).container_host_config == {"ipc_mode": "host"} and get(name).container_network == "host"


def _preflight_in_place(baked_recipe: str, baked_source: str):
    import os
    import subprocess
    import sys

    env = dict(os.environ, RL_BENCH_RUNTIME="container", DOCKER_HOST="unix:///nonexistent/no-engine.sock",
               **{provenance.BAKED_RECIPE_ENV: baked_recipe, provenance.BAKED_SOURCE_ENV: baked_source})
    return subprocess.run([sys.executable, "-m", "rl_pipeline_bench.cli", "preflight", "--backend", "reference",
                           "--runtime", "container"], env=env, capture_output=True, text=True, timeout=120)


def test_preflight_in_a_pod_of_the_image_checks_the_image_in_place_without_an_engine():
    """In a Kubernetes pod (RL_BENCH_RUNTIME=container, the image's ENV) there is no engine to ask:
    the preflight recomputes this tree's hashes and compares them with the baked ones."""
    import json

    from rl_pipeline_bench.paths import ROOT

    recipe = provenance.recipe_record("reference", ROOT)["sha256"]
    source = provenance.source_manifest(ROOT)
    ok = _preflight_in_place(recipe, source)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["in_image"]["matches"] is True
    stale = _preflight_in_place("0" * 64, source)
    assert stale.returncode == 1
    assert f"recipe sha256 recomputed in the container is {recipe}, the image was baked with {'0' * 64}" in stale.stderr


def test_an_image_whose_files_differ_from_its_labels_fails_the_run_before_the_backend(config, tmp_path, monkeypatch):
    """In place (RL_BENCH_RUNTIME=container), a recomputed hash that differs from the baked one fails the
    run with its evidence kept, naming both hashes; the backend never starts."""
    import json

    from rl_pipeline_bench.runs import runner
    from rl_pipeline_bench.paths import ROOT
    from rl_pipeline_bench.settings.spec import build_spec, check_spec

    spec = check_spec(build_spec(config, "smoke_container"))
    source = provenance.source_manifest(ROOT)
    monkeypatch.setenv("RL_BENCH_RUNTIME", "container")
    monkeypatch.setenv(provenance.BAKED_RECIPE_ENV, provenance.recipe_record("reference", ROOT)["sha256"])
    monkeypatch.setenv(provenance.BAKED_SOURCE_ENV, "f" * 64)
    from rl_pipeline_bench.models.reference import BUILD_RECORD, load_build_config

    # The spec's own model, built from its build config, but with no weights: a backend that
    # started would fail on them, with another error (the model identity check passes first).
    spec_model = spec.settings["model"]
    snapshot = tmp_path / "no-weights"
    snapshot.mkdir()
    (snapshot / BUILD_RECORD).write_text(json.dumps({"build_config": load_build_config(ROOT / spec_model["build_config"])}))
    model = tmp_path / "model.json"
    model.write_text(json.dumps({"model": spec_model["name"], "repo_id": spec_model["repo_id"],
                                 "source": spec_model["source"], "snapshot_path": str(snapshot)}))
    code = runner.execute_run(spec, "reference", "multi_turn", 1, model_record=model,
                              evidence_dir_root=tmp_path / "evidence", run_id="in-place-mismatch")
    manifest = json.loads((tmp_path / "evidence/in-place-mismatch/manifest.json").read_text())
    assert code == 1 and manifest["status"] == "failed"
    assert "Traceback" in manifest["error"] and "_refuse_unproven_image" in manifest["error"], "before the backend"
    assert f"source sha256 recomputed in the container is {source}, the image was baked with {'f' * 64}" in manifest["error"]
    assert manifest["provenance"]["in_image"]["matches"] is False and manifest["provenance"]["container"] is None

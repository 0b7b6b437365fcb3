"""The smoke_container suite: the whole pipeline with its benchmark run inside the reference image.

`snakemake --cores 1 reports/comparison.html --config suite=smoke_container` in a
scratch copy, on the real engine (podman + runc, .ci/setup_podman.sh): the pipeline
builds the reference image from the copy's recipe (the engine's layer cache makes a
rebuild of unchanged layers cheap, so the image tests after this file reuse this
build), preflights it, and the host's `bench run` starts `bench run` inside it. The
evidence lands in the host's evidence directory, written by the container; its
manifest names the container and the hashes the container recomputed. Without an
engine the test skips, except in CI (CI=true), where it fails.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest
from workflow_copy import copy_repo, snakemake

from rl_pipeline_bench.runs import image_runs
from rl_pipeline_bench.provenance import images
from rl_pipeline_bench.runs.container_run import LABEL_RUN

# Slow tier (tests/conftest.py): the pipeline with runtime: container, images built by podman.
pytestmark = [pytest.mark.e2e, pytest.mark.podman]

PODMAN_SOCK = "/run/podman/podman.sock"
WORKLOAD = "multi_turn"


@pytest.fixture(scope="module")
def engine():
    if not os.environ.get("DOCKER_HOST") and os.path.exists(PODMAN_SOCK):
        os.environ["DOCKER_HOST"] = f"unix://{PODMAN_SOCK}"
    try:
        return images.engine_client(timeout=300)
    except images.ImageError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs the podman engine (.ci/setup_podman.sh): {exc}")
        pytest.skip(f"no container engine reachable (run `sudo bash .ci/setup_podman.sh`): {exc}")


@pytest.fixture(scope="module")
def container_workdir(engine, tmp_path_factory) -> Path:
    workdir = copy_repo(tmp_path_factory.mktemp("container") / "repo")
    proc = snakemake(workdir, "reports/comparison.html", "--config", "suite=smoke_container", timeout=3000)
    assert proc.returncode == 0, "smoke_container pipeline failed"
    return workdir


def _run_dir(workdir: Path) -> Path:
    (run_json,) = workdir.glob(f"results/runs/smoke_container-*/reference/{WORKLOAD}/trial1/run.json")
    return run_json.parent


def test_the_run_executes_in_the_image_and_its_manifest_proves_it(container_workdir, engine):
    run_dir = _run_dir(container_workdir)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["valid"], summary["reasons"]
    run = json.loads((run_dir / "run.json").read_text())
    evidence = container_workdir / run["evidence_dir"]
    assert evidence.parent == container_workdir / "results" / "evidence", "evidence lands in the host's evidence root"
    manifest = json.loads((evidence / "manifest.json").read_text())
    record = json.loads((container_workdir / "results/images/reference.json").read_text())
    assert manifest["status"] == "completed" and manifest["runtime"] == "container"
    assert manifest["image"]["image_id"] == record["image_id"] and "digest" in manifest["image"]

    ident = manifest["provenance"]
    container = ident["container"]
    assert ident["runtime"] == "container" and container["image_id"] == record["image_id"]
    assert len(container["container_id"]) == 64 and container["name"] == image_runs.container_name(run["run_id"])
    assert container["network_mode"] == "none" and container["device_requests"] == []
    # Mounted: evidence and the attempts index read-write, the rest read-only; never the image's own code.
    writable = {m["target"] for m in container["mounts"] if not m["read_only"]}
    assert writable == {str((container_workdir / "results/evidence").resolve()),
                        str((container_workdir / "results/attempts.jsonl").resolve())}
    assert not any(m["target"].startswith("/opt/") for m in container["mounts"])

    # The container recomputed the hashes of its own tree (/opt/rl-bench), equal to the labels and to the host's.
    in_image = ident["in_image"]
    assert in_image["matches"] and in_image["problems"] == [] and in_image["root"] == "/opt/rl-bench"
    assert in_image["recipe_sha256"] == record["labels"][images.LABEL_RECIPE] == manifest["recipe_sha256"]
    assert in_image["source_sha256"] == record["labels"][images.LABEL_SOURCE] == manifest["source_sha256"]
    assert in_image["running_package"]["matches"] and in_image["running_package"]["package_dir"].startswith("/opt/env/")
    assert manifest["env"]["RL_BENCH_RUNTIME"] == "container"

    calls = pd.read_parquet(evidence / "calls.parquet")
    assert len(calls) and (calls["completion_tokens"] == calls["forced_completion_tokens"]).all()
    events = [json.loads(line) for line in (container_workdir / "results/attempts.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events if e["run_id"] == run["run_id"]] == ["started", "finished", "summarized"]
    # The container is gone once the run ended.
    assert engine.api.containers(all=True, filters={"label": f"{LABEL_RUN}={run['run_id']}"}) == []
    html = (container_workdir / "reports/comparison.html").read_text()
    assert "smoke_container" in html and WORKLOAD in html


def test_an_image_that_is_not_the_backend_s_leaves_a_failed_evidence_directory(container_workdir, engine, tmp_path):
    """The host refuses an image whose labels are not the reference backend's; the attempt is still recorded."""
    from rl_pipeline_bench.settings.spec import load_spec

    (spec_file,) = container_workdir.glob("results/specs/smoke_container-*.json")
    record = json.loads((container_workdir / "results/images/reference.json").read_text())
    base = engine.images.get(os.environ.get("RL_BENCH_BASE_IMAGE", "localhost/rl-bench/debian-python:bookworm"))
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({**record, "image_id": base.id}))
    model_record = next(container_workdir.glob("results/models/*.json"))
    host = image_runs.HostRun(load_spec(spec_file), "reference", WORKLOAD, 1, json.loads(model_record.read_text()),
                              model_record, tmp_path / "evidence", tmp_path / "attempts.jsonl", wrong)
    code, evidence = image_runs.execute_in_image(host, "host-refused-run", client=engine, log=lambda line: None)
    assert code == 1
    manifest = json.loads((evidence / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "labelled for backend" in manifest["error"]
    events = [json.loads(line)["event"] for line in (tmp_path / "attempts.jsonl").read_text().splitlines()]
    assert events == ["started", "finished"]


def test_the_leased_gpus_go_into_the_container_as_device_requests(container_workdir, tmp_path):
    """A cuda container suite under a real `bench lease run` (NVML replaced by the test inventory file).

    The lease stays on the host; the container gets exactly the leased UUIDs as one device
    request and in CUDA_VISIBLE_DEVICES, and the in-container manifest records the lease.
    There is no GPU here, so the benchmark itself then fails inside, its evidence kept.
    """
    import subprocess
    import sys

    import yaml
    from lease_helpers import gpu, lease_argv, write_inventory
    from workflow_copy import workflow_env

    config = yaml.safe_load((container_workdir / "config.yaml").read_text())
    config["suites"]["container_gpu"] = dict(config["suites"]["smoke_container"], device="cuda", gpus=1,
                                             gpu_sets=["0"], description="container run under a GPU lease (test)")
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(config, sort_keys=False))
    inventory = write_inventory(tmp_path / "inventory.json", [gpu(0)])
    lock_dir = tmp_path / "locks"
    evidence_root, index = tmp_path / "evidence", tmp_path / "attempts.jsonl"
    model_record = next(container_workdir.glob("results/models/*.json"))
    run = [sys.executable, "-m", "rl_pipeline_bench.cli", "run", "--configfile", str(config_file), "--suite", "container_gpu",
           "--backend", "reference", "--workload", WORKLOAD, "--model-record", str(model_record),
           "--image-record", str(container_workdir / "results/images/reference.json"),
           "--evidence-root", str(evidence_root), "--attempts-index", str(index)]
    env = dict(workflow_env(container_workdir), RL_BENCH_GPU_INVENTORY=str(inventory), RL_BENCH_LOCK_DIR=str(lock_dir))
    env.pop("RL_BENCH_LEASE_RECORD", None)
    proc = subprocess.run(lease_argv("0", 1, "container-gpu-test", run), cwd=container_workdir, env=env,
                          capture_output=True, text=True, timeout=600)
    (evidence,) = evidence_root.iterdir()
    manifest = json.loads((evidence / "manifest.json").read_text())
    uuid = gpu(0)["uuid"]
    assert [g["uuid"] for g in manifest["gpus"]] == [uuid], proc.stderr[-3000:]
    container = manifest["provenance"]["container"]
    assert container["gpu_uuids"] == [uuid]
    assert container["device_requests"] == [{"Driver": "", "Count": 0, "DeviceIDs": [uuid], "Capabilities": [["gpu"]],
                                             "Options": {}}]
    assert manifest["env"]["CUDA_VISIBLE_DEVICES"] == uuid
    assert manifest["provenance"]["in_image"]["matches"]
    assert proc.returncode != 0 and manifest["status"] == "failed", "no CUDA device exists here"

"""The seed's Kubernetes qualification flow, tested as far as this machine allows.

No Kubernetes API server can run here. What is real: the manifests, validated
against the Kubernetes schemas in strict mode (kubernetes-validate); the script's
--dry-run and its refusals of bad input; the in-pod program (identity check, the
release gate, and a whole CPU suite run into a data directory); the artifact archive.
The controller's state machine runs against `k8s_fake.FakeCluster`, a test double of
the API server (see that module), whose API objects are schema-validated too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import kubernetes
import kubernetes_validate
import pytest
import yaml

from k8s_fake import FakeCluster
from rl_pipeline_bench.provenance import recipes as provenance
from rl_pipeline_bench import paths
from rl_pipeline_bench.k8s import collect, manifests, markers, pod
from rl_pipeline_bench.k8s.controller import Controller, ResumeRefused, Timeouts, verify_pod
from rl_pipeline_bench.k8s.request import RequestError, build_request, parse_image
from rl_pipeline_bench.paths import ROOT

SCRIPT = ROOT / "scripts" / "qualify_kubernetes.py"
DIGEST = "sha256:" + "ab" * 32
IMAGE = f"registry.example.com/rl-bench/art@{DIGEST}"
#: The API version the installed client speaks (kubernetes 32.x = Kubernetes 1.32).
K8S_VERSION = "1." + kubernetes.__version__.split(".")[0]
FAST = Timeouts(start_s=5, run_s=5, exit_s=5, exec_s=60, poll_s=0)


def strict(obj: dict) -> None:
    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


@pytest.fixture(scope="module")
def source_json(tmp_path_factory) -> Path:
    """The seed's one-liner, run for real: the hashes of this checkout."""
    path = tmp_path_factory.mktemp("k8s") / "source.json"
    code = ("import json; from rl_pipeline_bench.cli import ROOT, recipe_manifest, source_manifest; "
            "print(json.dumps(dict(source_sha256=source_manifest(), recipe_sha256=recipe_manifest(ROOT))))")
    path.write_text(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    return path


def _args(source_json: Path, output: Path, **over) -> argparse.Namespace:
    base = dict(backend="art", suite="comparison", name="rl-bench-art-test", image=IMAGE,
                source_provenance=str(source_json), output=str(output), context="lab", namespace="bench",
                pvc="bench-data", cache_subpath="caches/huggingface", pull_secret=None, scheduler=None,
                node_selector=[], runtime_class=None, host_hook=[])
    base.update(over)
    return argparse.Namespace(**base)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


# --------------------------------------------------------------------------- manifests and --dry-run

def test_manifests_are_valid_kubernetes_objects_in_strict_mode(source_json, tmp_path):
    req = build_request(_args(source_json, tmp_path / "out", pull_secret="regcred", scheduler="volcano",
                              node_selector=["nvidia.com/gpu.product=NVIDIA-H200"], runtime_class="nvidia"))
    pod_body = manifests.pod_manifest(req)
    for obj in (pod_body, manifests.configmap_manifest(req), manifests.collector_manifest(req, "gpu-node-3")):
        strict(obj)
    spec = pod_body["spec"]
    (container,) = spec["containers"]
    assert container["image"] == IMAGE and container["resources"]["limits"] == {"nvidia.com/gpu": "4"}
    assert spec["restartPolicy"] == "Never" and spec["schedulerName"] == "volcano" and spec["runtimeClassName"] == "nvidia"
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    # Only data, cache and provenance (plus the pod's own metadata and /dev/shm scratch): never code or deps.
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert set(mounts) == {manifests.DATA_DIR, manifests.CACHE_DIR, manifests.PROVENANCE_DIR, manifests.PODINFO_DIR, "/dev/shm"}
    assert mounts[manifests.CACHE_DIR]["subPath"] == "caches/huggingface"
    assert not any(m.startswith(manifests.BENCH_ROOT) or m.startswith("/opt") for m in mounts)
    record = json.loads(manifests.configmap_manifest(req)["data"]["source.json"])
    assert record == json.loads(source_json.read_text())


def test_a_manifest_kubernetes_would_reject_fails_strict_validation(source_json, tmp_path):
    """The validator is not a rubber stamp: an unknown field is refused in strict mode."""
    body = manifests.pod_manifest(build_request(_args(source_json, tmp_path / "out")))
    body["spec"]["containers"][0]["gpus"] = 4
    with pytest.raises(kubernetes_validate.ValidationError):
        strict(body)


def test_dry_run_prints_the_pod_and_creates_nothing(source_json, tmp_path):
    out = tmp_path / "out"
    proc = _cli("--backend", "skyrl", "--name", "rl-bench-skyrl-test", "--image", IMAGE.replace("/art@", "/skyrl@"),
                "--source-provenance", str(source_json), "--output", str(out), "--pvc", "bench-data",
                "--cache-subpath", "caches/huggingface", "--host-hook", "cuda-compat", "--namespace", "bench", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    configmap, pod_body = list(yaml.safe_load_all(proc.stdout))
    strict(configmap)
    strict(pod_body)
    assert pod_body["kind"] == "Pod" and pod_body["metadata"]["namespace"] == "bench"
    command = pod_body["spec"]["containers"][0]["command"]
    assert command[command.index("--host-hook") + 1] == "cuda-compat"  # declared by the skyrl descriptor
    assert "nothing was created" in proc.stderr and not out.exists()


@pytest.mark.parametrize("change, words", [
    ({"image": "registry.example.com/rl-bench/art:latest"}, ["--image", "has no digest", "@sha256:"]),
    ({"image": "registry.example.com/rl-bench/art@sha256:1234"}, ["not a sha256 digest"]),
    ({"name": "Bad_Name"}, ["--name", "RFC 1123"]),
    ({"backend": "reference"}, ["--backend", "not in suite 'comparison'"]),
    ({"host_hook": ["cuda-compat"]}, ["--host-hook cuda-compat", "backend art declares no host hooks"]),
    ({"backend": "skyrl", "host_hook": ["cuda-compt"]}, ["--host-hook cuda-compt", "declares only cuda-compat"]),
    ({"cache_subpath": "../etc"}, ["--cache-subpath", "without '..'"]),
    ({"node_selector": ["novalue"]}, ["--node-selector", "KEY=VALUE"]),
    ({"name": "rl-bench\n"}, ["--name", "RFC 1123"]),
    ({"namespace": "bench\nx"}, ["--namespace", "not a Kubernetes name", "RFC 1123 label"]),
    ({"namespace": "../bench"}, ["--namespace", "not a Kubernetes name"]),
    ({"pvc": "../data"}, ["--pvc", "RFC 1123 subdomain"]),
    ({"pvc": "bench-data\n"}, ["--pvc", "not a Kubernetes name"]),
    ({"pull_secret": "Secret"}, ["--pull-secret", "not a Kubernetes name"]),
    ({"runtime_class": "nvidia\n"}, ["--runtime-class", "not a Kubernetes name"]),
    ({"scheduler": "../sched"}, ["--scheduler", "not a Kubernetes name"]),
    ({"node_selector": ["gpu=a\nb"]}, ["--node-selector", "valid label key and value"]),
    ({"node_selector": ["../x=1"]}, ["--node-selector", "valid label key"]),
    ({"node_selector": ["gpu=h200", "gpu=a100"]}, ["--node-selector", "'gpu' is given twice"]),
])
def test_bad_input_is_refused_naming_the_flag(source_json, tmp_path, change, words):
    with pytest.raises(RequestError) as err:
        build_request(_args(source_json, tmp_path / "out", **change))
    assert all(w in str(err.value) for w in words), str(err.value)


def test_a_saved_request_round_trips_and_an_older_layout_still_loads(source_json, tmp_path):
    from rl_pipeline_bench.k8s.request import QualifyRequest

    req = build_request(_args(source_json, tmp_path / "out", backend="skyrl", host_hook=["cuda-compat"]))
    saved = json.loads(json.dumps(req.to_dict()))
    assert QualifyRequest.from_dict(saved) == req
    older = {k: v for k, v in saved.items() if k != "host_hooks"} | {"skyrl_cuda_compat": True}
    assert QualifyRequest.from_dict(older).host_hooks == ()


def test_existing_output_and_incomplete_source_record_are_refused_by_the_script(source_json, tmp_path):
    out = tmp_path / "used"
    out.mkdir()
    base = ["--backend", "art", "--name", "n1", "--image", IMAGE, "--pvc", "p", "--cache-subpath", "hf"]
    proc = _cli(*base, "--source-provenance", str(source_json), "--output", str(out))
    assert proc.returncode == 2 and "already exists" in proc.stderr and "--resume" in proc.stderr
    partial = tmp_path / "partial.json"
    record = json.loads(source_json.read_text())
    del record["recipe_sha256"]["art"]
    partial.write_text(json.dumps(record))
    proc = _cli(*base, "--source-provenance", str(partial), "--output", str(tmp_path / "fresh"))
    assert proc.returncode == 2 and "no sha256 for backend 'art'" in proc.stderr and not (tmp_path / "fresh").exists()
    tagged = [a if a != IMAGE else "registry.example.com/rl-bench/art:v1" for a in base]
    proc = _cli(*tagged, "--source-provenance", str(source_json), "--output", str(tmp_path / "fresh"))
    assert proc.returncode == 2 and "has no digest" in proc.stderr


@pytest.mark.parametrize("flag, value", [("--start-timeout", "-5"), ("--run-timeout", "nan"), ("--start-timeout", "0"),
                                         ("--run-timeout", "inf")])
def test_time_limits_must_be_finite_and_positive(source_json, tmp_path, flag, value):
    proc = _cli("--backend", "art", "--name", "n1", "--image", IMAGE, "--pvc", "p", "--cache-subpath", "hf",
                "--source-provenance", str(source_json), "--output", str(tmp_path / "o"), "--dry-run", flag, value)
    assert proc.returncode == 2 and flag in proc.stderr and "seconds" in proc.stderr, proc.stderr


def test_image_reference_keeps_repository_and_digest():
    ref = parse_image(IMAGE)
    assert ref.repository == "registry.example.com/rl-bench/art" and ref.digest == DIGEST and ref.reference == IMAGE


# --------------------------------------------------------------------------- inside the pod

def _record(source_json: Path, tmp_path: Path, **override) -> Path:
    record = json.loads(source_json.read_text())
    record.update(override)
    path = tmp_path / "mounted-source.json"
    path.write_text(json.dumps(record))
    return path


def test_pod_identity_matches_the_checkout_it_was_made_from(source_json, tmp_path):
    (tmp_path / "hf" / "hub").mkdir(parents=True)
    result = pod.check_identity(ROOT, "art", source_json, tmp_path / "hf", needs_hub=True)
    assert result["ok"], result["problems"]


def test_pod_refuses_baked_hashes_that_differ_from_the_mounted_record_before_any_gpu_work(source_json, tmp_path):
    wrong = "0" * 64
    record = _record(source_json, tmp_path, source_sha256=wrong)
    podinfo = tmp_path / "podinfo"
    podinfo.mkdir()
    env = dict(os.environ, RL_BENCH_POD_UID="uid-1", RL_BENCH_ROOT=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "rl_pipeline_bench.k8s.pod", "--backend", "art", "--suite", "comparison",
                           "--gpus", "0,1,2,3", "--source-record", str(record), "--data", str(tmp_path / "data"),
                           "--cache", str(tmp_path / "hf"), "--podinfo", str(podinfo)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == pod.EXIT_IDENTITY
    identity = markers.parse(proc.stdout)["identity"]
    assert not identity["ok"] and "released" not in markers.parse(proc.stdout)
    text = " ".join(identity["problems"])
    assert wrong in text and provenance.source_manifest(ROOT) in text and "has no hub/" in text
    assert not (tmp_path / "data").exists()


def test_pod_gate_waits_for_its_own_uid_and_honours_abort(tmp_path):
    (tmp_path / "annotations").write_text('rl-bench/release="someone-else"\nother="x"\n')
    assert pod.wait_for_annotation(tmp_path, manifests.RELEASE_ANNOTATION, "uid-1", timeout_s=0.2, poll_s=0.05) == "timeout"
    (tmp_path / "annotations").write_text('rl-bench/release="uid-1"\n')
    assert pod.wait_for_annotation(tmp_path, manifests.RELEASE_ANNOTATION, "uid-1", timeout_s=1) == "go"
    (tmp_path / "annotations").write_text('rl-bench/release="abort"\n')
    assert pod.wait_for_annotation(tmp_path, manifests.RELEASE_ANNOTATION, "uid-1", timeout_s=1) == "abort"


_SKIP = shutil.ignore_patterns(".venv", ".git", "results", "reports", "logs", ".snakemake", "__pycache__",
                               ".pytest_cache", ".scratch", ".venv-*")


@pytest.mark.e2e
def test_pod_program_runs_a_cpu_suite_into_its_data_directory(tmp_path):
    """The in-pod program for real, on CPU: identity, gate, one workload, summary, completion, then collection."""
    image_root = tmp_path / "opt-rl-bench"  # stands in for the image's /opt/rl-bench
    shutil.copytree(ROOT, image_root, ignore=_SKIP, symlinks=True)
    config = yaml.safe_load((image_root / "config.yaml").read_text())
    config["suites"]["k8s_cpu"] = dict(config["suites"]["smoke"], workloads=["multi_turn"], description="k8s test")
    (image_root / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    record = tmp_path / "source.json"
    record.write_text(json.dumps({"source_sha256": provenance.source_manifest(image_root),
                                  "recipe_sha256": provenance.recipe_manifest(image_root)}))
    podinfo, data = tmp_path / "podinfo", tmp_path / "data"
    podinfo.mkdir()
    (podinfo / "annotations").write_text('rl-bench/release="uid-7"\nrl-bench/collected="uid-7"\n')
    env = dict(os.environ, RL_BENCH_POD_UID="uid-7", RL_BENCH_ROOT=str(image_root),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run([sys.executable, "-m", "rl_pipeline_bench.k8s.pod", "--backend", "reference", "--suite", "k8s_cpu",
                           "--gpus", "0", "--source-record", str(record), "--data", str(data),
                           "--cache", str(tmp_path / "hf"), "--podinfo", str(podinfo)],
                          env=env, capture_output=True, text=True, timeout=900)
    found = markers.parse(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert found["identity"]["ok"] and found["released"]["released"] and found["completed"]["ok"]
    (run,) = markers.runs(proc.stdout)
    assert run["exit_code"] == 0 and run["summary"]["valid"] is True
    archive = subprocess.run([sys.executable, *collect.archive_command(str(data))[1:]], capture_output=True, text=True, check=True)
    got = collect.unpack(archive.stdout, tmp_path / "collected")
    manifests_found = list(paths.evidence_root(tmp_path / "collected").glob("*/manifest.json"))
    assert got["files"] >= 5 and len(manifests_found) == 1
    assert json.loads(manifests_found[0].read_text())["status"] == "completed"
    assert (tmp_path / "collected" / run["run_json"]).exists()


def test_archive_corruption_is_detected(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.txt").write_text("x" * 1000)
    out = subprocess.run([sys.executable, *collect.archive_command(str(tmp_path / "src"))[1:]], capture_output=True,
                         text=True, check=True).stdout
    lines = out.splitlines()
    with pytest.raises(collect.CollectError, match="no trailer"):
        collect.unpack("\n".join(lines[:-1]), tmp_path / "d1")
    lines[0] = ("A" if lines[0][0] != "A" else "B") + lines[0][1:]
    with pytest.raises(collect.CollectError, match="corrupt"):
        collect.unpack("\n".join(lines), tmp_path / "d2")
    assert not (tmp_path / "d1").exists() and not (tmp_path / "d2").exists()


# --------------------------------------------------------------------------- the controller against the test double

@pytest.fixture
def results(tmp_path) -> Path:
    """What the pod's data directory holds after a run (the fake PVC)."""
    d = tmp_path / "pvc-run"
    (paths.evidence_root(d) / "run-1").mkdir(parents=True)
    (paths.evidence_root(d) / "run-1" / "manifest.json").write_text('{"status": "completed"}')
    run_dir = paths.run_dir("comparison-0123456789ab", "art", "multi_turn", 1, d)
    run_dir.mkdir(parents=True)
    (run_dir / "summary.json").write_text('{"valid": true}')
    return d


def _controller(source_json, tmp_path, cluster) -> Controller:
    req = build_request(_args(source_json, tmp_path / "out"))
    return Controller(req, cluster, tmp_path / "out", FAST, say=lambda msg: None)


def _states(out: Path) -> list[str]:
    return [h["state"] for h in json.loads((out / "qualification.json").read_text())["history"]]


def test_controller_verifies_releases_collects_and_keeps_the_pod(source_json, tmp_path, results):
    cluster = FakeCluster(results)
    code = _controller(source_json, tmp_path, cluster).start()
    out = tmp_path / "out"
    record = json.loads((out / "qualification.json").read_text())
    assert code == 0, record
    assert record["outcome"] == "completed" and _states(out) == list(
        ("prepared", "created", "verified", "released", "finished", "collected", "closed"))
    assert record["pre_release"]["pod_problems"] == [] and record["pre_release"]["identity"]["ok"]
    assert record["post_completion"]["pod_problems"] == [] and record["final"]["exit_code"] == 0
    assert cluster.created_pods == ["rl-bench-art-test"], "one pod, never a second"
    assert not [c for c in cluster.calls if c[0] == "delete_pod"], "the completed pod record is kept"
    uid = record["pod"]["uid"]
    annotations = cluster.pods["rl-bench-art-test"]["metadata"]["annotations"]
    assert annotations[manifests.RELEASE_ANNOTATION] == uid and annotations[manifests.COLLECTED_ANNOTATION] == uid
    assert (paths.evidence_root(out / "artifacts") / "run-1" / "manifest.json").exists()
    assert record["artifacts"]["files"] == 2
    for name in ("pod-requested.json", "pod-observed-verify.json", "pod-observed-finish.json", "pod-final.json"):
        strict(json.loads((out / name).read_text()))  # the double's API objects are real-shaped
    assert "completed" in markers.parse((out / "pod.log").read_text())


def test_wrong_image_digest_is_refused_and_the_benchmark_never_released(source_json, tmp_path, results):
    cluster = FakeCluster(results, image_digest="sha256:" + "cd" * 32)
    code = _controller(source_json, tmp_path, cluster).start()
    record = json.loads((tmp_path / "out" / "qualification.json").read_text())
    assert code == 3 and record["outcome"] == "refused"
    assert "container runs image digest sha256:cdcd" in record["reason"] and DIGEST in record["reason"]
    notes = cluster.pods["rl-bench-art-test"]["metadata"]["annotations"]
    assert notes[manifests.RELEASE_ANNOTATION] == manifests.ABORT
    assert not [c for c in cluster.calls if c[0] == "exec"] and cluster.created_pods == ["rl-bench-art-test"]


def test_baked_hash_mismatch_reported_by_the_pod_is_refused(source_json, tmp_path, results):
    cluster = FakeCluster(results, identity_ok=False)
    code = _controller(source_json, tmp_path, cluster).start()
    record = json.loads((tmp_path / "out" / "qualification.json").read_text())
    assert code == 3 and "baked source sha256" in record["reason"] and "released" not in _states(tmp_path / "out")


def test_failed_run_is_recorded_not_rerun_and_artifacts_come_through_a_helper_pod(source_json, tmp_path, results):
    cluster = FakeCluster(results, run_fails=True)
    code = _controller(source_json, tmp_path, cluster).start()
    record = json.loads((tmp_path / "out" / "qualification.json").read_text())
    assert code == 1 and record["outcome"] == "failed" and "multi_turn exited 1" in record["reason"]
    assert cluster.created_pods == ["rl-bench-art-test", "rl-bench-art-test-collect"]
    assert ("delete_pod", "rl-bench-art-test-collect") in cluster.calls
    assert ("delete_pod", "rl-bench-art-test") not in cluster.calls
    assert "via" in record["artifacts"] and "collect" in record["artifacts"]["via"]
    helper = json.loads((tmp_path / "out" / "collector-requested.json").read_text())
    assert helper["spec"]["nodeName"] == "gpu-node-3"
    strict(helper)


def test_a_replaced_pod_is_not_trusted(source_json, tmp_path, results):
    cluster = FakeCluster(results, replace_after_release=True)
    code = _controller(source_json, tmp_path, cluster).start()
    record = json.loads((tmp_path / "out" / "qualification.json").read_text())
    assert code == 1 and "replaced" in record["reason"] and cluster.created_pods == ["rl-bench-art-test"]


def test_resume_observes_the_same_pod_and_never_creates_one(source_json, tmp_path, results):
    cluster = FakeCluster(results)
    ctl = _controller(source_json, tmp_path, cluster)
    ctl._release = lambda: 99  # the controller is "killed" right after verification
    assert ctl.start() == 99
    out = tmp_path / "out"
    assert _states(out)[-1] == "verified"
    code = Controller.resume(lambda req: cluster, out, FAST, say=lambda msg: None)
    assert code == 0 and cluster.created_pods == ["rl-bench-art-test"]
    assert _states(out)[-1] == "closed"
    # Asking again only reports the recorded outcome: nothing is observed or rerun.
    calls = len(cluster.calls)
    assert Controller.resume(lambda req: cluster, out, FAST, say=lambda msg: None) == 0 and len(cluster.calls) == calls


def test_resume_refuses_a_pod_with_another_uid(source_json, tmp_path, results):
    cluster = FakeCluster(results)
    ctl = _controller(source_json, tmp_path, cluster)
    ctl._release = lambda: 99
    ctl.start()
    cluster.pods["rl-bench-art-test"]["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000"
    with pytest.raises(ResumeRefused, match="not the same pod"):
        Controller.resume(lambda req: cluster, tmp_path / "out", FAST, say=lambda msg: None)


def test_resume_without_a_record_is_refused(tmp_path):
    proc = _cli("--resume", "--output", str(tmp_path / "nothing"))
    assert proc.returncode == 2 and "no qualification.json" in proc.stderr


def test_verify_pod_reads_docker_and_containerd_image_ids():
    def pod_with(image_id):
        return {"metadata": {"uid": "u"}, "status": {"containerStatuses": [{"name": "benchmark", "imageID": image_id}]}}

    assert verify_pod(pod_with(f"docker-pullable://registry.example.com/rl-bench/art@{DIGEST}"), "u", DIGEST) == []
    assert verify_pod(pod_with(f"registry.example.com/rl-bench/art@{DIGEST}"), "u", DIGEST) == []
    assert "no imageID digest" in verify_pod(pod_with(""), "u", DIGEST)[0]
    assert "the pod was replaced" in verify_pod(pod_with(f"x@{DIGEST}"), "v", DIGEST)[0]


# --------------------------------------------------------------------------- the Snakemake profile

def _profile_dry_run(tmp_path: Path, **env_vars: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RL_BENCH_K8S_", "AWS_", "SNAKEMAKE_STORAGE_S3_"))}
    env.update(env_vars, HOME=str(tmp_path))  # no AWS credentials file either
    return subprocess.run([sys.executable, "-m", "snakemake", "-n", "--profile", "profiles/kubernetes"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.workflow
def test_kubernetes_profile_refuses_an_image_without_digest(tmp_path):
    proc = _profile_dry_run(tmp_path)
    assert proc.returncode != 0 and "set RL_BENCH_K8S_IMAGE" in proc.stderr
    proc = _profile_dry_run(tmp_path, RL_BENCH_K8S_IMAGE="registry.example.com/rl-bench/reference:latest",
                            RL_BENCH_K8S_STORAGE_PREFIX="s3://bucket/rl-bench")
    assert proc.returncode != 0 and "names no digest" in proc.stderr


@pytest.mark.workflow
def test_kubernetes_profile_options_exist_in_the_installed_plugins(tmp_path):
    """Every profile key is accepted by Snakemake, the kubernetes executor and the S3 storage plugin:
    the dry run gets past argument parsing to the storage provider, which here has no endpoint."""
    proc = _profile_dry_run(tmp_path, RL_BENCH_K8S_IMAGE=f"registry.example.com/rl-bench/reference@{DIGEST}",
                            RL_BENCH_K8S_STORAGE_PREFIX="s3://bucket/rl-bench", RL_BENCH_K8S_S3_ENDPOINT="http://127.0.0.1:9")
    text = proc.stdout + proc.stderr
    assert "unrecognized arguments" not in text and "Building DAG of jobs" in text, text[-3000:]
    assert "s3://bucket/rl-bench/" in text, text[-3000:]


# --------------------------------------------------------------------------- the REST edge with the real client

def test_cluster_api_speaks_the_kubernetes_rest_api_through_the_real_client(source_json, tmp_path, results):
    """ClusterApi over HTTP against FakeApiServer (a test double): paths, bodies, API field names, 404."""
    from k8s_fake import FakeApiServer
    from rl_pipeline_bench.k8s.api import ClusterApi, ClusterError

    req = build_request(_args(source_json, tmp_path / "out"))
    cluster = FakeCluster(results)
    with FakeApiServer(cluster, "bench") as server:
        api = ClusterApi("lab", "bench", config_file=str(server.kubeconfig(tmp_path / "kubeconfig", "lab", "bench")))
        api.create_config_map(manifests.configmap_manifest(req))
        created = api.create_pod(manifests.pod_manifest(req))
        assert created["metadata"]["uid"] and created["spec"]["restartPolicy"] == "Never"
        assert created["spec"]["containers"][0]["volumeMounts"][0]["mountPath"] == manifests.DATA_DIR  # API field names
        running = api.read_pod(req.name)
        assert running["status"]["containerStatuses"][0]["imageID"].endswith(DIGEST)
        assert markers.parse(api.read_log(req.name, manifests.CONTAINER))["identity"]["ok"]
        patched = api.annotate(req.name, {manifests.RELEASE_ANNOTATION: created["metadata"]["uid"]})
        assert patched["metadata"]["annotations"][manifests.RELEASE_ANNOTATION] == created["metadata"]["uid"]
        assert api.read_pod("no-such-pod") is None
        with pytest.raises(ClusterError) as err:
            api.create_pod(manifests.pod_manifest(req))
        assert err.value.status == 409
        api.delete_pod(req.name)
        assert api.read_pod(req.name) is None
    methods = [(m, path.split("?")[0]) for m, path, _, _ in server.requests]
    assert ("POST", "/api/v1/namespaces/bench/pods") in methods and ("PATCH", f"/api/v1/namespaces/bench/pods/{req.name}") in methods
    (patch,) = [r for r in server.requests if r[0] == "PATCH"]
    assert "merge-patch" in patch[2] and patch[3] == {"metadata": {"annotations": {manifests.RELEASE_ANNOTATION: created["metadata"]["uid"]}}}
    (post,) = [r for r in server.requests if r[0] == "POST" and r[1].endswith("/pods")][:1]
    strict(post[3])  # what went over the wire is a valid Pod

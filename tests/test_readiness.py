"""The machine checks before the first job: everything missing in one block, each with its fix; nothing started.

This machine has no GPU and no Hub; the container engine is pointed at a socket that does
not exist and the Hub at a closed local port, so the answers do not depend on what runs here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from lease_helpers import gpu, write_inventory
from workflow_copy import copy_repo, workflow_env

from rl_pipeline_bench.runs import readiness

COMPARISON = {"gpus": 4, "gpu_sets": ["0,1,2,3"], "runtime": "container"}
UNREACHABLE = {"DOCKER_HOST": "unix:///nonexistent/rl-bench-test.sock", "HF_ENDPOINT": "http://127.0.0.1:9"}


def _snakemake(workdir: Path, suite: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    full_env = workflow_env(workdir, extra_env={**UNREACHABLE, **env})
    for name in ("RL_BENCH_GPU_INVENTORY", "HF_HUB_OFFLINE"):
        full_env.pop(name, None)
    return subprocess.run([sys.executable, "-m", "snakemake", "reports/comparison.html", *args,
                           "--config", f"suite={suite}"], cwd=workdir, env=full_env,
                          capture_output=True, text=True, timeout=600)


def _comparison(workdir: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return _snakemake(workdir, "comparison", *args, **env)


def _block(out: str, suite: str) -> list[str]:
    """The readiness block: its heading once, then problem and fix lines, nothing else of Python's."""
    heading = f"suite {suite} cannot run on this machine; nothing was started:"
    assert out.count(heading) == 1 and "Traceback" not in out and "Exception" not in out, out[-3000:]
    block = out.split(heading, 1)[1].strip("\n").splitlines()
    assert block[-1] == "(`snakemake -n ...` still shows what would run.)", block
    problems, fixes = block[:-1:2], block[1:-1:2]
    assert all(p.startswith("  - ") for p in problems) and all(f.startswith("    fix: ") for f in fixes), block
    return [p.strip() for p in problems]


def _no_nvml() -> None:
    from rl_pipeline_bench.host.gpus import InventoryError, query_inventory

    try:
        query_inventory({})
        pytest.skip("this machine has NVML: the test is about one without GPUs")
    except InventoryError:
        pass


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return copy_repo(tmp_path_factory.mktemp("readiness") / "repo")


def _assert_nothing_downloaded(workdir: Path) -> None:
    assert not (workdir / "results/models/hf_home/hub/models--Qwen--Qwen3.5-35B-A3B").exists()
    assert not (workdir / "results/models/qwen3.5-35b-a3b.json").exists()
    assert not (workdir / "logs/models/qwen3.5-35b-a3b.log").exists()  # the model job never started


@pytest.mark.workflow
def test_comparison_without_gpu_engine_or_hub_stops_before_the_first_job(workdir):
    _no_nvml()
    started = time.monotonic()
    proc = _comparison(workdir, "--cores", "1")
    elapsed = time.monotonic() - started
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1
    problems = _block(out, "comparison")
    assert [p.split(":")[0] for p in problems] == ["- no GPU", "- no container engine", "- no Hub"], out[-3000:]
    assert "NVML" in problems[0] and "DOCKER_HOST=unix:///nonexistent/rl-bench-test.sock" in problems[1]
    assert "hf_cache=PATH" in out.split(problems[2], 1)[1]  # the Hub's fix
    assert not (workdir / "logs").exists() and not (workdir / "results/specs").exists()  # no job ran
    _assert_nothing_downloaded(workdir)
    assert elapsed < 120, elapsed


@pytest.mark.workflow
@pytest.mark.parametrize("suite, problem", [("reference_gpu", "- no GPU"), ("smoke_container", "- no container engine")])
def test_a_suite_this_machine_cannot_run_stops_before_its_first_job(tmp_path, suite, problem):
    """reference_gpu used to fail at its first probe's lease; smoke_container after three probes, at the build."""
    if suite == "reference_gpu":
        _no_nvml()
    workdir = copy_repo(tmp_path / "repo")
    proc = _snakemake(workdir, suite, "--cores", "1")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and [p.split(":")[0] for p in _block(out, suite)] == [problem], out[-3000:]
    assert not (workdir / "logs").exists() and not (workdir / "results/specs").exists()


@pytest.mark.workflow
def test_a_dry_run_plans_the_comparison_on_a_machine_without_gpus(workdir):
    proc = _comparison(workdir, "-n")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "run_benchmark" in out and "This was a dry-run" in out and "cannot run on this machine" not in out
    _assert_nothing_downloaded(workdir)


@pytest.mark.workflow
def test_the_slurm_profile_checks_the_cluster_gpus_before_the_first_job(workdir):
    proc = subprocess.run(["sinfo", "--noheader", "--format=%G"], capture_output=True, text=True) \
        if shutil.which("sinfo") else None
    if proc is None or proc.returncode != 0 or "gpu" not in proc.stdout:
        pytest.skip("no SLURM cluster with gpu gres answers here (`sudo bash .ci/setup_slurm.sh`)")
    run = _comparison(workdir, "--profile", "profiles/slurm")
    out = run.stdout + run.stderr
    assert run.returncode == 1
    problems = _block(out, "comparison")
    assert "- no SLURM node with 4 GPUs: the most GPU gres a node has (sinfo) is" in problems[0], out[-3000:]
    assert [p.split(":")[0] for p in problems[1:]] == ["- no container engine", "- no Hub"]
    _assert_nothing_downloaded(workdir)


def test_gpus_are_counted_and_the_gpu_set_found_through_the_inventory(tmp_path, monkeypatch):
    monkeypatch.setenv("RL_BENCH_GPU_INVENTORY", str(write_inventory(tmp_path / "two.json", [gpu(0), gpu(1)])))
    (problem,) = readiness.gpu_problems(COMPARISON, "local")
    assert problem.startswith("too few GPUs: the suite needs 4, NVML lists 2 (Fixture H200 (test inventory))")
    monkeypatch.setenv("RL_BENCH_GPU_INVENTORY", str(write_inventory(tmp_path / "four.json", [gpu(i) for i in range(4)])))
    assert readiness.gpu_problems(COMPARISON, "local") == []
    (problem,) = readiness.gpu_problems(dict(COMPARISON, gpu_sets=["4,5,6,7"]), "local")
    assert problem.startswith("GPU(s) 4, 5, 6, 7 of the suite's gpu_sets are not on this machine")
    assert readiness.gpu_problems(dict(COMPARISON, gpus=0), "local") == []


def test_the_gpu_kind_is_each_leased_gpus_nvml_name(tmp_path, monkeypatch):
    """The comparison suite's figures are for H200s: four A100s are the wrong machine, named."""
    from rl_pipeline_bench.settings.config import load_config

    comparison = load_config()["suites"]["comparison"]
    assert comparison["gpu_kind"] == "H200"  # the suite the contract is for declares it
    mixed = [dict(gpu(i), name="NVIDIA A100-SXM4-80GB") if i in (2, 3) else gpu(i) for i in range(8)]
    monkeypatch.setenv("RL_BENCH_GPU_INVENTORY", str(write_inventory(tmp_path / "mixed.json", mixed)))
    (problem,) = readiness.gpu_problems(comparison, "local")
    assert problem == ("wrong GPU kind: the suite's throughput contract is for H200 GPUs; 2 of the 4 it would use "
                       "are not (2 NVIDIA A100-SXM4-80GB, 3 NVIDIA A100-SXM4-80GB)")
    assert readiness.gpu_problems(dict(comparison, gpu_sets=["4,5,6,7"]), "local") == []  # four H200s
    no_sets = {k: v for k, v in comparison.items() if k != "gpu_sets"}
    assert "2 NVIDIA A100" in readiness.gpu_problems(no_sets, "local")[0]  # the first four GPUs, as leased
    assert readiness.gpu_problems(dict(comparison, gpu_sets=["7,6,5,4"], gpu_kind="fixture h200"),
                                  "local") == []  # matched within the name, ignoring case


@pytest.mark.parametrize("gres, problem", [
    ("gpu:a100:8", "no SLURM node with 4 H200 GPUs: the typed GPU gres (sinfo) are gpu:a100:8"),
    ("gpu:h200:2\ngpu:a100:8", "no SLURM node with 4 H200 GPUs: the typed GPU gres (sinfo) are gpu:a100:8, gpu:h200:2"),
    ("gpu:nvidia_h200:4(S:0-1)", None),
    ("gpu:8", None),  # an untyped gres says nothing of the kind
])
def test_the_gpu_kind_under_slurm_is_a_typed_gres(tmp_path, monkeypatch, gres, problem):
    """sinfo is a small script printing a given gres here (this machine's test cluster has untyped gres)."""
    sinfo = tmp_path / "sinfo"
    sinfo.write_text(f"#!/bin/sh\nprintf '{gres}\\n'\n")
    sinfo.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    problems = readiness.gpu_problems({"gpus": 4, "gpu_kind": "H200"}, "slurm")
    assert problems == ([problem] if problem else [])


def test_offline_without_the_snapshot_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (problem,) = readiness.snapshot_problems("Qwen/Qwen3.5-35B-A3B", "a" * 40, tmp_path / "hf")
    assert problem.startswith("offline (HF_HUB_OFFLINE=1)") and "hf_cache=PATH" in problem.fix


def test_a_snapshot_larger_than_the_free_disk_is_refused(tmp_path, monkeypatch):
    """The Hub's file list is the one edge here that cannot be reached: a double of model_info gives its sizes."""
    import huggingface_hub

    free = shutil.disk_usage(tmp_path).free
    files = [SimpleNamespace(rfilename="model-00001.safetensors", size=free + 10**9),
             SimpleNamespace(rfilename="config.json", size=1000)]
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", lambda self, *a, **kw: SimpleNamespace(siblings=files))
    (problem,) = readiness.snapshot_problems("Qwen/Qwen3.5-35B-A3B", "a" * 40, tmp_path / "hf")
    assert problem.startswith(f"not enough disk: Qwen/Qwen3.5-35B-A3B@{'a' * 40} is {(free + 10**9 + 1000) / 1e9:.1f} GB")
    files[0].size = 10**6
    assert readiness.snapshot_problems("Qwen/Qwen3.5-35B-A3B", "a" * 40, tmp_path / "hf") == []

"""SLURM: the job environment, leases of exactly the allocated GPUs, and the pipeline through the profile.

The first tests read SLURM job environments given as plain dicts. The rest run on a
real one-node SLURM cluster (slurmctld, slurmd, munge on localhost; GPUs are gres on
character devices made with mknod, see .ci/setup_slurm.sh). GPU facts inside those
jobs come from the RL_BENCH_GPU_INVENTORY test seam, the project's only NVML stand-in.
Without a cluster these tests skip on a developer machine and fail in CI.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lease_helpers import gpu, write_inventory
from rl_pipeline_bench.leases import EXIT_REFUSED
from rl_pipeline_bench.paths import ROOT
from rl_pipeline_bench.host.slurm import SlurmAllocationError, allocated_gpu_spec, current_job

# Slow tier (tests/conftest.py): jobs submitted to the real SLURM cluster.
pytestmark = pytest.mark.cluster

BIN = Path(sys.executable).parent


# --------------------------------------------------------------------------- job environment

def test_outside_slurm_there_is_no_job():
    assert current_job({"PATH": "/usr/bin"}) is None


def test_step_gpus_win_over_job_gpus_and_the_job_is_described():
    job = current_job({"SLURM_JOB_ID": "42", "SLURM_STEP_ID": "0", "SLURMD_NODENAME": "gpu07",
                       "SLURM_JOB_NODELIST": "gpu07", "SLURM_JOB_PARTITION": "h200", "SLURM_JOB_ACCOUNT": "rl",
                       "SLURM_JOB_GPUS": "0,1,2,3,4,5,6,7", "SLURM_STEP_GPUS": "4,5,6,7", "SLURM_CPUS_ON_NODE": "32"})
    assert job.gpus == (4, 5, 6, 7) and job.gpu_source == "SLURM_STEP_GPUS"
    assert job.to_dict()["node"] == "gpu07" and job.partition == "h200" and job.cpus_on_node == 32
    assert allocated_gpu_spec(job, 4) == "4,5,6,7"


@pytest.mark.parametrize("gpus, count, words", [
    ("2", 4, ["allocated 1 GPU(s)", "SLURM_JOB_GPUS=2", "fewer than the 4", "--gpus=4"]),
    ("0,1", 1, ["more than the 1"]),
    (None, 2, ["has no GPU allocated", "--gpus=2"]),
])
def test_an_allocation_of_another_size_is_refused_naming_it(gpus, count, words):
    env = {"SLURM_JOB_ID": "9", "SLURMD_NODENAME": "n1"}
    if gpus is not None:
        env["SLURM_JOB_GPUS"] = gpus
    with pytest.raises(SlurmAllocationError) as err:
        allocated_gpu_spec(current_job(env), count)
    assert "SLURM job 9" in str(err.value) and all(w in str(err.value) for w in words), str(err.value)


@pytest.mark.parametrize("ids", ["gpu:0", "\u00b2", "0,\u0661"])  # '²' and Arabic-Indic one pass str.isdigit()
def test_malformed_gpu_ids_are_an_error_not_a_guess(ids):
    with pytest.raises(SlurmAllocationError, match="not a comma-separated list"):
        current_job({"SLURM_JOB_ID": "3", "SLURM_JOB_GPUS": ids})


_SHOW = ("import json, os; print('VISIBLE', os.environ['CUDA_VISIBLE_DEVICES']); "
         "print('SLURM', json.load(open(os.environ['RL_BENCH_LEASE_RECORD'])).get('slurm'))")


def _lease(tmp_path, env_extra, spec, count, inventory_gpus=2):
    inventory = write_inventory(tmp_path / "inventory.json", [gpu(i) for i in range(inventory_gpus)])
    env = dict(os.environ, RL_BENCH_GPU_INVENTORY=str(inventory), RL_BENCH_LOCK_DIR=str(tmp_path / "locks"), **env_extra)
    env.pop("RL_BENCH_LEASE_RECORD", None)
    cmd = [sys.executable, "-m", "rl_pipeline_bench.commands.lease", "run", "--gpus", spec, "--count", str(count),
           "--run-id", "slurm-env-test", "--memory-threshold-mib", "1024", "--",
           sys.executable, "-c", _SHOW]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)


def test_a_stray_slurm_environment_cannot_move_the_lease(tmp_path):
    """SLURM variables naming a job the controller does not know (none here, or no SLURM at all)
    are not trusted: GPUs other than the configured ones are refused, and nothing records a SLURM job."""
    stray = {"SLURM_JOB_ID": "999999", "SLURM_STEP_GPUS": "1", "SLURMD_NODENAME": "n1"}
    proc = _lease(tmp_path, stray, "0", 1)
    assert proc.returncode == EXIT_REFUSED, proc.stdout + proc.stderr
    assert "VISIBLE" not in proc.stdout
    assert "SLURM job 999999" in proc.stderr and "SLURM_STEP_GPUS=1" in proc.stderr and "scontrol" in proc.stderr
    same = _lease(tmp_path, stray, "1", 1)  # no mismatch: the configured GPUs, and no SLURM block
    assert same.returncode == 0, same.stderr
    assert "ignoring the SLURM environment" in same.stderr
    assert f"VISIBLE {gpu(1)['uuid']}" in same.stdout and "SLURM None" in same.stdout
    bad = _lease(tmp_path, {"SLURM_JOB_ID": "999999", "SLURM_JOB_GPUS": "\u00b2"}, "0", 1)
    assert bad.returncode == EXIT_REFUSED and "Traceback" not in bad.stderr and "not a comma-separated" in bad.stderr


# --------------------------------------------------------------------------- a real SLURM

def _slurm_up() -> str | None:
    if not shutil.which("sinfo"):
        return "sinfo not installed"
    proc = subprocess.run(["sinfo", "-h", "-o", "%T %G"], capture_output=True, text=True, timeout=30)
    if proc.returncode != 0 or "gpu" not in proc.stdout:
        return f"no SLURM cluster with gpu gres answers ({proc.stderr.strip() or proc.stdout.strip()})"
    return None


@pytest.fixture(scope="module")
def slurm():
    problem = _slurm_up()
    if problem:
        message = f"{problem}: start one with `sudo bash .ci/setup_slurm.sh`"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def _bench_env(**extra) -> dict[str, str]:
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", PYTHONUNBUFFERED="1", **extra)
    env.pop("RL_BENCH_LEASE_RECORD", None)
    return env


def _sbatch_wait(args: list[str], wrap: str, env: dict[str, str], out: Path) -> tuple[int, str]:
    proc = subprocess.run(["sbatch", "--wait", "--parsable", "-o", str(out), *args, "--wrap", wrap],
                          env=env, capture_output=True, text=True, timeout=300)
    return proc.returncode, out.read_text() if out.exists() else proc.stderr


def test_sbatch_job_leases_only_the_gpu_slurm_gave_it(slurm, tmp_path):
    inventory = write_inventory(tmp_path / "inventory.json", [gpu(i) for i in range(2)])
    env = _bench_env(RL_BENCH_GPU_INVENTORY=str(inventory), RL_BENCH_LOCK_DIR=str(tmp_path / "locks"))
    hold = subprocess.run(["sbatch", "--parsable", "--gpus=1", "-o", "/dev/null", "--wrap", "sleep 120"],
                          capture_output=True, text=True, check=True).stdout.strip().split(";")[0]
    try:
        detail = subprocess.run(["scontrol", "show", "job", "-d", hold], capture_output=True, text=True).stdout
        held = 1 if "IDX:1" in detail else 0
        code, log = _sbatch_wait(
            ["--gpus=1"],
            f"echo SLURM_JOB_GPUS=$SLURM_JOB_GPUS; bench lease run --gpus {held} --count 1 --run-id sbatch-lease "
            f"--memory-threshold-mib 1024 -- python -c \"import os; print('VISIBLE', os.environ['CUDA_VISIBLE_DEVICES'])\"",
            env, tmp_path / "job.out")
    finally:
        subprocess.run(["scancel", hold], check=False)
    other = 1 - held
    assert code == 0, log
    assert f"SLURM_JOB_GPUS={other}" in log, log
    assert f"VISIBLE {gpu(other)['uuid']}" in log and gpu(held)["uuid"] not in log, log
    assert f"leasing the allocated GPU(s) {other} (SLURM_JOB_GPUS) instead of the configured SPEC(s) {held}" in log


def test_sbatch_job_with_fewer_gpus_than_needed_is_refused_before_gpu_work(slurm, tmp_path):
    inventory = write_inventory(tmp_path / "inventory.json", [gpu(i) for i in range(2)])
    env = _bench_env(RL_BENCH_GPU_INVENTORY=str(inventory), RL_BENCH_LOCK_DIR=str(tmp_path / "locks"))
    code, log = _sbatch_wait(["--gpus=1"], "bench lease run --gpus 0,1 --count 2 --run-id too-few -- "
                             "python -c 'print(\"COMMAND RAN\")'", env, tmp_path / "job.out")
    assert code != 0
    assert "lease refused" in log and "allocated 1 GPU(s)" in log and "fewer than the 2 the run needs" in log, log
    assert "COMMAND RAN" not in log
    assert not list((tmp_path / "locks").glob("lease-*.json"))


# --------------------------------------------------------------------------- the pipeline through --profile profiles/slurm

_SKIP = shutil.ignore_patterns(".venv", ".git", "results", "reports", "logs", ".snakemake", "__pycache__",
                               ".pytest_cache", ".scratch", ".venv-*")
CPU_SUITE, GPU_SUITE = "slurm_cpu", "slurm_gpu"


def _add_suites(config_path: Path) -> None:
    """One workload, smallest scale: the point is the execution path, not the numbers."""
    config = yaml.safe_load(config_path.read_text())
    base = dict(config["suites"]["smoke"], workloads=["multi_turn"], description="one workload through SLURM (test)")
    config["suites"][CPU_SUITE] = base
    config["suites"][GPU_SUITE] = dict(base, device="cuda", gpus=1, gpu_sets=["0"],
                                       description="the GPU path through SLURM against fake gres (test)")
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))


@pytest.fixture(scope="module")
def slurm_pipeline(slurm, tmp_path_factory):
    """One Snakemake invocation through the profile as shipped: the CPU suite's report and the GPU suite's run.

    Both benchmark runs are SLURM jobs at once (bench_slot=2); --keep-going because
    the GPU run must fail (the fake gres has no CUDA behind it) while the rest goes on.
    """
    workdir = tmp_path_factory.mktemp("slurm-pipeline") / "repo"
    shutil.copytree(ROOT, workdir, ignore=_SKIP, symlinks=True)
    _add_suites(workdir / "config.yaml")
    inventory = write_inventory(workdir.parent / "inventory.json", [gpu(i) for i in range(2)])
    env = _bench_env(RL_BENCH_ROOT=str(workdir), RL_BENCH_GPU_INVENTORY=str(inventory),
                     RL_BENCH_LOCK_DIR=str(workdir.parent / "locks"))
    plan = subprocess.run([sys.executable, "-m", "rl_pipeline_bench.cli", "plan", "--configfile", str(workdir / "config.yaml"),
                           "--suite", GPU_SUITE, "--json"], env=env, capture_output=True, text=True, check=True)
    (gpu_run,) = [r["target"] for r in json.loads(plan.stdout)["runs"]]  # the run's file target, whatever the layout
    proc = subprocess.run([sys.executable, "-m", "snakemake", "reports/comparison.html", gpu_run, "--profile", "profiles/slurm",
                           "--slurm-init-seconds-before-status-checks", "2", "--keep-going", "--resources", "bench_slot=2",
                           "--config", f"suite={CPU_SUITE}"],
                          cwd=workdir, env=env, capture_output=True, text=True, timeout=1200)
    (workdir.parent / "snakemake.log").write_text(proc.stdout + proc.stderr)
    return workdir, proc


def _manifests(workdir: Path, suite: str) -> list[dict]:
    found = [json.loads(Path(p).read_text()) for p in sorted(glob.glob(str(workdir / "results/evidence/*/manifest.json")))]
    return [m for m in found if m["suite"] == suite]


def _scontrol(job_id: str) -> str:
    return subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True).stdout


def test_pipeline_runs_through_sbatch_and_renders_the_report(slurm_pipeline):
    workdir, proc = slurm_pipeline
    output = proc.stdout + proc.stderr
    assert (workdir / "reports/comparison.html").exists(), output[-5000:]
    (manifest,) = _manifests(workdir, CPU_SUITE)
    assert manifest["status"] == "completed"
    job = manifest["slurm"]
    assert job and job["job_id"].isdigit() and job["node"] == "localhost" and job["gpus"] == []
    detail = _scontrol(job["job_id"])
    assert f"JobId={job['job_id']}" in detail and "JobState=COMPLETED" in detail, detail
    assert "TimeLimit=12:00:00" in detail, "the profile's runtime reaches sbatch -t"
    assert f"submitted with SLURM jobid {job['job_id']}" in output
    # Kept logs (--slurm-keep-successful-logs); only benchmark runs and the infrastructure
    # probes (which measure the node) went to the cluster.
    logs = workdir / "logs" / "slurm"
    assert list(logs.glob(f"rule_run_benchmark/*/{job['job_id']}.log"))
    assert sorted(p.name for p in logs.iterdir()) == ["rule_allreduce_probe", "rule_checkpoint_probe",
                                                       "rule_run_benchmark", "rule_storage_probe"]
    # ... and the report and summary jobs ran here, where Snakemake runs (the rules' messages replace
    # the "localrule NAME:" headers on the terminal; the kept SLURM logs above name no such rule).
    assert "(Rule: render_report)" in output and "(Rule: summarize_run)" in output
    html = (workdir / "reports/comparison.html").read_text()
    assert CPU_SUITE in html and "multi_turn" in html


def test_gpu_suite_job_gets_the_suites_gpu_count_and_the_lease_takes_that_gpu(slurm_pipeline):
    """The GPU path: --gpus from the rule's gpu resource, the lease inside the job, the manifest.

    The fake gres has no CUDA behind it, so the reference backend stops at its CUDA
    check after the lease: the run is recorded as failed, which is what this checks too.
    """
    workdir, proc = slurm_pipeline
    assert proc.returncode != 0, "a CUDA run cannot succeed on fake GPUs"
    (manifest,) = _manifests(workdir, GPU_SUITE)
    assert manifest["status"] == "failed" and "CUDA" in manifest["error"]
    job = manifest["slurm"]
    assert job["gpu_source"] == "SLURM_STEP_GPUS" and len(job["gpus"]) == 1
    assert manifest["gpus"] == [{k: gpu(job["gpus"][0])[k] for k in ("index", "uuid", "name", "driver")}]
    assert manifest["lease"]["gpu_spec"] == str(job["gpus"][0])
    detail = _scontrol(job["job_id"])
    assert "TresPerJob=gres:gpu:1" in detail and "CpusPerTres=gres:gpu:8" in detail, detail
    assert not list((workdir.parent / "locks").glob("lease-*.json")), "the lease was released after the run"

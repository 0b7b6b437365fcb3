"""The whole pipeline on the smoke suite, in a scratch copy of the repository.

This is the newcomer's first command, run for real: tiny model build, four plans,
four reference runs on CPU, summaries and the report. It also checks the promises
around it: evidence is kept, the report rebuilds from evidence alone without
re-running a benchmark, and a deleted run.json is the only way to re-run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from planted_secrets import MARK, PLANTED_SECRETS
from workflow_copy import scheduled_jobs as _jobs
from workflow_copy import snakemake as _snakemake
from workflow_copy import spec_id as smoke_spec

from rl_pipeline_bench.evidence.progress import PREFIX as PROGRESS

# Slow tier (tests/conftest.py): the whole smoke pipeline, run once per session.
pytestmark = pytest.mark.e2e

WORKLOADS = ["multi_turn", "long_generation", "tool_history", "multi_turn_salted"]


# smoke_workdir (tests/conftest.py): the session's one smoke pipeline run, shared with the browser test;
# it runs with a broad set of planted secrets, and so does every pipeline call here.


def snakemake(workdir: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return _snakemake(workdir, *args, extra_env=PLANTED_SECRETS, **kw)


def _run_dirs(workdir: Path) -> list[Path]:
    return sorted((workdir / "results" / "evidence").iterdir())


def test_smoke_pipeline_produces_valid_runs_and_report(smoke_workdir):
    spec = smoke_spec(smoke_workdir)
    assert (smoke_workdir / f"results/specs/{spec}.json").is_file()
    for w in WORKLOADS:
        summary = json.loads((smoke_workdir / f"results/runs/{spec}/reference/{w}/trial1/summary.json").read_text())
        assert summary["valid"], (w, summary["reasons"])
        assert summary["e2e"]["headline"]["trajectories_per_s"] > 0
        assert summary["e2e"]["headline"]["first_update"] == 16 and summary["e2e"]["headline"]["last_update"] == 20
        assert summary["trainer"]["headline"]["assistant_tokens_per_s"] > 0
        assert summary["spec"]["id"] == spec
        run = json.loads((smoke_workdir / f"results/runs/{spec}/reference/{w}/trial1/run.json").read_text())
        evidence = smoke_workdir / run["evidence_dir"]
        manifest = json.loads((evidence / "manifest.json").read_text())
        assert manifest["status"] == "completed" and manifest["workload"] == w
        assert manifest["model"]["revision"] and len(manifest["model"]["revision"]) == 40
        assert manifest["source_sha256"] and manifest["recipe_sha256"]
        calls = pd.read_parquet(evidence / "calls.parquet")
        assert (calls["completion_tokens"] == calls["forced_completion_tokens"]).all()
    html = (smoke_workdir / "reports/comparison.html").read_text()
    assert "smoke" in html and all(w in html for w in WORKLOADS)
    headline = pd.read_csv(smoke_workdir / "reports/tables/headline.csv")
    assert len(headline) == len(WORKLOADS)


def test_asking_again_has_nothing_to_do(smoke_workdir):
    """Right after the first pipeline run: the same command plans no job (its inputs are the same list)."""
    proc = snakemake(smoke_workdir, "-n", "reports/comparison.html")
    assert proc.returncode == 0 and "Nothing to be done" in proc.stdout + proc.stderr, _jobs(proc)


def test_terminal_shows_each_update_short_lines_and_where_the_report_is(smoke_terminal):
    """docs/workflow.md, What the terminal shows: one line per job, one per completed update of each run
    (the last with its rates), no scheduler bookkeeping, the report's path last."""
    lines = smoke_terminal.splitlines()
    for w in WORKLOADS:
        mine = [line for line in lines if line.startswith(f"{PROGRESS} reference {w} trial1: ")]
        updates = [int(line.split(": update ")[1].split("/")[0]) for line in mine if ": update " in line]
        assert updates == list(range(1, 21)), mine
        assert "started, 20 updates" in mine[0] and "completed in" in mine[-1] and "trajectories/s" in mine[-1]
    assert "Shell command" not in smoke_terminal
    for bookkeeping in ("Select jobs to execute", "Execute 1 jobs", "Write-protecting", "%|"):
        assert bookkeeping not in smoke_terminal, bookkeeping
    assert max(len(line) for line in lines) <= 200, max(lines, key=len)
    assert "Job 0: render reports/comparison.html" in smoke_terminal
    assert [line for line in lines if line.startswith("Report written:")] == ["Report written: reports/comparison.html"]
    assert lines.index("Report written: reports/comparison.html") > lines.index("21 of 21 steps (100%) done")


def test_smoke_report_has_the_infrastructure_section_with_cpu_figures(smoke_workdir):
    html = (smoke_workdir / "reports/comparison.html").read_text()
    assert 'id="infrastructure"' in html and "no GPU lease: a CPU run" in html
    tables = smoke_workdir / "reports/tables"
    storage = pd.read_csv(tables / "infra_storage.csv")
    assert list(storage["direction"]) == ["write", "read"] and (storage["mb_per_s"] > 0).all()
    allreduce = pd.read_csv(tables / "infra_allreduce.csv")
    assert set(allreduce["backend"]) == {"gloo"} and (allreduce["world_size"] == 2).all()
    assert allreduce["bytes"].max() == 1 << 20 and (allreduce["busbw_gbps"] > 0).all()
    checkpoint = pd.read_csv(tables / "infra_checkpoint.csv")
    assert len(checkpoint) == 4 and (checkpoint["seconds"] > 0).all()
    efficiency = pd.read_csv(tables / "infra_trainer_efficiency.csv")
    assert set(efficiency["status"]) == {"estimated"} and (efficiency["achieved_tflops"] > 0).all()
    for name in ("infra_allreduce", "infra_storage", "infra_checkpoint"):
        assert (smoke_workdir / "reports/figures" / f"{name}.png").is_file()
    assert not (smoke_workdir / "results/probes/scratch").exists()  # the probes left nothing behind


def test_leased_run_without_nvml_records_why_and_completes(smoke_workdir, tmp_path):
    """A GPU lease (through the inventory test seam) on a host without NVML: the sampler
    cannot start, the manifest says why, and the run goes on to completion."""
    import yaml

    from lease_helpers import gpu, lease_argv, lease_env, write_inventory

    config = yaml.safe_load((smoke_workdir / "config.yaml").read_text())
    config["suites"]["smoke"]["contract"] = {"warmup_updates": 1, "measured_updates": 1, "headline_updates": 1}
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(config))
    inventory = write_inventory(tmp_path / "inventory.json", [gpu(0)])
    run = [sys.executable, "-m", "rl_pipeline_bench.cli", "run", "--configfile", str(config_path), "--backend", "reference",
           "--workload", "tool_history", "--evidence-root", str(tmp_path / "evidence")]
    env = dict(lease_env(inventory, tmp_path / "locks"), RL_BENCH_ROOT=str(smoke_workdir))
    proc = subprocess.run(lease_argv("0", 1, "telemetry-no-nvml", run), cwd=smoke_workdir, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (evidence,) = (tmp_path / "evidence").iterdir()
    manifest = json.loads((evidence / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["gpus"][0]["uuid"] == gpu(0)["uuid"]
    assert manifest["telemetry"]["status"] == "unavailable"
    assert manifest["telemetry"]["reason"].startswith("NVML could not be initialised")
    assert manifest["telemetry"]["devices"] == [{"index": 0, "uuid": gpu(0)["uuid"]}]
    assert not (evidence / "telemetry.parquet").exists()
    assert "telemetry not started" in (evidence / "run.log").read_text()


def test_plans_are_the_offered_work_for_every_backend(smoke_workdir):
    from rl_pipeline_bench.plan import workloads as wl
    from rl_pipeline_bench.settings.config import load_config
    from rl_pipeline_bench.settings.spec import build_spec, check_spec

    run_spec = check_spec(build_spec(load_config(smoke_workdir / "config.yaml"), "smoke"))
    spec = smoke_spec(smoke_workdir)
    for w in WORKLOADS:
        stored = wl.read_plan(smoke_workdir / f"results/workloads/{spec}/{w}.parquet")
        _ws, fresh, _ = wl.spec_plan(run_spec, w)
        pd.testing.assert_frame_equal(stored, fresh)


def test_report_rebuilds_from_evidence_without_rerunning(smoke_workdir):
    before = _run_dirs(smoke_workdir)
    tables = {p.name: p.read_bytes() for p in (smoke_workdir / "reports/tables").glob("*.csv")}
    shutil.rmtree(smoke_workdir / "reports")
    proc = snakemake(smoke_workdir, "reports/comparison.html")
    assert proc.returncode == 0
    assert "render_report" in _jobs(proc) and "run_benchmark" not in _jobs(proc)
    assert _run_dirs(smoke_workdir) == before, "a report target must never re-run a benchmark"
    rebuilt = {p.name: p.read_bytes() for p in (smoke_workdir / "reports/tables").glob("*.csv")}
    assert rebuilt == tables


def test_touching_inputs_does_not_rerun_benchmarks(smoke_workdir):
    before = _run_dirs(smoke_workdir)
    for plan in (smoke_workdir / f"results/workloads/{smoke_spec(smoke_workdir)}").glob("*.parquet"):
        plan.touch()
    (smoke_workdir / f"results/specs/{smoke_spec(smoke_workdir)}.json").touch()
    (smoke_workdir / "src/rl_pipeline_bench/settings/config.py").touch()  # source.json is remade; runs are not
    proc = snakemake(smoke_workdir, "-n", "reports/comparison.html")
    assert proc.returncode == 0
    assert "run_benchmark" not in _jobs(proc)
    assert _run_dirs(smoke_workdir) == before


def test_an_evidence_edit_puts_the_summary_out_of_date(smoke_workdir):
    """Evidence is no declared file, but run.json records its digest: an edited file becomes an input
    of the summarize rule, which re-summarises once (and not again), never re-running the benchmark."""
    import hashlib

    before = _run_dirs(smoke_workdir)
    run_json = next((smoke_workdir / "results" / "runs").glob("*/reference/multi_turn/trial1/run.json"))
    summary = run_json.with_name("summary.json")
    manifest = smoke_workdir / json.loads(run_json.read_text())["evidence_dir"] / "manifest.json"
    original = manifest.read_bytes()
    target = str(summary.relative_to(smoke_workdir))
    try:
        manifest.write_bytes(original.rstrip() + b" \n")  # new bytes, same meaning
        proc = snakemake(smoke_workdir, target)
        assert proc.returncode == 0 and "summarize_run" in _jobs(proc) and "run_benchmark" not in _jobs(proc)
        recorded = json.loads(summary.read_text())["evidence_digest"]["manifest.json"]
        assert recorded == hashlib.sha256(manifest.read_bytes()).hexdigest()
        again = snakemake(smoke_workdir, target)
        assert again.returncode == 0 and "summarize_run" not in _jobs(again)
    finally:
        manifest.write_bytes(original)
        restored = snakemake(smoke_workdir, target)
    assert restored.returncode == 0 and "summarize_run" in _jobs(restored)
    assert _run_dirs(smoke_workdir) == before


def test_deleting_run_json_reruns_and_keeps_old_evidence(smoke_workdir):
    before = _run_dirs(smoke_workdir)
    run_json = smoke_workdir / f"results/runs/{smoke_spec(smoke_workdir)}/reference/multi_turn/trial1/run.json"
    old = json.loads(run_json.read_text())
    run_json.unlink()
    # docs/workflow.md, "Re-running a benchmark": ask for the run.json together with the report.
    proc = snakemake(smoke_workdir, str(run_json.relative_to(smoke_workdir)), "reports/comparison.html")
    assert proc.returncode == 0
    assert "run_benchmark" in _jobs(proc) and "summarize_run" in _jobs(proc) and "render_report" in _jobs(proc)
    after = _run_dirs(smoke_workdir)
    assert set(before) < set(after) and len(after) == len(before) + 1
    new = json.loads(run_json.read_text())
    assert new["run_id"] != old["run_id"]
    assert (smoke_workdir / old["evidence_dir"] / "manifest.json").exists()
    summary = json.loads(run_json.with_name("summary.json").read_text())
    assert summary["run_id"] == new["run_id"]


def test_deleting_a_summary_and_asking_for_the_report_makes_it_again(smoke_workdir):
    before = _run_dirs(smoke_workdir)
    summary = smoke_workdir / f"results/runs/{smoke_spec(smoke_workdir)}/reference/tool_history/trial1/summary.json"
    old = json.loads(summary.read_text())
    summary.unlink()
    proc = snakemake(smoke_workdir, "reports/comparison.html")
    assert proc.returncode == 0
    assert "summarize_run" in _jobs(proc) and "render_report" in _jobs(proc) and "run_benchmark" not in _jobs(proc)
    assert json.loads(summary.read_text())["run_id"] == old["run_id"]
    assert _run_dirs(smoke_workdir) == before


def test_deleting_a_probe_record_measures_it_again_with_the_report(smoke_workdir):
    """docs/probes.md: `rm -f results/probes/smoke-*/storage.json`, then ask for the report."""
    probes = smoke_workdir / f"results/probes/{smoke_spec(smoke_workdir)}"
    others = {p.name: p.read_bytes() for p in probes.iterdir() if p.name != "storage.json"}
    (probes / "storage.json").unlink()
    before = _run_dirs(smoke_workdir)
    proc = snakemake(smoke_workdir, "reports/comparison.html")
    assert proc.returncode == 0
    assert "storage_probe" in _jobs(proc) and "render_report" in _jobs(proc) and "run_benchmark" not in _jobs(proc)
    assert json.loads((probes / "storage.json").read_text())["size_bytes"] > 0
    assert {p.name: p.read_bytes() for p in probes.iterdir() if p.name != "storage.json"} == others
    assert _run_dirs(smoke_workdir) == before


def test_deleting_run_json_alone_never_reruns_the_benchmark(smoke_workdir):
    """DESIGN: a report target never re-runs a benchmark; the summary still there is reported."""
    run_json = smoke_workdir / f"results/runs/{smoke_spec(smoke_workdir)}/reference/long_generation/trial1/run.json"
    record = run_json.read_bytes()
    before = _run_dirs(smoke_workdir)
    run_json.unlink()
    try:
        proc = snakemake(smoke_workdir, "reports/comparison.html")
        assert proc.returncode == 0
        assert "run_benchmark" not in _jobs(proc) and "summarize_run" not in _jobs(proc)
        assert not run_json.exists() and _run_dirs(smoke_workdir) == before
    finally:
        run_json.write_bytes(record)
        run_json.chmod(0o444)


def test_bench_run_suite_runs_what_the_suite_lacks_through_the_workflow(smoke_workdir):
    """The original launcher's `bench run --suite NAME`: Snakemake's report target, so only the run whose
    records were deleted runs (serially, under the workflow's rules), then its summary and the report."""
    from workflow_copy import workflow_env

    run_dir = smoke_workdir / f"results/runs/{smoke_spec(smoke_workdir)}/reference/tool_history/trial1"
    (run_dir / "run.json").unlink()
    (run_dir / "summary.json").unlink()
    before = _run_dirs(smoke_workdir)
    proc = subprocess.run([sys.executable, "-m", "rl_pipeline_bench.cli", "run", "--suite", "smoke"], cwd=smoke_workdir,
                          env=workflow_env(smoke_workdir, extra_env=PLANTED_SECRETS), capture_output=True, text=True,
                          timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "bench: snakemake --cores 1 reports/comparison.html --config suite=smoke" in proc.stderr
    counts = {row[0]: int(row[1]) for row in map(str.split, _jobs(proc).splitlines()) if len(row) == 2 and row[1].isdigit()}
    assert counts["run_benchmark"] == 1 and counts["summarize_run"] == 1 and counts["render_report"] == 1, counts
    assert len(_run_dirs(smoke_workdir)) == len(before) + 1
    assert json.loads((run_dir / "summary.json").read_text())["valid"]


def test_forced_run_never_replaces_a_run_record(smoke_workdir):
    """--forcerun run_benchmark (as root protected() does not bind) keeps run.json: bench run refuses
    to replace it, and a second bench run given the same --run-json refuses too."""
    before = _run_dirs(smoke_workdir)
    run_json = smoke_workdir / f"results/runs/{smoke_spec(smoke_workdir)}/reference/tool_history/trial1/run.json"
    old = run_json.read_bytes()
    proc = snakemake(smoke_workdir, "--forcerun", "run_benchmark", str(run_json.relative_to(smoke_workdir)))
    assert proc.returncode != 0
    assert run_json.read_bytes() == old and _run_dirs(smoke_workdir) == before
    env = dict(os.environ, **PLANTED_SECRETS, RL_BENCH_ROOT=str(smoke_workdir))
    proc = subprocess.run(
        [sys.executable, "-m", "rl_pipeline_bench.cli", "run", "--backend", "reference", "--workload", "tool_history",
         "--configfile", str(smoke_workdir / "config.yaml"), "--suite", "smoke", "--run-json", str(run_json),
         "--evidence-root", str(smoke_workdir / "results/evidence")],
        cwd=smoke_workdir, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 2 and "does not replace" in proc.stderr, proc.stderr
    assert run_json.read_bytes() == old and _run_dirs(smoke_workdir) == before


def test_failed_run_keeps_evidence_and_report_lists_it(smoke_workdir):
    """A run that fails (here: its model's weights vanished) leaves failed evidence; the report lists it."""
    from rl_pipeline_bench.models.reference import BUILD_RECORD

    record = json.loads((smoke_workdir / "results/models/reference-tiny-qwen3moe.json").read_text())
    # The same model (its build record passes the model identity check) with no weights: the backend fails.
    no_weights = smoke_workdir / "no-weights-snapshot"
    no_weights.mkdir(exist_ok=True)
    (no_weights / BUILD_RECORD).write_bytes((Path(record["snapshot_path"]) / BUILD_RECORD).read_bytes())
    broken = dict(record, snapshot_path=str(no_weights))
    broken_record = smoke_workdir / "broken-model.json"
    broken_record.write_text(json.dumps(broken))
    env = dict(os.environ, **PLANTED_SECRETS, RL_BENCH_ROOT=str(smoke_workdir))
    proc = subprocess.run(
        [sys.executable, "-m", "rl_pipeline_bench.cli", "run", "--backend", "reference", "--workload", "multi_turn",
         "--configfile", str(smoke_workdir / "config.yaml"), "--model-record", str(broken_record),
         "--evidence-root", str(smoke_workdir / "results/evidence")],
        cwd=smoke_workdir, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 1
    failed = [d for d in _run_dirs(smoke_workdir)
              if json.loads((d / "manifest.json").read_text())["status"] == "failed"]
    assert len(failed) == 1
    assert json.loads((failed[0] / "manifest.json").read_text())["error"]
    # The attempts index got the failure, so the report is out of date by itself (no --forcerun),
    # and rendering it re-runs nothing.
    index = [json.loads(line) for line in (smoke_workdir / "results/attempts.jsonl").read_text().splitlines()]
    assert {"started", "finished"} <= {e["event"] for e in index if e["run_id"] == failed[0].name}
    before = _run_dirs(smoke_workdir)
    proc = snakemake(smoke_workdir, "reports/comparison.html")
    assert proc.returncode == 0
    assert "render_report" in _jobs(proc) and "run_benchmark" not in _jobs(proc)
    assert _run_dirs(smoke_workdir) == before
    attempts = pd.read_csv(smoke_workdir / "reports/tables/attempts.csv")
    row = attempts[attempts.run_id == failed[0].name].iloc[0]
    assert row.status == "failed" and bool(row.failed_or_invalid)


def test_planted_secrets_are_written_nowhere(smoke_workdir):
    """No planted secret (env or a token passed through --set) is under results/, reports/, logs/ or .snakemake/.

    Runs last in this module, so the tree holds every pipeline run above (all with the
    planted environment), plus one more real run here whose command line carries a token.
    """
    set_token = f"ghp_{MARK}SetToken0000000000000000099"
    env = dict(os.environ, **PLANTED_SECRETS, RL_BENCH_ROOT=str(smoke_workdir))
    proc = subprocess.run(
        [sys.executable, "-m", "rl_pipeline_bench.cli", "run", "--backend", "reference", "--workload", "tool_history",
         "--configfile", str(smoke_workdir / "config.yaml"), "--config", f"hf_cache={set_token}",
         "--model-record", str(smoke_workdir / "results/models/reference-tiny-qwen3moe.json"),
         "--evidence-root", str(smoke_workdir / "results/evidence-planted")],
        cwd=smoke_workdir, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert MARK not in proc.stdout + proc.stderr
    (evidence,) = (smoke_workdir / "results/evidence-planted").iterdir()
    manifest = json.loads((evidence / "manifest.json").read_text())
    assert "hf_cache=<redacted>" in manifest["command"] and manifest["env"]["HF_TOKEN"] == "<redacted>"
    assert "PGPASSWORD" not in manifest["env"] and "UNRELATED_SETTING" not in manifest["env"]
    assert manifest["env"]["RL_BENCH_DB_LOGIN"] == manifest["env"]["SLURM_JOB_COMMENT"] == "<not recorded>"
    leaks, checked = [], 0
    for top in ("results", "reports", "logs", ".snakemake"):
        for path in (smoke_workdir / top).rglob("*"):
            if MARK in str(path.relative_to(smoke_workdir)):
                leaks.append(f"{path} (name)")
            if path.is_file() and not path.is_symlink():
                checked += 1
                if MARK.encode() in path.read_bytes():
                    leaks.append(str(path))
    assert checked > 50 and not leaks, leaks
    for run_dir in [*_run_dirs(smoke_workdir), evidence]:
        for name in ("manifest.json", "run.log"):  # they hold the environment and the command
            assert (run_dir / name).stat().st_mode & 0o077 == 0, run_dir / name


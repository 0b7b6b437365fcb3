"""Overrides reach every job, settings-keyed targets, and no re-run of finished benchmarks.

The real workflow in a scratch copy, kept cheap: one workload (tool_history) at a tiny
scale and a short contract (2 warmup + 3 measured updates). `--configfile` overrides
`trials` and `scale` of the smoke suite; every job must run under that override (the bug
this guards against: `bench run` re-read config.yaml and refused trial 2). The suite is
first run with one trial, then `trials` is raised to two: the spec id stays, trial 1 is
kept and only trial 2 runs (a trial's identity does not depend on how many were asked
for). Then `scale` is edited: new run directories appear under a new spec hash and the
old ones stay; the first settings again find their finished runs and run nothing.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from workflow_copy import copy_repo, snakemake, spec_id
from workflow_copy import scheduled_jobs as jobs

# Slow tier (tests/conftest.py): real Snakemake runs in a scratch copy.
pytestmark = pytest.mark.e2e

OVERRIDE = ("suites:\n  smoke:\n    workloads: [tool_history]\n    trials: {trials}\n    scale: {scale}\n"
            "    contract: {{warmup_updates: 2, measured_updates: 3, headline_updates: 2}}\n")
FIRST = {"trials": 2, "scale": 0.01}


def _override(workdir: Path, name: str, **settings) -> Path:
    path = workdir / name
    path.write_text(OVERRIDE.format(**settings))
    return path


@dataclass
class OneTrialFirst:
    """What the workflow did with one trial, before `trials` was raised to two."""

    spec: str
    trial1: dict[Path, bytes]
    evidence: list[str]
    dry_run: subprocess.CompletedProcess


@pytest.fixture(scope="module")
def raised_trials(tmp_path_factory):
    workdir = copy_repo(tmp_path_factory.mktemp("spec-pipeline") / "repo")
    one = _override(workdir, "one.yaml", **{**FIRST, "trials": 1})
    # --printshellcmds: the default profile leaves commands out; the test reads them
    proc_one = snakemake(workdir, "reports/comparison.html", "--configfile", str(one), "--printshellcmds")
    assert proc_one.returncode == 0, "one-trial pipeline failed"
    spec_one = spec_id(workdir, configfile=one)
    run1 = workdir / f"results/runs/{spec_one}/reference/tool_history/trial1"
    before = OneTrialFirst(spec_one, {p: p.read_bytes() for p in run1.rglob("*.json")}, _evidence(workdir), None)
    first = _override(workdir, "first.yaml", **FIRST)
    before.dry_run = snakemake(workdir, "-n", "reports/comparison.html", "--configfile", str(first))
    proc = snakemake(workdir, "reports/comparison.html", "--configfile", str(first), "--printshellcmds")
    assert proc.returncode == 0, "override pipeline failed"
    return workdir, first, spec_id(workdir, configfile=first), (proc_one, proc), before


@pytest.fixture(scope="module")
def override_run(raised_trials):
    workdir, first, spec, procs, _before = raised_trials
    return workdir, first, spec, procs


def _evidence(workdir: Path) -> list[str]:
    return sorted(p.name for p in (workdir / "results" / "evidence").iterdir() if p.is_dir())


def test_every_job_uses_the_override(override_run):
    workdir, first, spec, proc = override_run
    default = spec_id(workdir)
    assert spec != default and spec.startswith("smoke-")
    doc = json.loads((workdir / f"results/specs/{spec}.json").read_text())
    # written when one trial was asked for; trials are recorded, not hashed
    assert doc["about"]["trials"] == 1 and "trials" not in doc["settings"]
    assert doc["settings"]["workload_scale"] == {"tool_history": 0.01}
    # `bench plan --configfile` resolves the spec Snakemake wrote for the same --configfile
    plan = subprocess.run([sys.executable, "-m", "rl_pipeline_bench.cli", "plan", "--configfile",
                           str(workdir / "config.yaml"), "--configfile", str(first), "--json"],
                          cwd=workdir, capture_output=True, text=True, timeout=120)
    assert plan.returncode == 0, plan.stderr
    planned = json.loads(plan.stdout)["spec"]
    assert planned["id"] == doc["id"] and planned["settings"] == doc["settings"] and planned["about"]["trials"] == 2
    # the plan, both trials' runs, their summaries and the report all ran under the override's spec
    from rl_pipeline_bench.plan.workloads import read_plan_meta

    meta = read_plan_meta(workdir / f"results/workloads/{spec}/tool_history.parquet")
    assert meta["spec_hash"] == doc["hash"] and meta["spec"]["scale"] == 0.01
    for trial in (1, 2):
        run = workdir / f"results/runs/{spec}/reference/tool_history/trial{trial}"
        record = json.loads((run / "run.json").read_text())
        manifest = json.loads((workdir / record["evidence_dir"] / "manifest.json").read_text())
        assert manifest["trial"] == trial and manifest["scale"] == 0.01 and manifest["spec"]["hash"] == doc["hash"]
        summary = json.loads((run / "summary.json").read_text())
        assert summary["valid"], summary["reasons"]
        assert summary["spec"]["id"] == spec
    shell = [ln.split("Shell command: ", 1)[1] for p in proc for ln in (p.stdout + p.stderr).splitlines()
             if "Shell command: " in ln]
    steps = [step.strip() for ln in shell for step in ln.split("&&") if "bench " in step]
    seen = {step.split()[1] for step in steps}
    assert {"write-plan", "preflight", "run", "summarize-run", "report"} <= seen, seen
    for step in steps:
        if step.startswith("bench spec write"):
            assert f"--output results/specs/{spec}.json" in step, step
            continue
        if step.startswith("bench probe model-flops"):  # a function of the model record alone, shared by every spec
            assert "--model-record results/models/" in step and "config.yaml" not in step, step
            continue
        assert f"--spec results/specs/{spec}.json" in step, step
        assert "config.yaml" not in step, step
    head = pd.read_csv(workdir / "reports/tables/headline.csv")
    assert head[["workload", "trials", "valid_trials"]].values.tolist() == [["tool_history", 2, 2]]
    assert spec in (workdir / "reports/comparison.html").read_text()


def test_report_judges_the_trials_and_the_window(override_run):
    workdir, _first, _spec, _proc = override_run
    stats = pd.read_csv(workdir / "reports/tables/trial_stats.csv")
    row = stats[stats.rate == "headline_trajectories_per_s"].iloc[0]
    assert row.valid_trials == 2 and row.ci_low <= row["mean"] <= row.ci_high and row.cv >= 0
    assert "few_valid_trials" in row.warnings  # 2 < statistics.min_trials
    activity = pd.read_csv(workdir / "reports/tables/activity.csv")
    assert len(activity) == 2 and (activity.busy_share > 0).all() and (activity.calls_finished > 0).all()
    html = (workdir / "reports/comparison.html").read_text()
    for anchor in ("trials", "activity"):
        assert f'<section id="{anchor}">' in html


def test_raising_trials_adds_runs_and_keeps_trial_one(raised_trials):
    workdir, _first, spec, _procs, before = raised_trials
    assert spec == before.spec  # the trial count is not part of the spec id
    dry = before.dry_run
    assert dry.returncode == 0
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", jobs(dry), re.M))
    assert stats.get("run_benchmark") == "1" and "workload_plan" not in stats and "run_spec" not in stats, stats
    run2 = json.loads((workdir / f"results/runs/{spec}/reference/tool_history/trial2/run.json").read_text())
    assert json.loads((workdir / run2["evidence_dir"] / "manifest.json").read_text())["trial"] == 2
    assert {p: p.read_bytes() for p in before.trial1} == before.trial1, "trial 1's records must stay untouched"
    after = _evidence(workdir)
    assert set(before.evidence) < set(after) and len(after) == len(before.evidence) + 1


def test_identical_settings_never_rerun(override_run):
    workdir, first, _spec, _proc = override_run
    before = _evidence(workdir)
    proc = snakemake(workdir, "reports/comparison.html", "--configfile", str(first))
    assert proc.returncode == 0
    assert "run_benchmark" not in jobs(proc) and "workload_plan" not in jobs(proc)
    assert _evidence(workdir) == before


def test_edited_scale_makes_new_runs_and_keeps_old_ones(override_run):
    workdir, first, spec, _proc = override_run
    before = _evidence(workdir)
    old_runs = {p: p.read_bytes() for p in (workdir / f"results/runs/{spec}").rglob("*.json")}
    edited = _override(workdir, "edited.yaml", **{**FIRST, "scale": 0.012})
    new_spec = spec_id(workdir, configfile=edited)
    assert new_spec != spec
    proc = snakemake(workdir, "reports/comparison.html", "--configfile", str(edited))
    assert proc.returncode == 0
    assert "run_benchmark" in jobs(proc)
    after = _evidence(workdir)
    assert set(before) < set(after) and len(after) == len(before) + 2
    assert {p: p.read_bytes() for p in old_runs} == old_runs, "runs of the old spec must be kept untouched"
    for trial in (1, 2):
        record = json.loads((workdir / f"results/runs/{new_spec}/reference/tool_history/trial{trial}/run.json").read_text())
        assert json.loads((workdir / record["evidence_dir"] / "manifest.json").read_text())["scale"] == 0.012
    assert (workdir / f"results/specs/{spec}.json").is_file() and (workdir / f"results/specs/{new_spec}.json").is_file()

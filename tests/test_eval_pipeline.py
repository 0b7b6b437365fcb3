"""The smoke evaluation for real: robosuite Lift rendered with OSMesa, the scripted policy
saved as a checkpoint under a training directory (scheduled evaluation), through
Snakemake in a scratch copy; then the report section (the paper table as data), a crashing
episode, and bad input that must stop before any work."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from rl_pipeline_bench.settings.config import load_config
from rl_pipeline_bench.records.configfile import ConfigError
from rl_pipeline_bench.eval import spec as eval_spec
from rl_pipeline_bench.eval.policies.loader import PolicyLoadError, checkpoint_id
from rl_pipeline_bench.eval.runner import run_evaluation
from rl_pipeline_bench.paths import ROOT

import importlib.util  # noqa: E402

# Slow tier (tests/conftest.py): real evaluation runs through Snakemake.
pytestmark = pytest.mark.e2e

# Not imported here: importing robosuite sets PYOPENGL_PLATFORM for this whole process.
if importlib.util.find_spec("robosuite") is None:  # CI installs the extra: there its absence is a failure
    if os.environ.get("CI"):
        pytest.fail("robosuite is the `eval` extra (`uv sync --extra eval`); .ci/run installs it")
    pytest.skip("robosuite is the `eval` extra (`uv sync --extra eval`); .ci/run installs it", allow_module_level=True)

_SKIP = shutil.ignore_patterns(".venv", ".git", "results", "reports", "logs", ".snakemake", "__pycache__",
                               ".pytest_cache", ".whl", ".gl", ".scratch", ".venv-*")


def _snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, RL_BENCH_ROOT=str(workdir), PYTHONUNBUFFERED="1", MUJOCO_GL="osmesa")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", *args], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=1500)
    if proc.returncode != 0:
        print(proc.stdout[-6000:], proc.stderr[-6000:])
    return proc


def _checkpoint(root: Path, step: int) -> Path:
    d = root / "actor" / f"global_step_{step}"
    d.mkdir(parents=True)
    (d / "policy.json").write_text(json.dumps({"kind": "scripted_lift", "params": {"gain": 10.0}}))
    return d


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("eval") / "repo"
    shutil.copytree(ROOT, workdir, ignore=_SKIP, symlinks=True)
    ckpts = workdir.parent / "training"
    _checkpoint(ckpts, 5)
    # Only the checkpoint (the scripted policy saved with policy.json): 2 runs x 2 scenarios.
    # --configfile merges into config.yaml, and `policies` is not a hashed setting.
    (workdir / "checkpoints-only.yaml").write_text("eval_suites: {smoke: {policies: []}}\n")
    proc = _snakemake(workdir, "eval_all", "--configfile", "checkpoints-only.yaml",
                      "--config", "eval_suite=smoke", f"eval_checkpoints_dir={ckpts}")
    assert proc.returncode == 0, "smoke evaluation failed"
    return workdir, ckpts


def test_smoke_evaluation_writes_evidence_and_summary(evaluated):
    workdir, ckpts = evaluated
    spec = eval_spec.resolve(load_config(workdir / "config.yaml"), "smoke")
    base = workdir / "results/eval" / f"smoke-{spec['hash']}"
    assert eval_spec.load(base / "spec.json")["hash"] == spec["hash"]
    pid = checkpoint_id(ckpts / "actor/global_step_5")
    assert not (base / "scripted_lift").exists()
    for policy in (pid,):
        summary = json.loads((base / policy / "summary.json").read_text())
        assert summary["complete"], summary["problems"]
        assert summary["overall"]["episodes"] == spec["runs"] * spec["scenarios_per_task"]
        assert summary["overall"]["success_rate_mean"] == 1.0, summary["overall"]
        for r in summary["runs"]:
            ev = Path(r["evidence_dir"])
            ev = ev if ev.is_absolute() else workdir / ev
            episodes = pd.read_parquet(ev / "episodes.parquet")
            assert set(episodes.columns) >= {"task", "scenario", "run", "seed", "steps", "success", "wall_time_s"}
            assert (episodes["steps"] <= spec["max_steps"]["Lift"]).all() and episodes["error"].isna().all()
            manifest = json.loads((ev / "manifest.json").read_text())
            assert manifest["status"] == "completed" and manifest["packages"]["robosuite"] == "1.4.0"
            assert manifest["environment"]["mujoco_gl"] == "osmesa" and manifest["host"]["hostname"]
            assert manifest["protocol"]["greedy"] is True
            if policy == pid:
                assert manifest["policy"]["sha256"] and manifest["policy"]["path"].endswith("global_step_5")
            assert (ev / "eval.log").read_text().count("progress:") >= 1


def test_deleted_eval_json_is_evaluated_again_when_the_summary_is_asked_for(evaluated):
    """docs/evaluation.md: delete a run's eval.json, then the same command evaluates that run
    again (fresh evidence, the old kept) and re-summarizes; the other run is not evaluated again."""
    workdir, ckpts = evaluated
    spec = eval_spec.resolve(load_config(workdir / "config.yaml"), "smoke")
    policy = workdir / "results/eval" / f"smoke-{spec['hash']}" / checkpoint_id(ckpts / "actor/global_step_5")
    pointer = policy / "run1" / "eval.json"
    old = json.loads(pointer.read_text())
    other = (policy / "run2" / "eval.json").read_bytes()
    pointer.unlink()
    proc = _snakemake(workdir, "eval_all", "--configfile", "checkpoints-only.yaml",
                      "--config", "eval_suite=smoke", f"eval_checkpoints_dir={ckpts}")
    assert proc.returncode == 0
    new = json.loads(pointer.read_text())
    assert new["evidence_dir"] != old["evidence_dir"] and (workdir / old["evidence_dir"]).is_dir()
    assert (policy / "run2" / "eval.json").read_bytes() == other
    summary = json.loads((policy / "summary.json").read_text())
    assert new["evidence_dir"] in [r["evidence_dir"] for r in summary["runs"]]


def test_scheduled_evaluation_runs_only_new_checkpoints(evaluated):
    workdir, ckpts = evaluated
    new = checkpoint_id(_checkpoint(ckpts, 10))
    old = checkpoint_id(ckpts / "actor/global_step_5")
    proc = _snakemake(workdir, "-n", "-p", "eval_all", "--configfile", "checkpoints-only.yaml",
                      "--config", "eval_suite=smoke", f"eval_checkpoints_dir={ckpts}")
    assert proc.returncode == 0
    planned = [line for line in proc.stdout.splitlines() if "bench eval run" in line]
    assert len(planned) == 2 and all(f"--policy {new}" in line for line in planned), planned
    assert old not in proc.stdout.split("Job stats")[0].replace(f"{old}/summary.json", "")


def test_report_shows_the_evaluation_beside_the_paper_table(evaluated, tmp_path):
    from rl_pipeline_bench.jobs import render_report

    workdir, _ = evaluated
    summaries = sorted((workdir / "results/eval").glob("smoke-*/*/summary.json"))
    render_report([], [], workdir / "results/evidence", tmp_path / "r.html", tmp_path / "tables", tmp_path / "fig",
                  "smoke", eval_summaries=summaries)
    html = (tmp_path / "r.html").read_text()
    assert 'id="eval"' in html and "global_step_5" in html and "robosuite Lift" in html
    # The paper's rows are LIBERO and RoboTwin: beside a robosuite evaluation the report says so
    # (test_eval_aggregate shows them beside a LIBERO one); its table keeps them as data.
    assert "this report has none" in html and "OpenVLA-OFT (SFT)" not in html
    overall = pd.read_csv(tmp_path / "tables/eval_overall.csv")
    assert list(overall["success_pct_mean"]) == [100.0]
    paper = pd.read_csv(tmp_path / "tables/eval_paper_comparison.csv")
    assert set(paper["kind"]) == {"paper"}  # robosuite has no paper counterpart: reference rows only


def test_crashing_episode_is_recorded_and_the_run_goes_on(config, tmp_path):
    config["eval_suites"]["t"] = dict(config["eval_suites"]["smoke"], runs=1, scenarios_per_task=3)
    spec = eval_spec.resolve(config, "t")
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    user = {"eval_checkpoint": str(ckpt), "eval_policy_entry_point": "eval_policies:crashing"}
    sys.path.insert(0, str(Path(__file__).parent))
    directory = run_evaluation(spec, user, checkpoint_id(ckpt), 1, tmp_path / "ev", workers=1)
    episodes = pd.read_parquet(directory / "episodes.parquet").sort_values("scenario")
    assert list(episodes["success"]) == [True, False, True]
    assert "RuntimeError: policy exploded in episode 2" in episodes.iloc[1]["error"]
    manifest = json.loads((directory / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["counts"]["crashed"] == 1


def test_bad_input_stops_before_any_work(config, tmp_path):
    spec = eval_spec.resolve(config, "smoke")
    missing = tmp_path / "global_step_7"
    with pytest.raises(PolicyLoadError, match="unknown policy"):
        run_evaluation(spec, {}, "global_step_7-deadbeef", 1, tmp_path / "ev")
    with pytest.raises(PolicyLoadError, match=f"policy checkpoint {missing}: no such file or directory"):
        run_evaluation(spec, {"eval_checkpoint": str(missing)}, checkpoint_id(missing), 1, tmp_path / "ev")
    bare = tmp_path / "bare"
    bare.mkdir()
    with pytest.raises(PolicyLoadError, match="has no policy.json.*eval_policy_entry_point"):
        run_evaluation(spec, {"eval_checkpoint": str(bare)}, checkpoint_id(bare), 1, tmp_path / "ev")
    with pytest.raises(ConfigError, match="unknown eval suite"):
        eval_spec.resolve(config, "libero_11")
    assert not (tmp_path / "ev").exists()


def test_workflow_refuses_bad_input_at_dag_time(evaluated, tmp_path):
    workdir, _ = evaluated
    cases = [
        (["eval_suite=libero_10", f"eval_checkpoint={tmp_path / 'global_step_9'}"],
         f"policy checkpoint {tmp_path / 'global_step_9'}: no such file or directory"),
        (["eval_suite=libero_10", f"libero_assets={tmp_path / 'no-assets'}"],
         f"libero_assets={tmp_path / 'no-assets'}: no such directory"),
        (["eval_suite=libero_10"], "eval suite 'libero_10' has no policy to evaluate"),
        (["eval_suite=libero_11"], "unknown eval suite 'libero_11'"),
        (["eval_suite=robotwin"], "RoboTwin 2.0 episodes are not executed"),
    ]
    for settings, message in cases:
        proc = _snakemake(workdir, "-n", "eval_all", "--config", *settings)
        assert proc.returncode != 0 and message in proc.stdout + proc.stderr, (settings, proc.stderr[-2000:])
    assert not list((workdir / "results/eval").glob("libero_*"))


def test_report_rule_passes_the_evaluations_to_the_report(evaluated):
    """The report target takes the selected eval suite's summaries (dry run: no benchmark is run)."""
    workdir, ckpts = evaluated
    proc = _snakemake(workdir, "-n", "-p", "reports/comparison.html", "--configfile", "checkpoints-only.yaml",
                      "--config", "eval_suite=smoke", f"eval_checkpoints_dir={ckpts}")
    assert proc.returncode == 0
    pid = checkpoint_id(ckpts / "actor/global_step_5")
    out = proc.stdout + proc.stderr
    report_cmd = [line for line in out.splitlines() if "bench report --spec" in line]
    assert report_cmd, out[-3000:]
    assert "--eval-summaries results/eval/smoke-" in report_cmd[0] and f"{pid}/summary.json" in report_cmd[0]

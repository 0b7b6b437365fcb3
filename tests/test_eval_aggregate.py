"""The protocol's aggregation on hand-made episodes: per-run rates, mean ± std over runs,
groups, crashed and missing episodes, and the paper comparison."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from rl_pipeline_bench import paths
from rl_pipeline_bench.records.configfile import ConfigError
from rl_pipeline_bench.eval import aggregate, protocol, spec as eval_spec, tables
from rl_pipeline_bench.eval.benchmarks import paper_reference, task_limits


def _spec(config, benchmark="libero", tasks=("libero_spatial", "libero_10"), n=4, runs=3):
    """The eval spec of a one-off suite "t" over the config (which it leaves unchanged)."""
    suite = {"benchmark": benchmark, "tasks": list(tasks), "scenarios_per_task": n, "runs": runs, "policies": [],
             "workers": 1, "gpus": 0}
    return eval_spec.resolve(dict(config, eval_suites={"t": suite}), "t")


def _episodes(spec, outcome, n_tasks=2, group_of=None):
    """outcome(suite_task, task_index, scenario, run) -> True/False/'crash'."""
    rows = []
    for st in spec["tasks"]:
        for ti in range(n_tasks):
            for sc in range(spec["scenarios_per_task"]):
                for run in range(1, spec["runs"] + 1):
                    o = outcome(st, ti, sc, run)
                    rows.append({"suite_task": st, "group": group_of(st) if group_of else st, "task_index": ti,
                                 "task": f"{st}-task{ti}", "scenario": sc, "run": run, "scenario_seed": 0, "seed": 0,
                                 "steps": 10, "max_steps": 512, "success": o is True,
                                 "wall_time_s": 1.0, "error": "RuntimeError: boom" if o == "crash" else None})
    return pd.DataFrame(rows)


LABELS = {"libero_spatial": "Spatial", "libero_10": "Long"}


def test_per_task_rates_are_per_run_then_mean_and_sample_std(config):
    spec = _spec(config)
    # libero_spatial task 0: run1 4/4, run2 2/4, run3 3/4 -> 100, 50, 75 %: mean 75, sample std 25
    table = {1: 4, 2: 2, 3: 3}
    ep = _episodes(spec, lambda st, ti, sc, r: (sc < table[r]) if (st, ti) == ("libero_spatial", 0) else sc == 0,
                   group_of=LABELS.get)
    s = aggregate.summarize(ep, spec, "p")
    assert s["complete"], s["problems"]
    t0 = next(t for t in s["per_task"] if t["suite_task"] == "libero_spatial" and t["task_index"] == 0)
    assert t0["per_run"] == {1: 1.0, 2: 0.5, 3: 0.75}
    assert t0["success_rate_mean"] == pytest.approx(0.75)
    assert t0["success_rate_std"] == pytest.approx(0.25)
    other = next(t for t in s["per_task"] if t["suite_task"] == "libero_10")
    assert other["success_rate_mean"] == pytest.approx(0.25) and other["success_rate_std"] == pytest.approx(0.0)
    spatial = next(g for g in s["per_group"] if g["group"] == "Spatial")
    # run r pools both spatial tasks: (table[r] + 1) / 8
    assert spatial["per_run"] == {r: (table[r] + 1) / 8 for r in table}
    assert s["overall"]["episodes"] == 2 * 2 * 4 * 3
    assert s["overall"]["success_rate_mean"] == pytest.approx(sum((table[r] + 1 + 2) / 16 for r in table) / 3)


def test_crashed_episode_counts_as_unsuccessful_and_is_counted(config):
    spec = _spec(config, runs=1)
    ep = _episodes(spec, lambda st, ti, sc, r: "crash" if sc == 1 else True, group_of=LABELS.get)
    ep.loc[ep["error"].notna(), "success"] = True  # a crashed episode never counts, whatever its flag says
    s = aggregate.summarize(ep, spec, "p")
    assert s["overall"]["crashed"] == 4 and s["overall"]["success_rate_mean"] == pytest.approx(0.75)
    assert s["overall"]["success_rate_std"] is None  # one run: no spread to report


def test_missing_and_duplicated_episodes_make_the_summary_incomplete(config):
    spec = _spec(config, runs=2)
    ep = _episodes(spec, lambda *a: True, group_of=LABELS.get)
    ep = ep[~((ep["run"] == 2) & (ep["scenario"] == 3) & (ep["task_index"] == 1) & (ep["suite_task"] == "libero_10"))]
    ep = pd.concat([ep, ep.iloc[:1]])
    s = aggregate.summarize(ep, spec, "p")
    assert not s["complete"]
    assert any("libero_10 task 1 run 2: 3 episodes, expected 4" in p for p in s["problems"])
    assert any("duplicated" in p for p in s["problems"])


def test_robotwin_horizons_and_paper_columns(config):
    spec = _spec(config, "robotwin", tasks=("lift_pot", "move_can_pot", "handover_block", "blocks_ranking_rgb"), n=2, runs=2)
    from rl_pipeline_bench.eval.benchmarks import group_of

    ok = {"lift_pot": 1.0, "move_can_pot": 0.5, "handover_block": 0.0, "blocks_ranking_rgb": 1.0}
    ep = _episodes(spec, lambda st, ti, sc, r: sc < ok[st] * 2, n_tasks=1, group_of=lambda st: group_of("robotwin", st))
    s = aggregate.summarize(ep, spec, "p")
    groups = {g["group"]: g["success_rate_mean"] for g in s["per_group"]}
    assert groups == {"Short": 1.0, "Medium": 0.5, "Long": 0.0, "Extra-Long": 1.0}
    cols = {c["column"]: c["success_rate_mean"] for c in s["paper_columns"]}
    assert cols == {"Short": 1.0, "Medium": 0.5, "Long+XL": 0.5}
    assert spec["max_steps"] == {"lift_pot": 400, "move_can_pot": 400, "handover_block": 800, "blocks_ranking_rgb": 1200}


def test_paper_comparison_keeps_reference_rows_and_differences(config):
    spec = _spec(config, tasks=("libero_spatial", "libero_object", "libero_goal", "libero_10"), n=50, runs=3)
    labels = {"libero_spatial": "Spatial", "libero_object": "Object", "libero_goal": "Goal", "libero_10": "Long"}
    ep = _episodes(spec, lambda st, ti, sc, r: sc < 25 or st == "libero_goal", group_of=labels.get)
    s = aggregate.summarize(ep, spec, "ckpt")
    s["_path"] = "x/summary.json"
    df = tables.paper_comparison([s])
    ref = paper_reference()
    paper = df[df["kind"] == "paper"]
    assert len(paper) == 4 * 5 + 2 * 4  # every reference cell of both tables, as data
    assert paper.set_index(["row", "column"]).loc[("+ RLinf", "Long"), "success_pct"] == ref["libero"]["rows"]["+ RLinf"]["Long"]
    measured = df[df["kind"] == "measured"].set_index("column")["success_pct"]
    assert measured["Goal"] == pytest.approx(100.0) and measured["Spatial"] == pytest.approx(50.0)
    assert measured["Avg"] == pytest.approx(62.5)
    diff = df[(df["kind"] == "difference") & (df["row"].str.endswith("− OpenVLA-OFT (SFT)"))].set_index("column")
    assert diff.loc["Spatial", "success_pct"] == pytest.approx(50.0 - 91.6)
    wide = tables.paper_wide(df, "robotwin")
    assert [r["kind"] for r in wide["rows"]] == ["paper", "paper"]  # nothing measured: reference rows only
    # A stand-in, or a reduced protocol: its row beside the paper's, no difference to them.
    standin = dict(s, runs=[{"policy": {"role": "stand-in"}}])
    reduced = aggregate.summarize(ep[ep["run"] < 3], dict(spec, runs=2), "ckpt") | {"_path": "y/summary.json"}
    for other in (standin, reduced):
        kinds = set(tables.paper_comparison([other])["kind"])
        assert kinds == {"paper", "measured"}, (other["policy_id"], kinds)


def test_report_shows_the_paper_rows_beside_a_libero_evaluation(config, tmp_path):
    from rl_pipeline_bench.jobs import render_report

    spec = _spec(config, tasks=("libero_spatial", "libero_object", "libero_goal", "libero_10"), n=50, runs=3)
    labels = {"libero_spatial": "Spatial", "libero_object": "Object", "libero_goal": "Goal", "libero_10": "Long"}
    summary = aggregate.summarize(_episodes(spec, lambda st, ti, sc, r: sc == 0, group_of=labels.get), spec, "ckpt")
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(summary))
    render_report([], [], tmp_path / "evidence", tmp_path / "r.html", tmp_path / "tables", tmp_path / "fig", "t",
                  eval_summaries=[path])
    html = (tmp_path / "r.html").read_text()
    section = html[html.index('<section id="eval">'):]
    assert "this report has none" not in section
    assert "paper: OpenVLA-OFT (SFT)" in section and "− OpenVLA-OFT (SFT)" in section  # reference and difference
    assert str(paper_reference()["libero"]["rows"]["+ RLinf"]["Long"]) in section


def test_seeds_are_pure_and_scenarios_shared_between_runs(config):
    spec = _spec(config, "robosuite", tasks=("Lift",), n=3, runs=2)
    tasks = [protocol.TaskRef("Lift", 0, "Lift", "")]
    r1, r2 = protocol.plan(spec, tasks, 1), protocol.plan(spec, tasks, 2)
    assert [e.scenario_seed for e in r1] == [e.scenario_seed for e in r2]
    assert [e.seed for e in r1] != [e.seed for e in r2]
    assert r1 == protocol.plan(spec, tasks, 1)
    with pytest.raises(ValueError, match="outside 1..2"):
        protocol.plan(spec, tasks, 3)


def test_spec_hash_keys_the_work_and_bad_names_are_refused(config):
    a, b = _spec(config, n=4), _spec(config, n=5)
    assert a["hash"] != b["hash"]
    shipped = eval_spec.resolve(config, "smoke")["hash"]
    config["eval_suites"]["smoke"] = dict(config["eval_suites"]["smoke"], workers=1)
    assert eval_spec.resolve(config, "smoke")["hash"] == shipped
    with pytest.raises(ConfigError, match="unknown LIBERO suite 'libero_100'.*libero_10"):
        task_limits("libero", "libero_100")
    with pytest.raises(ConfigError, match="unknown eval suite 'nope'"):
        eval_spec.resolve(config, "nope")
    with pytest.raises(ConfigError, match="exceeds the 50 init states"):
        _spec(config, n=51)
    assert not math.isnan(a["seed"])


# -- evaluation evidence is validated like run evidence (eval.validate) ----------------------------

def _forged(tmp_path, spec, column: str, values) -> pd.DataFrame:
    """Episodes as a forged episodes.parquet holds them: `column` rewritten, read back through read_episodes."""
    from rl_pipeline_bench.eval.episodes import EPISODES, read_episodes

    ep = _episodes(spec, lambda *a: False, group_of=LABELS.get)
    ep[column] = pd.Series(values, dtype=object) if isinstance(values, list) else values
    ep.to_parquet(tmp_path / EPISODES)
    return read_episodes(tmp_path)


@pytest.mark.parametrize("forged", [float("nan"), "False", 5, 1.0])
def test_a_success_that_is_not_a_bool_is_unsuccessful_and_named(config, tmp_path, forged):
    spec = _spec(config, runs=1)
    ep = _forged(tmp_path, spec, "success", forged)
    s = aggregate.summarize(ep, spec, "p")
    assert not s["complete"] and s["overall"]["success_rate_mean"] == 0.0
    (reason,) = [p for p in s["problems"] if p.startswith("success_not_bool:")]
    assert f"{len(ep)} episode(s) with success of type {type(forged).__name__}" in reason


@pytest.mark.parametrize("column,values,code", [
    ("steps", 600, "steps_above_max"),      # max_steps is 512 in the fixture ...
    ("steps", -1, "steps_invalid"),
    ("steps", 2.5, "steps_invalid"),
    ("max_steps", 10_000, "max_steps_mismatch"),  # ... and the spec's max for these tasks
    ("scenario", 99, "episode_not_in_plan"),
    ("suite_task", "libero_goal", "episode_not_in_plan"),
    ("run", 7, "episode_not_in_plan"),
    ("group", "Goal", "episode_not_in_plan"),
    ("task_index", -1, "episode_not_in_plan"),
    ("task_index", ["x"] * 16, "episode_not_in_plan"),
])
def test_episodes_outside_the_plan_or_its_limits_make_the_summary_incomplete(config, tmp_path, column, values, code):
    spec = _spec(config, runs=1)
    spec["max_steps"] = {t: 512 for t in spec["tasks"]}
    clean = aggregate.summarize(_episodes(spec, lambda *a: False, group_of=LABELS.get), spec, "p")
    assert clean["complete"], clean["problems"]
    ep = _forged(tmp_path, spec, column, values)
    s = aggregate.summarize(ep, spec, "p")
    assert not s["complete"] and any(p.startswith(f"{code}: ") for p in s["problems"]), s["problems"]


@pytest.mark.parametrize("status", ["failed", "running"])
def test_a_run_that_did_not_complete_makes_the_summary_incomplete(config, tmp_path, status):
    from rl_pipeline_bench.eval.episodes import write_episodes, write_manifest
    from rl_pipeline_bench.eval.summary import summarize_runs
    from rl_pipeline_bench.records.atomicfile import atomic_write_json

    spec = _spec(config, runs=1)
    spec_path = tmp_path / paths.EVAL_SPEC_FILE.format(esuite=spec["eval_suite"], ehash=spec["hash"])
    spec_path.parent.mkdir(parents=True)
    atomic_write_json(spec_path, spec)
    ev = tmp_path / "ev-run1"
    ev.mkdir()
    write_episodes(ev, _episodes(spec, lambda *a: True, group_of=LABELS.get).to_dict("records"))
    write_manifest(ev, {"eval_run_id": "ev-run1", "spec_hash": spec["hash"], "run": 1, "status": status,
                        "started_at": "t0", "finished_at": None, "policy": {"policy_id": "p"}, "packages": {}})
    pointer = tmp_path / "eval.json"
    atomic_write_json(pointer, {"evidence_dir": str(ev)})
    s = summarize_runs(spec_path, "p", [pointer], tmp_path / "summary.json")
    assert not s["complete"] and f"run_not_completed: run 1 (ev-run1) has status '{status}'" in s["problems"]


def test_every_eval_reason_code_is_documented():
    from rl_pipeline_bench.eval.validate import EVAL_REASON_CODES
    from rl_pipeline_bench.paths import ROOT

    doc = (ROOT / "docs" / "validation.md").read_text()
    for code in EVAL_REASON_CODES:
        assert f"`{code}`" in doc, code

"""Evaluation throughput figures from episode timings, the projected protocol wall time, and the
labels a measured row gets beside the paper's (hand-made episodes; real ones: test_eval_libero_smoke)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from rl_pipeline_bench.eval import benchmarks, throughput
from rl_pipeline_bench.eval.tables import measured_label, protocol_cuts

FIGURES = {"env_build_s": 20.0, "reset_s": 5.0, "step_s": 0.5, "steps_per_s_per_worker": 2.0}


def _episodes(**overrides) -> pd.DataFrame:
    rows = [
        {"steps": 10, "error": None, "env_build_s": 12.0, "reset_s": 2.0, "step_s": 4.0, "render_s": 3.0, "policy_s": 0.1},
        {"steps": 30, "error": None, "env_build_s": 0.0, "reset_s": 4.0, "step_s": 6.0, "render_s": 5.0, "policy_s": 0.3},
        # crashed: its partial timings stay out of every figure (its build still counts as one)
        {"steps": 3, "error": "RuntimeError: x", "env_build_s": 8.0, "reset_s": 1.0, "step_s": 99.0,
         "render_s": 0.0, "policy_s": 0.0},
    ]
    df = pd.DataFrame(rows)
    for k, v in overrides.items():
        df[k] = v
    return df


def test_figures_are_ratios_of_sums_over_the_episodes_that_did_not_crash():
    m = throughput.measured(_episodes())
    assert m["episodes"] == 2 and m["steps"] == 40
    assert m["steps_per_s_per_worker"] == pytest.approx(40 / 10.0)
    assert m["step_s"] == pytest.approx(10.0 / 40)
    assert m["render_share"] == pytest.approx(8.0 / 10.0)
    assert m["reset_s"] == pytest.approx(3.0) and m["policy_s_per_step"] == pytest.approx(0.4 / 40)
    assert m["env_builds"] == 2 and m["env_build_s"] == pytest.approx(10.0)


def test_evidence_without_timings_has_no_figures():
    nan = float("nan")
    assert throughput.measured(_episodes(step_s=nan, render_s=nan, reset_s=nan)) is None
    assert throughput.measured(pd.DataFrame()) is None
    assert throughput.protocol_projection(None) is None


def test_projection_replays_the_pool_chunking():
    episode_s = 5.0 + 512 * 0.5
    # 2 cores, 10 tasks: one chunk of 50 episodes per task, five chunks per worker, three runs.
    two = throughput.project(FIGURES, tasks=10, scenarios=50, runs=3, max_steps=512, cores=2)
    assert two["env_builds"] == 30 and two["episodes"] == 1500 and two["steps"] == 1500 * 512
    assert two["wall_s"] == pytest.approx(3 * 5 * (20.0 + 50 * episode_s))
    # 16 cores: two chunks of 25 per task (20 in all), so four workers play a second chunk.
    sixteen = throughput.project(FIGURES, tasks=10, scenarios=50, runs=3, max_steps=512, cores=16)
    assert sixteen["env_builds"] == 60
    assert sixteen["wall_s"] == pytest.approx(3 * 2 * (20.0 + 25 * episode_s))
    # More cores than chunks: the longest chunk sets the time.
    many = throughput.project(FIGURES, tasks=1, scenarios=4, runs=1, max_steps=10, cores=64)
    assert many["wall_s"] == pytest.approx(20.0 + 5.0 + 10 * 0.5)


def test_protocol_projection_is_the_libero_10_protocol_on_the_configured_cores():
    p = throughput.protocol_projection(FIGURES)
    facts = benchmarks.facts()
    assert (p["suite"], p["tasks"], p["scenarios_per_task"], p["runs"], p["max_steps"]) == ("libero_10", 10, 50, 3, 512)
    assert [r["cores"] for r in p["rows"]] == facts["libero"]["projection"]["cores"]
    hours = [r["wall_h"] for r in p["rows"]]
    assert hours == sorted(hours, reverse=True) and all(math.isfinite(h) for h in hours)
    assert [r["cores"] for r in throughput.protocol_projection(FIGURES, [4])["rows"]] == [4]


def _summary(role="stand-in", task_indices=None, n=50, runs=3, max_steps=512):
    return {"eval_suite": "s", "policy_id": "p", "benchmark": "libero",
            "protocol": {"task_indices": task_indices, "scenarios_per_task": n, "runs": runs,
                         "max_steps": {"libero_10": max_steps}},
            "runs": [{"policy": {"role": role}}]}


def test_a_measured_row_says_what_its_policy_is_and_where_its_protocol_is_reduced():
    assert measured_label(_summary(role="checkpoint")) == "measured: p (s; checkpoint)"
    assert protocol_cuts(_summary()) == []
    reduced = _summary(task_indices=[0], n=2, runs=1, max_steps=64)
    assert protocol_cuts(reduced) == ["task 0 only", "2 of 50 scenarios", "1 of 3 runs", "at most 64 of 512 steps"]
    assert measured_label(reduced) == ("measured: p (s; stand-in; reduced protocol: task 0 only, 2 of 50 scenarios, "
                                       "1 of 3 runs, at most 64 of 512 steps)")
    assert measured_label({**_summary(), "runs": []}) == "measured: p (s)"  # evidence written before roles existed


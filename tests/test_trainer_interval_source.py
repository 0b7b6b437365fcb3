"""The trainer rate says when it rests on controller-side intervals (issue 18, finding 3).

A driver whose framework keeps no per-rank trainer timing writes `trainer_timing` into
the manifest; the summary carries its source beside the trainer rate and the report's
headline table shows it.
"""

from __future__ import annotations

import json

import pandas as pd
from evidence_fixtures import build_evidence

from rl_pipeline_bench.contract.summary import summarize
from rl_pipeline_bench.backends.topology import CONTROLLER_INTERVAL
from rl_pipeline_bench.evidence.store import MANIFEST
from rl_pipeline_bench.report.collect import Run
from rl_pipeline_bench.report.tables import headline_table, runs_table


def _with_timing(d, timing):
    m = json.loads((d / MANIFEST).read_text())
    m["trainer_timing"] = timing
    (d / MANIFEST).write_text(json.dumps(m))


def test_controller_intervals_are_marked_in_summary_and_report(tmp_path):
    marked = build_evidence(tmp_path / "a")
    _with_timing(marked, {"source": CONTROLLER_INTERVAL, "why": "no per-rank timing in the framework"})
    plain = build_evidence(tmp_path / "b")
    s_marked, s_plain = summarize(marked), summarize(plain)
    assert s_marked["trainer"]["headline"]["interval_source"] == "controller_interval"
    assert s_marked["valid"] and s_marked["trainer"]["headline"]["assistant_tokens_per_s"] is not None
    assert s_plain["trainer"]["headline"]["interval_source"] is None
    runs = [Run(summary=s_marked, summary_path="a", evidence_dir=marked, updates=None)]
    row = headline_table(runs, [s_marked["workload"]], [s_marked["backend"]]).iloc[0]
    assert row["trainer_interval_source"] == "controller_interval"
    assert runs_table(runs).iloc[0]["trainer_interval_source"] == "controller_interval"


def _runs(tmp_path, sources: dict[str, str | None], trials: int = 2) -> list[Run]:
    """Runs of two backends on one workload, each backend's trainer intervals from `sources`."""
    runs = []
    for backend, source in sources.items():
        for trial in range(1, trials + 1):
            d = build_evidence(tmp_path / f"{backend}{trial}", manifest={"backend": backend, "trial": trial},
                               completed_at=[(2.0 + 0.01 * trial) * u for u in range(1, 21)])
            if source is not None:
                _with_timing(d, {"source": source, "why": "no per-rank timing in the framework"})
            runs.append(Run(summary=summarize(d), summary_path=str(d), evidence_dir=d, updates=None))
    return runs


def test_a_ratio_of_trainer_rates_measured_differently_is_never_shown(tmp_path):
    """Issue 25, finding 4: a cross-rank union against a controller interval is not like for like."""
    from types import SimpleNamespace

    from rl_pipeline_bench.report import paper
    from rl_pipeline_bench.report.stats import StatsSettings, TRAINER_RATE, interval_source_text
    from rl_pipeline_bench.report.tables import comparisons_table, ratios_table, trial_stats_table

    runs = _runs(tmp_path, {"a": None, "b": CONTROLLER_INTERVAL})
    w = runs[0].summary["workload"]
    settings = StatsSettings(bootstrap_resamples=99)
    stats = trial_stats_table(runs, [w], ["a", "b"], settings)
    sources = stats[stats["rate"] == TRAINER_RATE].set_index("backend")["interval_source"]
    assert sources["a"] == interval_source_text(None) and "union of all ranks" in sources["a"]
    assert sources["b"] == interval_source_text(CONTROLLER_INTERVAL) and "controller-side" in sources["b"]
    assert stats[stats["rate"] != TRAINER_RATE]["interval_source"].isna().all()

    comp = comparisons_table(runs, [w], ["a", "b"], settings).set_index("rate")
    trainer = comp.loc[TRAINER_RATE]
    assert pd.isna(trainer["ratio"]) and pd.isna(trainer["p_value"]) and pd.isna(trainer["ci_low"])
    assert trainer["note"].startswith("trainer intervals measured differently")
    assert comp.loc["headline_trajectories_per_s", "ratio"] > 0  # the end-to-end rates are compared
    ratios = ratios_table(headline_table(runs, [w], ["a", "b"]), [w], ["a", "b"]).iloc[0]
    assert pd.isna(ratios[TRAINER_RATE]) and ratios["headline_trajectories_per_s"] > 0

    tex = paper.trainer_table(SimpleNamespace(tables={"trial_stats": stats}))
    assert "trainer intervals" in tex and "controller-side interval" in tex and "union of all ranks" in tex
    assert "not like for like" in tex
    comp_tex = paper.comparisons_table(SimpleNamespace(tables={"comparisons": comparisons_table(runs, [w], ["a", "b"], settings)}, stats_settings=settings))
    assert "not compared" in comp_tex and "vs" in comp_tex


def test_trainer_rates_measured_the_same_way_are_compared_and_say_how(tmp_path):
    from rl_pipeline_bench.report.stats import StatsSettings, TRAINER_RATE
    from rl_pipeline_bench.report.tables import comparisons_table

    runs = _runs(tmp_path, {"a": CONTROLLER_INTERVAL, "b": CONTROLLER_INTERVAL})
    w = runs[0].summary["workload"]
    trainer = comparisons_table(runs, [w], ["a", "b"], StatsSettings(bootstrap_resamples=99)).set_index("rate").loc[TRAINER_RATE]
    assert trainer["ratio"] > 0 and "controller-side" in trainer["interval_source"]
    assert trainer["interval_source"] == trainer["baseline_interval_source"]

"""The trainer rate says when it rests on controller-side intervals (issue 18, finding 3).

A driver whose framework keeps no per-rank trainer timing writes `trainer_timing` into
the manifest; the summary carries its source beside the trainer rate and the report's
headline table shows it.
"""

from __future__ import annotations

import json

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

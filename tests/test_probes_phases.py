"""Phase attribution and per-phase statistics on hand-made evidence (times and values chosen here)."""

from __future__ import annotations

import json

import pandas as pd
import pyarrow as pa
import pytest

from evidence_fixtures import build_evidence
from rl_pipeline_bench.probes import phases
from rl_pipeline_bench.probes.run_infra import summarize_run_infra
from rl_pipeline_bench.probes.telemetry import TELEMETRY, TELEMETRY_SCHEMA


def _intervals(rows):
    return pd.DataFrame(rows, columns=["rank", "update", "start", "end"])


def _calls(spans):
    return pd.DataFrame([{"started_at": a, "finished_at": b} for a, b in spans])


INTERVALS = _intervals([(0, 1, 1.0, 2.0), (1, 1, 1.5, 3.0)])  # union [1, 3]
CALLS = _calls([(0.0, 1.2), (2.5, 4.0), (5.0, 6.0)])


def test_merge_and_inside_count_ends_and_overlaps_once():
    s, e = phases.merge_intervals([1.0, 1.5, 5.0, 4.0], [2.0, 3.0, 6.0, 5.0])
    assert s.tolist() == [1.0, 4.0] and e.tolist() == [3.0, 6.0]  # touching [4,5] and [5,6] merge
    assert phases.inside([0.9, 1.0, 3.0, 3.1, 4.5], (s, e)).tolist() == [False, True, True, False, True]


def test_trainer_interval_wins_then_calls_in_flight_then_other():
    t = [0.5, 1.0, 1.1, 2.9, 3.5, 4.5, 5.0, 7.0]
    got = phases.attribute(t, INTERVALS, CALLS).tolist()
    assert got == ["rollout", "update", "update", "update", "rollout", "other", "rollout", "other"]


def test_no_intervals_and_no_calls_is_all_other():
    assert set(phases.attribute([0.0, 1.0], _intervals([]), _calls([]).reindex(columns=["started_at", "finished_at"]))) == {"other"}


def _row(t, gpu, source, util=None, mem_util=None, used=None, total=None):
    return {"t": t, "gpu_index": gpu, "gpu_uuid": f"GPU-{gpu}", "source": source, "gpu_util_pct": util,
            "mem_util_pct": mem_util, "memory_used_mib": used, "memory_total_mib": total,
            "power_w": 100.0 if source == "poll" else None, "sm_clock_mhz": 1500.0 if source == "poll" else None}


TELEMETRY_ROWS = [
    # GPU 0: polls only
    _row(0.5, 0, "poll", 10, 5, 1000, 10000), _row(1.5, 0, "poll", 90, 40, 9000, 10000),
    _row(2.5, 0, "poll", 70, 30, 8500, 10000), _row(3.5, 0, "poll", 20, 10, 2000, 10000),
    _row(4.5, 0, "poll", 0, 0, 500, 10000),
    # GPU 1: polls say 0 %, NVML's own buffer has finer samples, which win for utilisation
    _row(0.5, 1, "poll", 0, 0, 100, 10000), _row(1.5, 1, "poll", 0, 0, 100, 10000),
    _row(1.2, 1, "nvml_samples", util=50), _row(1.8, 1, "nvml_samples", util=60),
    _row(3.6, 1, "nvml_samples", util=5), _row(3.7, 1, "nvml_samples", mem_util=7),
]


def _stats():
    return phases.phase_stats(pd.DataFrame(TELEMETRY_ROWS), INTERVALS, CALLS)


def _get(stats, gpu, phase):
    row = stats[(stats["gpu_index"] == gpu) & (stats["phase"] == phase)]
    assert len(row) == 1
    return row.iloc[0]


def test_per_phase_statistics_by_hand():
    stats = _stats()
    upd = _get(stats, 0, "update")  # samples at 1.5 (90 %) and 2.5 (70 %)
    assert upd["util_source"] == "poll" and upd["util_samples"] == 2
    assert upd["gpu_util_mean"] == pytest.approx(80.0)
    assert upd["gpu_util_p50"] == pytest.approx(80.0)
    assert upd["gpu_util_p90"] == pytest.approx(70 + 0.9 * 20)
    assert upd["mem_util_mean"] == pytest.approx(35.0)
    assert upd["memory_used_peak_mib"] == 9000 and upd["memory_used_peak_pct"] == pytest.approx(90.0)
    roll = _get(stats, 0, "rollout")  # 0.5 (10 %) and 3.5 (20 %)
    assert roll["gpu_util_mean"] == pytest.approx(15.0) and roll["memory_used_peak_mib"] == 2000
    other = _get(stats, 0, "other")
    assert other["gpu_util_mean"] == 0.0 and other["util_samples"] == 1
    whole = _get(stats, 0, "all")
    assert whole["util_samples"] == 5 and whole["gpu_util_mean"] == pytest.approx(38.0)
    assert whole["power_mean_w"] == 100.0 and whole["sm_clock_mean_mhz"] == 1500.0


def test_nvml_buffer_samples_replace_polls_for_utilisation():
    stats = _stats()
    upd = _get(stats, 1, "update")  # buffer samples at 1.2 and 1.8
    assert upd["util_source"] == "nvml_samples" and upd["util_samples"] == 2
    assert upd["gpu_util_mean"] == pytest.approx(55.0)
    assert upd["poll_samples"] == 1 and upd["memory_used_peak_mib"] == 100  # memory still from the poll
    roll = _get(stats, 1, "rollout")
    assert roll["gpu_util_mean"] == pytest.approx(5.0) and roll["mem_util_mean"] == pytest.approx(7.0)
    other = _get(stats, 1, "other")
    assert other["util_samples"] == 0 and pd.isna(other["gpu_util_mean"])


def test_targets_are_findings_met_or_not():
    found = {(f["gpu_index"], f["target"]): f for f in phases.findings(_stats())}
    assert found[(0, "gpu_util_update")]["met"] is True and found[(0, "gpu_util_update")]["value"] == pytest.approx(80)
    assert found[(0, "memory_used")]["met"] is True and found[(0, "memory_used")]["value"] == pytest.approx(90)
    assert found[(1, "gpu_util_update")]["met"] is False
    assert found[(1, "memory_used")]["met"] is False and found[(1, "memory_used")]["target_text"] == "> 80 %"


def test_a_phase_without_samples_is_not_judged():
    rows = [_row(4.5, 0, "poll", 99, 0, 9900, 10000)]  # only an 'other' sample
    found = {f["target"]: f for f in phases.findings(phases.phase_stats(pd.DataFrame(rows), INTERVALS, CALLS))}
    assert found["gpu_util_update"]["met"] is None and "no samples" in found["gpu_util_update"]["note"]
    assert found["memory_used"]["met"] is True


def test_run_infra_summary_from_an_evidence_directory(tmp_path):
    """The same hand-made samples inside real evidence: fixture intervals/calls, telemetry.parquet beside them."""
    telemetry = {"status": "recorded", "devices": [{"index": 0, "uuid": "GPU-0"}], "interval_s": 1.0, "rows": 3}
    ev = build_evidence(tmp_path, manifest={"telemetry": telemetry})
    # fixture update 16: calls [45, 45.2], rank 0 [45.5, 47.0], rank 1 [46.0, 47.5], completion 48
    rows = [_row(45.1, 0, "poll", 5, 1, 100, 1000), _row(46.5, 0, "poll", 95, 50, 900, 1000),
            _row(47.8, 0, "poll", 1, 1, 100, 1000)]
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows, schema=TELEMETRY_SCHEMA), ev / TELEMETRY)
    summary = summarize_run_infra(ev, None)
    json.dumps(summary, allow_nan=False)  # what the rule writes must be strict JSON
    t = summary["telemetry"]
    assert t["status"] == "recorded"
    by_phase = {p["phase"]: p for p in t["phases"]}
    assert by_phase["update"]["gpu_util_mean"] == 95 and by_phase["rollout"]["gpu_util_mean"] == 5
    assert by_phase["other"]["gpu_util_mean"] == 1
    assert {f["target"]: f["met"] for f in t["findings"]} == {"gpu_util_update": True, "memory_used": True}
    assert summary["trainer_efficiency"]["status"] == "unavailable"  # no FLOPs card given


def test_run_without_telemetry_says_why(tmp_path):
    ev = build_evidence(tmp_path)  # manifest without a telemetry record
    t = summarize_run_infra(ev, None)["telemetry"]
    assert t["status"] == "absent" and "no telemetry" in t["reason"] and t["phases"] == []
    ev2 = build_evidence(tmp_path, manifest={"telemetry": {"status": "unavailable", "reason": "NVML could not be initialised: x"}})
    t2 = summarize_run_infra(ev2, None)["telemetry"]
    assert t2["status"] == "unavailable" and t2["reason"].startswith("NVML")


def test_update_phase_without_a_poll_inside_takes_peak_memory_from_the_polls_around_it():
    """Trainer intervals shorter than the poll interval (as on the H200): no poll lands inside one."""
    intervals = _intervals([(0, 1, 1.1, 1.3), (0, 2, 3.1, 3.2)])
    calls = _calls([(0.0, 1.1), (1.3, 3.1)])
    rows = [_row(t, 0, "poll", 5, 1, used, 10000) for t, used in ((0.5, 1000), (1.0, 1200), (2.0, 6000),
                                                                 (3.0, 6100), (4.0, 6300), (5.0, 9000))]
    rows += [_row(1.2, 0, "nvml_samples", util=80), _row(3.15, 0, "nvml_samples", util=90)]
    stats = phases.phase_stats(pd.DataFrame(rows), intervals, calls)
    upd = _get(stats, 0, "update")
    assert upd["poll_samples"] == 0 and upd["gpu_util_mean"] == pytest.approx(85.0)
    # bracketing polls: 1.0 and 2.0 around [1.1, 1.3]; 3.0 and 4.0 around [3.1, 3.2] (not 5.0)
    assert upd["memory_used_peak_mib"] == 6300 and upd["memory_peak_basis"] == phases.BRACKETING
    roll = _get(stats, 0, "rollout")
    assert roll["memory_used_peak_mib"] == 6100 and roll["memory_peak_basis"] == phases.INSIDE

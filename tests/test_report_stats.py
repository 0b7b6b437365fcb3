"""Trial statistics in the report: per-cell mean/std/CV/CI, ratio CI and rank test, noise warnings.

Evidence is TEST FIXTURE evidence (tests/evidence_fixtures.py) with chosen update times,
summarised by the real contract code; the statistics come from scipy.stats.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from evidence_fixtures import build_evidence  # noqa: E402

from rl_pipeline_bench.evidence.attempts import append_event, seed_index  # noqa: E402
from rl_pipeline_bench.contract.summary import summarize_to_file  # noqa: E402
from rl_pipeline_bench.report import ReportInputError, render_report  # noqa: E402
from rl_pipeline_bench.report.stats import StatsSettings, compare, describe, noise_warnings  # noqa: E402
from rl_pipeline_bench.settings.spec import build_spec, check_spec  # noqa: E402

SETTINGS = StatsSettings()
#: Seconds per update of each trial: art is steady (CV 0.5 %), skyrl noisy and faster.
STEPS = {"art": [3.0, 3.015, 2.985], "skyrl": [2.0, 2.3, 1.8]}


def test_describe_matches_hand_computed_values():
    d = describe([1.69, 2.04, 2.27], SETTINGS)  # the reference_gpu multi_turn trials
    assert d["n"] == 3 and d["mean"] == pytest.approx(2.0)
    assert d["std"] == pytest.approx(np.std([1.69, 2.04, 2.27], ddof=1))
    assert d["cv"] == pytest.approx(0.146, abs=1e-3)
    assert 1.69 <= d["ci_low"] < d["mean"] < d["ci_high"] <= 2.27


def test_undefined_statistics_are_none_never_nan():
    assert describe([], SETTINGS) == {"n": 0, "mean": None, "std": None, "cv": None, "ci_low": None, "ci_high": None}
    one = describe([4.0], SETTINGS)
    assert one["mean"] == 4.0 and one["std"] is None and one["ci_low"] is None
    flat = describe([2.0, 2.0, 2.0], SETTINGS)
    assert flat["cv"] == 0.0 and flat["ci_low"] == flat["ci_high"] == 2.0
    c = compare([1.0], [], SETTINGS)
    assert c["ratio"] is None and c["p_value"] is None


def test_compare_ratio_ci_and_exact_rank_test():
    c = compare([3.0, 3.1, 3.2], [2.0, 2.1, 2.05], SETTINGS)
    assert c["ratio"] == pytest.approx(3.1 / 2.05)
    assert c["ci_low"] < c["ratio"] < c["ci_high"]
    # fully separated 3 vs 3: U = 9, exact two-sided p = 2 / C(6, 3) = 0.1, the smallest possible
    assert c["mannwhitney_u"] == 9.0 and c["p_value"] == pytest.approx(0.1)


def test_noise_warnings():
    assert noise_warnings(3, {"x": 0.01}, SETTINGS) == []
    assert [w.split(":")[0] for w in noise_warnings(2, {"x": 0.2}, SETTINGS)] == ["few_valid_trials", "cv_above_bound"]
    assert noise_warnings(0, {}, SETTINGS)[0].startswith("no_valid_trials")


@pytest.fixture(scope="module")
def report(tmp_path_factory, fresh_config):
    ws = tmp_path_factory.mktemp("stats")
    cfg = fresh_config()
    cfg["suites"]["fixstats"] = {**cfg["suites"]["smoke"], "backends": ["art", "skyrl"],
                                 "workloads": ["multi_turn", "tool_history"], "trials": 3}
    spec = check_spec(build_spec(cfg, "fixstats"))
    ev = ws / "results" / "evidence"
    summaries = []
    for w in ("multi_turn", "tool_history"):
        for b, steps in STEPS.items():
            for trial, step in enumerate(steps, 1):
                kw = {}
                if w == "tool_history" and b == "skyrl":
                    kw["completed_at"] = [step * u for u in range(1, 20)] + [step * 19]  # invalid: not increasing
                m = {"backend": b, "workload": w, "suite": spec.suite_name, "trial": trial,
                     "spec": {"id": spec.id, "hash": spec.hash}}
                if b == "art":
                    m["art_autotuner"] = {"healthy": True, "problems": []}
                path = build_evidence(ev, completed_at=kw.get("completed_at", [step * u for u in range(1, 21)]),
                                      manifest=m, run_id=f"2026010{trial}T0000{len(summaries):02d}Z-{b}-{w}-t{trial}")
                out = ws / "results" / "runs" / spec.id / b / w / f"trial{trial}" / "summary.json"
                summarize_to_file(path, out)
                summaries.append(out)
    index = ws / "results" / "attempts.jsonl"
    seed_index(ev, index)
    reports = ws / "reports"
    render_report(summaries, [], ev, reports / "comparison.html", reports / "tables", reports / "figures",
                  spec.suite_name, spec, attempts_index=index)
    return ws, spec, summaries, reports


def test_trial_stats_table(report):
    _ws, _spec, _s, reports = report
    t = pd.read_csv(reports / "tables" / "trial_stats.csv", keep_default_na=False)
    traj = t[t.rate == "headline_trajectories_per_s"].set_index(["workload", "backend"])
    art = traj.loc[("multi_turn", "art")]
    # headline: 11 trajectories over 5 updates of `step` s each
    rates = [11 / (5 * s) for s in STEPS["art"]]
    assert float(art["mean"]) == pytest.approx(np.mean(rates), rel=1e-6)
    assert float(art["cv"]) == pytest.approx(np.std(rates, ddof=1) / np.mean(rates), abs=1e-6)  # CSV: 6 decimals
    assert float(art.ci_low) <= float(art["mean"]) <= float(art.ci_high)
    assert art.warnings == "" and art.valid_trials == 3
    noisy = traj.loc[("multi_turn", "skyrl")]
    assert noisy.warnings.startswith("cv_above_bound")
    none = traj.loc[("tool_history", "skyrl")]
    assert none.valid_trials == 0 and none.warnings.startswith("no_valid_trials")
    assert none["mean"] == "" and none.ci_low == "" and none.cv == ""  # empty, never NaN


def test_comparisons_table(report):
    _ws, _spec, _s, reports = report
    c = pd.read_csv(reports / "tables" / "comparisons.csv", keep_default_na=False)
    row = c[(c.workload == "multi_turn") & (c.rate == "headline_trajectories_per_s")].iloc[0]
    assert (row.backend, row.baseline, row.n, row.n_baseline) == ("skyrl", "art", 3, 3)
    expected = np.mean([11 / (5 * s) for s in STEPS["skyrl"]]) / np.mean([11 / (5 * s) for s in STEPS["art"]])
    assert float(row.ratio) == pytest.approx(expected, rel=1e-6)
    assert float(row.ci_low) < float(row.ratio) < float(row.ci_high)
    assert float(row.p_value) == pytest.approx(0.1) and float(row.mannwhitney_u) == 9.0
    th = c[(c.workload == "tool_history") & (c.rate == "headline_trajectories_per_s")].iloc[0]
    assert th.p_value == "" and "at least 2 valid trials" in th.note


def test_html_shows_statistics_and_window_activity(report):
    _ws, spec, _s, reports = report
    html = (reports / "comparison.html").read_text(encoding="utf-8")
    trials = html[html.index('<section id="trials">'):html.index('<section id="ratios">')]
    assert "cv_above_bound" in trials and "no valid trials: nothing to estimate" in trials and "nan" not in trials
    ratios = html[html.index('<section id="ratios">'):html.index('<section id="activity">')]
    assert "U=9" in ratios and "p=0.1" in ratios
    activity = html[html.index('<section id="activity">'):html.index('<section id="timelines">')]
    assert "generation_stopped_early" in activity and "busy share" in activity
    assert spec.id in html


def test_failed_attempt_in_index_is_listed(report, tmp_path):
    ws, spec, summaries, _reports = report
    index = ws / "results" / "attempts.jsonl"
    append_event(index, "started", "20270101T000000Z-late-failure", suite=spec.suite_name, spec=spec.id,
                 backend="art", workload="multi_turn", trial=1)
    append_event(index, "finished", "20270101T000000Z-late-failure", status="failed", error="RuntimeError: late")
    out = tmp_path / "r"
    render_report(summaries, [], ws / "results" / "evidence", out / "c.html", out / "t", out / "f",
                  spec.suite_name, spec, attempts_index=index)
    attempts = pd.read_csv(out / "t" / "attempts.csv", keep_default_na=False).set_index("run_id")
    assert attempts.loc["20270101T000000Z-late-failure", "status"] == "failed"
    assert bool(attempts.loc["20270101T000000Z-late-failure", "failed_or_invalid"]) is True
    assert "RuntimeError: late" in (out / "c.html").read_text()


def test_summary_of_another_spec_is_refused_naming_both(report, tmp_path):
    ws, spec, summaries, _reports = report
    other = tmp_path / "summary.json"
    doc = json.loads(summaries[0].read_text())
    doc["spec"] = {"id": "fixstats-0123456789ab", "hash": "0123456789ab"}
    other.write_text(json.dumps(doc))
    with pytest.raises(ReportInputError, match=f"0123456789ab.*{spec.hash}"):
        render_report([other], [], ws / "results" / "evidence", tmp_path / "c.html", tmp_path / "t", tmp_path / "f",
                      spec.suite_name, spec)


# --------------------------------------------------------------------------- how to read a number


def test_the_reading_rule_of_a_comparison():
    """resolved only with enough trials for the rank test, an interval excluding 1.00x and a small p."""
    from rl_pipeline_bench.report.reading import NOT_RESOLVED, RESOLVED, smallest_p, trials_needed, verdict

    assert smallest_p(3, 3) == pytest.approx(0.1) and smallest_p(4, 4) == pytest.approx(2 / 70)
    assert trials_needed(0.05, 3) == 4 and trials_needed(0.05, 5) == 5
    # the case: 1.50x [1.40-1.61x] from 2 vs 2 trials, p = 0.333
    word, why = verdict({"n": 2, "n_baseline": 2, "ratio": 1.5, "ci_low": 1.4, "ci_high": 1.61, "p_value": 1 / 3},
                        SETTINGS)
    assert word == NOT_RESOLVED and why == ["too few trials: 2 vs 2 (4 each needed for p < 0.05)", "p ≥ 0.05"]
    separated = compare([3.0, 3.1, 3.2, 3.3], [2.0, 2.1, 2.05, 2.2], SETTINGS)
    assert verdict(separated, SETTINGS) == (RESOLVED, [])
    three = compare([3.0, 3.1, 3.2], [2.0, 2.1, 2.05], SETTINGS)  # as separated as 3 vs 3 can be: p = 0.1
    assert verdict(three, SETTINGS)[0] == NOT_RESOLVED
    overlapping = compare([2.0, 2.2, 2.1, 1.9], [2.05, 2.15, 1.95, 2.0], SETTINGS)
    assert "interval includes 1.00×" in verdict(overlapping, SETTINGS)[1]


def test_readme_states_the_reports_reading_rule():
    from rl_pipeline_bench.paths import ROOT
    from rl_pipeline_bench.report.reading import comparison_rule

    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert comparison_rule(SETTINGS) in readme


def test_the_first_screen_carries_uncertainty_and_warnings(report):
    """Every headline number with ± and CV, the notes that change its reading beside it, the verdict beside each ratio."""
    import re

    _ws, _spec, _s, reports = report
    html = (reports / "comparison.html").read_text(encoding="utf-8")
    head = html[html.index('<section id="headline">'):html.index('<section id="contract">')]
    rows = re.findall(r"<tr class=\"[^\"]*\">\s*<td>(.*?)</tr>", head, re.S)
    cells = {re.sub(r"<[^>]+>|\s+", " ", r.split("</td>", 1)[0]).split("·")[0].strip() + "/" +
             re.sub(r"<[^>]+>|\s+", " ", r.split("</td>", 1)[0]).split("·")[1].split()[0]: r for r in rows[:4]}
    for key, row in cells.items():
        assert row.count('class="num rate"') == 3 and row.count("±") == 3, key
    assert "noisy" not in cells["multi_turn/art"] and "CV 0.5 %" in cells["multi_turn/art"]
    assert "noisy: CV" in cells["multi_turn/skyrl"] and "&gt; 5 %" in cells["multi_turn/skyrl"]
    assert "no valid trial of 3: for diagnosis only" in cells["tool_history/skyrl"]
    assert "generation stopped early" in head  # tool_history's fixture calls end before its window
    assert "Red rows have invalid trials" in head
    assert head.count("not resolved") >= 3 and "too few trials: 3 vs 3 (4 each needed for p &lt; 0.05)" in head


def test_other_trials_on_disk_are_named_with_the_command_that_includes_them(report, tmp_path):
    ws, spec, summaries, _reports = report
    shown = [s for s in summaries if "trial3" not in str(s)]
    out = tmp_path / "r"
    render_report(shown, [], ws / "results" / "evidence", out / "c.html", out / "t", out / "f", spec.suite_name, spec)
    html = (out / "c.html").read_text(encoding="utf-8")
    assert "4 more trials of this spec are on disk but not in this report" in html
    assert "--config 'suites={fixstats: {trials: 3}}'" in html
    full = (ws / "reports" / "comparison.html").read_text(encoding="utf-8")
    assert "on disk but not in this report" not in full and "Red rows" in full


def test_timestamps_read_as_dates():
    from rl_pipeline_bench.report.build import fmt_spread, fmt_when

    assert fmt_when("2026-12-01T21:45:01.826817+00:00") == "2026-12-01 21:45:01 UTC"
    assert fmt_when("2026-12-01T21:45:01Z") == "2026-12-01 21:45:01 UTC"
    assert fmt_when(None) == "—" and fmt_when("not a time") == "not a time"
    assert [fmt_spread(v) for v in (0.0331, 27.09, 1436.0, 0.0, None)] == ["0.033", "27", "1,400", "0", "—"]

"""benchmarks/verdict.py: a benchmark says met or missed only when its interval clears the aim."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import verdict  # noqa: E402


def test_one_pair_resolves_nothing():
    """The case that printed 'cost -4.60 % (aim <= 1 %: met)' from one on/off pair."""
    v = verdict.mean_verdict([-4.6], 1.0)
    assert v.status == verdict.UNRESOLVED and v.low is None
    assert "not resolved at this noise" in v.text(unit=" %")


def test_noisy_repeats_around_the_aim_are_unresolved_and_tight_ones_resolve():
    assert verdict.mean_verdict([-4.6, 8.0, 3.0, -6.0], 1.0).status == verdict.UNRESOLVED
    assert verdict.mean_verdict([0.1, 0.2, 0.15, 0.12], 1.0).status == verdict.MET
    assert verdict.mean_verdict([3.0, 3.2, 2.9, 3.1], 1.0).status == verdict.MISSED
    # a lower aim (at least): the lower bound must clear it
    assert verdict.mean_verdict([6.1, 6.3, 6.2], 5.0, at_most=False).status == verdict.MET
    assert verdict.mean_verdict([4.1, 4.2, 4.0], 5.0, at_most=False).status == verdict.MISSED


def test_interval_is_the_student_t_interval():
    v = verdict.mean_verdict([1.0, 2.0, 3.0], 10.0)
    # mean 2, sd 1, sem 1/sqrt(3), t(0.975, 2) = 4.302653
    assert v.estimate == pytest.approx(2.0)
    assert v.high == pytest.approx(2.0 + 4.302653 / 3 ** 0.5, rel=1e-5)
    assert v.met


def test_cv_verdict_uses_the_chi_square_interval():
    steady = [100.0, 100.5, 99.8, 100.2, 99.9, 100.1, 100.3, 99.7, 100.0, 100.2]
    assert verdict.cv_verdict(steady, 0.02).status == verdict.MET
    wobbly = [100.0, 118.0, 86.0, 105.0, 92.0]
    assert verdict.cv_verdict(wobbly, 0.02).status == verdict.MISSED
    assert verdict.cv_verdict([100.0, 101.5], 0.02).status == verdict.UNRESOLVED  # 2 repeats: interval too wide
    assert verdict.cv_verdict([5.0], 0.02).status == verdict.UNRESOLVED


BENCHMARKS = sorted((Path(__file__).resolve().parents[1] / "benchmarks").glob("bench_*.py"))


@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: p.name)
def test_benchmarks_judge_their_aims_only_through_the_verdict_helper(path):
    """A benchmark with an aim imports verdict.py and prints no hand-made 'met' / 'not met' / 'MISSED'."""
    text = path.read_text()
    for phrase in ("'met'", '"met"', "not met", "MISSED'", "'ok' if"):
        assert phrase not in text, f"{path.name} states {phrase} outside benchmarks/verdict.py"
    if "TARGET_" in text or "target(" in text:
        assert "from verdict import" in text, f"{path.name} has an aim but no verdict from benchmarks/verdict.py"

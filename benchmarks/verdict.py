"""Met, missed, or not resolved: a benchmark's verdict on an aim, from repeats and their interval.

One figure cannot meet or miss an aim when repeats of the same work spread wider than
the margin: "met" needs the whole confidence interval on the right side of the aim (for
an upper aim, the upper bound under it), "missed" the whole interval on the wrong side,
and anything else is "not resolved at this noise". Intervals are Student-t intervals of
the mean (scipy.stats), or for a coefficient of variation the chi-square interval of
the standard deviation over the mean; fewer than two repeats resolve nothing.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

MET, MISSED, UNRESOLVED = "met", "missed", "not resolved at this noise"
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Verdict:
    status: str  # MET, MISSED or UNRESOLVED
    estimate: float
    low: float | None  # the interval; None with fewer than two repeats
    high: float | None
    n: int
    aim: float
    at_most: bool  # the aim is an upper bound (value <= aim) rather than a lower one

    @property
    def met(self) -> bool:
        return self.status == MET

    def text(self, fmt: str = "{:.3g}", unit: str = "") -> str:
        """e.g. '1.2 s (95 % CI 1.1..1.3 s, 5 repeats; aim <= 10 s: met)'."""
        aim = f"aim {'<=' if self.at_most else '>='} {fmt.format(self.aim)}{unit}"
        if self.low is None:
            spread = f"{self.n} repeat" + ("s" if self.n != 1 else "")
        else:
            spread = (f"{int(CONFIDENCE * 100)} % CI {fmt.format(self.low)}..{fmt.format(self.high)}{unit}, "
                      f"{self.n} repeats")
        return f"{fmt.format(self.estimate)}{unit} ({spread}; {aim}: {self.status})"


def _judge(estimate: float, low: float | None, high: float | None, n: int, aim: float, at_most: bool) -> Verdict:
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        status = UNRESOLVED
    elif at_most:
        status = MET if high <= aim else MISSED if low > aim else UNRESOLVED
    else:
        status = MET if low >= aim else MISSED if high < aim else UNRESOLVED
    return Verdict(status, estimate, low, high, n, float(aim), at_most)


def mean_verdict(samples: Sequence[float], aim: float, *, at_most: bool = True,
                 confidence: float = CONFIDENCE) -> Verdict:
    """Verdict on the mean of repeated measurements against `aim`."""
    from scipy import stats

    x = [float(v) for v in samples]
    if not x:
        raise ValueError("a verdict needs at least one measurement")
    mean = statistics.fmean(x)
    if len(x) < 2:
        return _judge(mean, None, None, len(x), aim, at_most)
    sem = statistics.stdev(x) / math.sqrt(len(x))
    if sem == 0.0:
        low = high = mean
    else:
        low, high = stats.t.interval(confidence, len(x) - 1, loc=mean, scale=sem)
    return _judge(mean, float(low), float(high), len(x), aim, at_most)


def cv_verdict(samples: Sequence[float], aim: float, *, confidence: float = CONFIDENCE) -> Verdict:
    """Verdict on the coefficient of variation (std / mean) of repeats against an upper aim (a fraction)."""
    from scipy import stats

    x = [float(v) for v in samples]
    if not x:
        raise ValueError("a verdict needs at least one measurement")
    mean = statistics.fmean(x)
    if len(x) < 2 or mean == 0.0:
        return _judge(0.0 if len(x) < 2 else math.nan, None, None, len(x), aim, True)
    sd = statistics.stdev(x)
    dof = len(x) - 1
    alpha = 1.0 - confidence
    low = math.sqrt(dof * sd ** 2 / stats.chi2.ppf(1 - alpha / 2, dof)) / abs(mean)
    high = math.sqrt(dof * sd ** 2 / stats.chi2.ppf(alpha / 2, dof)) / abs(mean)
    return _judge(sd / abs(mean), low, high, len(x), aim, True)

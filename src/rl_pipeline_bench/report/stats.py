"""Trial statistics: how far a headline rate can be trusted, with scipy.stats.

Per backend x workload, over its valid trials: mean, standard deviation (ddof 1),
coefficient of variation, and a percentile-bootstrap confidence interval of the mean.
Between each backend and the baseline (the suite's first backend): the ratio of means
with a bootstrap interval (trials resampled independently on each side) and a
two-sided Mann-Whitney U test. A cell gets a noise warning when a headline rate's CV
exceeds the configured bound or fewer than `min_trials` trials are valid. A statistic
that cannot be computed is None (an empty CSV field, "—" in the HTML), never NaN.

Bootstrap resampling uses a fixed seed, so the same evidence gives the same report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

#: The headline rates judged: (table column, label).
HEADLINE_RATES = (
    ("headline_trajectories_per_s", "headline trajectories/s"),
    ("headline_assistant_tokens_per_s", "headline assistant tokens/s"),
    ("trainer_assistant_tokens_per_s", "trainer assistant tokens/s"),
)
BOOTSTRAP_SEED = 20260101

#: The trainer rate: its intervals are not measured the same way by every backend (the summary's
#: trainer.headline.interval_source, from the manifest's trainer_timing; docs/validation.md).
TRAINER_RATE = "trainer_assistant_tokens_per_s"
#: What a trainer rate's intervals are, by source, as tables and captions say it. No source is the
#: contract's own measure: the union of all ranks' native intervals.
INTERVAL_SOURCES = {
    None: "union of all ranks' trainer intervals",
    "controller_interval": "one controller-side interval per step (the framework keeps no per-rank timing)",
}


def interval_source_text(source: str | None) -> str:
    """The words for one trainer-rate source (a source joined over trials is shown as given)."""
    source = None if source in ("", None) or source != source else str(source)  # NaN from a CSV is no source
    return INTERVAL_SOURCES.get(source, source or INTERVAL_SOURCES[None])


def unlike_sources(source: str | None, baseline_source: str | None) -> str:
    """Why two trainer rates are not like for like ("" when their intervals are measured the same way)."""
    a, b = interval_source_text(source), interval_source_text(baseline_source)
    return "" if a == b else f"trainer intervals measured differently ({a} vs {b}): no ratio"

#: Stable codes of the noise warnings (docs/validation.md).
NOISE_CODES = {
    "no_valid_trials": "no valid trial: nothing to estimate",
    "few_valid_trials": "fewer valid trials than statistics.min_trials",
    "cv_above_bound": "a headline rate's coefficient of variation exceeds statistics.cv_bound",
}


@dataclass(frozen=True)
class StatsSettings:
    cv_bound: float = 0.05
    min_trials: int = 3
    confidence: float = 0.95
    bootstrap_resamples: int = 9999

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any] | None) -> "StatsSettings":
        m = dict(m or {})
        return cls(**{k: m[k] for k in ("cv_bound", "min_trials", "confidence", "bootstrap_resamples") if k in m})


def _finite(values) -> np.ndarray:
    x = np.asarray([v for v in values if v is not None], dtype="float64")
    return x[np.isfinite(x)]


def _bootstrap(samples: tuple[np.ndarray, ...], statistic, settings: StatsSettings) -> tuple[float | None, float | None]:
    from scipy import stats

    if any(len(s) < 2 for s in samples):
        return None, None
    if all(np.all(s == s[0]) for s in samples):  # no spread: every resample gives the same value
        v = float(statistic(*samples, axis=-1))
        return v, v
    res = stats.bootstrap(samples, statistic, n_resamples=settings.bootstrap_resamples,
                          confidence_level=settings.confidence, method="percentile", vectorized=True,
                          paired=False, rng=np.random.default_rng(BOOTSTRAP_SEED))
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return (low, high) if np.isfinite(low) and np.isfinite(high) else (None, None)


def describe(values, settings: StatsSettings) -> dict[str, Any]:
    """n, mean, std, cv, ci_low, ci_high of one rate over valid trials (None where undefined)."""
    x = _finite(values)
    n = len(x)
    out: dict[str, Any] = {"n": n, "mean": None, "std": None, "cv": None, "ci_low": None, "ci_high": None}
    if n == 0:
        return out
    mean = float(x.mean())
    out["mean"] = mean
    if n >= 2:
        std = float(x.std(ddof=1))
        out["std"] = std
        out["cv"] = std / mean if mean > 0 else None
        out["ci_low"], out["ci_high"] = _bootstrap((x,), np.mean, settings)
    return out


def _ratio_of_means(x, y, axis=-1):
    return np.mean(x, axis=axis) / np.mean(y, axis=axis)


def compare(values, baseline_values, settings: StatsSettings) -> dict[str, Any]:
    """ratio of means (values / baseline) with its bootstrap CI, and a Mann-Whitney U test."""
    from scipy import stats

    x, y = _finite(values), _finite(baseline_values)
    out: dict[str, Any] = {"n": len(x), "n_baseline": len(y), "ratio": None, "ci_low": None, "ci_high": None,
                           "mannwhitney_u": None, "p_value": None}
    if len(x) and len(y) and y.mean() > 0:
        out["ratio"] = float(x.mean() / y.mean())
        out["ci_low"], out["ci_high"] = _bootstrap((x, y), _ratio_of_means, settings)
    if len(x) >= 2 and len(y) >= 2:
        res = stats.mannwhitneyu(x, y, alternative="two-sided", method="auto")
        out["mannwhitney_u"], out["p_value"] = float(res.statistic), float(res.pvalue)
    return out


def noise_warnings(n_valid: int, cvs: Mapping[str, float | None], settings: StatsSettings) -> list[str]:
    """Named noise warnings of one backend x workload cell ("code: detail")."""
    if n_valid == 0:
        return ["no_valid_trials: no valid trial, nothing to estimate"]
    out = []
    if n_valid < settings.min_trials:
        out.append(f"few_valid_trials: {n_valid} valid trial(s), fewer than {settings.min_trials}")
    high = [f"{label} CV {cv:.1%}" for label, cv in cvs.items() if cv is not None and cv > settings.cv_bound]
    if high:
        out.append(f"cv_above_bound: {', '.join(high)} above {settings.cv_bound:.0%}")
    return out

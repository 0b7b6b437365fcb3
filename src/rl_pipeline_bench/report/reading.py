"""How to read a headline number and a comparison: the report's one reading rule, in words.

Every headline cell (backend x workload) gets the notes that change how its number reads,
from the trial statistics and its runs' own warnings: trials left out as invalid, too few
valid trials, a CV above the bound, a headline window that measured a drain. Every
comparison between two backends gets one verdict:

- **resolved** when each side has at least `statistics.min_trials` valid trials, the rank
  test can reach the significance level with that many trials at all, the ratio's interval
  excludes 1.00x and the Mann-Whitney p is below the level (1 - `statistics.confidence`,
  0.05 by default);
- **not resolved** otherwise, with every reason that applies.

With 3 trials per backend the two-sided rank test cannot give a p below 0.10 (2 of the 20
ways to order 3 + 3 trials are the extremes), so resolving a difference at 0.05 takes at
least 4 trials per backend. README.md and docs/reading-the-report.md state the same rule.
"""

from __future__ import annotations

from math import comb
from typing import Any, Iterable

#: Codes of the notes beside a headline number (docs/reading-the-report.md).
NOTE_CODES = {
    "no_valid_trials": "no valid trial: the numbers are of invalid runs, for diagnosis only",
    "invalid_trials_left_out": "some trials are invalid and left out of the number",
    "few_valid_trials": "fewer valid trials than statistics.min_trials: spread and interval unreliable",
    "cv_above_bound": "a rate's coefficient of variation is above statistics.cv_bound",
    "generation_stopped_early": "a trial's headline window measured a drain: the rate overstates steady state",
    "rollout_activity_unknown": "a trial's rollout activity in the headline window is unknown",
}

RESOLVED, NOT_RESOLVED = "resolved", "not resolved"


def smallest_p(n: int, m: int) -> float | None:
    """The smallest two-sided p the exact Mann-Whitney test can give for n and m trials (no ties)."""
    if n < 1 or m < 1:
        return None
    return min(1.0, 2 / comb(n + m, n))


def trials_needed(alpha: float, min_trials: int) -> int:
    """The fewest trials per backend (equal sides, at least min_trials) whose rank test can reach p < alpha."""
    n = max(1, min_trials)
    while smallest_p(n, n) >= alpha:
        n += 1
    return n


def verdict(d: dict[str, Any], settings) -> tuple[str, list[str]]:
    """(RESOLVED or NOT_RESOLVED, the reasons it is not) of one comparison (report.stats.compare's output)."""
    alpha = 1 - settings.confidence
    n, m = d.get("n") or 0, d.get("n_baseline") or 0
    reasons = []
    if min(n, m) < settings.min_trials or smallest_p(n, m) >= alpha:
        reasons.append(f"too few trials: {n} vs {m} ({trials_needed(alpha, settings.min_trials)} each needed "
                       f"for p < {alpha:g})")
    low, high = d.get("ci_low"), d.get("ci_high")
    if d.get("ratio") is None:
        reasons.append("no ratio: a side has no valid trial")
    elif low is None or high is None:
        reasons.append("no interval")
    elif low <= 1.0 <= high:
        reasons.append("interval includes 1.00×")
    p = d.get("p_value")
    if p is not None and p >= alpha:
        reasons.append(f"p ≥ {alpha:g}")
    return (RESOLVED, []) if not reasons else (NOT_RESOLVED, reasons)


def _warning_codes(summary: dict) -> list[tuple[str, str]]:
    out = []
    for w in summary.get("warnings") or []:
        code, _, detail = str(w).partition(":")
        out.append((code.strip(), detail.strip()))
    return out


def cell_notes(runs: Iterable, stats_rows: list[dict], settings, rate_labels: dict[str, str]) -> list[dict]:
    """The notes beside one headline cell: [{code, text}], most serious first; [] when it reads as it is.

    `runs` are the cell's runs (report.collect.Run), `stats_rows` its trial-statistics rows
    (report.tables.trial_stats_table, one per headline rate), `rate_labels` short names of the rates.
    """
    runs = list(runs)
    valid = [r for r in runs if r.summary.get("valid") is True]
    notes = []
    if not valid:
        notes.append({"code": "no_valid_trials", "text": f"no valid trial of {len(runs)}: for diagnosis only"})
    elif len(valid) < len(runs):
        notes.append({"code": "invalid_trials_left_out",
                      "text": f"{len(runs) - len(valid)} of {len(runs)} trials invalid, left out"})
    if valid and len(valid) < settings.min_trials:
        notes.append({"code": "few_valid_trials",
                      "text": (f"{len(valid)} trial{'s' if len(valid) != 1 else ''} (< {settings.min_trials}): "
                               + ("no spread" if len(valid) == 1 else "spread unreliable"))})
    noisy = [f"{100 * row['cv']:.1f} % {rate_labels.get(row['rate'], row['rate'])}" for row in stats_rows
             if row.get("cv") is not None and row["cv"] > settings.cv_bound]
    if noisy:
        notes.append({"code": "cv_above_bound",
                      "text": f"noisy: CV {', '.join(noisy)} > {100 * settings.cv_bound:.0f} %"})
    for code, text in (("generation_stopped_early", "generation stopped early ({}): overstates steady state"),
                       ("rollout_activity_unknown", "rollout activity unknown ({})")):
        trials = sorted(int(r.summary["trial"]) for r in runs if any(c == code for c, _ in _warning_codes(r.summary)))
        if trials:
            which = f"trial{'s' if len(trials) > 1 else ''} {', '.join(map(str, trials))}"
            notes.append({"code": code, "text": text.format(which)})
    return notes


def comparison_rule(settings) -> str:
    """The reading rule of a comparison in one sentence, with the settings' numbers (README says it too)."""
    alpha = 1 - settings.confidence
    return (f"A difference between two backends is resolved only when each has at least "
            f"{settings.min_trials} valid trials, the ratio's {100 * settings.confidence:.0f} % interval excludes "
            f"1.00× and the rank test's p is below {alpha:g}; otherwise it is not resolved. With "
            f"{settings.min_trials} trials per backend p cannot go below {smallest_p(settings.min_trials, settings.min_trials):.2f}, "
            f"so resolving one takes at least {trials_needed(alpha, settings.min_trials)} trials per backend.")

"""The report's tables as DataFrames, and their deterministic CSV form.

Every number is copied from a summary (or counted from an offered plan); rows are
sorted by the suite's workload/backend order and floats use one fixed format, so the
same evidence always yields byte-identical CSV files.
"""

from __future__ import annotations

import math
import shlex
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from ..evidence.attempts import Attempt
from ..contract.settings import ContractSettings
from .collect import OFFERED_QUANTITIES, Run, offered_lengths
from .files import write_output

FLOAT_FORMAT = "%.6f"

#: (column, path into the summary) for the per-run rates.
RATE_FIELDS = (
    ("headline_trajectories_per_s", ("e2e", "headline", "trajectories_per_s")),
    ("headline_assistant_tokens_per_s", ("e2e", "headline", "assistant_tokens_per_s")),
    ("trainer_assistant_tokens_per_s", ("trainer", "headline", "assistant_tokens_per_s")),
    ("measured_trajectories_per_s", ("e2e", "measured", "trajectories_per_s")),
    ("measured_assistant_tokens_per_s", ("e2e", "measured", "assistant_tokens_per_s")),
)
RATE_COLUMNS = tuple(c for c, _ in RATE_FIELDS)


def get(d: Any, *keys: str) -> Any:
    """Nested lookup that yields None where a summary of a broken run has no value."""
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def _clean(v: Any) -> Any:
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return None
    return v


def template_records(df: pd.DataFrame) -> list[dict]:
    """DataFrame rows as plain dicts with None for missing values (templates test `is none`)."""
    return [{k: _clean(v) for k, v in row.items()} for row in df.astype(object).to_dict("records")]


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if np.isfinite(v) else None


# -- provenance formatting (shared with the HTML) ------------------------------------


def fmt_model(m: Any) -> str:
    if isinstance(m, dict):
        name = m.get("repo_id") or m.get("id") or m.get("model") or m.get("name") or "?"
        rev = m.get("revision")
        return f"{name} @ {rev}" if rev else str(name)
    return "" if m is None else str(m)


def fmt_mapping(v: Any) -> str:
    """Hashes or image records may be a string or a small mapping; both print on one line."""
    if v is None:
        return ""
    if isinstance(v, dict):
        return "; ".join(f"{k}: {fmt_mapping(v[k])}" for k in sorted(v))
    if isinstance(v, (list, tuple)):
        return ", ".join(fmt_mapping(x) for x in v)
    return str(v)


def fmt_host(h: Any) -> str:
    if isinstance(h, dict):
        parts = [str(h.get("hostname") or "?")]
        extra = [str(h[k]) for k in ("platform",) if h.get(k)]
        if h.get("cpu_count"):
            extra.append(f"{h['cpu_count']} CPUs")
        if h.get("python"):
            extra.append(f"Python {h['python']}")
        return parts[0] + (f" ({', '.join(extra)})" if extra else "")
    return "" if h is None else str(h)


def fmt_gpus(g: Any) -> str:
    if not g:
        return "none"
    if isinstance(g, list):
        out = []
        for d in g:
            if isinstance(d, dict):
                bits = [str(d.get("index", "?")), str(d.get("name") or "")]
                if d.get("uuid"):
                    bits.append(str(d["uuid"]))
                if d.get("driver"):
                    bits.append(f"driver {d['driver']}")
                out.append(" ".join(b for b in bits if b))
            else:
                out.append(str(d))
        return "; ".join(out)
    return fmt_mapping(g)


def fmt_command(c: Any) -> str:
    if isinstance(c, (list, tuple)):
        return shlex.join(str(x) for x in c)
    return "" if c is None else str(c)


def provenance_row(summary: dict) -> dict[str, str]:
    p = summary.get("provenance") or {}
    return {
        "model": fmt_model(p.get("model")),
        "recipe_sha256": fmt_mapping(p.get("recipe_sha256")),
        "source_sha256": fmt_mapping(p.get("source_sha256")),
        "image": fmt_mapping(p.get("image")) or "none (native)",
        "host": fmt_host(p.get("host")),
        "gpus": fmt_gpus(p.get("gpus")),
        "command": fmt_command(p.get("command")),
        "started_at": str(p.get("started_at") or ""),
        "finished_at": str(p.get("finished_at") or ""),
    }


# -- tables ---------------------------------------------------------------------------


def _frame(rows: list[dict], columns: list[str], int_columns: Iterable[str] = ()) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=columns)
    for c in int_columns:
        df[c] = pd.array([None if _num(v) is None else int(v) for v in df[c]], dtype="Int64")
    return df


def runs_table(runs: list[Run]) -> pd.DataFrame:
    """One row per run: validity, reasons, windows, rates and provenance."""
    rows = []
    for r in runs:
        s = r.summary
        row = {
            "workload": s["workload"], "backend": s["backend"], "trial": int(s["trial"]),
            "run_id": s["run_id"], "status": s.get("status"), "valid": bool(s["valid"]),
            "reasons": "; ".join(str(x) for x in s.get("reasons") or []),
            "warmup_updates": get(s, "contract", "warmup_updates"),
            "measured_updates": get(s, "contract", "measured_updates"),
            "headline_updates": get(s, "contract", "headline_updates"),
            "updates": get(s, "counts", "updates"),
            "accepted_trajectories": get(s, "counts", "accepted_trajectories"),
            "offered_trajectories": get(s, "counts", "offered_trajectories"),
            "headline_window_s": _num(get(s, "e2e", "headline", "window_s")),
            "measured_window_s": _num(get(s, "e2e", "measured", "window_s")),
            "trainer_union_s": _num(get(s, "trainer", "headline", "union_s")),
            "trainer_interval_source": get(s, "trainer", "headline", "interval_source"),
        }
        row.update({c: _num(get(s, *path)) for c, path in RATE_FIELDS})
        row.update(provenance_row(s))
        row["evidence_dir"] = str(s.get("evidence_dir") or "")
        rows.append(row)
    cols = ["workload", "backend", "trial", "run_id", "status", "valid", "reasons",
            "warmup_updates", "measured_updates", "headline_updates", "updates",
            "accepted_trajectories", "offered_trajectories", "headline_window_s", "measured_window_s",
            "trainer_union_s", "trainer_interval_source", *RATE_COLUMNS, "model", "recipe_sha256", "source_sha256", "image", "host",
            "gpus", "command", "started_at", "finished_at", "evidence_dir"]
    return _frame(rows, cols, ["trial", "warmup_updates", "measured_updates", "headline_updates", "updates",
                               "accepted_trajectories", "offered_trajectories"])


def measured_table(runs: list[Run]) -> pd.DataFrame:
    """Per run, both e2e windows in full (updates, endpoints, sums, rates)."""
    rows = []
    for r in runs:
        s = r.summary
        for window in ("measured", "headline"):
            w = get(s, "e2e", window) or {}
            rows.append({
                "workload": s["workload"], "backend": s["backend"], "trial": int(s["trial"]),
                "run_id": s["run_id"], "valid": bool(s["valid"]), "window": window,
                "first_update": w.get("first_update"), "last_update": w.get("last_update"),
                "window_start_s": _num(w.get("window_start_s")), "window_end_s": _num(w.get("window_end_s")),
                "window_s": _num(w.get("window_s")), "trajectories": w.get("trajectories"),
                "assistant_tokens": w.get("assistant_tokens"),
                "trajectories_per_s": _num(w.get("trajectories_per_s")),
                "assistant_tokens_per_s": _num(w.get("assistant_tokens_per_s")),
            })
    cols = ["workload", "backend", "trial", "run_id", "valid", "window", "first_update", "last_update",
            "window_start_s", "window_end_s", "window_s", "trajectories", "assistant_tokens",
            "trajectories_per_s", "assistant_tokens_per_s"]
    return _frame(rows, cols, ["trial", "first_update", "last_update", "trajectories", "assistant_tokens"])


def _mean(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return float(np.mean(vals)) if vals else None


def headline_table(runs: list[Run], workloads: list[str], backends: list[str]) -> pd.DataFrame:
    """Per workload x backend: the mean over valid trials (over all trials only when none is valid)."""
    rows = []
    for w in workloads:
        for b in backends:
            cell = [r for r in runs if r.key[0] == w and r.key[1] == b]
            if not cell:
                continue
            valid = [r for r in cell if r.summary["valid"] is True]
            basis = valid or cell
            row = {
                "workload": w, "backend": b, "trials": len(cell), "valid_trials": len(valid),
                "valid": len(valid) == len(cell),
                "basis": (f"mean of {len(valid)} valid trial(s)" if valid
                          else f"mean of {len(cell)} INVALID trial(s)"),
            }
            for c, path in RATE_FIELDS:
                row[c] = _mean([_num(get(r.summary, *path)) for r in basis])
            row["trainer_interval_source"] = interval_source(basis)
            rows.append(row)
    cols = ["workload", "backend", "trials", "valid_trials", "valid", "basis", *RATE_COLUMNS,
            "trainer_interval_source"]
    return _frame(rows, cols, ["trials", "valid_trials"])


def interval_source(runs: list[Run]) -> str | None:
    """What the trainer rate's intervals are (summary trainer.headline.interval_source), joined over trials."""
    found = sorted({str(v) for r in runs if (v := get(r.summary, "trainer", "headline", "interval_source"))})
    return ", ".join(found) or None


def _cells(runs: list[Run], workloads: list[str], backends: list[str]):
    """(workload, backend, all runs, valid runs) for every cell that has runs."""
    for w in workloads:
        for b in backends:
            cell = [r for r in runs if r.key[0] == w and r.key[1] == b]
            if cell:
                yield w, b, cell, [r for r in cell if r.summary["valid"] is True]


def _rate_values(cell: list[Run], column: str) -> list[float | None]:
    path = dict(RATE_FIELDS)[column]
    return [_num(get(r.summary, *path)) for r in cell]


#: The measured-window rates, described over trials beside the headline ones (not judged for noise).
MEASURED_RATES = (
    ("measured_trajectories_per_s", "measured trajectories/s"),
    ("measured_assistant_tokens_per_s", "measured assistant tokens/s"),
)


def trial_stats_table(runs: list[Run], workloads: list[str], backends: list[str], settings) -> pd.DataFrame:
    """Per workload x backend x rate: trials, valid trials, mean, std, CV, bootstrap CI, warnings.

    The headline rates are judged (noise warnings); the measured-window rates are described too."""
    from . import stats

    rows = []
    for w, b, cell, valid in _cells(runs, workloads, backends):
        described = {c: stats.describe(_rate_values(valid, c), settings)
                     for c, _ in (*stats.HEADLINE_RATES, *MEASURED_RATES)}
        warnings = stats.noise_warnings(len(valid), {label: described[c]["cv"] for c, label in stats.HEADLINE_RATES},
                                        settings)
        for c, label in (*stats.HEADLINE_RATES, *MEASURED_RATES):
            d = described[c]
            rows.append({
                "workload": w, "backend": b, "rate": c, "label": label, "trials": len(cell),
                "valid_trials": len(valid), "mean": d["mean"], "std": d["std"], "cv": d["cv"],
                "ci_low": d["ci_low"], "ci_high": d["ci_high"], "confidence": settings.confidence,
                "noisy": bool(warnings), "warnings": " | ".join(warnings),
            })
    cols = ["workload", "backend", "rate", "label", "trials", "valid_trials", "mean", "std", "cv", "ci_low",
            "ci_high", "confidence", "noisy", "warnings"]
    return _frame(rows, cols, ["trials", "valid_trials"])


def comparisons_table(runs: list[Run], workloads: list[str], backends: list[str], settings) -> pd.DataFrame:
    """Each backend against the baseline (first backend), per workload and headline rate, over valid trials,
    with its verdict (report.reading: resolved or not resolved, and why not)."""
    from . import reading, stats

    rows = []
    if len(backends) >= 2:
        base = backends[0]
        cells = {(w, b): valid for w, b, _cell, valid in _cells(runs, workloads, backends)}
        for w in workloads:
            if (w, base) not in cells:
                continue
            for b in backends[1:]:
                if (w, b) not in cells:
                    continue
                for c, label in stats.HEADLINE_RATES:
                    d = stats.compare(_rate_values(cells[(w, b)], c), _rate_values(cells[(w, base)], c), settings)
                    note = "" if d["p_value"] is not None else "rank test needs at least 2 valid trials per backend"
                    word, why = reading.verdict(d, settings)
                    rows.append({"workload": w, "backend": b, "baseline": base, "rate": c, "label": label, **d,
                                 "confidence": settings.confidence, "note": note, "verdict": word,
                                 "verdict_reasons": " | ".join(why)})
    cols = ["workload", "backend", "baseline", "rate", "label", "n", "n_baseline", "ratio", "ci_low", "ci_high",
            "confidence", "mannwhitney_u", "p_value", "note", "verdict", "verdict_reasons"]
    return _frame(rows, cols, ["n", "n_baseline"])


def activity_table(runs: list[Run]) -> pd.DataFrame:
    """Per run: the rollout's activity in the headline window and the summary's warnings."""
    rows = []
    for r in runs:
        s = r.summary
        a = get(s, "rollout", "headline") or {}
        rows.append({
            "workload": s["workload"], "backend": s["backend"], "trial": int(s["trial"]), "run_id": s["run_id"],
            "valid": bool(s["valid"]), "headline_window_s": _num(get(s, "e2e", "headline", "window_s")),
            "busy_share": _num(a.get("busy_share")), "calls_finished": a.get("calls_finished"),
            "calls_started": a.get("calls_started"), "in_flight_at_end": a.get("in_flight_at_end"),
            "idle_tail_s": _num(a.get("idle_tail_s")),
            "warnings": " | ".join(str(x) for x in s.get("warnings") or []),
        })
    cols = ["workload", "backend", "trial", "run_id", "valid", "headline_window_s", "busy_share", "calls_finished",
            "calls_started", "in_flight_at_end", "idle_tail_s", "warnings"]
    return _frame(rows, cols, ["trial", "calls_finished", "calls_started"])


def ratios_table(headline: pd.DataFrame, workloads: list[str], backends: list[str]) -> pd.DataFrame:
    """Each backend's rates divided by the first listed backend's, per workload."""
    rows = []
    if len(backends) >= 2:
        base = backends[0]
        for w in workloads:
            sub = headline[headline["workload"] == w].set_index("backend")
            if base not in sub.index:
                continue
            for b in backends[1:]:
                if b not in sub.index:
                    continue
                row = {"workload": w, "backend": b, "baseline": base,
                       "both_valid": bool(sub.at[b, "valid"]) and bool(sub.at[base, "valid"])}
                for c in RATE_COLUMNS:
                    num, den = _num(sub.at[b, c]), _num(sub.at[base, c])
                    row[c] = num / den if num is not None and den not in (None, 0.0) else None
                rows.append(row)
    cols = ["workload", "backend", "baseline", "both_valid", *RATE_COLUMNS]
    return _frame(rows, cols)


def attempts_table(attempts: list[Attempt]) -> pd.DataFrame:
    rows = [{
        "run_id": a.name, "suite": a.suite, "spec": a.spec, "backend": a.backend, "workload": a.workload,
        "trial": "" if a.trial is None else str(a.trial), "status": a.status_text or "unreadable", "valid": a.valid,
        "failed_or_invalid": a.failed_or_invalid, "in_report": a.in_report,
        "started_at": a.started_at, "finished_at": a.finished_at, "error": a.error,
        "reasons": "; ".join(a.reasons),
    } for a in attempts]
    cols = ["run_id", "suite", "spec", "backend", "workload", "trial", "status", "valid", "failed_or_invalid",
            "in_report", "started_at", "finished_at", "error", "reasons"]
    return pd.DataFrame(rows, columns=cols)


def offered_table(plans: dict[str, pd.DataFrame], workloads: list[str]) -> pd.DataFrame:
    """Quantiles of the offered lengths, per workload and quantity."""
    rows = []
    for w in workloads:
        if w not in plans:
            continue
        lengths = offered_lengths(plans[w])
        for q, _label in OFFERED_QUANTITIES:
            x = lengths[q]
            stats = dict(count=len(x), min=None, p10=None, p50=None, p90=None, max=None, mean=None)
            if len(x):
                p10, p50, p90 = np.percentile(x, [10, 50, 90])
                stats.update(min=int(x.min()), p10=float(p10), p50=float(p50), p90=float(p90),
                             max=int(x.max()), mean=float(x.mean()))
            rows.append({"workload": w, "quantity": q, **stats})
    cols = ["workload", "quantity", "count", "min", "p10", "p50", "p90", "max", "mean"]
    return _frame(rows, cols, ["count", "min", "max"])


def updates_table(runs: list[Run]) -> pd.DataFrame:
    """The per-update completion times behind the timeline figure (columns built whole: 10 000 runs)."""
    drawn = [r for r in runs if r.updates is not None]
    cols = ["workload", "backend", "trial", "run_id", "update", "completed_at", "window"]
    if not drawn:
        return _frame([], cols, ["trial", "update"])
    sizes = [len(r.updates) for r in drawn]
    windows = []
    for r in drawn:
        settings = ContractSettings.recorded(r.summary.get("contract") or {})
        windows.extend(settings.window_of(int(u)) if settings else "" for u in r.updates.update.tolist())
    return pd.DataFrame({
        "workload": np.repeat([r.key[0] for r in drawn], sizes).astype(object),
        "backend": np.repeat([r.key[1] for r in drawn], sizes).astype(object),
        "trial": pd.array(np.repeat([r.key[2] for r in drawn], sizes), dtype="Int64"),
        "run_id": np.repeat([str(r.summary["run_id"]) for r in drawn], sizes).astype(object),
        "update": pd.array(np.concatenate([r.updates.update for r in drawn]), dtype="Int64"),
        "completed_at": np.concatenate([r.updates.completed_at for r in drawn]),
        "window": windows,
    }, columns=cols)


# -- writing ------------------------------------------------------------------------------


def to_csv_bytes(df: pd.DataFrame) -> bytes:
    return df.to_csv(index=False, float_format=FLOAT_FORMAT, lineterminator="\n").encode("utf-8")


def write_tables(tables: dict[str, pd.DataFrame], tables_dir: Path) -> None:
    tables_dir.mkdir(parents=True, exist_ok=True)
    for name in sorted(tables):
        write_output(tables_dir / f"{name}.csv", to_csv_bytes(tables[name]))

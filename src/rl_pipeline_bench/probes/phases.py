"""Which phase each telemetry sample belongs to, from the run's own evidence, and per-phase statistics.

Phases, in order of precedence at a sample's time t:
  update  - t lies inside a native trainer interval (any rank; trainer_intervals.parquet);
  rollout - no trainer interval, but at least one model call is in flight
            (started_at <= t <= finished_at in calls.parquet);
  other   - neither (start-up, publication, waiting, shutdown).
Utilisation statistics come from NVML's own sample buffer where it has samples for a
GPU (finer than the poll), else from the poll; memory, power and clock from the poll.
Trainer intervals can be shorter than the poll interval, so a run's update phase may hold
no poll at all; its peak memory then comes from the polls that bracket its intervals
(the last before and the first after each), and `memory_peak_basis` says so. NVML's
memory used is what the processes hold, which a caching allocator (PyTorch's) keeps
after use, so the poll after an interval sees at least what the interval reserved.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from . import reference_data

PHASES = ("update", "rollout", "other")
ALL = "all"  # the whole sampled run, every phase together

STAT_COLUMNS = (
    "gpu_index", "gpu_uuid", "phase", "util_source", "util_samples", "gpu_util_mean", "gpu_util_p50",
    "gpu_util_p90", "mem_util_mean", "mem_util_p50", "mem_util_p90", "poll_samples", "memory_used_peak_mib",
    "memory_total_mib", "memory_used_peak_pct", "memory_peak_basis", "power_mean_w", "sm_clock_mean_mhz",
)
#: How a phase's peak memory was found: polls inside the phase, or the polls around its intervals.
INSIDE, BRACKETING = "polls in phase", "polls bracketing its intervals"


def merge_intervals(starts, ends) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint, sorted segments covering the union of [start, end] intervals."""
    s = np.asarray(starts, dtype="float64")
    e = np.asarray(ends, dtype="float64")
    keep = np.isfinite(s) & np.isfinite(e) & (e >= s)
    s, e = s[keep], e[keep]
    if not len(s):
        return s, e
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    out_s, out_e = [s[0]], [e[0]]
    for a, b in zip(s[1:], e[1:]):
        if a <= out_e[-1]:
            out_e[-1] = max(out_e[-1], b)
        else:
            out_s.append(a)
            out_e.append(b)
    return np.asarray(out_s), np.asarray(out_e)


def inside(t, segments: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Boolean mask: which times fall within one of the (merged) segments, ends included."""
    t = np.asarray(t, dtype="float64")
    starts, ends = segments
    if not len(starts):
        return np.zeros(t.shape, dtype=bool)
    idx = np.searchsorted(starts, t, side="right") - 1
    ok = idx >= 0
    result = np.zeros(t.shape, dtype=bool)
    result[ok] = t[ok] <= ends[idx[ok]]
    return result


def attribute(t, intervals: pd.DataFrame, calls: pd.DataFrame) -> np.ndarray:
    """Phase name per time (see the module docstring for the rules)."""
    t = np.asarray(t, dtype="float64")
    in_trainer = inside(t, merge_intervals(intervals["start"], intervals["end"]))
    in_call = inside(t, merge_intervals(calls["started_at"], calls["finished_at"]))
    return np.where(in_trainer, "update", np.where(in_call, "rollout", "other"))


def _pct(x: pd.Series, q: float) -> float | None:
    x = x.dropna()
    return float(np.percentile(x, q)) if len(x) else None


def _mean(x: pd.Series) -> float | None:
    x = x.dropna()
    return float(x.mean()) if len(x) else None


def _peak(x: pd.Series) -> float | None:
    x = x.dropna()
    return float(x.max()) if len(x) else None


def bracketing(t, segments: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Boolean mask of the times that bracket the segments: the last at or before each start, the first at or after each end."""
    t = np.asarray(t, dtype="float64")
    mask = np.zeros(t.shape, dtype=bool)
    if not len(t):
        return mask
    order = np.argsort(t, kind="stable")
    ts = t[order]
    starts, ends = segments
    before = np.searchsorted(ts, starts, side="right") - 1
    after = np.searchsorted(ts, ends, side="left")
    picked = np.concatenate([before[before >= 0], after[after < len(ts)]]).astype(int)
    mask[order[picked]] = True
    return mask


def _stats(gpu_index: int, uuid: str, phase: str, util: pd.DataFrame, util_source: str,
           poll: pd.DataFrame, total_mib: float | None, around: pd.DataFrame | None = None) -> dict[str, Any]:
    peak = _peak(poll["memory_used_mib"])
    basis = INSIDE if peak is not None else None
    if peak is None and around is not None:
        peak = _peak(around["memory_used_mib"])
        basis = BRACKETING if peak is not None else None
    return {
        "gpu_index": gpu_index, "gpu_uuid": uuid, "phase": phase, "util_source": util_source,
        "util_samples": int(util["gpu_util_pct"].notna().sum()),
        "gpu_util_mean": _mean(util["gpu_util_pct"]), "gpu_util_p50": _pct(util["gpu_util_pct"], 50),
        "gpu_util_p90": _pct(util["gpu_util_pct"], 90),
        "mem_util_mean": _mean(util["mem_util_pct"]), "mem_util_p50": _pct(util["mem_util_pct"], 50),
        "mem_util_p90": _pct(util["mem_util_pct"], 90),
        "poll_samples": int(len(poll)), "memory_used_peak_mib": peak, "memory_total_mib": total_mib,
        "memory_used_peak_pct": 100.0 * peak / total_mib if peak is not None and total_mib else None,
        "memory_peak_basis": basis, "power_mean_w": _mean(poll["power_w"]), "sm_clock_mean_mhz": _mean(poll["sm_clock_mhz"]),
    }


def phase_stats(telemetry: pd.DataFrame, intervals: pd.DataFrame, calls: pd.DataFrame) -> pd.DataFrame:
    """One row per (GPU, phase) plus one per GPU for the whole run (phase 'all')."""
    if telemetry.empty:
        return pd.DataFrame(columns=list(STAT_COLUMNS))
    tel = telemetry.copy()
    tel["phase"] = attribute(tel["t"], intervals, calls)
    trainer_segments = merge_intervals(intervals["start"], intervals["end"])
    rows = []
    for (index, uuid), dev in tel.groupby(["gpu_index", "gpu_uuid"], sort=True):
        buffered = dev[(dev["source"] == "nvml_samples")]
        use_buffer = bool(buffered["gpu_util_pct"].notna().any())
        util_all = buffered if use_buffer else dev[dev["source"] == "poll"]
        poll_all = dev[dev["source"] == "poll"]
        total = _peak(poll_all["memory_total_mib"])
        source = "nvml_samples" if use_buffer else "poll"
        for phase in (*PHASES, ALL):
            util = util_all if phase == ALL else util_all[util_all["phase"] == phase]
            poll = poll_all if phase == ALL else poll_all[poll_all["phase"] == phase]
            around = poll_all[bracketing(poll_all["t"], trainer_segments)] if phase == "update" else None
            rows.append(_stats(int(index), str(uuid), phase, util, source, poll, total, around))
    return pd.DataFrame(rows, columns=list(STAT_COLUMNS))


def findings(stats: pd.DataFrame) -> list[dict[str, Any]]:
    """The seed's utilisation and memory targets per GPU, as met / not met (None: no samples)."""
    out = []
    for (index, uuid), dev in stats.groupby(["gpu_index", "gpu_uuid"], sort=True):
        by_phase = {r["phase"]: r for r in dev.to_dict("records")}
        for key, phase, column in (("gpu_util_update", "update", "gpu_util_mean"),
                                   ("memory_used", ALL, "memory_used_peak_pct")):
            value = by_phase.get(phase, {}).get(column)
            value = None if value is None or pd.isna(value) else float(value)
            out.append({"gpu_index": int(index), "gpu_uuid": str(uuid), "target": key, "phase": phase,
                        "value": value, "target_text": reference_data.target_text(key),
                        "met": reference_data.judge(key, value),
                        "note": None if value is not None else f"no samples in phase '{phase}'"})
    return out

"""The measurement contract: rates and validity derived from evidence v1 alone.

With the default settings (5 warmup + 15 measured updates, the last 5 as headline,
N = 20) the headline window runs from completion 15 to completion 20 and counts the
accepted trajectories and assistant tokens of updates 16-20; the measured window runs
from completion 5 to completion 20 over updates 6-20; the trainer rate divides the
headline tokens by the length of the union of every rank's trainer intervals tagged
with updates 16-20 (concurrent ranks are not double counted). Every rule that a run
breaks becomes a named reason "code: detail"; an invalid run still gets whatever
rates can be computed, marked `valid: false`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from . import plan_identity
from ..plan.call_identity import row_label
from ..records.atomicfile import atomic_write_json
from ..evidence.store import Evidence, read_evidence
from . import reconcile
from .intervals import interval_union_length
from .settings import ContractSettings
from ..records.formats import schema_of

SUMMARY_SCHEMA = schema_of("summary")
#: The rule set this module applies; recorded in every summary (its history: records.formats).
CONTRACT_RULES = schema_of("contract-rules")
#: Generation that ends more than this share of the headline window before the window
#: does (with no call in flight at its end) is "stopped early".
GENERATION_TAIL_TOLERANCE = 0.05


def _num(v: Any) -> float | int | None:
    """A JSON-safe Python number: NaN/inf become null, numpy scalars become Python ones."""
    if v is None:
        return None
    if isinstance(v, bool):
        return v
    if isinstance(v, int) or (hasattr(v, "dtype") and getattr(v.dtype, "kind", "") in "iu"):
        return int(v)
    f = float(v)
    return f if math.isfinite(f) else None


def _rate(amount: Any, seconds: Any) -> float | None:
    if amount is None or seconds is None or seconds <= 0:
        return None
    return float(amount) / float(seconds)


def _single_completions(updates: pd.DataFrame) -> dict[int, float]:
    """update -> completed_at for updates recorded exactly once (duplicates are ambiguous)."""
    counts = updates["update"].value_counts()
    once = updates[updates["update"].map(counts) == 1]
    return {int(u): float(t) for u, t in zip(once["update"], once["completed_at"])}


def _e2e_window(updates: pd.DataFrame, completions: dict[int, float], first: int, last: int,
                label: str, reasons: list[str]) -> dict:
    start, end = completions.get(first - 1), completions.get(last)
    window = None
    if start is not None and end is not None and math.isfinite(start) and math.isfinite(end):
        window = end - start
        if window <= 0:
            reasons.append(
                f"window_nonpositive: {label} window is {window:g} s "
                f"(completed_at of update {first - 1} = {start:g}, of update {last} = {end:g})"
            )
    rows = updates[(updates["update"] >= first) & (updates["update"] <= last)]
    trajectories = int(rows["accepted_trajectories"].sum()) if len(rows) else None
    tokens = int(rows["assistant_tokens"].sum()) if len(rows) else None
    return {
        "first_update": first,
        "last_update": last,
        "window_start_s": _num(start),
        "window_end_s": _num(end),
        "window_s": _num(window),
        "trajectories": trajectories,
        "assistant_tokens": tokens,
        "trajectories_per_s": _rate(trajectories, window),
        "assistant_tokens_per_s": _rate(tokens, window),
    }


# ---------------------------------------------------------------------------
# Validation rules


def _fmt_list(values: Iterable[int], limit: int = 10) -> str:
    values = list(values)
    shown = ", ".join(str(v) for v in values[:limit])
    return f"[{shown}{', ...' if len(values) > limit else ''}]"


def _settings_from_manifest(manifest: dict | None, reasons: list[str]) -> tuple[ContractSettings, dict]:
    if manifest is None:
        return ContractSettings(), {}
    contract = manifest.get("contract")
    if not isinstance(contract, dict):
        reasons.append("contract_missing: manifest has no contract object; default settings used")
        return ContractSettings(), {}
    try:
        settings = ContractSettings.from_mapping(contract)
    except (TypeError, ValueError) as exc:
        reasons.append(f"contract_invalid: {exc}; default settings used")
        return ContractSettings(), contract
    return settings, contract


def _check_status(manifest: dict | None, reasons: list[str]) -> None:
    if manifest is None:
        return
    status = manifest.get("status")
    if status != "completed":
        detail = f"run status is {status!r}"
        error = manifest.get("error")
        lines = [ln.strip() for ln in str(error or "").splitlines() if ln.strip()]
        if lines:
            # A traceback's last line names the exception; otherwise the first line is the gist.
            gist = lines[-1] if lines[0].startswith("Traceback") else lines[0]
            detail += f" (error: {gist[:200]})"
        elif status == "running":
            from ..host.liveness import describe

            detail += f" ({describe(manifest.get('supervisor'))})"
        reasons.append(f"status_not_completed: {detail}")


def _check_backend(manifest: dict | None, reasons: list[str]) -> bool:
    """The run's backend's own validity checks (its descriptor's evidence_checks); returns
    whether its updates reconcile with its calls per plan update (else over the run)."""
    from .. import backends

    name = (manifest or {}).get("backend")
    if not isinstance(name, str) or name not in backends.names():
        return False  # a backend this installation does not register: only the common contract applies
    descriptor = backends.get(name)
    for check in descriptor.evidence_checks:
        reasons.extend(check(manifest))
    return descriptor.trains_plan_updates


def _check_updates(updates: pd.DataFrame, settings: ContractSettings, reasons: list[str]) -> None:
    n = settings.total_updates
    if len(updates) != n:
        reasons.append(f"update_count: {len(updates)} updates recorded, the contract requires {n}")
    seen = updates["update"].astype("int64").tolist()
    counts = pd.Series(seen, dtype="int64").value_counts()
    missing = [u for u in range(1, n + 1) if u not in counts.index]
    duplicated = sorted(int(u) for u, c in counts.items() if c > 1)
    unexpected = sorted(int(u) for u in counts.index if not 1 <= u <= n)
    if missing or duplicated or unexpected:
        parts = []
        if missing:
            parts.append(f"missing {_fmt_list(missing)}")
        if duplicated:
            parts.append(f"duplicated {_fmt_list(duplicated)}")
        if unexpected:
            parts.append(f"outside 1..{n}: {_fmt_list(unexpected)}")
        reasons.append(f"updates_not_contiguous: expected updates 1..{n} each exactly once; " + "; ".join(parts))

    times = updates["completed_at"].to_numpy(dtype="float64")
    bad = updates[~np.isfinite(times) | (times < 0)]
    if len(bad):
        u, t = int(bad["update"].iloc[0]), float(bad["completed_at"].iloc[0])
        reasons.append(f"completion_time_invalid: {len(bad)} update(s) with a negative or non-finite completed_at; first: update {u} at {t}")
    ordered = updates.sort_values("update", kind="stable")
    prev_u = prev_t = None
    for u, t in zip(ordered["update"], ordered["completed_at"]):
        if prev_t is not None and not (t > prev_t):
            reasons.append(
                f"completion_not_increasing: update {int(u)} completed at {float(t):g} s, "
                f"not after update {int(prev_u)} at {float(prev_t):g} s"
            )
            break
        prev_u, prev_t = u, t

    neg = updates[(updates["accepted_trajectories"] < 0) | (updates["assistant_tokens"] < 0)]
    if len(neg):
        r = neg.iloc[0]
        reasons.append(
            f"negative_count: {len(neg)} update(s) with negative counts; first: update {int(r['update'])} "
            f"accepted_trajectories={int(r['accepted_trajectories'])} assistant_tokens={int(r['assistant_tokens'])}"
        )


def _check_calls(calls: pd.DataFrame, calls_readable: bool, settings: ContractSettings, recorded: set[int],
                 reasons: list[str]) -> None:
    if not calls_readable:
        return
    if len(calls) == 0:
        reasons.append("calls_empty: calls.parquet holds no model calls")
        return
    # Untagged calls are never "beyond"; an update recorded as trained is updates_not_contiguous's finding.
    update = pd.to_numeric(calls["update"], errors="coerce").fillna(0)
    untrained = (update > settings.total_updates) & ~update.isin(recorded)
    beyond = calls[untrained.to_numpy() & calls["accepted"].fillna(False).astype(bool).to_numpy()]
    if len(beyond):
        r = beyond.iloc[0]
        reasons.append(
            f"accepted_beyond_trained: {len(beyond)} call(s) of updates after the last trained update "
            f"{settings.total_updates} are marked accepted; first: {row_label(r)}"
        )
    bad = calls[calls["completion_tokens"] != calls["forced_completion_tokens"]]
    if len(bad):
        r = bad.iloc[0]
        reasons.append(
            f"completion_length_mismatch: {len(bad)} of {len(calls)} calls differ from their forced length; "
            f"first: {row_label(r)} "
            f"completion_tokens={int(r['completion_tokens'])} forced_completion_tokens={int(r['forced_completion_tokens'])}"
        )


def _offered_per_update(contract: dict, manifest: dict | None, reasons: list[str]) -> int | None:
    if manifest is None or not isinstance(manifest.get("contract"), dict):
        return None
    v = contract.get("offered_trajectories_per_update")
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        reasons.append(f"contract_incomplete: offered_trajectories_per_update is {v!r}, expected an integer >= 0")
        return None
    return v


def _expected_ranks(contract: dict, manifest: dict | None, reasons: list[str]) -> list[int] | None:
    if manifest is None or not isinstance(manifest.get("contract"), dict):
        return None
    v = contract.get("trainer_ranks")
    if not isinstance(v, list) or not v or not all(isinstance(r, int) and not isinstance(r, bool) for r in v):
        reasons.append(f"contract_incomplete: trainer_ranks is {v!r}, expected a non-empty list of integers")
        return None
    return sorted(set(v))


def _check_accepted(updates: pd.DataFrame, offered: int | None, reasons: list[str]) -> None:
    if offered is None:
        return
    over = updates[updates["accepted_trajectories"] > offered]
    if len(over):
        r = over.iloc[0]
        reasons.append(
            f"accepted_above_offered: {len(over)} update(s) accepted more than the {offered} trajectories offered; "
            f"first: update {int(r['update'])} accepted {int(r['accepted_trajectories'])}"
        )


def _trainer_headline(intervals: pd.DataFrame, settings: ContractSettings, tokens: int | None,
                      expected: list[int] | None, intervals_readable: bool, reasons: list[str]) -> dict:
    first, last = settings.trainer_window
    start = intervals["start"].to_numpy(dtype="float64")
    end = intervals["end"].to_numpy(dtype="float64")
    bad = intervals[~(np.isfinite(start) & np.isfinite(end)) | (end < start)]
    if len(bad):
        r = bad.iloc[0]
        reasons.append(
            f"interval_invalid: {len(bad)} trainer interval(s) end before they start or are not finite; "
            f"first: rank {int(r['rank'])} update {int(r['update'])} [{float(r['start'])}, {float(r['end'])}]"
        )
    good = intervals.drop(index=bad.index)
    head = good[(good["update"] >= first) & (good["update"] <= last)]

    if expected is not None and intervals_readable:
        present = set(zip(head["rank"].astype(int), head["update"].astype(int)))
        for rank in expected:
            lacking = [u for u in range(first, last + 1) if (rank, u) not in present]
            if lacking:
                reasons.append(
                    f"trainer_ranks_missing: rank {rank} has no trainer interval for update(s) {_fmt_list(lacking)} "
                    f"(expected ranks {expected})"
                )
        extra = sorted(set(good["rank"].astype(int)) - set(expected))
        if extra:
            reasons.append(f"trainer_ranks_unexpected: intervals from rank(s) {extra}, expected ranks {expected}")

    union = interval_union_length(zip(head["start"], head["end"])) if len(head) else None
    if union is not None and union <= 0:
        reasons.append(f"window_nonpositive: trainer interval union over updates {first}-{last} is {union:g} s")
    return {
        "first_update": first,
        "last_update": last,
        "union_s": _num(union),
        "assistant_tokens": tokens,
        "assistant_tokens_per_s": _rate(tokens, union),
    }


# ---------------------------------------------------------------------------
# Rollout activity in the headline window


def _pauses(t0: np.ndarray, t1: np.ndarray, start: float, end: float) -> tuple[float, float]:
    """(busy share, longest pause) of call intervals clipped to [start, end]; a pause has no call in flight."""
    lo, hi = np.clip(t0, start, end), np.clip(t1, start, end)
    keep = hi > lo
    busy = interval_union_length(zip(lo[keep], hi[keep]))
    longest, cursor = 0.0, start
    for a, b in sorted(zip(lo[keep], hi[keep])):
        longest, cursor = max(longest, a - cursor), max(cursor, b)
    return busy / (end - start), max(longest, end - cursor)


def rollout_activity(calls: pd.DataFrame, headline: dict, measured: dict, warnings: list[str]) -> dict:
    """How busy generation was in the headline window, from every recorded call (accepted or not).

    busy_share: the share of the headline window with at least one call in flight;
    calls_finished / calls_started: calls that finished / started inside it;
    idle_tail_s: how long before the window's end generation last had a call in flight
    (0 when one was in flight at the end). The same busy share and the longest pause are
    measured over the steady part of the measured window (from its start to the headline
    window's start) for comparison. Generation "stopped early" when its idle tail is
    longer than both 5 % of the window and the longest pause of the steady part: a
    rollout that waits on the staleness limit every update pauses as long as before,
    a rollout that ran out of work does not.
    """
    start, end = headline.get("window_start_s"), headline.get("window_end_s")
    out = {"window_start_s": start, "window_end_s": end, "busy_share": None, "calls_finished": None,
           "calls_started": None, "in_flight_at_end": None, "last_call_finished_s": None, "idle_tail_s": None,
           "steady_busy_share": None, "steady_longest_pause_s": None}
    t0 = calls["started_at"].to_numpy(dtype="float64") if len(calls) else np.array([])
    t1 = calls["finished_at"].to_numpy(dtype="float64") if len(calls) else np.array([])
    ok = np.isfinite(t0) & np.isfinite(t1) & (t1 >= t0)
    t0, t1 = t0[ok], t1[ok]
    if start is None or end is None or not end > start or not len(t0):
        warnings.append("rollout_activity_unknown: " + ("no timed calls" if not len(t0) else "no headline window"))
        return out
    busy, _ = _pauses(t0, t1, start, end)
    in_flight = bool(np.any((t0 <= end) & (t1 > end)))
    before_end = t1[t0 <= end]
    last_before = float(before_end.max()) if len(before_end) else None
    idle_tail = 0.0 if in_flight else (max(0.0, end - last_before) if last_before is not None else end - start)
    steady_start = measured.get("window_start_s")
    steady_busy = steady_pause = None
    if steady_start is not None and start > steady_start:
        steady_busy, steady_pause = _pauses(t0, t1, steady_start, start)
    out.update(busy_share=busy, calls_finished=int(np.sum((t1 > start) & (t1 <= end))),
               calls_started=int(np.sum((t0 >= start) & (t0 < end))), in_flight_at_end=in_flight,
               last_call_finished_s=float(t1.max()), idle_tail_s=idle_tail,
               steady_busy_share=steady_busy, steady_longest_pause_s=steady_pause)
    if idle_tail > max(GENERATION_TAIL_TOLERANCE * (end - start), steady_pause or 0.0):
        warnings.append(
            f"generation_stopped_early: the last call before the headline window's end finished at "
            f"{last_before if last_before is not None else start:g} s, {idle_tail:.3g} s "
            f"({idle_tail / (end - start):.0%} of the window) before it ended at {end:g} s, longer than any pause "
            f"before the window ({steady_pause or 0.0:.3g} s); busy share {busy:.0%}"
            + (f" against {steady_busy:.0%} before" if steady_busy is not None else "")
            + f", {out['calls_finished']} call(s) finished in the window"
        )
    return out


# ---------------------------------------------------------------------------
# Summary


def summarize_evidence(ev: Evidence, run_record: Mapping[str, Any] | None = None,
                       spec: plan_identity.NamedSpec | None = None, plan: pd.DataFrame | None = None) -> dict:
    """The summary of already-read evidence (see `summarize`)."""
    reasons: list[str] = list(ev.problems)
    manifest = ev.manifest
    m = manifest or {}
    identity = reconcile.check_identity(manifest, ev.path, reasons)
    plan_identity.check_plan_identity(manifest, ev.calls, spec, plan, reasons)  # a relabelled run is not its label's run
    if run_record is not None:
        reconcile.check_run_record(run_record, manifest, ev.path, reasons)
    settings, contract = _settings_from_manifest(manifest, reasons)
    _check_status(manifest, reasons)
    per_plan_update = _check_backend(manifest, reasons)
    offered = _offered_per_update(contract, manifest, reasons)
    expected = _expected_ranks(contract, manifest, reasons)

    problem_codes = {p.split(":", 1)[0] for p in ev.problems}
    unread = {"evidence_dir_missing", "manifest_schema"}  # no table was read: judge none of them
    updates_ok = not ({"updates_missing", "updates_corrupt"} | unread) & problem_codes
    calls_ok = not ({"calls_missing", "calls_corrupt"} | unread) & problem_codes
    intervals_ok = not ({"intervals_missing", "intervals_corrupt"} | unread) & problem_codes

    updates = ev.updates
    if updates_ok:
        _check_updates(updates, settings, reasons)
    _check_calls(ev.calls, calls_ok, settings, set(updates["update"].astype(int)), reasons)
    _check_accepted(updates, offered, reasons)
    if updates_ok and calls_ok and len(ev.calls):
        reconcile.check_calls(updates, ev.calls, settings.total_updates, contract, offered, per_plan_update, reasons)
    if updates_ok and intervals_ok:
        reconcile.check_intervals(updates, ev.intervals, reasons)

    completions = _single_completions(updates)
    headline = _e2e_window(updates, completions, *settings.headline_window, "headline", reasons)
    measured = _e2e_window(updates, completions, *settings.measured_window, "measured", reasons)
    trainer = _trainer_headline(ev.intervals, settings, headline["assistant_tokens"], expected, intervals_ok, reasons)
    timing = m.get("trainer_timing") if isinstance(m.get("trainer_timing"), dict) else {}
    trainer["interval_source"] = timing.get("source")
    warnings: list[str] = []
    rollout = rollout_activity(ev.calls if calls_ok else ev.calls.iloc[0:0], headline, measured, warnings)

    reasons = list(dict.fromkeys(reasons))  # stable order, no repeats
    distinct_updates = int(updates["update"].nunique())
    return {
        "schema": SUMMARY_SCHEMA,
        # Identity fields only as well typed values (a bad one is manifest_identity's finding);
        # a run is named by its evidence directory when its manifest names another.
        "run_id": None if manifest is None else ev.path.name,
        "suite": identity["suite"],
        "spec": m.get("spec") if isinstance(m.get("spec"), dict) else None,
        "backend": identity["backend"],
        "workload": identity["workload"],
        "trial": identity["trial"],
        "status": m.get("status"),
        "evidence_dir": str(ev.path),
        "valid": not reasons,
        "reasons": reasons,
        "warnings": warnings,
        "contract_rules": CONTRACT_RULES,
        "contract": settings.as_dict(),
        "e2e": {"headline": headline, "measured": measured},
        "trainer": {"headline": trainer},
        "rollout": {"headline": rollout},
        "counts": {
            "updates": int(len(updates)),
            "calls": int(len(ev.calls)),
            "accepted_trajectories": int(updates["accepted_trajectories"].sum()),
            # What was offered for the updates this run recorded (acceptance = accepted / offered).
            "offered_trajectories": offered * distinct_updates if offered is not None else None,
        },
        "provenance": {k: m.get(k) for k in (
            "model", "recipe_sha256", "source_sha256", "image", "host", "gpus",
            "started_at", "finished_at", "command")},
        "timeline": update_timeline(updates),
    }


def update_timeline(updates: pd.DataFrame) -> dict[str, list]:
    """Every recorded update's completion, in update order: what the report draws, so it reads no evidence."""
    rows = updates[["update", "completed_at"]].sort_values("update", kind="stable")
    return {"update": [int(u) for u in rows["update"]],
            "completed_at": [float(t) if math.isfinite(t) else None for t in rows["completed_at"].astype(float)]}


def summarize(evidence_dir: Path | str, run_record: Mapping[str, Any] | None = None,
              spec: plan_identity.NamedSpec | None = None, plan: pd.DataFrame | None = None) -> dict:
    """Summary (rates + validity with named reasons) of one evidence directory; never raises on bad evidence.

    run_record: the run.json that points at the directory; it must name the same run.
    spec, plan: the run spec and the offered plan of the workload the run is summarized
    under (the workflow's files); the evidence must be a run of both (`plan_mismatch`).
    """
    from ..evidence.digest import evidence_digest, seal

    digest = evidence_digest(evidence_dir)  # the bytes about to be read: the report re-checks them
    summary = summarize_evidence(read_evidence(evidence_dir), run_record, spec, plan)
    summary["evidence_digest"] = digest
    return seal(summary)


def summarize_to_file(evidence_dir: Path | str, out_path: Path | str,
                      run_record: Mapping[str, Any] | None = None, spec: plan_identity.NamedSpec | None = None,
                      plan: pd.DataFrame | None = None) -> dict:
    """Write the summary atomically as JSON and return it."""
    summary = summarize(evidence_dir, run_record, spec, plan)
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out, summary)
    return summary

"""Cross-checks between the files of one evidence directory: each may be well formed and
still contradict the others, and a summary must not call such evidence valid.

- Calls against updates. A backend whose update u trains exactly the accepted calls of
  plan update u (its descriptor's `trains_plan_updates`, the reference backend) is
  reconciled per update: the trajectories with accepted calls and those calls'
  completion tokens equal the update's `accepted_trajectories` and `assistant_tokens`,
  and every offered call of a recorded update (the plan's identities, from the
  contract's `offered_plan` shape) appears exactly once. A framework that batches work
  across plan updates (ART, SkyRL) is reconciled over the run: what its updates say
  they trained cannot exceed what its calls generated (accepted calls, plus calls of
  extra offered updates, which issue 9's rule records as not accepted although a
  framework may train them), counting at most one end-of-turn token per call beside
  the completion tokens.
- Call times: from 0 on, finite, never finishing before they start.
- Trainer intervals: inside the run (from 0 to the last update's completion), of a
  recorded update, of non-zero length, and an update's union not below
  `TRAINER_SHARE_FLOOR` of its wall time (completion to completion).
- Identity: the manifest's run id, backend, workload, suite and trial have their types,
  the run id names the evidence directory, and the run record (run.json) agrees.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from .intervals import interval_union_length
from ..plan.call_identity import row_label
from .reasons import TRAINER_SHARE_FLOOR

#: Tokens a framework may count per call beside the completion (an end-of-turn token).
TOKENS_PER_CALL_SLACK = 1
#: Identity fields of a manifest (and of run.json) that must name the same run.
IDENTITY_FIELDS = ("run_id", "backend", "workload", "suite", "trial")
#: The keys of the contract's offered plan shape (runner.execute_run records them).
OFFERED_PLAN_KEYS = ("groups_per_update", "group_size", "calls_per_trajectory")

_TRAJECTORY = ["update", "group", "trajectory"]
_CALL = [*_TRAJECTORY, "call"]


def _fmt(values, limit: int = 5) -> str:
    values = list(values)
    return "[" + ", ".join(map(str, values[:limit])) + (", ..." if len(values) > limit else "") + "]"


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def offered_shape(contract: Mapping[str, Any], reasons: list[str]) -> tuple[int, int, int] | None:
    """(groups per update, group size, calls per trajectory) of the offered plan, or None if not recorded."""
    shape = contract.get("offered_plan")
    if shape is None:
        return None  # evidence written before the shape was recorded: counts are checked, identities not
    values = [shape.get(k) for k in OFFERED_PLAN_KEYS] if isinstance(shape, dict) else []
    if len(values) != 3 or not all(_is_int(v) and v >= 1 for v in values):
        reasons.append(f"contract_incomplete: offered_plan is {shape!r}, expected integers >= 1 for "
                       f"{', '.join(OFFERED_PLAN_KEYS)}")
        return None
    offered = contract.get("offered_trajectories_per_update")
    if _is_int(offered) and offered != values[0] * values[1]:
        reasons.append(f"contract_incomplete: offered_plan has {values[0]} group(s) of {values[1]}, but "
                       f"offered_trajectories_per_update is {offered}")
        return None
    return values[0], values[1], values[2]


def _tagged(calls: pd.DataFrame) -> pd.DataFrame:
    out = calls[calls["update"].notna()].copy()
    out["update"] = out["update"].astype("int64")
    return out


def _check_identities(calls: pd.DataFrame, shape: tuple[int, int, int] | None, reasons: list[str]) -> None:
    dup = calls[calls.duplicated(_CALL, keep="first")]
    if len(dup):
        r = dup.iloc[0]
        reasons.append(f"calls_not_in_plan: {len(dup)} call(s) recorded more than once; first: {row_label(r)}")
    if shape is None:
        return
    groups, size, per = shape
    outside = calls[(calls["group"] < 0) | (calls["group"] >= groups) | (calls["trajectory"] < 0)
                    | (calls["trajectory"] >= size) | (calls["call"] < 0) | (calls["call"] >= per) | (calls["update"] < 1)]
    if len(outside):
        r = outside.iloc[0]
        reasons.append(f"calls_not_in_plan: {len(outside)} call(s) outside the offered plan ({groups} group(s) of "
                       f"{size} trajectories, {per} call(s) each per update); first: {row_label(r)}")


def _check_offered_present(calls: pd.DataFrame, recorded: list[int], shape: tuple[int, int, int] | None,
                           offered: int | None, reasons: list[str]) -> None:
    """Every offered call of a recorded update appears (all identities with the shape, else the trajectory count)."""
    if shape is not None:
        groups, size, per = shape
        expected = pd.MultiIndex.from_product([recorded, range(groups), range(size), range(per)], names=_CALL)
        present = pd.MultiIndex.from_frame(calls[_CALL])
        missing = expected.difference(present)
        if len(missing):
            u, g, t, c = missing[0]
            by_update = pd.Series([m[0] for m in missing]).value_counts().sort_index()
            reasons.append(f"offered_call_missing: {len(missing)} offered call(s) of recorded updates have no row; "
                           f"first: update {u} group {g} trajectory {t} call {c} (updates {_fmt(by_update.index)})")
        return
    if offered is None:
        return
    counts = calls.drop_duplicates(_TRAJECTORY).groupby("update").size()
    short = [(u, int(counts.get(u, 0))) for u in recorded if int(counts.get(u, 0)) < offered]
    if short:
        u, n = short[0]
        reasons.append(f"offered_call_missing: {len(short)} recorded update(s) have calls of fewer trajectories than "
                       f"the {offered} offered; first: update {u} with {n}")


def _per_update(updates: pd.DataFrame, calls: pd.DataFrame, untagged: int, total: int,
                reasons: list[str]) -> None:
    """Per update: accepted trajectories and tokens equal those of its accepted calls."""
    if untagged:
        reasons.append(f"calls_not_in_plan: {untagged} call(s) carry no update, but this backend's updates are "
                       "reconciled per plan update")
    traj = calls.groupby(_TRAJECTORY)["accepted"].agg(["any", "all"])
    mixed = traj[traj["any"] & ~traj["all"]]
    if len(mixed):
        u, g, t = mixed.index[0]
        reasons.append(f"trajectory_acceptance_mixed: {len(mixed)} trajectory(ies) with accepted and not accepted "
                       f"calls; first: update {u} group {g} trajectory {t}")
    accepted_traj = traj[traj["any"]].groupby(level="update").size()
    accepted_tokens = calls[calls["accepted"]].groupby("update")["completion_tokens"].sum()
    recorded = dict(zip(updates["update"].astype(int), zip(updates["accepted_trajectories"].astype(int),
                                                             updates["assistant_tokens"].astype(int))))
    bad_traj, bad_tokens = [], []
    for u in sorted(set(recorded) | set(int(x) for x in accepted_traj.index if 1 <= x <= total)):
        got_t, got_k = recorded.get(u, (0, 0))
        want_t, want_k = int(accepted_traj.get(u, 0)), int(accepted_tokens.get(u, 0))
        where = "" if u in recorded else " (updates.parquet has no such update)"
        if got_t != want_t:
            bad_traj.append(f"update {u} says {got_t}, its accepted calls hold {want_t}{where}")
        if got_k != want_k:
            bad_tokens.append(f"update {u} says {got_k}, its accepted calls hold {want_k}{where}")
    if bad_traj:
        reasons.append(f"accepted_trajectories_mismatch: {len(bad_traj)} update(s); first: {bad_traj[0]}")
    if bad_tokens:
        reasons.append(f"assistant_tokens_mismatch: {len(bad_tokens)} update(s); first: {bad_tokens[0]}")


def _run_totals(updates: pd.DataFrame, calls: pd.DataFrame, all_calls: pd.DataFrame, total: int,
                reasons: list[str]) -> None:
    """Over the run: what the updates say they trained does not exceed what the calls generated."""
    untagged = all_calls[all_calls["update"].isna()]
    eligible_untagged = untagged[untagged["accepted"].fillna(False).astype(bool)]
    eligible = calls[calls["accepted"] | (calls["update"] > total)]
    trajectories = len(eligible.drop_duplicates(_TRAJECTORY)) + int((eligible_untagged["call"] == 0).sum())
    tokens = int(eligible["completion_tokens"].sum() + eligible_untagged["completion_tokens"].sum())
    n_calls = len(eligible) + len(eligible_untagged)
    trained_t, trained_k = int(updates["accepted_trajectories"].sum()), int(updates["assistant_tokens"].sum())
    if trained_t > trajectories:
        reasons.append(f"accepted_trajectories_mismatch: the updates trained {trained_t} trajectories in all, "
                       f"the calls hold {trajectories} accepted (or extra offered) trajectories")
    if trained_k > tokens + TOKENS_PER_CALL_SLACK * n_calls:
        reasons.append(f"assistant_tokens_mismatch: the updates trained {trained_k} assistant tokens in all, "
                       f"the calls generated {tokens} in {n_calls} accepted (or extra offered) call(s)")


def _check_call_times(calls: pd.DataFrame, reasons: list[str]) -> None:
    start, end = calls["started_at"].to_numpy(dtype="float64"), calls["finished_at"].to_numpy(dtype="float64")
    with np.errstate(invalid="ignore"):
        bad = calls[~(np.isfinite(start) & np.isfinite(end)) | (start < 0) | (end < start)]
    if len(bad):
        r = bad.iloc[0]
        reasons.append(f"call_time_invalid: {len(bad)} call(s) with a negative, non-finite or reversed time; first: "
                       f"{row_label(r)} [{float(r['started_at'])}, {float(r['finished_at'])}]")


def check_calls(updates: pd.DataFrame, calls: pd.DataFrame, total: int, contract: Mapping[str, Any],
                offered: int | None, per_plan_update: bool, reasons: list[str]) -> None:
    """Reconcile calls.parquet with updates.parquet (see the module docstring); readable tables only."""
    _check_call_times(calls, reasons)
    shape = offered_shape(contract, reasons)
    calls = calls.assign(accepted=calls["accepted"].fillna(False).astype(bool))
    tagged = _tagged(calls)
    _check_identities(tagged, shape, reasons)
    if not per_plan_update:
        _run_totals(updates, tagged, calls, total, reasons)
        return
    recorded = sorted(int(u) for u in updates["update"].unique() if 1 <= int(u) <= total)
    _check_offered_present(tagged, recorded, shape, offered, reasons)
    _per_update(updates, tagged, int(calls["update"].isna().sum()), total, reasons)


def _union(rows: pd.DataFrame) -> float:
    return interval_union_length(zip(rows["start"], rows["end"]))


def check_intervals(updates: pd.DataFrame, intervals: pd.DataFrame, reasons: list[str]) -> None:
    """Trainer intervals inside the run, non-empty, of recorded updates, and not absurdly short."""
    start, end = intervals["start"].to_numpy(dtype="float64"), intervals["end"].to_numpy(dtype="float64")
    finite = intervals[np.isfinite(start) & np.isfinite(end) & (end >= start)]  # the rest: interval_invalid
    empty = finite[finite["end"] == finite["start"]]
    if len(empty):
        r = empty.iloc[0]
        reasons.append(f"interval_empty: {len(empty)} trainer interval(s) of zero length; first: rank {int(r['rank'])} "
                       f"update {int(r['update'])} at {float(r['start']):g} s")
    done = updates.drop_duplicates("update", keep=False)
    done = done[np.isfinite(done["completed_at"].to_numpy(dtype="float64"))]
    completion = dict(zip(done["update"].astype(int), done["completed_at"].astype(float)))
    run_end = max(completion.values(), default=None)
    outside = finite[(finite["start"] < 0) | ~finite["update"].astype(int).isin(set(completion))
                     | ((finite["end"] > run_end) if run_end is not None else False)]
    if len(outside):
        r = outside.iloc[0]
        reasons.append(f"interval_outside_run: {len(outside)} trainer interval(s) outside [0, {run_end}] s (the last "
                       f"recorded completion) or of an unrecorded update; first: rank {int(r['rank'])} update "
                       f"{int(r['update'])} [{float(r['start']):g}, {float(r['end']):g}]")
    short = []
    for u, rows in finite.groupby("update"):
        u = int(u)
        if u not in completion:
            continue
        wall = completion[u] - completion.get(u - 1, 0.0)
        union = _union(rows)
        if wall > 0 and union < TRAINER_SHARE_FLOOR * wall:
            short.append(f"update {u}: {union:.3g} s of trainer time in {wall:.3g} s")
    if short:
        reasons.append(f"trainer_union_implausible: {len(short)} update(s) with a trainer union below "
                       f"{TRAINER_SHARE_FLOOR:g} of the update's wall time; first: {short[0]}")


def _safe_name() -> re.Pattern:
    from ..records.configfile import safe_name_regex

    return re.compile(f"^(?:{safe_name_regex()})$")


def check_identity(manifest: Mapping[str, Any] | None, evidence_dir: Path, reasons: list[str]) -> dict[str, Any]:
    """The manifest's identity fields that are well typed (the others None), with a reason for each bad one."""
    if manifest is None:
        return dict.fromkeys(IDENTITY_FIELDS)
    name, out, bad = _safe_name(), {}, []
    for key in IDENTITY_FIELDS:
        v = manifest.get(key)
        if key == "trial":
            ok = _is_int(v) and v >= 1
        elif key == "run_id":
            ok = isinstance(v, str) and v == Path(evidence_dir).name
        else:
            ok = isinstance(v, str) and bool(name.match(v))
        out[key] = v if ok else None
        if not ok:
            want = ("an integer >= 1" if key == "trial" else f"the evidence directory's name {Path(evidence_dir).name!r}"
                    if key == "run_id" else "a safe name string")
            bad.append(f"{key} is {v!r}, expected {want}")
    if bad:
        reasons.append("manifest_identity: " + "; ".join(bad))
    return out


def check_run_record(record: Mapping[str, Any], manifest: Mapping[str, Any] | None, evidence_dir: Path,
                     reasons: list[str]) -> None:
    """What run.json says of its run (each field it has) is what the manifest and directory say."""
    if manifest is None:
        return
    diffs = [f"{k}: run.json {record.get(k)!r}, manifest {manifest.get(k)!r}"
             for k in IDENTITY_FIELDS if k in record and record.get(k) != manifest.get(k)]
    if "run_id" in record and record.get("run_id") != Path(evidence_dir).name:
        diffs.append(f"run.json run_id {record.get('run_id')!r} is not the evidence directory {Path(evidence_dir).name!r}")
    spec = manifest.get("spec")
    spec_hash = spec.get("hash") if isinstance(spec, dict) else None
    if "spec_hash" in record and record.get("spec_hash") != spec_hash:
        diffs.append(f"spec_hash: run.json {record.get('spec_hash')!r}, manifest {spec_hash!r}")
    if diffs:
        reasons.append("run_record_mismatch: " + "; ".join(diffs))

"""Gather what the report is made of: run summaries, their update timelines, offered
plans, and every attempt of the attempts index (rl_pipeline_bench.evidence.attempts).

Nothing here computes a benchmark number: rates come from the contract code's
summaries, and a broken evidence directory becomes a listed attempt, never a crash.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..evidence.attempts import Attempt, read_attempts, unindexed_dirs
from ..records.formats import LEDGER
from ..records.jsonfile import read_json

SUMMARY_SCHEMA = LEDGER["summary"].schema

#: The offered length quantities plotted per workload (key, label).
OFFERED_QUANTITIES = (
    ("prompt", "prompt tokens (per group)"),
    ("completion", "forced completion tokens (per new call)"),
    ("tool_observation", "tool observation tokens (history + between calls)"),
    ("tool_schema", "tool schema tokens (per group)"),
)


class ReportInputError(ValueError):
    """A declared report input (summary or plan) is missing or malformed; names the file."""


@dataclass(frozen=True)
class Timeline:
    """One run's update completions in update order (plain arrays: a report may hold 10 000)."""

    update: np.ndarray  # int64
    completed_at: np.ndarray  # float64, seconds since the run's start

    def __len__(self) -> int:
        return len(self.update)


@dataclass
class Run:
    """One benchmark run as the report sees it: its summary plus its update timeline."""

    summary: dict[str, Any]
    summary_path: str
    evidence_dir: Path | None
    updates: Timeline | None
    problems: list[str] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.summary["workload"], self.summary["backend"], int(self.summary["trial"]))


#: Every summary schema: "rl-bench/summary/vN"; this code reads the versions in SUMMARY_READERS.
SUMMARY_FAMILY = LEDGER["summary"].family


class UnreadableSummary(ReportInputError):
    """A summary of a version this code has no reader for: listed in the report, never parsed."""


def _read_v1_summary(data: dict[str, Any], path: Path) -> dict[str, Any]:
    missing = [k for k in ("run_id", "backend", "workload", "trial", "valid", "reasons", "contract", "e2e", "trainer")
               if k not in data]
    if missing:
        raise ReportInputError(f"summary {path} lacks field(s) {missing}")
    return data


#: The reader of each summary version this code understands (the report reads no other).
SUMMARY_READERS = {SUMMARY_SCHEMA: _read_v1_summary}


def load_summary(path: Path | str) -> dict[str, Any]:
    """Read one summary JSON through the reader of its schema version.

    A summary of another version of this project's schema raises UnreadableSummary (the
    report lists it with the reason); anything else that is not a summary is an error
    naming the file.
    """
    path = Path(path)
    data = read_json(path, "summary", ReportInputError, strict=True)
    schema = data.get("schema") if isinstance(data, dict) else None
    reader = SUMMARY_READERS.get(schema)
    if reader is not None:
        return reader(data, path)
    if isinstance(schema, str) and schema.startswith(SUMMARY_FAMILY):
        raise UnreadableSummary(f"summary_schema: {path} has schema {schema!r}; this version reads only "
                                f"{sorted(SUMMARY_READERS)} (re-summarise its evidence with this version's "
                                "`bench summarize-run`, or report it with the version that wrote it)")
    got = schema if isinstance(data, dict) else type(data).__name__
    raise ReportInputError(f"summary {path} has schema {got!r}, expected {SUMMARY_SCHEMA!r}")


def resolve_evidence_dir(summary: dict[str, Any], evidence_root: Path) -> Path | None:
    """The run's evidence directory: under the given evidence root first, then as recorded."""
    candidates = []
    if summary.get("run_id"):
        candidates.append(evidence_root / str(summary["run_id"]))
    if summary.get("evidence_dir"):
        candidates.append(Path(summary["evidence_dir"]))
    for c in candidates:
        if c.is_dir():
            return c
    return None


_RUN_PATH = re.compile(r"(?P<backend>[^/]+)/(?P<workload>[^/]+)/trial(?P<trial>\d+)/[^/]+$")


def _well_typed(key: str, value: Any) -> bool:
    if key == "trial":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, str) and bool(value)


def _fill_identity(summary: dict[str, Any], summary_path: Path, problems: list[str]) -> None:
    """A run whose manifest is unreadable (or names itself with values of the wrong type) has
    no usable backend/workload/trial in its summary; the declared run path
    (paths.RUN_DIR: .../{backend}/{workload}/trial{n}/) still says them."""
    missing = [k for k in ("backend", "workload", "trial") if not _well_typed(k, summary.get(k))]
    if not missing:
        return
    m = _RUN_PATH.search(summary_path.as_posix())
    if m is None:
        raise ReportInputError(f"summary {summary_path} has no {'/'.join(missing)} and its path does not name them "
                               "(expected .../{backend}/{workload}/trial{n}/summary.json)")
    for k in missing:
        summary[k] = int(m["trial"]) if k == "trial" else m[k]
    problems.append(f"summary lacks a usable {'/'.join(missing)} (unreadable or mistyped manifest); "
                    "taken from its path")


#: Evidence problems a report run shows: its timeline's, and a version with no reader.
_SHOWN_PROBLEMS = ("updates", "manifest_schema")


def _timeline(update, completed_at) -> Timeline | None:
    u, t = np.asarray(update, dtype=np.int64), np.asarray(completed_at, dtype=np.float64)
    order = np.argsort(u, kind="stable")
    return Timeline(u[order], t[order]) if len(u) else None


def _summary_timeline(summary: dict[str, Any]) -> Timeline | None:
    """The update timeline the summary carries (contract.update_timeline), or None when it has none."""
    t = summary.get("timeline")
    if not isinstance(t, dict) or not isinstance(t.get("update"), list) or not isinstance(t.get("completed_at"), list) \
            or len(t["update"]) != len(t["completed_at"]):
        return None
    return _timeline(t["update"], [np.nan if v is None else v for v in t["completed_at"]])


def _distrust(summary: dict[str, Any], evidence_dir: Path | None) -> None:
    """An edited, malformed or out-of-date summary is shown as an invalid run, its reason first."""
    from ..evidence.digest import summary_problems

    problems = summary_problems(summary, evidence_dir)
    if problems:
        earlier = summary["reasons"] if isinstance(summary.get("reasons"), list) else []
        summary["valid"] = False
        summary["reasons"] = [*problems, *(str(r) for r in earlier)]


def load_run(summary_path: Path | str, evidence_root: Path) -> Run:
    """A run from its summary and its update timeline: the summary's own, else read from its evidence.

    Summaries carry the timeline since the report stopped reading evidence for it (a
    thousand runs' updates tables were most of a large report's time); older ones fall
    back to the evidence's updates table (the only table read).
    """
    from ..evidence.store import UPDATES, read_evidence

    summary = load_summary(summary_path)
    problems: list[str] = []
    _fill_identity(summary, Path(summary_path), problems)
    evidence_dir = resolve_evidence_dir(summary, evidence_root)
    _distrust(summary, evidence_dir)
    updates = _summary_timeline(summary)
    if evidence_dir is None:
        problems.append(f"evidence directory of run {summary['run_id']} not found under {evidence_root}"
                        + ("" if updates is not None else "; no timeline"))
    elif updates is None:
        ev = read_evidence(evidence_dir, tables=(UPDATES,))
        problems.extend(p for p in ev.problems if p.startswith(_SHOWN_PROBLEMS))
        updates = _timeline(ev.updates["update"].to_numpy(), ev.updates["completed_at"].to_numpy())
    return Run(summary, str(summary_path), evidence_dir, updates, problems)


@dataclass(frozen=True)
class UnreadableRun:
    """A declared summary the report could not read by any reader; shown with the reason."""

    summary_path: str
    reason: str


def load_runs(summary_paths: list[Path | str], evidence_root: Path) -> tuple[list[Run], list[UnreadableRun]]:
    """Runs of every readable summary, and the summaries of versions this code cannot read."""
    runs, unreadable = [], []
    for p in summary_paths:
        try:
            runs.append(load_run(p, evidence_root))
        except UnreadableSummary as exc:
            unreadable.append(UnreadableRun(str(p), str(exc)))
    seen: dict[tuple, str] = {}
    for r in runs:
        if r.key in seen:
            raise ReportInputError(
                f"summaries {seen[r.key]} and {r.summary_path} are both {r.key[1]}/{r.key[0]}/trial{r.key[2]}"
            )
        seen[r.key] = r.summary_path
    return runs, unreadable


def load_attempts(index: Path | None, evidence_root: Path, runs: list[Run]) -> tuple[list[Attempt], list[str]]:
    """Every attempt: the attempts index, the report's own runs judged by their summaries
    (once: the same verdict as the headline table), and any evidence directory the index
    lacks (by name only). Nothing is re-scored. Returns (attempts sorted by run id, problems)."""
    found, problems = read_attempts(index) if index is not None else ([], [])
    by_id = {a.name: a for a in found}
    for r in runs:
        s = r.summary
        a = by_id.setdefault(str(s["run_id"]), Attempt(name=str(s["run_id"]), status=None, valid=None, reasons=[]))
        a.in_report = True
        a.valid = s["valid"] if isinstance(s["valid"], bool) else None
        a.reasons = [str(x) for x in s.get("reasons") or []]
        a.status = s.get("status") if isinstance(s.get("status"), str) else a.status
        a.suite, a.backend, a.workload, a.trial = s.get("suite"), s["backend"], s["workload"], s["trial"]
    for name in unindexed_dirs(evidence_root, set(by_id)):
        by_id[name] = Attempt(name=name, status=None, valid=None, reasons=[
            f"not_indexed: the directory is not in {index or 'the attempts index'} (not made by `bench run`)"])
    return [by_id[k] for k in sorted(by_id)], problems


def load_plans(plan_paths: list[Path | str]) -> dict[str, pd.DataFrame]:
    """Offered plans by workload name (from the plan's own `workload` column)."""
    plans: dict[str, pd.DataFrame] = {}
    for p in plan_paths:
        p = Path(p)
        try:
            df = pd.read_parquet(p)
        except FileNotFoundError:
            raise ReportInputError(f"offered plan {p} does not exist") from None
        except Exception as exc:
            raise ReportInputError(f"offered plan {p} is not readable parquet: {exc}") from None
        need = {"workload", "update", "group", "trajectory", "call", "prompt_tokens", "tool_schema_tokens",
                "history_observation_tokens", "forced_completion_tokens", "tool_observation_tokens"}
        missing = sorted(need - set(df.columns))
        if missing:
            raise ReportInputError(f"offered plan {p} lacks column(s) {missing}")
        names = df["workload"].unique().tolist()
        if len(names) != 1:
            raise ReportInputError(f"offered plan {p} holds workloads {names}; expected exactly one")
        if names[0] in plans:
            raise ReportInputError(f"two offered plans for workload {names[0]!r} (second: {p})")
        plans[names[0]] = df
    return plans


def offered_lengths(plan: pd.DataFrame) -> dict[str, np.ndarray]:
    """The offered token lengths a plan draws, one sample per draw (shared values once per group)."""
    groups = plan.drop_duplicates(["update", "group"])
    last_call = plan.groupby(["update", "group", "trajectory"])["call"].transform("max")
    between = plan.loc[plan["call"] < last_call, "tool_observation_tokens"].to_numpy(dtype=np.int64)
    history = [int(x) for lst in groups["history_observation_tokens"] for x in (lst if lst is not None else [])]
    return {
        "prompt": groups["prompt_tokens"].to_numpy(dtype=np.int64),
        "completion": plan["forced_completion_tokens"].to_numpy(dtype=np.int64),
        "tool_observation": np.concatenate([np.asarray(history, dtype=np.int64), between]),
        "tool_schema": groups["tool_schema_tokens"].to_numpy(dtype=np.int64),
    }

"""Gather what the report is made of: run summaries, their update timelines, offered
plans, and every attempt under the evidence root.

Nothing here computes a benchmark number: rates come from the contract code's
summaries, and a broken evidence directory becomes a listed attempt, never a crash.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

SUMMARY_SCHEMA = "rl-bench/summary/v1"

#: The offered length quantities plotted per workload (key, label).
OFFERED_QUANTITIES = (
    ("prompt", "prompt tokens (per group)"),
    ("completion", "forced completion tokens (per new call)"),
    ("tool_observation", "tool observation tokens (history + between calls)"),
    ("tool_schema", "tool schema tokens (per group)"),
)


class ReportInputError(ValueError):
    """A declared report input (summary or plan) is missing or malformed; names the file."""


@dataclass
class Run:
    """One benchmark run as the report sees it: its summary plus its update timeline."""

    summary: dict[str, Any]
    summary_path: str
    evidence_dir: Path | None
    updates: pd.DataFrame | None
    problems: list[str] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.summary["workload"], self.summary["backend"], int(self.summary["trial"]))


@dataclass
class Attempt:
    """One directory under the evidence root, judged by its manifest and its summary."""

    name: str
    status: str | None
    valid: bool | None
    reasons: list[str]
    suite: str | None = None
    backend: str | None = None
    workload: str | None = None
    trial: Any = None
    started_at: str | None = None
    finished_at: str | None = None
    error: str | None = None
    in_report: bool = False

    @property
    def error_not_in_reasons(self) -> bool:
        """The manifest's error text, when no reason already quotes it."""
        return bool(self.error) and not any(str(self.error) in r for r in self.reasons)

    @property
    def failed_or_invalid(self) -> bool:
        return self.status != "completed" or self.valid is not True


def load_summary(path: Path | str) -> dict[str, Any]:
    """Read one summary JSON and check it is a v1 summary with the fields the report needs."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportInputError(f"summary {path} does not exist") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportInputError(f"summary {path} is not readable JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("schema") != SUMMARY_SCHEMA:
        got = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise ReportInputError(f"summary {path} has schema {got!r}, expected {SUMMARY_SCHEMA!r}")
    missing = [k for k in ("run_id", "backend", "workload", "trial", "valid", "reasons", "contract", "e2e", "trainer")
               if k not in data]
    if missing:
        raise ReportInputError(f"summary {path} lacks field(s) {missing}")
    return data


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


def _fill_identity(summary: dict[str, Any], summary_path: Path, problems: list[str]) -> None:
    """A run whose manifest is unreadable has no backend/workload/trial in its summary;
    the declared run path results/runs/{suite}/{backend}/{workload}/trial{n}/ still says them."""
    missing = [k for k in ("backend", "workload", "trial") if summary.get(k) is None]
    if not missing:
        return
    m = _RUN_PATH.search(summary_path.as_posix())
    if m is None:
        raise ReportInputError(f"summary {summary_path} has no {'/'.join(missing)} and its path does not name them "
                               "(expected .../{backend}/{workload}/trial{n}/summary.json)")
    for k in missing:
        summary[k] = int(m["trial"]) if k == "trial" else m[k]
    problems.append(f"summary lacks {'/'.join(missing)} (unreadable manifest); taken from its path")


def load_run(summary_path: Path | str, evidence_root: Path) -> Run:
    from ..evidence import read_evidence

    summary = load_summary(summary_path)
    problems: list[str] = []
    _fill_identity(summary, Path(summary_path), problems)
    evidence_dir = resolve_evidence_dir(summary, evidence_root)
    updates = None
    if evidence_dir is None:
        problems.append(f"evidence directory of run {summary['run_id']} not found under {evidence_root}; no timeline")
    else:
        ev = read_evidence(evidence_dir)
        problems.extend(p for p in ev.problems if p.startswith("updates"))
        if len(ev.updates):
            updates = ev.updates[["update", "completed_at"]].sort_values("update", kind="stable").reset_index(drop=True)
    return Run(summary, str(summary_path), evidence_dir, updates, problems)


def load_runs(summary_paths: list[Path | str], evidence_root: Path) -> list[Run]:
    runs = [load_run(p, evidence_root) for p in summary_paths]
    seen: dict[tuple, str] = {}
    for r in runs:
        if r.key in seen:
            raise ReportInputError(
                f"summaries {seen[r.key]} and {r.summary_path} are both {r.key[1]}/{r.key[0]}/trial{r.key[2]}"
            )
        seen[r.key] = r.summary_path
    return runs


def _summarize_safely(path: Path) -> dict[str, Any]:
    from ..contract import summarize

    try:
        return summarize(path)
    except Exception as exc:  # a corrupt directory must be listed, not crash the report
        return {"status": None, "valid": False,
                "reasons": [f"summarize_error: {type(exc).__name__}: {exc}"]}


def _read_manifest(path: Path) -> tuple[dict | None, str | None]:
    f = path / "manifest.json"
    try:
        m = json.loads(f.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, "manifest_missing: manifest.json not found"
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"manifest_unreadable: {exc}"
    if not isinstance(m, dict):
        return None, f"manifest_unreadable: holds a {type(m).__name__}, not an object"
    return m, None


def scan_attempts(evidence_root: Path, reported_run_ids: set[str]) -> list[Attempt]:
    """Every directory under the evidence root, sorted by name (run ids sort by time)."""
    if not evidence_root.is_dir():
        return []
    attempts = []
    for d in sorted(p for p in evidence_root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        manifest, manifest_problem = _read_manifest(d)
        summary = _summarize_safely(d)
        reasons = [str(r) for r in (summary.get("reasons") or [])]
        if manifest_problem and not any(r.startswith("manifest") for r in reasons):
            reasons.insert(0, manifest_problem)
        m = manifest or {}
        status = m.get("status") if manifest is not None else None
        valid = summary.get("valid")
        attempts.append(Attempt(
            name=d.name,
            status=status if isinstance(status, str) else None,
            valid=valid if isinstance(valid, bool) else None,
            reasons=reasons,
            suite=m.get("suite"), backend=m.get("backend"), workload=m.get("workload"),
            trial=m.get("trial"), started_at=m.get("started_at"), finished_at=m.get("finished_at"),
            error=m.get("error"),
            in_report=d.name in reported_run_ids,
        ))
    return attempts


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

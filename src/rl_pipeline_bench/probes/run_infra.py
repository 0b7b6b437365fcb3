"""One run's infrastructure summary: telemetry per phase with the seed's targets, and trainer MFU.

Derived from the evidence directory alone (plus the model's FLOPs card), like the
contract's summary, and never part of a run's validity: a run without telemetry is
summarised with the reason it has none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..evidence.store import CALLS, INTERVALS, read_evidence
from . import phases
from .efficiency import trainer_efficiency
from .telemetry import read_telemetry
from ..records.formats import schema_of

RUN_INFRA_SCHEMA = schema_of("run-infra")


def _records(df) -> list[dict[str, Any]]:
    return [{k: (None if v != v else v) for k, v in row.items()} for row in df.astype(object).to_dict("records")]


def telemetry_summary(ev) -> dict[str, Any]:
    """Status of the sampler (from the manifest), per-phase statistics and target findings."""
    recorded = (ev.manifest or {}).get("telemetry")
    if not isinstance(recorded, dict):
        return {"status": "absent", "reason": "the manifest records no telemetry (run made before the sampler existed)",
                "phases": [], "findings": []}
    out = {k: v for k, v in recorded.items() if k in (
        "status", "reason", "devices", "interval_s", "nvml_samples", "rows", "rows_by_source", "sampler_busy_s",
        "sampler_busy_fraction", "sampled_s", "unsupported_queries", "errors", "driver")}
    out.setdefault("reason", None)
    out["phases"], out["findings"] = [], []
    if recorded.get("status") not in ("recorded", "running"):
        return out
    table, problem = read_telemetry(ev.path)
    if problem or table.empty:
        out["reason"] = problem or "telemetry.parquet holds no samples"
        return out
    stats = phases.phase_stats(table, ev.intervals, ev.calls)
    out["phases"] = _records(stats)
    out["findings"] = phases.findings(stats)
    return out


def summarize_run_infra(evidence_dir: Path | str, card: dict[str, Any] | None) -> dict[str, Any]:
    ev = read_evidence(evidence_dir, tables=(CALLS, INTERVALS))  # phases and FLOPs need no updates table
    m = ev.manifest or {}
    return {
        "schema": RUN_INFRA_SCHEMA,
        **{k: m.get(k) for k in ("run_id", "suite", "backend", "workload", "trial")},
        "spec": m.get("spec"),
        "evidence_dir": str(ev.path),
        "gpus": m.get("gpus"),
        "telemetry": telemetry_summary(ev),
        "trainer_efficiency": trainer_efficiency(ev, card),
        "evidence_problems": list(ev.problems),
    }

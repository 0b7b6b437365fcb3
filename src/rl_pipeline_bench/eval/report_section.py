"""The report's task-quality section: context for `templates/_eval.html.j2` (and the
evaluation-throughput rows of `templates/_infrastructure.html.j2`).

Kept apart from the throughput report so both can change independently; the
report calls `section(paths, tables_dir)` and includes the partial.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from . import benchmarks
from .tables import eval_tables, load_summaries, paper_wide, protocol_cuts
from .throughput import protocol_projection


def _clean(v: Any) -> Any:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return v


def _records(df) -> list[dict]:
    return [{k: _clean(v) for k, v in r.items()} for r in df.astype(object).to_dict("records")]


def section(summary_paths, tables_dir: Path | None = None, write=None) -> dict[str, Any]:
    summaries = load_summaries(summary_paths or [])
    tabs = eval_tables(summaries)
    if tables_dir is not None and write is not None:
        write(tabs, Path(tables_dir))
    ref = benchmarks.paper_reference()
    return {
        "summaries": [{"eval_suite": s["eval_suite"], "spec_hash": s["spec_hash"], "benchmark": s["benchmark"],
                       "policy": s["policy_id"], "description": s.get("description"), "protocol": s["protocol"],
                       "max_steps_source": s.get("max_steps_source") or {}, "complete": s["complete"],
                       "problems": s["problems"], "runs": s.get("runs") or [], "protocol_cuts": protocol_cuts(s),
                       "policy_identity": ((s.get("runs") or [{}])[0]).get("policy"),
                       "packages": ((s.get("runs") or [{}])[0]).get("packages")} for s in summaries],
        "overall": _records(tabs["eval_overall"]),
        "groups": _records(tabs["eval_groups"]),
        "tasks": _records(tabs["eval_tasks"]),
        "paper": [paper_wide(tabs["eval_paper_comparison"], b) for b in ("libero", "robotwin")],
        "paper_source": ref["source"],
        "measured_benchmarks": sorted({s["benchmark"] for s in summaries}),
        # Shown in the Infrastructure section; the protocol's projection only from LIBERO scenes.
        "throughput": [dict(row, projection=protocol_projection(row) if row["benchmark"] == "libero" else None)
                       for row in _records(tabs["eval_throughput"])],
        "robotwin_horizons": benchmarks.facts()["robotwin"]["horizons"],
    }

"""The evaluation's report tables as DataFrames (HTML here, LaTeX in the paper report).

Success rates are in percent, like the paper's; mean and sample std over runs.
`paper_comparison` holds the paper's reference rows (data in
`data/paper_reference.yaml`, source named there) beside the measured rows, and the
difference measured − paper for every pair that shares a column. A measured row's
label says what kind of policy it is (a stand-in, scripted, a checkpoint) and where
its protocol falls short of the paper's (fewer tasks, scenarios, runs or steps); the
difference is given only for a checkpoint under the paper's full protocol (a
stand-in's, a scripted policy's or a two-episode rate minus the paper's measures
nothing).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from . import benchmarks
from ..records.jsonfile import read_record

PAPER_BENCHMARKS = ("libero", "robotwin")


def _pct(x: float | None) -> float | None:
    return None if x is None else 100.0 * float(x)


def load_summaries(paths) -> list[dict[str, Any]]:
    out = []
    for p in paths:
        s = read_record(p, "eval-summary", "eval summary")
        s["_path"] = str(p)
        out.append(s)
    return sorted(out, key=lambda s: (s["eval_suite"], s["policy_id"]))


def _ident(s: dict) -> dict:
    return {"eval_suite": s["eval_suite"], "spec_hash": s["spec_hash"], "benchmark": s["benchmark"],
            "policy": s["policy_id"]}


def _rate_cols(row: dict) -> dict:
    return {"success_pct_mean": _pct(row["success_rate_mean"]), "success_pct_std": _pct(row["success_rate_std"]),
            "runs": row["runs"], "episodes": row["episodes"], "successes": row["successes"], "crashed": row["crashed"],
            "per_run_pct": "; ".join(f"run{r}: {100 * v:.1f}" for r, v in sorted(row["per_run"].items(),
                                                                                key=lambda kv: int(kv[0])))}


def measured_columns(s: dict) -> dict[str, dict]:
    """Paper column -> measured rate row, for the benchmarks the paper reports."""
    ref = benchmarks.paper_reference()
    out: dict[str, dict] = {}
    if s["benchmark"] == "libero":
        by_label = {g["group"]: g for g in s["per_group"]}
        for column in ref["libero"]["columns"]:
            if column in by_label:
                out[column] = by_label[column]
        if set(ref["libero"]["columns"]) <= set(out):
            means = [out[c]["success_rate_mean"] for c in ref["libero"]["columns"]]
            out["Avg"] = {"success_rate_mean": sum(means) / len(means), "success_rate_std": None,
                          "runs": s["overall"]["runs"], "episodes": s["overall"]["episodes"],
                          "successes": s["overall"]["successes"], "crashed": s["overall"]["crashed"], "per_run": {}}
    elif s["benchmark"] == "robotwin":
        for row in s["paper_columns"]:
            out[row["column"]] = row
        if s["overall"]:
            out["Overall Avg"] = s["overall"]
    return out


def protocol_cuts(s: dict) -> list[str]:
    """Where a summary's protocol falls short of RLinf's (benchmarks.yaml `protocol`, each suite's max steps)."""
    p, ref = s["protocol"], benchmarks.facts()["protocol"]
    cuts = []
    if p.get("task_indices") is not None:
        cuts.append(f"task {', '.join(map(str, p['task_indices']))} only")
    if p["scenarios_per_task"] < ref["scenarios_per_task"]:
        cuts.append(f"{p['scenarios_per_task']} of {ref['scenarios_per_task']} scenarios")
    if p["runs"] < ref["runs"]:
        cuts.append(f"{p['runs']} of {ref['runs']} runs")
    for task, steps in p["max_steps"].items():
        own, _ = benchmarks.task_limits(s["benchmark"], task)
        if steps < own:
            cuts.append(f"at most {steps} of {own} steps")
    return cuts


def policy_role(s: dict) -> str | None:
    """What the evaluated policy is (loader.BUILTIN roles, or "checkpoint"), from its runs' evidence."""
    return ((s.get("runs") or [{}])[0].get("policy") or {}).get("role")


def measured_label(s: dict) -> str:
    notes = [n for n in [policy_role(s)] if n]
    cuts = protocol_cuts(s)
    if cuts:
        notes.append("reduced protocol: " + ", ".join(cuts))
    return f"measured: {s['policy_id']} ({s['eval_suite']}" + "".join(f"; {n}" for n in notes) + ")"


def paper_comparison(summaries: list[dict]) -> pd.DataFrame:
    ref = benchmarks.paper_reference()
    rows = []
    for bench in PAPER_BENCHMARKS:
        cols = list(ref[bench]["columns"]) + (["Avg"] if bench == "libero" else [])
        for name, values in ref[bench]["rows"].items():
            for c in cols:
                if c in values:
                    rows.append({"benchmark": bench, "row": name, "kind": "paper", "column": c,
                                 "success_pct": float(values[c]), "success_pct_std": None, "runs": None,
                                 "source": ref["source"]})
        for s in summaries:
            if s["benchmark"] != bench:
                continue
            label = measured_label(s)
            comparable = policy_role(s) in (None, "checkpoint") and not protocol_cuts(s)
            measured = measured_columns(s)
            for c in cols:
                if c not in measured:
                    continue
                m = measured[c]
                rows.append({"benchmark": bench, "row": label, "kind": "measured", "column": c,
                             "success_pct": _pct(m["success_rate_mean"]), "success_pct_std": _pct(m["success_rate_std"]),
                             "runs": m["runs"], "source": s["_path"]})
                for name, values in ref[bench]["rows"].items():
                    if comparable and c in values:
                        rows.append({"benchmark": bench, "row": f"{label} − {name}", "kind": "difference",
                                     "column": c, "success_pct": _pct(m["success_rate_mean"]) - float(values[c]),
                                     "success_pct_std": None, "runs": m["runs"], "source": "measured − paper"})
    return pd.DataFrame(rows, columns=["benchmark", "row", "kind", "column", "success_pct", "success_pct_std",
                                       "runs", "source"])


def eval_tables(summaries: list[dict]) -> dict[str, pd.DataFrame]:
    """All evaluation tables, named as their CSV files (`reports/tables/{name}.csv`)."""
    tasks, groups, overall = [], [], []
    for s in summaries:
        for t in s["per_task"]:
            tasks.append({**_ident(s), "group": t["group"], "task_index": t["task_index"], "task": t["task"],
                          **_rate_cols(t)})
        for g in s["per_group"]:
            groups.append({**_ident(s), "group": g["group"], **_rate_cols(g)})
        if s["overall"]:
            overall.append({**_ident(s), **_rate_cols(s["overall"]), "complete": s["complete"],
                            "problems": "; ".join(s["problems"])})
    return {
        "eval_throughput": throughput_table(summaries),
        "eval_tasks": pd.DataFrame(tasks),
        "eval_groups": pd.DataFrame(groups),
        "eval_overall": pd.DataFrame(overall),
        "eval_paper_comparison": paper_comparison(summaries),
    }


def throughput_table(summaries: list[dict]) -> pd.DataFrame:
    """One row per evaluation with timings: measured figures, where and how they were measured."""
    rows = []
    for s in summaries:
        fig = s.get("throughput")
        if not fig:
            continue
        runs = s.get("runs") or []
        rows.append({**_ident(s), **fig, "camera_size": s["protocol"].get("camera_size"),
                     "cameras": ", ".join((runs[0].get("cameras") or []) if runs else []),
                     "workers": "; ".join(sorted({str(r.get("workers")) for r in runs})),
                     "mujoco_gl": "; ".join(sorted({str(r.get("mujoco_gl")) for r in runs})),
                     "host": "; ".join(sorted({f"{r.get('host')} ({r.get('cpu_count')} CPUs)" for r in runs})),
                     "load_average_1min": "; ".join(
                         f"run{r['run']}: {la['started'][0]:.1f} -> {la['finished'][0]:.1f}" for r in runs
                         if (la := r.get("load_average")) and la.get("finished")),
                     "finished_at": max((r.get("finished_at") or "" for r in runs), default=""),
                     "command": runs[0].get("command") if runs else None})
    return pd.DataFrame(rows)


def paper_wide(table: pd.DataFrame, bench: str) -> dict[str, Any]:
    """One benchmark's comparison as a wide table (rows x paper columns) for rendering."""
    ref = benchmarks.paper_reference()
    cols = list(ref[bench]["columns"]) + (["Avg"] if bench == "libero" else [])
    sub = table[table["benchmark"] == bench]
    rows = []
    for (name, kind), g in sub.groupby(["row", "kind"], sort=False):
        cells = {c: None for c in cols}
        stds = {c: None for c in cols}
        for _, r in g.iterrows():
            cells[r["column"]] = r["success_pct"]
            stds[r["column"]] = None if pd.isna(r["success_pct_std"]) else r["success_pct_std"]
        rows.append({"row": name, "kind": kind, "cells": cells, "stds": stds})
    return {"benchmark": bench, "columns": cols, "rows": rows}

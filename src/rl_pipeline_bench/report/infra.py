"""The report's "Infrastructure" section: per-run telemetry and MFU, all-reduce, storage and checkpoint probes.

Inputs are files the pipeline made: each run's infrastructure summary
(`rl-bench/run-infra/v1`) and the probe records (all-reduce, storage, checkpoint,
GEMM). `infra_tables` returns every table of the section as DataFrames (also what a
paper report takes); `build_section` writes them to reports/tables/infra_*.csv, the
figures to reports/figures/infra_*.png and returns the template context.
Every target is a finding (met / not met), never a validity rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..probes import reference_data
from ..probes.allreduce import ALLREDUCE_SCHEMA
from ..probes.checkpoint import CHECKPOINT_SCHEMA
from ..probes.gemm import GEMM_SCHEMA
from ..probes.run_infra import RUN_INFRA_SCHEMA
from ..probes.storage import STORAGE_SCHEMA
from .collect import ReportInputError
from .files import data_uri
from ..records.jsonfile import read_json

PROBE_KINDS = {ALLREDUCE_SCHEMA: "allreduce", STORAGE_SCHEMA: "storage", CHECKPOINT_SCHEMA: "checkpoint",
               GEMM_SCHEMA: "gemm"}
RUN_KEY = ("workload", "backend", "trial")


@dataclass
class InfraInputs:
    runs: list[dict[str, Any]] = field(default_factory=list)
    probes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def _read(path: Path) -> dict[str, Any]:
    data = read_json(path, "infrastructure input", ReportInputError, strict=True)
    if not isinstance(data, dict):
        raise ReportInputError(f"infrastructure input {path} is not a JSON object")
    return data


def load_inputs(run_infra_paths=(), probe_paths=()) -> InfraInputs:
    """Read the per-run summaries and the probe records; a wrong file is named, never skipped."""
    inputs = InfraInputs(probes={k: [] for k in PROBE_KINDS.values()})
    for p in run_infra_paths:
        data = _read(p)
        if data.get("schema") != RUN_INFRA_SCHEMA:
            raise ReportInputError(f"{p} has schema {data.get('schema')!r}, expected {RUN_INFRA_SCHEMA!r}")
        inputs.runs.append(data | {"path": str(p)})
    for p in probe_paths:
        data = _read(p)
        kind = PROBE_KINDS.get(data.get("schema"))
        if kind is None:
            raise ReportInputError(f"{p} has schema {data.get('schema')!r}, expected one of {sorted(PROBE_KINDS)}")
        inputs.probes[kind].append(data | {"path": str(p), "label": data.get("label") or Path(p).stem})
    inputs.runs.sort(key=lambda r: tuple(str(r.get(k)) for k in RUN_KEY))
    for records in inputs.probes.values():
        records.sort(key=lambda r: (str(r["label"]), r["path"]))
    return inputs


# --------------------------------------------------------------------------- tables


def _run_cols(r: dict) -> dict[str, Any]:
    return {k: r.get(k) for k in RUN_KEY} | {"run_id": r.get("run_id")}


def _finding(run: dict, target: str, gpu_index: int) -> dict:
    for f in run["telemetry"].get("findings") or []:
        if f["target"] == target and f["gpu_index"] == gpu_index:
            return f
    return {}


def telemetry_table(inputs: InfraInputs) -> pd.DataFrame:
    rows = []
    for r in inputs.runs:
        t = r["telemetry"]
        base = _run_cols(r) | {"telemetry_status": t.get("status"), "telemetry_reason": t.get("reason"),
                               "sampler_busy_pct": 100 * t["sampler_busy_fraction"]
                               if t.get("sampler_busy_fraction") is not None else None}
        gpus = sorted({p["gpu_index"] for p in t.get("phases") or []})
        if not gpus:
            rows.append(base | {"gpu_index": None})
            continue
        for g in gpus:
            util, mem = _finding(r, "gpu_util_update", g), _finding(r, "memory_used", g)
            rows.append(base | {"gpu_index": g, "update_gpu_util_mean": util.get("value"),
                                "update_gpu_util_met": util.get("met"), "memory_used_peak_pct": mem.get("value"),
                                "memory_used_met": mem.get("met")})
    cols = [*RUN_KEY, "run_id", "telemetry_status", "telemetry_reason", "sampler_busy_pct", "gpu_index",
            "update_gpu_util_mean", "update_gpu_util_met", "memory_used_peak_pct", "memory_used_met"]
    return pd.DataFrame(rows, columns=cols)


def utilisation_table(inputs: InfraInputs) -> pd.DataFrame:
    """Per run, GPU and phase: the sampler's statistics (empty for runs without telemetry)."""
    rows = [_run_cols(r) | p for r in inputs.runs for p in r["telemetry"].get("phases") or []]
    from ..probes.phases import STAT_COLUMNS

    return pd.DataFrame(rows, columns=[*RUN_KEY, "run_id", *STAT_COLUMNS])


def efficiency_table(inputs: InfraInputs) -> pd.DataFrame:
    rows = []
    for r in inputs.runs:
        e = r["trainer_efficiency"]
        peak = e.get("peak") or {}
        rows.append(_run_cols(r) | {
            "status": e.get("status"), "reason": e.get("reason"), "first_update": e.get("first_update"),
            "last_update": e.get("last_update"), "trainer_union_s": e.get("union_s"), "tokens": e.get("tokens"),
            "flops": e.get("flops"), "flops_per_token": e.get("flops_per_token"),
            "achieved_tflops": e.get("achieved_tflops"), "trainer_dtype": e.get("trainer_dtype"),
            "device_name": e.get("device_name"), "trainer_gpus": e.get("trainer_gpus"),
            "peak_bf16_dense_tflops": peak.get("bf16_dense_tflops"),
            "peak_measured_bf16_tflops": peak.get("measured_bf16_tflops"),
            "mfu_datasheet": e.get("mfu_datasheet"), "mfu_measured": e.get("mfu_measured"),
            "notes": " | ".join(e.get("notes") or []),
        })
    cols = [*RUN_KEY, "run_id", "status", "reason", "first_update", "last_update", "trainer_union_s", "tokens",
            "flops", "flops_per_token", "achieved_tflops", "trainer_dtype", "device_name", "trainer_gpus",
            "peak_bf16_dense_tflops", "peak_measured_bf16_tflops", "mfu_datasheet", "mfu_measured", "notes"]
    return pd.DataFrame(rows, columns=cols)


def allreduce_table(inputs: InfraInputs) -> pd.DataFrame:
    rows = [{"label": p["label"], "backend": p["backend"], "world_size": p["world_size"], **row}
            for p in inputs.probes["allreduce"] for row in p["rows"]]
    return pd.DataFrame(rows, columns=["label", "backend", "world_size", "bytes", "elements", "dtype", "time_us",
                                       "algbw_gbps", "busbw_gbps"])


def _expectation_verdict(probe: dict, exp: dict) -> tuple[str, bool | None, float | None]:
    busbw = probe["largest"]["busbw_gbps"]
    names = " ".join(probe.get("device_names") or [])
    if probe["backend"] != "nccl":
        return "not applicable: a CPU (gloo) probe", None, None
    if probe["world_size"] < 2:
        return "not applicable: world size 1 (bus bandwidth needs at least 2 GPUs)", None, None
    if not re.search(exp["gpu_match"], names):
        return f"not applicable: probe GPUs are {_counted(probe.get('device_names')) or 'unknown'}", None, None
    if exp["scope"] == "inter-node":
        return "not measured: this probe's ranks all run on one host", None, None
    if exp.get("link_peak_gbps"):
        return f"{100 * busbw / exp['link_peak_gbps']:.1f} % of the link peak", None, busbw
    met = busbw >= exp["expected_min_gbps"]  # above the range's top is better than expected, still met
    return ("met" if met else "not met"), met, busbw


def _counted(names) -> str:
    """'8x NVIDIA H200' for eight equal names (a verdict names the kind of GPU, not each one)."""
    from collections import Counter

    return ", ".join(f"{n}x {name}" if n > 1 else name for name, n in Counter(names or []).items())


def _expected_text(exp: dict) -> str:
    if exp.get("link_peak_gbps"):
        return f"link peak {exp['link_peak_gbps']:g} GB/s"
    lo, hi = exp.get("expected_min_gbps"), exp.get("expected_max_gbps")
    return f"{lo:g}–{hi:g} GB/s" if hi is not None else f"≥ {lo:g} GB/s"


def allreduce_expectations_table(inputs: InfraInputs) -> pd.DataFrame:
    rows = []
    for p in inputs.probes["allreduce"]:
        for exp in reference_data.allreduce_expectations():
            verdict, met, value = _expectation_verdict(p, exp)
            rows.append({"label": p["label"], "world_size": p["world_size"], "backend": p["backend"],
                         "expectation": exp["id"], "scope": exp["scope"], "setup": exp["setup"],
                         "expected": _expected_text(exp), "message_bytes": p["largest"]["bytes"],
                         "measured_busbw_gbps": value, "verdict": verdict, "met": met, "source": exp["source"]})
    return pd.DataFrame(rows, columns=["label", "world_size", "backend", "expectation", "scope", "setup", "expected",
                                       "message_bytes", "measured_busbw_gbps", "verdict", "met", "source"])


def storage_table(inputs: InfraInputs) -> pd.DataFrame:
    rows = []
    for p in inputs.probes["storage"]:
        for direction in ("write", "read"):
            r = p["results"][direction]
            key = f"storage_{direction}"
            rows.append({"label": p["label"], "directory": p["directory"], "filesystem": p.get("filesystem"),
                         "engine": p["engine"], "direct": p["direct"], "size_bytes": p["size_bytes"],
                         "block_bytes": p["block_bytes"], "direction": direction, "mb_per_s": r.get("mb_per_s"),
                         "target": reference_data.target_text(key), "met": reference_data.judge(key, r.get("mb_per_s"))})
    return pd.DataFrame(rows, columns=["label", "directory", "filesystem", "engine", "direct", "size_bytes",
                                       "block_bytes", "direction", "mb_per_s", "target", "met"])


def checkpoint_table(inputs: InfraInputs) -> pd.DataFrame:
    rows = []
    for p in inputs.probes["checkpoint"]:
        for item in ("model", "adapter"):
            rec = p[item]
            for op in ("save", "load"):
                key = f"checkpoint_{op}"
                seconds = rec[f"{op}_s"]
                rows.append({"label": p["label"], "device": p["device"], "item": item, "operation": op,
                             "bytes": rec["bytes"], "seconds": seconds,
                             "mb_per_s": rec["bytes"] / seconds / 1e6 if seconds else None,
                             "target": reference_data.target_text(key), "met": reference_data.judge(key, seconds)})
    return pd.DataFrame(rows, columns=["label", "device", "item", "operation", "bytes", "seconds", "mb_per_s",
                                       "target", "met"])


def gemm_table(inputs: InfraInputs) -> pd.DataFrame:
    cols = ["label", "device_name", "n", "dtype", "iters", "seconds", "tflops"]
    return pd.DataFrame([{k: p.get(k) for k in cols} for p in inputs.probes["gemm"]], columns=cols)


def targets_table() -> pd.DataFrame:
    rows = [{"target": k, **{c: v.get(c) for c in ("label", "comparison", "threshold", "unit", "statistic", "source")}}
            for k, v in sorted(reference_data.targets().items())]
    return pd.DataFrame(rows)


def infra_tables(inputs: InfraInputs) -> dict[str, pd.DataFrame]:
    """Every table of the Infrastructure section, by its CSV name (reports/tables/NAME.csv)."""
    return {
        "infra_telemetry": telemetry_table(inputs),
        "infra_utilisation": utilisation_table(inputs),
        "infra_trainer_efficiency": efficiency_table(inputs),
        "infra_allreduce": allreduce_table(inputs),
        "infra_allreduce_expectations": allreduce_expectations_table(inputs),
        "infra_storage": storage_table(inputs),
        "infra_checkpoint": checkpoint_table(inputs),
        "infra_gemm": gemm_table(inputs),
        "infra_targets": targets_table(),
    }


# --------------------------------------------------------------------------- section


def build_section(run_infra_paths, probe_paths, tables_dir: Path, figures_dir: Path) -> dict[str, Any]:
    """Tables and figures of the section written; returns the template context `infra`."""
    from . import infra_figures
    from .tables import template_records, write_tables

    inputs = load_inputs(run_infra_paths, probe_paths)
    tabs = infra_tables(inputs)
    write_tables(tabs, Path(tables_dir))
    pngs = infra_figures.write_figures(tabs, Path(figures_dir))
    allreduce = []
    for p in inputs.probes["allreduce"]:
        allreduce.append({k: p.get(k) for k in ("label", "backend", "world_size", "device", "nccl_version",
                                                  "torch_version", "device_names", "env", "busbw_note",
                                                  "warmup_iters", "iters", "min_bytes", "max_bytes")}
                         | {"largest": p["largest"]})
    efficiency = template_records(tabs["infra_trainer_efficiency"])
    notes = {e["notes"] for e in efficiency if e.get("status") == "estimated"}
    shared_note = notes.pop() if len(notes) == 1 else None  # the same caveats for every run: said once
    return {
        "telemetry": template_records(tabs["infra_telemetry"]),
        "efficiency": efficiency,
        "efficiency_note": shared_note or None,
        "efficiency_row_notes": len(notes) > 0,
        "allreduce": allreduce,
        "expectations": template_records(tabs["infra_allreduce_expectations"]),
        "storage": template_records(tabs["infra_storage"]),
        "storage_probes": [{k: p.get(k) for k in ("label", "direct", "direct_note", "engine", "directory")}
                           for p in inputs.probes["storage"]],
        "checkpoint": template_records(tabs["infra_checkpoint"]),
        "gemm": template_records(tabs["infra_gemm"]),
        "targets": template_records(tabs["infra_targets"]),
        "figures": {name: data_uri(png) for name, png in pngs.items()},
        "n_runs": len(inputs.runs),
        "tables": sorted(tabs),
    }

"""What becomes an MLflow run: one record per benchmark run, probe or evaluation.

Each record has a stable key (the evidence run id, or the evaluation's suite, spec
hash and policy) that the exporter uses to log it exactly once. Records are built
from summaries only, so the export is a pure function of retained evidence.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from ..records.jsonfile import JsonFileError, read_json


@dataclass
class Record:
    key: str                       # unique and stable: logged once under this key
    kind: str                      # "benchmark" | "evaluation" | "probe"
    name: str                      # MLflow run name
    params: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    metric_steps: dict[str, dict[int, float]] = field(default_factory=dict)  # per-step series (runs of an eval)
    artifacts: list[Path] = field(default_factory=list)

    def digest(self) -> str:
        """sha256 of everything an export logs for this record (values and artifact bytes):
        a re-summarised run with another verdict or other figures has another digest."""
        h = hashlib.sha256()
        h.update(json.dumps({"key": self.key, "kind": self.kind, "name": self.name, "params": self.params,
                             "metrics": self.metrics,
                             "metric_steps": {k: {str(s): v for s, v in sorted(series.items())}
                                              for k, series in self.metric_steps.items()}},
                            sort_keys=True, separators=(",", ":")).encode("utf-8"))
        for path in self.artifacts:
            h.update(b"\0" + str(path.parent.name + "/" + path.name).encode("utf-8") + b"\0")
            h.update(Path(path).read_bytes())
        return h.hexdigest()


def _p(v: Any) -> str:
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True, separators=(",", ":"))
    return "None" if v is None else str(v)


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or x is None:
        return None
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def _read(path: Path) -> dict:
    from ..records.jsonfile import read_json

    return read_json(path, "summary")


def _get(d: Any, path: tuple[str, ...]) -> Any:
    for k in path:
        d = d.get(k) if isinstance(d, dict) else None
    return d


def benchmark_record(summary_path: Path) -> Record:
    s = _read(summary_path)
    prov = s.get("provenance") or {}
    evidence = Path(s.get("evidence_dir") or "")
    spec_hash = s.get("spec_hash") or _get(s, ("spec", "hash"))
    params = {
        "suite": _p(s.get("suite")), "backend": _p(s.get("backend")), "workload": _p(s.get("workload")),
        "trial": _p(s.get("trial")), "contract": _p(s.get("contract")), "spec_hash": _p(spec_hash),
        "recipe_sha256": _p(prov.get("recipe_sha256")), "source_sha256": _p(prov.get("source_sha256")),
        "model": _p(prov.get("model")), "valid": _p(s.get("valid")), "val_only": "False",
    }
    from ..report.tables import RATE_FIELDS  # the report's per-run rates: one list of them

    metrics = {name: v for name, path in RATE_FIELDS if (v := _num(_get(s, path))) is not None}
    artifacts = [Path(summary_path)] + [p for p in (evidence / "manifest.json",) if p.is_file()]
    return Record(key=f"benchmark:{s['run_id']}", kind="benchmark",
                  name=f"{s.get('suite')}/{s.get('backend')}/{s.get('workload')}/trial{s.get('trial')}",
                  params=params, metrics=metrics, artifacts=artifacts)


def evaluation_record(summary_path: Path) -> Record:
    s = _read(summary_path)
    runs = s.get("runs") or []
    policy = (runs[0].get("policy") if runs else None) or {}
    o = s.get("overall") or {}
    params = {
        "suite": s["eval_suite"], "backend": s["benchmark"], "benchmark": s["benchmark"], "policy": s["policy_id"],
        "policy_path": _p(policy.get("path")), "policy_sha256": _p(policy.get("sha256")),
        "spec_hash": s["spec_hash"], "protocol": _p(s["protocol"].get("protocol")),
        "scenarios_per_task": _p(s["protocol"].get("scenarios_per_task")), "runs": _p(s["protocol"].get("runs")),
        "seed": _p(s["protocol"].get("seed")), "greedy": _p(s["protocol"].get("greedy")),
        "complete": _p(s.get("complete")), "val_only": "True",
    }
    metrics: dict[str, float] = {}
    if o.get("success_rate_mean") is not None:
        metrics["success_rate"] = float(o["success_rate_mean"])
    if o.get("success_rate_std") is not None:
        metrics["success_rate_std"] = float(o["success_rate_std"])
    for key in ("episodes", "crashed"):
        if o.get(key) is not None:
            metrics[key] = float(o[key])
    for g in s.get("per_group") or []:
        if g.get("success_rate_mean") is not None:
            metrics[f"success_rate/{g['group']}"] = float(g["success_rate_mean"])
    for c in s.get("paper_columns") or []:
        if c.get("success_rate_mean") is not None:
            metrics[f"success_rate/paper/{c['column']}"] = float(c["success_rate_mean"])
    for t in s.get("per_task") or []:
        if t.get("success_rate_mean") is not None:
            metrics[f"success_rate/task/{t['suite_task']}/{t['task_index']}"] = float(t["success_rate_mean"])
    steps = {"success_rate_per_run": {int(r): float(v) for r, v in (o.get("per_run") or {}).items()}}
    artifacts = [Path(summary_path)]
    for r in runs:
        m = Path(r.get("evidence_dir") or "") / "manifest.json"
        if m.is_file():
            artifacts.append(m)
    return Record(key=f"evaluation:{s['eval_suite']}-{s['spec_hash']}/{s['policy_id']}", kind="evaluation",
                  name=f"eval/{s['eval_suite']}/{s['policy_id']}", params=params, metrics=metrics,
                  metric_steps=steps, artifacts=artifacts)


#: Record fields that are settings or environment, not figures.
PROBE_SKIP = frozenset({"env", "forced_env", "rows", "schema", "label", "device_names", "spec"})


def probe_record(summary_path: Path) -> Record:
    """A probe record (`bench probe ...`, schema rl-bench/probe-*/v1 or run-infra): numeric figures -> metrics.

    Probe records carry no run id; the key is the schema, label and a hash of the file, which
    the probe writes once and never rewrites.
    """
    from ..records.jsonfile import read_json

    s = read_json(summary_path, "probe record")
    raw = Path(summary_path).read_bytes()
    schema = str(s.get("schema") or "unknown")
    kind = schema.split("/")[1] if schema.count("/") >= 2 else schema
    metrics: dict[str, float] = {}

    def walk(prefix: str, v: Any) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                if k not in PROBE_SKIP:
                    walk(f"{prefix}/{k}" if prefix else str(k), x)
        elif not isinstance(v, list) and (n := _num(v)) is not None:
            metrics[prefix] = n

    walk("", s)
    label = s.get("label") or s.get("run_id") or Path(summary_path).stem
    params = {"suite": _p(s.get("suite")), "backend": _p(s.get("backend")), "probe": kind, "label": _p(label),
              "device": _p(s.get("device")), "schema": schema, "spec_hash": _p(_get(s, ("spec", "hash"))),
              "val_only": "False"}
    digest = hashlib.sha256(raw).hexdigest()[:16]
    return Record(key=f"probe:{schema}:{label}:{digest}", kind="probe", name=f"{kind}/{label}",
                  params=params, metrics=metrics, artifacts=[Path(summary_path)])


def _is_probe(path: Path) -> bool:
    try:
        schema = str(read_json(path, "record").get("schema") or "")
    except (JsonFileError, AttributeError):
        return False
    return schema.startswith(PROBE_SCHEMAS)


PROBE_SCHEMAS = ("rl-bench/probe-", "rl-bench/run-infra/")


def discover(results: Path | str) -> dict[str, list[Path]]:
    """Every summary under results/: benchmark runs, evaluations, probes (sorted)."""
    root = Path(results)
    return {
        "benchmark": sorted(p for p in (root / "runs").rglob("summary.json")),
        "evaluation": sorted(p for p in (root / "eval").rglob("summary.json")),
        "probe": sorted(p for p in (root / "probes").rglob("*.json") if _is_probe(p)) if (root / "probes").is_dir()
        else [],
    }


BUILDERS = {"benchmark": benchmark_record, "evaluation": evaluation_record, "probe": probe_record}

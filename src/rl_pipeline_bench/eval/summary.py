"""The summarize job: eval.json pointers -> episodes -> summary.json (a pure function of evidence)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pandas as pd

from ..records.configfile import ConfigError
from ..records.atomicfile import atomic_write_json
from . import spec as eval_spec
from .aggregate import summarize
from .throughput import measured
from .episodes import read_episodes, read_manifest
from .validate import run_reasons
from ..records.jsonfile import read_json

log = logging.getLogger(__name__)


def _json_safe(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, float) and obj != obj:
        return None
    return obj


def summarize_runs(spec_path: Path | str, policy_id: str, pointers: list[Path], output: Path | str) -> dict:
    spec = eval_spec.load(spec_path)
    frames, runs, run_problems = [], [], []
    for p in pointers:
        record = read_json(p, "eval run record", ConfigError)
        directory = Path(record["evidence_dir"])
        manifest = read_manifest(directory)
        if manifest.get("spec_hash") != spec["hash"]:
            raise ConfigError(f"{directory}: evidence of spec {manifest.get('spec_hash')}, not {spec['hash']}")
        if manifest["policy"]["policy_id"] != policy_id:
            raise ConfigError(f"{directory}: evidence of policy {manifest['policy']['policy_id']}, not {policy_id}")
        frames.append(read_episodes(directory))
        run_problems += run_reasons(manifest.get("run"), directory.name, manifest.get("status"))
        runs.append({"run": manifest["run"], "eval_run_id": manifest["eval_run_id"], "status": manifest["status"],
                     "evidence_dir": str(directory), "started_at": manifest["started_at"],
                     "finished_at": manifest["finished_at"], "policy": manifest["policy"],
                     "packages": manifest["packages"], "host": (manifest.get("host") or {}).get("hostname"),
                     "cpu_count": (manifest.get("host") or {}).get("cpu_count"), "gpus": manifest.get("gpus"),
                     "workers": manifest.get("workers"), "command": manifest.get("command"),
                     "load_average": manifest.get("load_average"),
                     "mujoco_gl": (manifest.get("environment") or {}).get("mujoco_gl"),
                     "cameras": (manifest.get("environment") or {}).get("cameras")})
        log.info("read %s: run %s, %d episodes", directory, manifest["run"], len(frames[-1]))
    episodes = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    summary = summarize(episodes, spec, policy_id, run_problems=run_problems)
    summary["runs"] = sorted(runs, key=lambda r: r["run"])
    summary["throughput"] = measured(episodes)  # pooled over the runs; each run's workers, host and load: `runs`
    summary["description"] = spec.get("description")
    summary["max_steps_source"] = spec["max_steps_source"]
    summary = _json_safe(summary)
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(output, summary)
    return summary

"""The resolved evaluation spec: one eval suite's protocol settings, hashed.

Evidence is keyed by the hash of the settings that change the work (benchmark,
tasks, scenarios, runs, seed, max steps, camera size, protocol version), so an
edited setting makes new targets and identical settings never re-evaluate. Worker
and GPU counts only change how fast the work goes and stay out of the hash. An
optional setting (`task_indices`) joins the hash only when it is set, so adding it
left the hashes of the suites that do not use it, and their evidence, as they were.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..records.configfile import ConfigError
from ..records.settings_hash import settings_hash as hash_of
from . import benchmarks
from ..records.formats import schema_of
from ..records.jsonfile import read_record

PROTOCOL = "rlinf-eval/v1"
HASHED_KEYS = ("protocol", "benchmark", "tasks", "scenarios_per_task", "runs", "seed", "max_steps",
               "camera_size", "greedy")
OPTIONAL_HASHED_KEYS = ("task_indices",)
DEFAULT_CAMERA_SIZE = {"robosuite": 64, "libero": 256, "robotwin": 256}


def settings_hash(spec: dict[str, Any]) -> str:
    """The hash of the protocol settings that change the work (HASHED_KEYS, and the optional ones that are set)."""
    settings = {k: spec[k] for k in HASHED_KEYS}
    settings.update({k: spec[k] for k in OPTIONAL_HASHED_KEYS if spec.get(k) is not None})
    return hash_of(settings)


def resolve(config: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    """Config + eval suite name -> the spec every evaluation job reads; ConfigError on bad input."""
    name = name or config.get("eval_suite")
    suites = config.get("eval_suites") or {}
    if name not in suites:
        raise ConfigError(f"unknown eval suite '{name}' (known eval suites: {', '.join(sorted(suites)) or 'none'})")
    s = suites[name]
    bench = s["benchmark"]
    limits = {}
    for task in s["tasks"]:
        steps, source = benchmarks.task_limits(bench, task)
        if "max_steps" in s:
            steps, source = int(s["max_steps"]), f"eval suite '{name}' override (benchmark's own: {steps}, {source})"
        limits[task] = {"max_steps": steps, "source": source}
    indices = s.get("task_indices")
    if indices is not None and bench != "libero":
        raise ConfigError(f"config key 'eval_suites/{name}/task_indices': only LIBERO suites hold several tasks "
                          f"(this suite's benchmark is {bench})")
    if bench == "libero":
        per_task = benchmarks.facts()["libero"]["init_states_per_task"]
        if s["scenarios_per_task"] > per_task:
            raise ConfigError(f"config key 'eval_suites/{name}/scenarios_per_task': {s['scenarios_per_task']} "
                              f"exceeds the {per_task} init states LIBERO ships per task")
    spec = {
        "schema": schema_of("eval-spec"),
        "protocol": PROTOCOL,
        "eval_suite": name,
        "description": s.get("description"),
        "benchmark": bench,
        "tasks": list(s["tasks"]),
        "task_indices": None if indices is None else sorted(set(int(i) for i in indices)),
        "scenarios_per_task": int(s["scenarios_per_task"]),
        "runs": int(s["runs"]),
        "seed": int(s.get("seed", config["seed"])),
        "max_steps": {t: v["max_steps"] for t, v in limits.items()},
        "max_steps_source": {t: v["source"] for t, v in limits.items()},
        "camera_size": int(s.get("camera_size", DEFAULT_CAMERA_SIZE[bench])),
        "greedy": True,
        "policies": list(s["policies"]),
        "workers": int(s["workers"]),
        "gpus": int(s["gpus"]),
        "gpu_sets": list(s.get("gpu_sets") or ([",".join(map(str, range(s["gpus"])))] if s["gpus"] else [])),
    }
    spec["hash"] = settings_hash(spec)
    return spec


def load(path: Path | str) -> dict[str, Any]:
    """Read a spec file and refuse one whose settings no longer match its hash."""
    path = Path(path)
    spec = read_record(path, "eval-spec", "eval spec", ConfigError)
    actual = settings_hash(spec)
    if spec.get("hash") != actual:
        raise ConfigError(f"{path}: eval spec hash {spec.get('hash')!r} does not match its settings ({actual})")
    if path.parent.name != f"{spec['eval_suite']}-{actual}":
        raise ConfigError(f"{path}: lives in {path.parent.name!r}, its settings hash to {spec['eval_suite']}-{actual}")
    return spec

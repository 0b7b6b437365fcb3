"""A spec file's settings checked against the same schema as the config they came from.

A spec's hash proves only that its settings were not edited after hashing: a forged
file with a recomputed hash (trials -1, workload `../../x`, an unknown key) passes
that. So every spec file that is read (`bench spec check`, `plan --spec`, `write-plan`,
`run`, ...) is also validated here, with the config schema's own definitions
(`schemas/config.schema.yaml` completed from the backend registry): a suite's keys and
bounds, the model entry, the workload distributions, the backends' sections and the
probe sections, plus the keys resolution adds (`extra_offered_updates`, the probes'
derived keys, the local model's build-config digest) and the cross-field rules a
schema cannot say.
"""

from __future__ import annotations

import copy
import functools
import hashlib
from pathlib import Path
from typing import Any

from .config import ConfigError, config_schema, non_finite_keys, schema_validator
from .rules import contract_problem, device_gpus_problem, model_source_problem


@functools.lru_cache(maxsize=1)
def spec_settings_schema() -> dict[str, Any]:
    """The JSON schema of a spec's `settings`, built from the completed config schema."""
    cs = config_schema()
    suite = copy.deepcopy(cs["properties"]["suites"]["additionalProperties"])
    props = suite["properties"]
    for unhashed in ("description", "gpu_sets", "gpu_kind", "probes"):  # not in settings, or resolved below
        props.pop(unhashed, None)
    # trials are not hashed (about.trials); a spec written before that change keeps them in settings
    suite["required"] = [k for k in suite["required"] if k != "trials"]
    workload_names = props["workloads"]["items"]["enum"]
    model = copy.deepcopy(cs["properties"]["models"]["additionalProperties"])
    model["properties"].update(name={"$ref": "#/$defs/name"},
                               build_config_sha256={"type": "string", "pattern": "^[0-9a-f]{64}$"})
    model["required"] = [*model["required"], "name"]
    distribution = copy.deepcopy(cs["properties"]["workloads"]["additionalProperties"])
    distribution["properties"].pop("description", None)
    contract = copy.deepcopy(cs["$defs"]["contract"])
    # a spec records the contract resolved (ContractSettings defaults filled in), every key present
    contract["required"] = sorted(contract["properties"])
    probes = copy.deepcopy(cs["$defs"]["probes"])
    probes["required"] = ["telemetry", "allreduce", "storage", "checkpoint"]
    probes["properties"]["allreduce"]["properties"]["backend"] = {"enum": ["nccl", "gloo"]}
    probes["properties"]["allreduce"]["properties"]["world_size"]["type"] = "integer"  # resolved, never null
    probes["properties"]["checkpoint"]["properties"].update(
        device={"enum": ["cpu", "cuda"]})
    backend_sections = {b: copy.deepcopy(cs["properties"][b]) for b in props["backends"]["items"]["enum"]
                        if b in cs["properties"]}
    props.update(
        suite={"$ref": "#/$defs/name"},
        seed=copy.deepcopy(cs["properties"]["seed"]),
        model=model,
        contract=contract,
        workload_scale={**copy.deepcopy(props["workload_scale"]), "required": []},
        workload_distributions={"type": "object", "propertyNames": {"enum": workload_names},
                                "additionalProperties": distribution},
        backend_settings={"type": "object", "additionalProperties": False, "properties": backend_sections},
        probes=probes,
    )
    suite["required"] = sorted({*suite["required"], "suite", "seed", "workload_scale", "workload_distributions",
                                "backend_settings", "probes"})
    return {"$schema": cs["$schema"], "$defs": cs["$defs"], **suite}


def settings_problems(settings: dict[str, Any]) -> list[str]:
    """What is wrong with a spec's settings (empty: they could have come from a valid config)."""
    problems = [p.replace("config key", "spec key") for p in non_finite_keys(settings, ("settings",))]
    if problems:
        return problems
    errors = sorted(schema_validator(spec_settings_schema()).iter_errors(settings), key=lambda e: list(e.absolute_path))
    if errors:
        return [f"spec key 'settings/{'/'.join(map(str, e.absolute_path))}': {e.message}" for e in errors]
    s = settings
    if (problem := contract_problem(s["contract"])) is not None:
        problems.append(f"spec key 'settings/contract': {problem}")
    if (problem := device_gpus_problem(s["device"], s["gpus"])) is not None:
        problems.append(f"spec key 'settings/gpus': {problem}")
    for key in ("workload_scale", "workload_distributions"):
        if sorted(s[key]) != sorted(s["workloads"]):
            problems.append(f"spec key 'settings/{key}': covers {sorted(s[key])}, the suite's workloads are "
                            f"{sorted(s['workloads'])}")
    if not set(s["backend_settings"]) <= set(s["backends"]):
        problems.append(f"spec key 'settings/backend_settings': sections {sorted(s['backend_settings'])} for "
                        f"backends {s['backends']}")
    problems.extend(_model_problems(s["model"]))
    return problems


def _model_problems(model: dict[str, Any]) -> list[str]:
    """A hub model pins a revision; a local model's build-config digest is the file's."""
    if (problem := model_source_problem(model)) is not None:
        return [f"spec key 'settings/model/{problem[0]}': {problem[1]}"]
    if model["source"] == "hub":
        return []
    if "build_config_sha256" not in model:
        return ["spec key 'settings/model': a local model needs build_config and build_config_sha256"]
    from ..paths import ROOT

    path = Path(model["build_config"])
    path = path if path.is_absolute() else ROOT / path
    try:
        actual = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        return [f"spec key 'settings/model/build_config': cannot read {path} ({exc.strerror or exc})"]
    if actual != model["build_config_sha256"]:
        return [f"spec key 'settings/model/build_config_sha256': {model['build_config_sha256']}, but {path} "
                f"hashes to {actual} (the spec was forged, or the build config changed since it was written)"]
    return []


def validate_spec_settings(doc: Any, where: str) -> None:
    """Raise ConfigError naming every problem of the spec's settings (and non-finite numbers under `about`).

    A document without a settings object is left to `spec.check_spec`, which names that.
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("settings"), dict):
        return
    problems = settings_problems(doc["settings"])
    about = doc.get("about") if isinstance(doc.get("about"), dict) else {}
    problems += [p.replace("config key", "spec key") for p in non_finite_keys(about, ("about",))]
    if len(problems) == 1:
        raise ConfigError(f"{where}: {problems[0]}")
    if problems:
        raise ConfigError(f"{where}: invalid settings:\n  " + "\n  ".join(problems))

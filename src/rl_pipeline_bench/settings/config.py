"""Config loading and validation: one place that turns config.yaml into checked settings.

The JSON schema is `schemas/config.schema.yaml` completed from the backend registry
(the allowed backend names, each backend's own suite keys and config section), so
it cannot drift from the registered backends. The workflow (rules/common.smk) and
the CLI both validate through `validate_config`, which adds the cross-field checks
a schema cannot express, so they refuse bad input identically.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from ..records.configfile import NOT_A_MAPPING, ConfigError, read_config_file
from .rules import contract_problem, device_gpus_problem, model_source_problem
from ..paths import CONFIG_PATH, SCHEMA_PATH
from .overrides import merge_config, type_strings

_SAFE_NAME_HELP = "not a safe name (a name that becomes a path: letters, digits, '.', '_', '-', starting with a letter or digit, at most 64 characters)"


def invalid_configuration(problems: list[str]) -> ConfigError:
    """One problem on one line; several, one per line under a heading."""
    if len(problems) == 1:
        return ConfigError(f"invalid configuration: {problems[0]}")
    return ConfigError("invalid configuration:\n  " + "\n  ".join(problems))


def non_finite_keys(obj: Any, path: tuple = ()) -> list[str]:
    """Keys whose value is NaN or infinite (JSON schema bounds let NaN through: every comparison is false)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return [f"config key '{'/'.join(map(str, path)) or '(top level)'}': {obj} is not a finite number"]
    if isinstance(obj, dict):
        return [p for k, v in obj.items() for p in non_finite_keys(v, (*path, k))]
    if isinstance(obj, (list, tuple)):
        return [p for i, v in enumerate(obj) for p in non_finite_keys(v, (*path, i))]
    return []


def _format_schema_error(err: jsonschema.ValidationError, name_pattern: str | None = None) -> str:
    where = "/".join(str(p) for p in err.absolute_path) or "(top level)"
    msg = f"config key '{where}': {err.message}"
    if err.validator == "pattern" and err.validator_value == name_pattern:
        return f"config key '{where}': {err.instance!r} is {_SAFE_NAME_HELP}"
    if err.validator == "enum":
        msg += f" (allowed: {', '.join(map(str, err.validator_value))})"
    elif err.validator == "additionalProperties" and isinstance(err.schema.get("properties"), dict):
        msg += f" (allowed keys: {', '.join(sorted(err.schema['properties']))})"
    return msg


def config_schema(schema_path: Path | str = SCHEMA_PATH) -> dict[str, Any]:
    """The config schema file completed from the backend registry (what `bench schema` prints).

    Adds the enum of registered backends, every backend's own suite keys
    (`Backend.suite_schema`) and its top-level section (`Backend.config_schema`).
    """
    from ..backends import registered

    backends = registered()
    schema = yaml.safe_load(Path(schema_path).read_text())
    suite = schema["properties"]["suites"]["additionalProperties"]
    suite["properties"]["backends"]["items"]["enum"] = [b.name for b in backends]  # keeps the safe-name $ref
    owners: dict[str, str] = {}
    for backend in backends:
        for key, sub in backend.suite_schema.items():
            if key in suite["properties"]:
                raise ConfigError(f"backend '{backend.name}' adds suite key '{key}', which "
                                  f"{owners.get(key, 'the base schema')} already defines")
            suite["properties"][key] = copy.deepcopy(dict(sub))
            owners[key] = f"backend '{backend.name}'"
        if backend.config_schema is not None:
            if backend.name in schema["properties"]:
                raise ConfigError(f"backend '{backend.name}' config section clashes with the config key '{backend.name}'")
            schema["properties"][backend.name] = copy.deepcopy(dict(backend.config_schema))
            schema["required"].append(backend.name)
    return schema


#: JSON Schema counts 1.0 as an integer; a count given as 1.0 would then reach range() and fail there.
_StrictValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _checker, value: isinstance(value, int) and not isinstance(value, bool)),
)


def schema_validator(schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    """A validator of `schema` whose integers are ints (never 1.0, never True)."""
    return _StrictValidator(schema)


def validate_config(config: dict[str, Any], schema_path: Path = SCHEMA_PATH) -> dict[str, Any]:
    """Validate against the JSON schema plus cross-field rules; raise ConfigError naming the key.

    Strings typed on a command line become the values they spell where the schema asks for a
    number, boolean or null (settings.overrides.type_strings), in place: the workflow's config too.
    """
    if not isinstance(config, dict):
        raise ConfigError(f"{NOT_A_MAPPING} (got a {type(config).__name__})")
    schema = config_schema(schema_path)
    validator = schema_validator(schema)
    type_strings(config, validator)  # `--config 'suites={smoke: {trials: 2}}'`: Snakemake passes '2'
    non_finite = non_finite_keys(config)
    if non_finite:
        raise invalid_configuration(non_finite)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        name_pattern = schema.get("$defs", {}).get("name", {}).get("pattern")
        raise invalid_configuration([_format_schema_error(e, name_pattern) for e in errors])
    problems: list[str] = []
    if config["suite"] not in config["suites"]:
        problems.append(
            f"config key 'suite': unknown suite '{config['suite']}' (known suites: {', '.join(sorted(config['suites']))})"
        )
    for name, suite in config["suites"].items():
        key = f"suites/{name}"
        if suite["model"] not in config["models"]:
            problems.append(
                f"config key '{key}/model': unknown model '{suite['model']}' (known models: {', '.join(sorted(config['models']))})"
            )
        for w in suite["workloads"]:
            if w not in config["workloads"]:
                problems.append(f"config key '{key}/workloads': workload '{w}' has no distribution under 'workloads'")
        if (problem := contract_problem(suite.get("contract"))) is not None:
            problems.append(f"config key '{key}/contract': {problem}")
        if (problem := device_gpus_problem(suite["device"], suite["gpus"])) is not None:
            problems.append(f"config key '{key}/gpus': {problem}")
        for spec in suite.get("gpu_sets", []):
            n = len([s for s in spec.split(",") if s.strip()])
            if n != suite["gpus"]:
                problems.append(f"config key '{key}/gpu_sets': set '{spec}' names {n} devices, the suite needs {suite['gpus']}")
    problems.extend(_probe_problems(config))
    for name, wl in config["workloads"].items():
        for dist in ("prompt_tokens", "completion_tokens", "tool_observation_tokens", "tool_schema_tokens"):
            knots = wl[dist]
            ps = [k[0] for k in knots]
            vs = [k[1] for k in knots]
            key = f"workloads/{name}/{dist}"
            if ps[0] != 0 or ps[-1] != 1:
                problems.append(f"config key '{key}': knots must start at p=0 and end at p=1 (got {ps[0]}..{ps[-1]})")
            if any(b <= a for a, b in zip(ps, ps[1:])):
                problems.append(f"config key '{key}': probabilities must strictly increase")
            if any(b < a for a, b in zip(vs, vs[1:])):
                problems.append(f"config key '{key}': token values must not decrease")
    for name, model in config["models"].items():
        if (problem := model_source_problem(model)) is not None:
            problems.append(f"config key 'models/{name}/{problem[0]}': {problem[1]}")
    if problems:
        raise invalid_configuration(problems)
    return config


def _probe_problems(config: dict[str, Any]) -> list[str]:
    """Probe settings a schema cannot check: message-size order, ranks a suite's GPUs can hold."""
    from ..probes.settings import merged_probe_settings

    problems = []
    for name, suite in config["suites"].items():
        ar = merged_probe_settings(config, suite)["allreduce"]
        where = f"suites/{name}/probes/allreduce" if "allreduce" in (suite.get("probes") or {}) else "probes/allreduce"
        if ar["min_bytes"] > ar["max_bytes"]:
            problems.append(f"config key '{where}': min_bytes {ar['min_bytes']} exceeds max_bytes {ar['max_bytes']}")
        if suite["device"] == "cuda" and ar["world_size"] is not None and ar["world_size"] > suite["gpus"]:
            problems.append(f"config key '{where}/world_size': {ar['world_size']} ranks need more GPUs than the "
                            f"suite leases ({suite['gpus']})")
    return problems


def check_options(values: dict[str, Any], section: str, flags: dict[str, str]) -> None:
    """Command-line values that stand for keys of a config section (`statistics`, `lease`, a probe's
    `probes/storage`), checked by that section's schema entries, so a flag and the config key refuse
    the same values. Keys the section does not define (derived ones) are left to argparse."""
    schema = config_schema()
    top, _, probe = section.partition("/")
    props = (schema["$defs"]["probes"]["properties"][probe] if top == "probes" else schema["properties"][top])["properties"]
    problems = []
    for key, value in values.items():
        if key not in props:
            continue
        if isinstance(value, float) and not math.isfinite(value):
            problems.append(f"{flags[key]} {value}: not a finite number")
            continue
        problems += [f"{flags[key]} {value!r}: {e.message}" for e in schema_validator(props[key]).iter_errors(value)]
    if problems:
        raise ConfigError("; ".join(problems))


def load_config(path: Path | str = CONFIG_PATH, overrides: dict[str, Any] | None = None,
                configfiles: Iterable[Path | str] = ()) -> dict[str, Any]:
    """Read config.yaml, merge configfiles over it, then the `--config` overrides, validate.

    The same order and merge as `snakemake --configfile F --config k=v` (nested mappings
    merge, anything else replaces: settings.overrides.merge_config), so a command given the
    same words resolves the spec the workflow resolves.
    """
    config = read_config_file(path)
    for configfile in configfiles:
        merge_config(config, read_config_file(configfile))
    merge_config(config, overrides or {})
    return validate_config(config)



"""The model a run is given (its identity record, results/models/MODEL.json) is the spec's model.

The spec hashes the model's settings: name, repository, the pinned revision of a hub
model, and for a locally built model the sha256 of its build config. `bench run` takes
the record by path (`--model-record`), so without this check a record of another
model, another revision or a snapshot built from another config would be used under the
spec's id. `check_model_record` refuses each, naming both sides.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import paths
from ..records.configfile import ConfigError
from ..records.jsonfile import JsonFileError, read_json


def check_model_record(record: Any, spec_model: dict[str, Any], where: str) -> None:
    """Raise ConfigError unless `record` names the spec's model (and, local, one built from its config)."""
    if not isinstance(record, dict):
        raise ConfigError(f"{where}: not a model identity record (a {type(record).__name__})")
    diffs = [f"{key} {record.get(rkey)!r}, the spec's is {spec_model.get(key)!r}"
             for rkey, key in (("model", "name"), ("repo_id", "repo_id"), ("source", "source"))
             if record.get(rkey) != spec_model.get(key)]
    if spec_model.get("source") == "hub" and record.get("revision") != spec_model.get("revision"):
        diffs.append(f"revision {record.get('revision')!r}, the spec pins {spec_model.get('revision')!r}")
    if not diffs and spec_model.get("source") == "local":
        diffs += _local_build_diffs(record, spec_model)
    if diffs:
        raise ConfigError(f"{where} is not the model of the run spec: " + "; ".join(diffs))


def _local_build_diffs(record: dict[str, Any], spec_model: dict[str, Any]) -> list[str]:
    """The snapshot records the build config it was made from; it must be the spec's build config."""
    from ..paths import ROOT
    from .reference import BUILD_RECORD, load_build_config

    config_path = Path(spec_model["build_config"])
    config_path = config_path if config_path.is_absolute() else ROOT / config_path
    try:
        built = read_json(Path(record["snapshot_path"]) / BUILD_RECORD, f"its snapshot's {BUILD_RECORD}")["build_config"]
    except (JsonFileError, KeyError, TypeError) as exc:
        return [f"its snapshot's {BUILD_RECORD} cannot be read ({exc})"]
    wanted = load_build_config(config_path)
    if built != wanted:
        return [f"its snapshot was built from another build config than {config_path} (sha256 "
                f"{spec_model.get('build_config_sha256')}); rebuild it: `snakemake --cores 1 "
                f"{paths.model_record(spec_model['name'])}`"]
    return []

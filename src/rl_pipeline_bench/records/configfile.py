"""Reading a config file and naming bad settings: the layer below the backend registry.

What every module that reads settings needs without the schema: `ConfigError`, the
file reader (Snakemake's JSON-then-YAML order), the schema's safe-name pattern, a suite's
settings and the refusal of an unknown name. Validation against the registry-completed schema is `rl_pipeline_bench.settings.config`,
which sits above the backends (it asks them for their schema pieces).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..paths import SCHEMA_PATH, NotARegularFile, require_regular_file


#: Snakemake's own wording (snakemake.common.configfile), so `bench` and `snakemake` name a bad file alike.
NOT_JSON_OR_YAML = ("Config file is not valid JSON or YAML. In case of YAML, make sure to not mix "
                    "whitespace and tab indentation.")
NOT_A_MAPPING = "Config file must be given as JSON or YAML with keys at top level."


class ConfigError(ValueError):
    """Bad configuration; the message names the key and what is allowed."""


def read_config_file(path: Path | str) -> dict[str, Any]:
    """A config file as a mapping: JSON first, then YAML, like Snakemake's own loader; ConfigError otherwise."""
    path = Path(path)
    try:
        require_regular_file(path, "config file")  # a FIFO would block the reader forever
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except NotARegularFile as exc:
        raise ConfigError(str(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc}") from None
    try:
        data = json.loads(text)
    except ValueError:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
            raise ConfigError(f"{path}{where}: {NOT_JSON_OR_YAML}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: {NOT_A_MAPPING} (it holds {'nothing' if data is None else 'a ' + type(data).__name__})")
    return data


@functools.lru_cache(maxsize=None)
def safe_name_regex(schema_path: Path | str = SCHEMA_PATH) -> str:
    """The safe-name pattern of the schema (`$defs/name`), unanchored, for Snakemake wildcard constraints.

    Read once per process: the workflow and every summary's identity check ask for it.
    """
    pattern = yaml.safe_load(Path(schema_path).read_text())["$defs"]["name"]["pattern"]
    return pattern.removeprefix("^").removesuffix("$")


@dataclass(frozen=True)
class Suite:
    name: str
    settings: dict[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.settings[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.settings.get(key, default)


def get_suite(config: dict[str, Any], name: str | None = None) -> Suite:
    name = name or config["suite"]
    if name not in config["suites"]:
        raise ConfigError(f"unknown suite '{name}' (known suites: {', '.join(sorted(config['suites']))})")
    return Suite(name, config["suites"][name])


def check_member(kind: str, value: str, known: list[str] | tuple[str, ...]) -> str:
    """Refuse an unknown backend/workload/... naming the known ones."""
    if value not in known:
        raise ConfigError(f"unknown {kind} '{value}' (known {kind}s: {', '.join(known)})")
    return value

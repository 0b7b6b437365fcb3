"""Settings typed on a command line, read the way Snakemake reads them, and typed by the schema.

`snakemake --config 'suites={smoke: {trials: 2}}'` merges that mapping into the config, but
Snakemake parses the value with YAML's BaseLoader, so every nested scalar arrives as a
string ('2'). The schema knows what each key holds: `type_strings` turns such a string into
the YAML value it spells wherever the schema refuses the string and accepts that value, so
a user types `trials: 2` on the command line as in a file. `bench` reads its own
`--config KEY=VALUE` items as Snakemake does (`parse_config_items`) and merges them, and its
`--configfile` files, with Snakemake's rule (`merge_config`), so a `bench` command and the
workflow given the same words resolve the same settings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import jsonschema
import yaml

from ..records.configfile import ConfigError

#: Snakemake's rule for a --config key (snakemake.cli.parse_config).
_KEY = re.compile(r"[a-zA-Z_][\w-]*\w$")


def merge_config(config: dict[str, Any], overwrite: Mapping[str, Any]) -> dict[str, Any]:
    """Merge `overwrite` into `config` in place as snakemake.utils.update_config does: nested mappings
    merge key by key, anything else replaces."""
    for key, value in overwrite.items():
        if isinstance(value, Mapping):
            sub = config.get(key)
            config[key] = merge_config(sub if isinstance(sub, dict) else {}, value)
        else:
            config[key] = value
    return config


def _top_level_value(text: str) -> Any:
    """One value as Snakemake's parse_config types it: int, float, True/False, else YAML's BaseLoader
    (nested scalars stay strings: type_strings types them), else the text."""
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            pass
    if text in ("True", "False"):
        return text == "True"
    try:
        return yaml.load(text, Loader=yaml.BaseLoader)
    except yaml.YAMLError:  # the value itself is not repeated: it may be a secret
        raise ConfigError("--config: a value is not valid YAML (quote the whole KEY=VALUE for the shell)") from None


def parse_config_items(items: Iterable[str]) -> dict[str, Any]:
    """`--config KEY=VALUE ...` as one mapping, merged item by item (a later item wins, mappings merge)."""
    out: dict[str, Any] = {}
    for item in items or ():
        key, eq, text = item.partition("=")
        if not eq:
            # Worded without the value: the error handler scrubs anything shaped like key=value.
            raise ConfigError(f"--config {item!r}: no '=' between the key and its value")
        if not _KEY.match(key):
            raise ConfigError(f"--config {key!r}: a key starts with a letter or '_' and holds letters, digits, "
                              "'_' or '-'")
        merge_config(out, {key: None if text == "" else _top_level_value(text)})
    return out


def _type_errors(errors: Iterable[jsonschema.ValidationError]):
    """Every `type` error, those inside anyOf/oneOf branches included."""
    for err in errors:
        if err.validator == "type":
            yield err
        yield from _type_errors(err.context or ())


def _set(config: Any, path, value: Any) -> None:
    *parents, last = list(path)
    for key in parents:
        config = config[key]
    config[last] = value


def type_strings(config: dict[str, Any], validator: jsonschema.protocols.Validator) -> dict[str, Any]:
    """Give a string the YAML value it spells where the schema wants that type, in place.

    Only strings the schema refuses are touched, and only when the value they spell is of a type
    the schema asks for there ('2' where an integer belongs; 'null' where null is allowed), so a
    value that is a string in the schema stays one and nothing valid changes.
    """
    for _ in range(16):  # a fixed point: a retyped value can expose errors below it
        changed = False
        for err in _type_errors(validator.iter_errors(config)):
            if not isinstance(err.instance, str) or not err.absolute_path:
                continue
            try:
                value = yaml.safe_load(err.instance)
            except yaml.YAMLError:
                continue
            wanted = err.validator_value if isinstance(err.validator_value, list) else [err.validator_value]
            if isinstance(value, str) or not any(validator.is_type(value, t) for t in wanted):
                continue
            _set(config, err.absolute_path, value)
            changed = True
        if not changed:
            break
    return config

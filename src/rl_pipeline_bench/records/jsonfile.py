"""Reading JSON inputs and reading and writing records so that every failure names the file and what it should be.

One error shape for every reader: "<what> <path> does not exist / is a directory / is not
readable JSON / holds a list / is version N / is not a <kind> record", raised as the
caller's error class (its own ConfigError, SnapshotError, ...), with the caller's hint
(the command that makes the file) appended. Records are checked against the version
ledger (records.formats); their JSON is strict (no NaN or Infinity, which no writer here
emits). Standard library only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from ..paths import NotARegularFile, require_regular_file
from .atomicfile import atomic_write_json
from .formats import LEDGER


class JsonFileError(ValueError):
    """A JSON input that is missing, not a regular file or not JSON; the message names it and what it is."""


class RunRecordError(JsonFileError):
    """A run.json that cannot be read or does not point at evidence; the message names it."""


def _reject_constant(name: str) -> None:
    raise ValueError(f"non-standard JSON constant {name}")


def read_json(path: Path | str, what: str = "file", error: type[Exception] = JsonFileError, *,
              hint: str = "", strict: bool = False) -> Any:
    """The parsed content of `path`; `error` naming `what` and the path otherwise (+ `hint`).

    strict: refuse NaN and Infinity (records; a third-party file may carry them)."""
    path = Path(path)
    tail = f". {hint}" if hint else ""
    try:
        require_regular_file(path, what)  # a FIFO or device would block or never end
        text = path.read_text(encoding="utf-8")
        return json.loads(text, parse_constant=_reject_constant) if strict else json.loads(text)
    except FileNotFoundError:
        raise error(f"{what} {path} does not exist{tail}") from None
    except NotARegularFile as exc:
        raise error(f"{exc}{tail}") from None
    except RecursionError:
        raise error(f"{what} {path} is not readable JSON: nested too deeply{tail}") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise error(f"{what} {path} is not readable JSON: {exc}{tail}") from None


def read_record(path: Path | str, kind: str, what: str | None = None, error: type[Exception] = JsonFileError, *,
                hint: str = "") -> dict[str, Any]:
    """A record of `kind` at the version this code writes (records.formats.LEDGER); `error` otherwise.

    A record of another version of the same kind is named as such, so a reader can say
    "re-make it with this version" rather than "not a record"."""
    fmt = LEDGER[kind]
    what = what or f"{kind} record"
    tail = f". {hint}" if hint else ""
    data = read_json(path, what, error, hint=hint, strict=True)
    if not isinstance(data, dict):
        raise error(f"{what} {path} holds a {type(data).__name__}, not a JSON object{tail}")
    schema = data.get("schema")
    if schema == fmt.schema:
        return data
    if isinstance(schema, str) and schema.startswith(fmt.family):
        raise error(f"{what} {path} is {schema!r}; this version reads only {fmt.schema!r}{tail}")
    raise error(f"{what} {path} is not a {kind} record (schema {schema!r}, expected {fmt.schema!r}){tail}")


def write_record(path: Path | str, kind: str, body: Mapping[str, Any], mode: int | None = None, *,
                 replace: bool = True) -> dict[str, Any]:
    """Write `body` atomically as a record of `kind` at this code's version (its `schema` first): the
    writer that pairs with `read_record`."""
    record = {"schema": LEDGER[kind].schema, **{k: v for k, v in body.items() if k != "schema"}}
    atomic_write_json(path, record, mode, replace=replace)
    return record

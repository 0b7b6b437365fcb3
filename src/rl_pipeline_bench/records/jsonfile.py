"""Reading a JSON input file so that every failure names the file (never a bare JSONDecodeError)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..paths import NotARegularFile, require_regular_file


class JsonFileError(ValueError):
    """A JSON input that is missing, not a regular file or not JSON; the message names it and what it is."""


class RunRecordError(ValueError):
    """A run.json that cannot be read or does not point at evidence; the message names it."""


def read_json(path: Path | str, what: str = "file", error: type[ValueError] = JsonFileError) -> Any:
    """The parsed content of `path`; `error` (JsonFileError) naming `what` and the path otherwise."""
    path = Path(path)
    try:
        require_regular_file(path, what)
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{what} {path} does not exist") from None
    except NotARegularFile as exc:
        raise error(str(exc)) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise error(f"{what} {path} is not readable JSON: {exc}") from None

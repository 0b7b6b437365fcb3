"""Where the project's files live, so that every module agrees on one layout."""

from __future__ import annotations

import os
from pathlib import Path

#: Repository root (the directory holding Snakefile and config.yaml). Overridable
#: with RL_BENCH_ROOT so that tests can run the pipeline in a scratch copy.
ROOT = Path(os.environ.get("RL_BENCH_ROOT", Path(__file__).resolve().parents[2]))

CONFIG_PATH = ROOT / "config.yaml"
SCHEMA_PATH = ROOT / "schemas" / "config.schema.yaml"


def results_dir(root: Path | None = None) -> Path:
    return (root or ROOT) / "results"


def evidence_root(root: Path | None = None) -> Path:
    return results_dir(root) / "evidence"


class NotARegularFile(ValueError):
    """An input path that exists but is a FIFO, socket, device or directory: reading it would block or fail."""


def require_regular_file(path: Path | str, what: str) -> None:
    """Refuse `path` when it exists but is not a regular file (a FIFO would block the reader forever).

    A missing path passes: each reader names that itself.
    """
    path = Path(path)
    if path.exists() and not path.is_file():
        kind = "a directory" if path.is_dir() else "not a regular file (a FIFO, socket or device)"
        raise NotARegularFile(f"{what} {path} is {kind}")

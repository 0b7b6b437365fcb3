"""Atomic file replacement: a reader never sees half a file, a crash never leaves one.

Every writer goes through a temp file in the same directory, fsync, then os.replace (or
a hard link, to refuse replacing). Standard library only, apart from the Parquet writer
that imports pyarrow when it is called.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

if TYPE_CHECKING:
    import pyarrow as pa

#: Mode of the files that hold the environment or commands (manifest, run.log).
PRIVATE_MODE = 0o600


def fsync_dir(directory: Path) -> None:
    """Make renames in `directory` durable (best effort: some filesystems refuse)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some filesystems refuse fsync on directories; the data is synced already
        pass
    finally:
        os.close(fd)


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# Read once at import: os.umask is process-wide, so toggling it later would race threads.
_UMASK = _read_umask()


def atomic_write(path: Path | str, write: Callable[[Any], None], mode: int | None = None, *,
                 sync_dir: bool = True, replace: bool = True) -> None:
    """Write `path` via `write(binary_file)` into a same-directory temp file, fsync, rename.

    `mode` None: readable like any other file (0666 less the umask); 0o600 for files
    that hold the environment or commands. `sync_dir=False` leaves the directory's
    fsync to the caller, who batches several renames. `replace=False` never replaces an
    existing file (FileExistsError, atomically: the temp file is hard-linked into place).
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        # mkstemp creates 0600; evidence is meant to be readable like any other file.
        os.chmod(tmp, 0o666 & ~_UMASK if mode is None else mode)
        if replace:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)
            os.unlink(tmp)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    if sync_dir:
        fsync_dir(path.parent)


def atomic_write_bytes(path: Path | str, data: bytes, mode: int | None = None, *, replace: bool = True) -> None:
    atomic_write(path, lambda fh: fh.write(data), mode, replace=replace)


def atomic_write_json(path: Path | str, obj: Any, mode: int | None = None, *, replace: bool = True) -> None:
    """Atomic JSON (indent 2, strict: NaN/Infinity are refused rather than written)."""
    text = json.dumps(obj, indent=2, sort_keys=False, allow_nan=False) + "\n"
    atomic_write_bytes(path, text.encode("utf-8"), mode, replace=replace)


def atomic_write_table(path: Path | str, table: pa.Table, *, sync_dir: bool = True) -> None:
    """Atomic Parquet (pyarrow is imported here, so JSON and bytes writers never load it)."""
    import pyarrow.parquet as pq

    atomic_write(path, lambda fh: pq.write_table(table, fh), sync_dir=sync_dir)


def write_json_atomic(data: Mapping[str, Any], path: Path | str) -> Path:
    """Write JSON through a temporary file and rename, so readers never see half a record."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=2, sort_keys=True)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path

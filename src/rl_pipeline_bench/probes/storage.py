"""Storage probe: sequential write then read of one file in a chosen directory, then the file is removed.

fio runs it when installed (`fio.py`), otherwise aligned O_DIRECT I/O in Python
(`direct_io.py`). Before anything is written the directory is checked: it must be
(or become) a writable directory with room for the file plus headroom; otherwise a
`StorageProbeError` names the directory, what it has and what the probe needs, and
whatever the probe created (the file, directories it made) is removed again.
"""

from __future__ import annotations

import os
import shutil
import socket
import time
import uuid
from pathlib import Path
from typing import Any

from . import direct_io
from .fio import fio_path, run_fio
from ..records.formats import schema_of

STORAGE_SCHEMA = schema_of("probe-storage")
HEADROOM_BYTES = 64 * 1024 * 1024
ENGINES = ("auto", "fio", "python")


class StorageProbeError(RuntimeError):
    """The probe directory cannot take the probe; the message names it and the space needed."""


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n} B"


def filesystem_type(directory: Path) -> str | None:
    """The mount type of the filesystem holding `directory` (longest mount-point prefix)."""
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    best, fstype = "", None
    target = str(directory.resolve())
    for line in lines:
        parts = line.split()
        if len(parts) >= 3:
            mount = parts[1].replace("\\040", " ")
            if (target == mount or target.startswith(mount.rstrip("/") + "/")) and len(mount) >= len(best):
                best, fstype = mount, parts[2]
    return fstype


def _make_dirs(directory: Path) -> list[Path]:
    """Create `directory` and missing parents; return what was created (deepest last)."""
    missing = []
    p = directory
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    created = []
    for d in reversed(missing):
        try:
            d.mkdir()
        except OSError as exc:
            _remove_dirs(created)
            raise StorageProbeError(f"probe directory {directory} cannot be created ({d}: {exc.strerror or exc})") from None
        created.append(d)
    return created


def _remove_dirs(created: list[Path]) -> None:
    for d in reversed(created):
        try:
            d.rmdir()
        except OSError:
            pass


def check_directory(directory: Path, needed_bytes: int) -> None:
    """Refuse a directory that is not one, is not writable, or lacks room for `needed_bytes`."""
    if not directory.is_dir():
        raise StorageProbeError(f"probe directory {directory} is not a directory")
    marker = directory / f".rl-bench-write-check-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
    except OSError as exc:
        raise StorageProbeError(f"probe directory {directory} is not writable ({exc.strerror or exc}); "
                                f"the storage probe needs to write {_human(needed_bytes)} there") from None
    finally:
        marker.unlink(missing_ok=True)
    free = shutil.disk_usage(directory).free
    if free < needed_bytes:
        raise StorageProbeError(
            f"probe directory {directory} has {_human(free)} free; the storage probe needs {_human(needed_bytes)} "
            f"(the test file plus {_human(HEADROOM_BYTES)} headroom). Choose a smaller size or another directory.")


def run_storage_probe(directory: Path | str, size_bytes: int, *, block_bytes: int = 1 << 20, engine: str = "auto",
                      timeout_s: float = 900.0, label: str | None = None, log=print) -> dict[str, Any]:
    """Sequential write then read of `size_bytes`; returns the probe record. Leaves nothing behind."""
    if engine not in ENGINES:
        raise StorageProbeError(f"storage engine must be one of {ENGINES}, got {engine!r}")
    if block_bytes % direct_io.ALIGN or block_bytes <= 0:
        raise StorageProbeError(f"block size {block_bytes} must be a positive multiple of {direct_io.ALIGN} B")
    size_bytes = -(-int(size_bytes) // block_bytes) * block_bytes  # whole blocks
    directory = Path(directory).absolute()
    if directory.exists() and not directory.is_dir():
        raise StorageProbeError(f"probe directory {directory} is not a directory")
    fio = fio_path() if engine in ("auto", "fio") else None
    if engine == "fio" and fio is None:
        raise StorageProbeError("storage engine 'fio' was asked for but fio is not installed (Debian: apt-get install fio)")
    created = _make_dirs(directory)
    path = directory / f".rl-bench-storage-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        check_directory(directory, size_bytes + HEADROOM_BYTES)
        fstype = filesystem_type(directory)
        direct, why = direct_io.supports_direct(directory)
        if not direct:
            log(f"storage: {why}; measuring buffered I/O with fsync and a page-cache drop instead")
        log(f"storage: {'fio' if fio else 'python'} sequential write then read of {_human(size_bytes)} in "
            f"{directory} ({'O_DIRECT' if direct else 'buffered'}, {_human(block_bytes)} blocks)")
        started = time.perf_counter()
        results = []
        for direction in ("write", "read"):
            if fio:
                r = run_fio(fio, path, direction, size_bytes, block_bytes, direct, timeout_s)
            elif direction == "write":
                r = direct_io.write_file(path, size_bytes, block_bytes, direct)
            else:
                r = direct_io.read_file(path, block_bytes, direct)
            r["mb_per_s"] = r["bandwidth_bytes_per_s"] / 1e6 if r["bandwidth_bytes_per_s"] else None
            results.append(r)
            log(f"storage: {direction} {r['mb_per_s']:.1f} MB/s")
    except OSError as exc:
        raise StorageProbeError(f"storage probe in {directory} failed: {exc}") from None
    finally:
        path.unlink(missing_ok=True)
        _remove_dirs(created)
    return {
        "schema": STORAGE_SCHEMA, "label": label, "directory": str(directory),
        "filesystem": fstype,
        "host": socket.gethostname(), "size_bytes": size_bytes, "block_bytes": block_bytes,
        "engine": "fio" if fio else "python", "direct": direct, "direct_note": why,
        "results": {r["direction"]: r for r in results}, "wall_s": time.perf_counter() - started,
        "file_removed": not path.exists(),
    }

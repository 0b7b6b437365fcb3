"""Sequential write/read in Python with O_DIRECT: the storage probe's engine when fio is absent.

O_DIRECT needs buffers, offsets and lengths aligned to the device's logical block;
an anonymous mmap is page-aligned (4 KiB), and the probe uses 1 MiB blocks, so every
write and read is aligned. The write ends with fsync, inside the timed span. Where
the filesystem refuses O_DIRECT (tmpfs, some network filesystems) `supports_direct`
says so and the caller falls back to buffered I/O with fsync and a page-cache drop
(posix_fadvise DONTNEED) before reading, and records that it did.
"""

from __future__ import annotations

import errno
import mmap
import os
import time
from pathlib import Path
from typing import Any

ALIGN = 4096


def supports_direct(directory: Path | str) -> tuple[bool, str | None]:
    """(True, None) if a file in `directory` can be written with O_DIRECT, else (False, why)."""
    if not hasattr(os, "O_DIRECT"):
        return False, "this platform has no O_DIRECT"
    path = Path(directory) / f".rl-bench-odirect-check-{os.getpid()}"
    buf = mmap.mmap(-1, ALIGN)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_DIRECT, 0o600)
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            return False, f"the filesystem of {directory} refuses O_DIRECT ({exc.strerror})"
        raise
    try:
        os.write(fd, buf)
        return True, None
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            return False, f"the filesystem of {directory} refuses aligned O_DIRECT writes ({exc.strerror})"
        raise
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
        buf.close()


def _drop_cache(fd: int) -> None:
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


def write_file(path: Path | str, size_bytes: int, block_bytes: int, direct: bool) -> dict[str, Any]:
    """Write `size_bytes` (a multiple of the block) sequentially and fsync; time it."""
    if block_bytes % ALIGN or size_bytes % block_bytes or size_bytes <= 0:
        raise ValueError(f"size {size_bytes} must be a positive multiple of the block {block_bytes}, "
                         f"itself a multiple of {ALIGN}")
    buf = mmap.mmap(-1, block_bytes)
    buf.write(os.urandom(block_bytes))  # incompressible, written once
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | (os.O_DIRECT if direct else 0)
    fd = os.open(path, flags, 0o600)
    try:
        start = time.perf_counter()
        written = 0
        while written < size_bytes:
            written += os.write(fd, buf)
        os.fsync(fd)
        elapsed = time.perf_counter() - start
        if not direct:
            _drop_cache(fd)
    finally:
        os.close(fd)
        buf.close()
    return _result("write", written, elapsed, block_bytes, direct)


def read_file(path: Path | str, block_bytes: int, direct: bool) -> dict[str, Any]:
    """Read the whole file sequentially into one aligned block buffer; time it."""
    buf = mmap.mmap(-1, block_bytes)
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
    try:
        if not direct:
            _drop_cache(fd)
        start = time.perf_counter()
        total = 0
        while True:
            n = os.readv(fd, [buf])
            if n == 0:
                break
            total += n
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        buf.close()
    return _result("read", total, elapsed, block_bytes, direct)


def _result(direction: str, nbytes: int, seconds: float, block_bytes: int, direct: bool) -> dict[str, Any]:
    return {"engine": "python", "direction": direction, "bytes": int(nbytes), "seconds": seconds,
            "bandwidth_bytes_per_s": nbytes / seconds if seconds > 0 else None, "block_bytes": block_bytes,
            "direct": direct}

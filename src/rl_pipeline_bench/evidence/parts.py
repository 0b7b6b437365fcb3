"""Append-only table parts for a running evidence directory, written off the caller's thread.

Rewriting a whole parquet table on every update is quadratic in the run's length and
costs milliseconds on the trainer's critical path. Instead each flush adds one small
part per table (`parts/{stem}-{seq:06d}.arrow`, an Arrow IPC file: about a tenth of a
small parquet file's write cost), each written under a temporary name, fsynced and
renamed, by one background thread in order; the parts directory is fsynced once per
flush. A reader concatenates a table's parts in sequence order (`read_part`, or
`pandas.read_feather` by hand); `EvidenceWriter.finish` replaces them with the whole
parquet tables.
"""

from __future__ import annotations

import os
import queue
import threading
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa

PARTS_DIR = "parts"
PART_SUFFIX = ".arrow"


def part_name(stem: str, seq: int) -> str:
    return f"{stem}-{seq:06d}{PART_SUFFIX}"


def part_files(evidence_dir: Path, stem: str) -> list[Path] | None:
    """A table's part files in write order; None when the directory holds no parts layout."""
    parts = evidence_dir / PARTS_DIR
    if not parts.is_dir():
        return None
    return sorted(parts.glob(f"{stem}-{'[0-9]' * 6}{PART_SUFFIX}"))


def write_part(path: Path, table: pa.Table) -> None:
    """Write a new part: temp name, fsync, rename (the caller fsyncs the directory once per batch).

    Parts are never replaced, and one thread writes them, so the temp name is fixed.
    """
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_part(path: Path) -> pa.Table:
    with pa.memory_map(str(path)) as source:
        return pa.ipc.open_file(source).read_all()


class EvidenceWriteError(OSError):
    """A background evidence write failed; raised on the run's next call into the writer."""


class BackgroundWriter:
    """One daemon thread that writes submitted batches in submission order.

    Batches that queue up while the thread is busy (a slow disk, a burst of updates)
    are merged into one write, `merge(batches) -> batch`, so a backlog costs one set of
    parts and fsyncs, not one per update. The first failure is kept and raised to the
    caller on its next `submit` or `drain`; later batches are skipped so the parts never
    have a gap that looks like complete data.
    """

    _STOP = object()

    def __init__(self, name: str, write: Callable[[Any], None], merge: Callable[[list], Any]):
        self._write, self._merge = write, merge
        self._jobs: "queue.Queue[object]" = queue.Queue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def _take(self) -> tuple[list, bool]:
        """The next batch and every batch queued behind it; whether the stop mark came with them."""
        items, stop = [self._jobs.get()], False
        while True:
            try:
                items.append(self._jobs.get_nowait())
            except queue.Empty:
                break
        if any(i is self._STOP for i in items):
            stop = True
            items = [i for i in items if i is not self._STOP]
        return items, stop

    def _loop(self) -> None:
        while True:
            items, stop = self._take()
            try:
                if items and self._error is None:
                    self._write(items[0] if len(items) == 1 else self._merge(items))
            except BaseException as exc:  # kept for the caller; this thread must keep draining
                self._error = exc
            finally:
                for _ in range(len(items) + stop):
                    self._jobs.task_done()
            if stop:
                return

    def _raise_pending(self) -> None:
        if self._error is not None:
            raise EvidenceWriteError(f"writing evidence failed: {type(self._error).__name__}: {self._error}") \
                from self._error

    def submit(self, batch: Any) -> None:
        self._raise_pending()
        if not self._thread.is_alive():
            raise EvidenceWriteError("the evidence writer thread is closed")
        self._jobs.put(batch)

    def drain(self) -> None:
        """Wait until every submitted batch is written; raise the first failure, if any."""
        self._jobs.join()
        self._raise_pending()

    def close(self) -> BaseException | None:
        """Write what is queued, stop the thread; return (not raise) the first failure."""
        if self._thread.is_alive():
            self._jobs.put(self._STOP)
            self._thread.join()
        return self._error

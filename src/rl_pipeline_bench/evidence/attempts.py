"""The attempts index: one JSON line per event of every benchmark attempt (paths.ATTEMPTS_INDEX).

The runner appends `started` when it has created an evidence directory and `finished`
when the run ended (completed or failed); the summarize_run rule appends `summarized`
with the contract's verdict. Appends are atomic (one write of one line under an
exclusive lock, then fsync), so concurrent runs never interleave and a crash loses at
most the line being written. The report reads this file instead of re-scoring every
evidence directory, and because the file is a report input, a new attempt (a failed
one too) makes the report out of date by itself.

This module is the index's only reader and writer; the format is in docs/run-spec.md.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from ..paths import ATTEMPTS_INDEX, EVIDENCE_ROOT
from ..records.formats import schema_of
from ..records.jsonfile import JsonFileError, read_json

EVENT_SCHEMA = schema_of("attempt-event")
EVENTS = ("started", "finished", "summarized")


def index_for(evidence_root: Path | str) -> Path:
    """The index beside an evidence root, as in the layout (rl_pipeline_bench.paths): evidence root
    `x/evidence` -> `x/attempts.jsonl`."""
    return Path(evidence_root).parent / Path(ATTEMPTS_INDEX).relative_to(Path(EVIDENCE_ROOT).parent)


def _open_index(index: Path, flags: int) -> int:
    """Open the index itself, never what a symbolic link in its place points at (O_NOFOLLOW)."""
    try:
        return os.open(index, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            from ..records.configfile import ConfigError

            raise ConfigError(f"attempts index {index} is a symbolic link; the index is read and written only "
                              "as a plain file (replace the link by the file it points at)") from None
        raise


def append_event(index: Path | str, event: str, run_id: str, **fields: Any) -> None:
    """Append one event line atomically (exclusive flock, single write, fsync).

    The line always starts a line of its own: if the file ends in a torn line (a writer
    killed mid-line, a hand edit), a newline is written first, under the same lock, so
    the torn line is reported by readers and this event is not glued to it.
    """
    if event not in EVENTS:
        raise ValueError(f"unknown attempt event {event!r} (known: {', '.join(EVENTS)})")
    record = {"schema": EVENT_SCHEMA, "event": event, "run_id": str(run_id), **fields}
    data = (json.dumps(record, sort_keys=True, allow_nan=False, default=str) + "\n").encode("utf-8")
    index = Path(index)
    index.parent.mkdir(parents=True, exist_ok=True)
    fd = _open_index(index, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)  # releases the lock


def started_fields(manifest: dict[str, Any], evidence_dir: Path | str) -> dict[str, Any]:
    spec = manifest.get("spec") if isinstance(manifest.get("spec"), dict) else {}
    return {
        "suite": manifest.get("suite"), "spec": spec.get("id"), "backend": manifest.get("backend"),
        "workload": manifest.get("workload"), "trial": manifest.get("trial"),
        "started_at": manifest.get("started_at"), "evidence_dir": str(evidence_dir),
        "supervisor": manifest.get("supervisor") if isinstance(manifest.get("supervisor"), dict) else None,
    }


def error_gist(error: Any) -> str | None:
    """The line of an error text that names it (a traceback's last line), at most 300 characters."""
    lines = [ln.strip() for ln in str(error or "").splitlines() if ln.strip()]
    if not lines:
        return None
    return (lines[-1] if lines[0].startswith("Traceback") else lines[0])[:300]


@dataclass
class Attempt:
    """One benchmark attempt as the index (and, for reported runs, its summary) says."""

    name: str
    status: str | None
    valid: bool | None
    reasons: list[str]
    suite: str | None = None
    backend: str | None = None
    workload: str | None = None
    trial: Any = None
    started_at: str | None = None
    finished_at: str | None = None
    error: str | None = None
    in_report: bool = False
    spec: str | None = None
    evidence_dir: str | None = None
    supervisor: dict | None = None

    @property
    def status_text(self) -> str | None:
        """The status, a `running` one saying whether its process still runs (rl_pipeline_bench.host.liveness)."""
        if self.status != "running":
            return self.status
        from ..host.liveness import describe

        return f"running ({describe(self.supervisor)})"

    @property
    def error_not_in_reasons(self) -> bool:
        """The manifest's error text, when no reason already quotes it."""
        return bool(self.error) and not any(str(self.error) in r for r in self.reasons)

    @property
    def failed_or_invalid(self) -> bool:
        return self.status != "completed" or self.valid is False


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _event_problem(line: str) -> tuple[dict[str, Any] | None, str | None]:
    """One line -> (event, None) or (None, why it is not one)."""
    try:
        record = json.loads(line, parse_constant=_no_constant)
    except ValueError as exc:  # JSONDecodeError too; NaN and Infinity literals
        return None, f"is not a JSON event ({exc})"
    if not isinstance(record, dict) or record.get("schema") != EVENT_SCHEMA:
        return None, f"is not an {EVENT_SCHEMA} event"
    if not isinstance(record.get("run_id"), str) or not record["run_id"]:
        return None, "has no run_id"
    if record.get("event") not in EVENTS:
        return None, f"has unknown event {record.get('event')!r} (known: {', '.join(EVENTS)})"
    return record, None


def read_events(index: Path | str) -> tuple[list[dict[str, Any]], list[str]]:
    """All event records, and a problem line (with its line number) for each line that is not one."""
    index = Path(index)
    try:
        fd = _open_index(index, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return [], []
    events, problems = [], []
    with os.fdopen(fd, "r", encoding="utf-8", errors="replace") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            from ..records.configfile import ConfigError

            raise ConfigError(f"attempts index {index} is not a regular file")
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            record, problem = _event_problem(line)
            if problem:
                problems.append(f"{index} line {n} {problem} (ignored)")
            else:
                events.append(record)
    return events, problems


_IDENTITY = ("suite", "spec", "backend", "workload", "trial", "started_at", "evidence_dir", "supervisor")


def fold(events: Iterable[dict[str, Any]]) -> dict[str, Attempt]:
    """Attempts by run id; later events of a run override earlier ones."""
    out: dict[str, Attempt] = {}
    for e in events:
        a = out.setdefault(e["run_id"], Attempt(name=e["run_id"], status="running", valid=None, reasons=[]))
        for k in _IDENTITY:
            if e.get(k) is not None:
                setattr(a, k, e[k])
        if e["event"] == "started" and e.get("status"):
            a.status = e["status"]
        elif e["event"] == "finished":
            a.status = e.get("status")
            a.finished_at = e.get("finished_at")
            a.error = e.get("error")
        elif e["event"] == "summarized":
            a.valid = e.get("valid") if isinstance(e.get("valid"), bool) else None
            a.reasons = [str(r) for r in e.get("reasons") or []]
    return out


def read_attempts(index: Path | str) -> tuple[list[Attempt], list[str]]:
    """Every attempt of the index, sorted by run id (run ids sort by start time), and read problems."""
    events, problems = read_events(index)
    attempts = fold(events)
    return [attempts[k] for k in sorted(attempts)], problems


def _manifest_event(directory: Path) -> tuple[dict[str, Any], str | None]:
    path = directory / "manifest.json"
    if not path.exists():
        return {}, "manifest_missing: manifest.json not found"
    try:
        m = read_json(path, "manifest", strict=True)
    except JsonFileError as exc:
        return {}, f"manifest_corrupt: {exc}"
    if not isinstance(m, dict):
        return {}, f"manifest_corrupt: holds a {type(m).__name__}, not an object"
    return m, None


def seed_index(evidence_root: Path | str, index: Path | str) -> int:
    """Index the evidence directories the index lacks (evidence older than the index): manifests only.

    Nothing is re-scored; returns the number of directories added. Idempotent.
    """
    root = Path(evidence_root)
    known = {a.name for a in read_attempts(index)[0]}
    n = 0
    for name in unindexed_dirs(root, known):
        d = root / name
        manifest, problem = _manifest_event(d)
        append_event(index, "started", d.name, **started_fields(manifest, d), seeded=True)
        status = manifest.get("status") if isinstance(manifest.get("status"), str) else None
        if problem or status in ("completed", "failed"):
            append_event(index, "finished", d.name, status=status, finished_at=manifest.get("finished_at"),
                         error=problem or error_gist(manifest.get("error")), seeded=True)
        n += 1
    return n


def unindexed_dirs(evidence_root: Path | str, indexed: set[str]) -> list[str]:
    """Evidence directories the index does not know (made outside the runner): names only, nothing read."""
    root = Path(evidence_root)
    if not root.is_dir():
        return []
    with os.scandir(root) as it:
        return sorted(e.name for e in it if e.is_dir() and not e.name.startswith(".") and e.name not in indexed)


__all__ = ["Attempt", "append_event", "error_gist", "fold", "index_for", "read_attempts", "read_events",
           "seed_index", "started_fields", "unindexed_dirs"]

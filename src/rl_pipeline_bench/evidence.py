"""Evidence v1 I/O: the only files a benchmark number may be derived from.

A run writes into a fresh `results/evidence/{run_id}/` that is never reused, deleted
or overwritten. Every file is replaced atomically (temp file in the same directory,
fsync, os.replace), so a reader — the summary, the report, a person — never sees half
a file, and whatever was flushed before a crash stays readable. Readers are tolerant:
`read_evidence` reports problems instead of raising, because a broken run must still
be listed with its reason.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .hostinfo import is_secret_name, redact_text, redacted_env

SCHEMA = "rl-bench/evidence/v1"

MANIFEST = "manifest.json"
RUN_LOG = "run.log"
UPDATES = "updates.parquet"
CALLS = "calls.parquet"
INTERVALS = "trainer_intervals.parquet"

UPDATES_SCHEMA = pa.schema(
    [
        ("update", pa.int64()),
        ("completed_at", pa.float64()),
        ("accepted_trajectories", pa.int64()),
        ("assistant_tokens", pa.int64()),
        ("policy_version", pa.int64()),
        ("mean_policy_age", pa.float64()),
    ]
)
CALLS_SCHEMA = pa.schema(
    [
        ("group", pa.int64()),
        ("trajectory", pa.int64()),
        ("call", pa.int64()),
        ("prompt_tokens", pa.int64()),
        ("forced_completion_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("accepted", pa.bool_()),
        ("started_at", pa.float64()),
        ("finished_at", pa.float64()),
        ("policy_version", pa.int64()),
        ("update", pa.int64()),  # optional per the interface: null when a backend cannot tag it
    ]
)
#: Columns of calls.parquet a writer may leave out.
CALLS_OPTIONAL = frozenset({"update"})
INTERVALS_SCHEMA = pa.schema(
    [
        ("rank", pa.int64()),
        ("update", pa.int64()),
        ("start", pa.float64()),
        ("end", pa.float64()),
    ]
)

#: Every manifest field of evidence v1; absent ones are written as null.
MANIFEST_FIELDS = (
    "schema", "run_id", "status", "backend", "workload", "suite", "trial",
    "started_at", "finished_at", "contract", "model", "recipe_sha256", "source_sha256",
    "image", "gpus", "host", "command", "env", "error",
)
STATUSES = ("running", "completed", "failed")
FINAL_STATUSES = ("completed", "failed")

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def utc_now_iso() -> str:
    """UTC ISO 8601 with milliseconds, the manifest's wall-clock format."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def new_run_id(suite: str, backend: str, workload: str, trial: int | str) -> str:
    """A unique, filesystem-safe run id that sorts by creation time (UTC prefix)."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    parts = [stamp, str(suite), str(backend), str(workload), f"trial{trial}", uuid.uuid4().hex[:8]]
    return "-".join(_SAFE.sub("_", p).strip("._") or "x" for p in parts)


# ---------------------------------------------------------------------------
# Atomic file replacement


def _fsync_dir(directory: Path) -> None:
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


def atomic_write(path: Path | str, write: Callable[[Any], None]) -> None:
    """Write `path` via `write(binary_file)` into a same-directory temp file, fsync, rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        # mkstemp creates 0600; evidence is meant to be readable like any other file.
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(path.parent)


def atomic_write_bytes(path: Path | str, data: bytes) -> None:
    atomic_write(path, lambda fh: fh.write(data))


def atomic_write_json(path: Path | str, obj: Any) -> None:
    """Atomic JSON (indent 2, strict: NaN/Infinity are refused rather than written)."""
    text = json.dumps(obj, indent=2, sort_keys=False, allow_nan=False) + "\n"
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_table(path: Path | str, table: pa.Table) -> None:
    atomic_write(path, lambda fh: pq.write_table(table, fh))


# ---------------------------------------------------------------------------
# Writer


def _redact_strings(obj: Any, secrets: dict[str, str] | None = None) -> Any:
    """Scrub secret values from every string in a JSON-like structure."""
    if secrets is None:  # only secret-named variables matter; filter once, not per string
        secrets = {k: v for k, v in os.environ.items() if is_secret_name(k)}
    if isinstance(obj, str):
        return redact_text(obj, secrets)
    if isinstance(obj, dict):
        return {k: _redact_strings(v, secrets) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_redact_strings(v, secrets) for v in obj]
    return obj


def _command_text(command: Any) -> str | None:
    if command is None:
        return None
    if isinstance(command, (list, tuple)):
        command = shlex.join(str(c) for c in command)
    return redact_text(str(command))


class _RedactingFormatter(logging.Formatter):
    """run.log must never carry a credential, whatever a backend logs (tracebacks included)."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_text(super().format(record))


class _RedactingFilter(logging.Filter):
    """Scrub the message before it propagates to handlers outside run.log (console, job logs)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact_text(record.getMessage())
        record.args = None
        return True


def _coerce_row(row: dict, schema: pa.Schema, optional: frozenset[str], what: str) -> dict:
    names = set(schema.names)
    unknown = sorted(set(row) - names)
    if unknown:
        raise ValueError(f"{what}: unknown column(s) {unknown}; allowed: {schema.names}")
    missing = [n for n in schema.names if n not in row and n not in optional]
    if missing:
        raise ValueError(f"{what}: missing column(s) {missing} in row {row!r}")
    out = {}
    for f in schema:
        v = row.get(f.name)
        if v is None:
            if f.name not in optional:
                raise ValueError(f"{what}: column '{f.name}' is null in row {row!r}")
            out[f.name] = None
        elif pa.types.is_integer(f.type):
            if isinstance(v, float) and not v.is_integer():
                raise ValueError(f"{what}: column '{f.name}' must be an integer, got {v!r}")
            out[f.name] = int(v)
        elif pa.types.is_floating(f.type):
            out[f.name] = float(v)
        elif pa.types.is_boolean(f.type):
            out[f.name] = bool(v)
        else:
            out[f.name] = v
    return out


class EvidenceWriter:
    """Writes one run's evidence directory; safe to call from rollout and trainer threads.

    Rows are recorded faithfully (only wrong columns or types are refused): judging
    them is the contract's job, and a bad value must stay visible as evidence.

    `add_update` rewrites updates.parquet (and any pending calls/intervals) at once, so
    every completed update is durable. Calls and intervals are buffered (rewriting a
    file per call would be quadratic) and written on the next update, on `flush()`,
    on `finish()`, or by any add that finds `flush_interval_s` passed since the last write.
    """

    def __init__(self, evidence_root: Path | str, run_id: str, manifest: dict | None = None,
                 *, flush_interval_s: float = 2.0):
        if not run_id or run_id in (".", "..") or _SAFE.search(run_id):
            raise ValueError(f"run id {run_id!r} is not filesystem-safe (allowed: letters, digits, '.', '_', '-')")
        self._t0 = time.monotonic()
        self._lock = threading.RLock()
        self._flush_interval_s = flush_interval_s
        self._last_flush = self._t0
        self._finished = False
        self._updates: list[dict] = []
        self._calls: list[dict] = []
        self._intervals: list[dict] = []
        self._dirty: set[str] = set()

        m = {k: None for k in MANIFEST_FIELDS}
        m.update(dict(manifest or {}))
        m["schema"] = SCHEMA
        m["run_id"] = run_id
        m["status"] = "running"
        m["started_at"] = utc_now_iso()
        m["finished_at"] = None
        m["error"] = None
        m["env"] = redacted_env(m["env"] if isinstance(m.get("env"), dict) else None)
        m["command"] = _command_text(m["command"] if m.get("command") is not None else sys.argv)
        try:  # refuse an unserialisable manifest before anything touches the disk
            json.dumps(m, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"manifest is not JSON-serialisable: {exc}") from None
        self._manifest = m

        root = Path(evidence_root)
        root.mkdir(parents=True, exist_ok=True)
        self.path = root / run_id
        try:
            self.path.mkdir(exist_ok=False)
        except FileExistsError:
            raise FileExistsError(
                f"evidence directory {self.path} already exists; evidence is never reused or overwritten "
                "(use new_run_id() for a fresh run id)"
            ) from None
        self.run_id = run_id

        self.logger = logging.getLogger(f"rl_pipeline_bench.evidence.{run_id}")
        self.logger.setLevel(logging.INFO)
        self._log_filter = _RedactingFilter()
        self.logger.addFilter(self._log_filter)
        self._log_handler = logging.FileHandler(self.path / RUN_LOG, encoding="utf-8")
        self._log_handler.setFormatter(
            _RedactingFormatter("%(asctime)s %(levelname)s [%(threadName)s] %(message)s")
        )
        self.logger.addHandler(self._log_handler)

        self._write_manifest()
        self._write_tables({UPDATES, CALLS, INTERVALS})
        self.logger.info("run %s started; evidence in %s", run_id, self.path)

    # -- clock and manifest -------------------------------------------------

    def clock(self) -> float:
        """Seconds since this run started, on the monotonic clock all evidence times use."""
        return time.monotonic() - self._t0

    @property
    def manifest(self) -> dict:
        with self._lock:
            return json.loads(json.dumps(self._manifest))

    def _write_manifest(self) -> None:
        atomic_write_json(self.path / MANIFEST, _redact_strings(self._manifest))

    def update_manifest(self, **fields: Any) -> None:
        """Record more provenance (image, gpus, ...); schema/run_id/status are not settable here."""
        reserved = {"schema", "run_id", "status", "started_at", "finished_at"} & set(fields)
        if reserved:
            raise ValueError(f"manifest field(s) {sorted(reserved)} are managed by the writer")
        with self._lock:
            self._check_open()
            if "env" in fields:
                fields["env"] = redacted_env(fields["env"]) if fields["env"] is not None else None
            if "command" in fields:
                fields["command"] = _command_text(fields["command"])
            if "error" in fields and fields["error"] is not None:
                fields["error"] = redact_text(str(fields["error"]))
            candidate = {**self._manifest, **fields}
            try:
                json.dumps(candidate, allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"manifest fields {sorted(fields)} are not JSON-serialisable: {exc}") from None
            self._manifest = candidate
            self._write_manifest()

    # -- rows ------------------------------------------------------------------

    def add_update(self, update: int, completed_at: float, accepted_trajectories: int,
                   assistant_tokens: int, policy_version: int, mean_policy_age: float) -> None:
        row = _coerce_row(
            dict(update=update, completed_at=completed_at, accepted_trajectories=accepted_trajectories,
                 assistant_tokens=assistant_tokens, policy_version=policy_version,
                 mean_policy_age=mean_policy_age),
            UPDATES_SCHEMA, frozenset(), "add_update",
        )
        with self._lock:
            self._check_open()
            self._updates.append(row)
            self._dirty.add(UPDATES)
            self._flush_locked()

    def add_calls(self, rows: Iterable[dict]) -> None:
        coerced = [_coerce_row(dict(r), CALLS_SCHEMA, CALLS_OPTIONAL, "add_calls") for r in rows]
        with self._lock:
            self._check_open()
            self._calls.extend(coerced)
            self._dirty.add(CALLS)
            self._maybe_flush_locked()

    def add_trainer_interval(self, rank: int, update: int, start: float, end: float) -> None:
        row = _coerce_row(dict(rank=rank, update=update, start=start, end=end),
                          INTERVALS_SCHEMA, frozenset(), "add_trainer_interval")
        with self._lock:
            self._check_open()
            self._intervals.append(row)
            self._dirty.add(INTERVALS)
            self._maybe_flush_locked()

    # -- flushing ----------------------------------------------------------------

    def _write_tables(self, names: set[str]) -> None:
        sources = {
            UPDATES: (self._updates, UPDATES_SCHEMA),
            CALLS: (self._calls, CALLS_SCHEMA),
            INTERVALS: (self._intervals, INTERVALS_SCHEMA),
        }
        for name in sorted(names):
            rows, schema = sources[name]
            atomic_write_table(self.path / name, pa.Table.from_pylist(rows, schema=schema))

    def _flush_locked(self) -> None:
        if self._dirty:
            self._write_tables(self._dirty)
            self._dirty.clear()
        self._last_flush = time.monotonic()

    def _maybe_flush_locked(self) -> None:
        if time.monotonic() - self._last_flush >= self._flush_interval_s:
            self._flush_locked()

    def flush(self) -> None:
        """Make everything recorded so far durable on disk."""
        with self._lock:
            self._flush_locked()
            self._log_handler.flush()

    def _check_open(self) -> None:
        if self._finished:
            raise RuntimeError(f"evidence writer for run {self.run_id} is already finished")

    def finish(self, status: str, error: str | None = None) -> None:
        """Final flush plus finished_at/status/error in the manifest; the writer closes."""
        if status not in FINAL_STATUSES:
            raise ValueError(f"finish status must be one of {FINAL_STATUSES}, got {status!r}")
        with self._lock:
            self._check_open()
            try:
                self._flush_locked()
            finally:
                self._manifest["status"] = status
                self._manifest["finished_at"] = utc_now_iso()
                self._manifest["error"] = redact_text(str(error)) if error is not None else None
                self._write_manifest()
                self._finished = True
                if error is not None:
                    self.logger.error("run %s %s: %s", self.run_id, status, error)
                else:
                    self.logger.info("run %s %s", self.run_id, status)
                self.logger.removeHandler(self._log_handler)
                self.logger.removeFilter(self._log_filter)
                self._log_handler.close()

    @property
    def finished(self) -> bool:
        return self._finished

    def __enter__(self) -> "EvidenceWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        """Completed on a clean exit, failed (with the exception text) otherwise."""
        if self._finished:
            return
        if exc is None:
            self.finish("completed")
        else:
            self.finish("failed", f"{exc_type.__name__}: {exc}")


# ---------------------------------------------------------------------------
# Reader


@dataclass
class Evidence:
    """What could be read from an evidence directory, plus what could not ("code: detail")."""

    path: Path
    manifest: dict | None
    updates: pd.DataFrame
    calls: pd.DataFrame
    intervals: pd.DataFrame
    problems: list[str] = field(default_factory=list)


def _empty(schema: pa.Schema) -> pd.DataFrame:
    return schema.empty_table().to_pandas()


def _reject_constant(name: str) -> None:
    raise ValueError(f"non-standard JSON constant {name}")


def _read_manifest(path: Path, problems: list[str]) -> dict | None:
    f = path / MANIFEST
    if not f.is_file():
        problems.append(f"manifest_missing: {f} not found")
        return None
    try:
        manifest = json.loads(f.read_text(encoding="utf-8"), parse_constant=_reject_constant)
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError is a ValueError
        problems.append(f"manifest_corrupt: {f} is not readable JSON ({exc})")
        return None
    if not isinstance(manifest, dict):
        problems.append(f"manifest_corrupt: {f} holds a {type(manifest).__name__}, not a JSON object")
        return None
    if manifest.get("schema") != SCHEMA:
        problems.append(f"manifest_schema: schema is {manifest.get('schema')!r}, expected {SCHEMA!r}")
    return manifest


def _read_table(path: Path, name: str, schema: pa.Schema, optional: frozenset[str],
                code: str, problems: list[str]) -> pd.DataFrame:
    f = path / name
    if not f.is_file():
        problems.append(f"{code}_missing: {name} not found")
        return _empty(schema)
    try:
        table = pq.read_table(f)
    except Exception as exc:  # pyarrow raises several types for truncated or foreign files
        problems.append(f"{code}_corrupt: {name} is not readable parquet ({type(exc).__name__}: {str(exc).replace(str(f), name)})")
        return _empty(schema)
    missing = [n for n in schema.names if n not in table.column_names and n not in optional]
    if missing:
        problems.append(f"{code}_corrupt: {name} lacks column(s) {missing}")
        return _empty(schema)
    columns = []
    for fld in schema:
        if fld.name in table.column_names:
            col = table.column(fld.name)
            try:
                col = col.cast(fld.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                problems.append(f"{code}_corrupt: column '{fld.name}' of {name} is {col.type}, expected {fld.type} ({exc})")
                return _empty(schema)
            if col.null_count and fld.name not in optional:
                problems.append(f"{code}_corrupt: column '{fld.name}' of {name} has {col.null_count} null value(s)")
                return _empty(schema)
        else:
            col = pa.nulls(table.num_rows, fld.type)
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=schema).to_pandas()


def read_evidence(path: Path | str) -> Evidence:
    """Read an evidence directory without ever raising; problems say what is wrong."""
    path = Path(path)
    problems: list[str] = []
    if not path.is_dir():
        problems.append(f"evidence_dir_missing: {path} is not a directory")
        return Evidence(path, None, _empty(UPDATES_SCHEMA), _empty(CALLS_SCHEMA),
                        _empty(INTERVALS_SCHEMA), problems)
    manifest = _read_manifest(path, problems)
    updates = _read_table(path, UPDATES, UPDATES_SCHEMA, frozenset(), "updates", problems)
    calls = _read_table(path, CALLS, CALLS_SCHEMA, CALLS_OPTIONAL, "calls", problems)
    intervals = _read_table(path, INTERVALS, INTERVALS_SCHEMA, frozenset(), "intervals", problems)
    return Evidence(path, manifest, updates, calls, intervals, problems)

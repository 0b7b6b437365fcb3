"""Evidence v1 I/O: the only files a benchmark number may be derived from.

A run writes into a fresh `results/evidence/{run_id}/` that is never reused, deleted
or overwritten. Every file is replaced atomically (temp file in the same directory,
fsync, os.replace), so a reader — the summary, the report, a person — never sees half
a file, and whatever was written before a crash stays readable. Readers are tolerant:
`read_evidence` reports problems instead of raising, because a broken run must still
be listed with its reason.

Two layouts, one reader. While a run goes, each table grows as append-only parts
(`parts/{table}-{seq}.arrow`, one per flush, written off the caller's thread); when
the writer finishes it writes the whole tables (`updates.parquet`, `calls.parquet`,
`trainer_intervals.parquet`) and removes the parts. A crashed run keeps its parts, and
`read_evidence` reads either layout (a whole table wins over parts of the same table).
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..records.atomicfile import PRIVATE_MODE, atomic_write_json, atomic_write_table, fsync_dir
from .parts import PARTS_DIR, BackgroundWriter, part_files, part_name, read_part, write_part
from ..host.liveness import process_identity
from ..records.private_log import RedactingFilter, private_log_handler
from ..records.redaction import is_secret_name, recorded_env, redact_text
from ..records.timestamps import UNSAFE_RUN_ID_CHARS, utc_now_iso
from ..records.formats import schema_of
from ..records.jsonfile import JsonFileError, read_json

SCHEMA = schema_of("evidence")

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

_SCHEMAS = {UPDATES: UPDATES_SCHEMA, CALLS: CALLS_SCHEMA, INTERVALS: INTERVALS_SCHEMA}
#: Write order of one flush's parts; readers read in reverse (updates first), so an
#: update they see always comes with its calls and intervals.
_PART_ORDER = (CALLS, INTERVALS, UPDATES)


def _stem(table: str) -> str:
    return table.removesuffix(".parquet")


#: Every manifest field of evidence v1; absent ones are written as null.
MANIFEST_FIELDS = (
    "schema", "run_id", "status", "backend", "workload", "suite", "trial",
    "started_at", "finished_at", "contract", "model", "recipe_sha256", "source_sha256",
    "image", "gpus", "host", "command", "env", "error", "supervisor",
)
STATUSES = ("running", "completed", "failed")
FINAL_STATUSES = ("completed", "failed")


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


class _RowCheck:
    """Fast acceptance of rows that already have exactly the schema's columns and Python types.

    Backends record hundreds of calls per update on the trainer's thread; a row that
    passes here is copied as is, any other goes through `_coerce_row`, which converts
    what it can and names what it cannot.
    """

    _PYTHON_TYPE = ((pa.types.is_boolean, bool), (pa.types.is_integer, int), (pa.types.is_floating, float))

    def __init__(self, schema: pa.Schema, optional: frozenset[str], what: str):
        self.schema, self.optional, self.what = schema, optional, what
        self.names = frozenset(schema.names)
        self.types = tuple((f.name, next(t for test, t in self._PYTHON_TYPE if test(f.type))) for f in schema)

    def __call__(self, row: dict) -> dict:
        if not isinstance(row, dict):
            row = dict(row)
        if row.keys() == self.names and all(type(row[n]) is t for n, t in self.types):
            return dict(row)
        return _coerce_row(row, self.schema, self.optional, self.what)


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


def _merge_batches(batches: list[tuple[int, dict[str, list[dict]]]]) -> tuple[int, dict[str, list[dict]]]:
    """Hand-offs that queued up, as one: rows in hand-off order, named by the last sequence number."""
    merged: dict[str, list[dict]] = {}
    for _seq, delta in batches:
        for name, rows in delta.items():
            merged.setdefault(name, []).extend(rows)
    return batches[-1][0], merged


_CHECK_UPDATE = _RowCheck(UPDATES_SCHEMA, frozenset(), "add_update")
_CHECK_CALL = _RowCheck(CALLS_SCHEMA, CALLS_OPTIONAL, "add_calls")
_CHECK_INTERVAL = _RowCheck(INTERVALS_SCHEMA, frozenset(), "add_trainer_interval")


class EvidenceWriter:
    """Writes one run's evidence directory; safe to call from rollout and trainer threads.

    Rows are recorded faithfully (only wrong columns or types are refused): judging
    them is the contract's job, and a bad value must stay visible as evidence.

    Each `add_update` hands the rows recorded since the last hand-off (calls, trainer
    intervals, then the update) to a background thread, which writes them as one part
    per table (module docstring); so does any add that finds `flush_interval_s` passed
    since the last hand-off. The caller's thread only validates and buffers: the
    harness stays off the trainer's critical path. The parts land on disk in hand-off
    order, an update only after its calls, so a crash (even SIGKILL) leaves every update
    the thread had written, with its calls and intervals, and never a half file.
    `flush()` waits until everything recorded is on disk; `finish()` writes the whole
    tables, removes the parts, and records the final status. `on_update`, when given, is
    called with each recorded update row (the runner prints it: rl_pipeline_bench.evidence.progress).
    """

    def __init__(self, evidence_root: Path | str, run_id: str, manifest: dict | None = None,
                 *, flush_interval_s: float = 2.0, on_update: Callable[[dict], None] | None = None,
                 env_prefixes: tuple[str, ...] = ()):
        """env_prefixes: the backend's own run-shaping variables (`Backend.env_prefixes`),
        recorded in the manifest's `env` beside the common allow-list."""
        if not run_id or run_id in (".", "..") or UNSAFE_RUN_ID_CHARS.search(run_id):
            raise ValueError(f"run id {run_id!r} is not filesystem-safe (allowed: letters, digits, '.', '_', '-')")
        self._t0 = time.monotonic()
        self._lock = threading.RLock()
        self._flush_interval_s = flush_interval_s
        self._on_update = on_update
        self._env_prefixes = tuple(env_prefixes)
        self._last_flush = self._t0
        self._finished = False
        self._tables: dict[str, list[dict]] = {UPDATES: [], CALLS: [], INTERVALS: []}
        self._handed_off = {name: 0 for name in self._tables}  # rows already given to the background writer
        self._seq = 0

        m = {k: None for k in MANIFEST_FIELDS}
        m.update(dict(manifest or {}))
        m["schema"] = SCHEMA
        m["run_id"] = run_id
        m["status"] = "running"
        m["started_at"] = utc_now_iso()
        # The process that writes this evidence: a reader tells a live run from a dead one by it.
        m["supervisor"] = m["supervisor"] if isinstance(m.get("supervisor"), dict) else process_identity()
        m["finished_at"] = None
        m["error"] = None
        m["env"] = recorded_env(m["env"] if isinstance(m.get("env"), dict) else None, self._env_prefixes)
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

        self.logger = logging.getLogger(f"rl_pipeline_bench.evidence.store.{run_id}")
        self.logger.setLevel(logging.INFO)
        self._log_filter = RedactingFilter()
        self.logger.addFilter(self._log_filter)  # records logged here, before they propagate
        # The handler's filter catches records of child loggers, which skip the logger's filter.
        self._log_handler = private_log_handler(self.path / RUN_LOG, "%(asctime)s %(levelname)s [%(threadName)s] %(message)s",
                                                self._log_filter)
        self.logger.addHandler(self._log_handler)

        (self.path / PARTS_DIR).mkdir()  # the parts layout: readable (empty tables) from the start
        self._write_manifest()
        self._background = BackgroundWriter(f"evidence-writer-{run_id}", self._write_batch, _merge_batches)
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
        atomic_write_json(self.path / MANIFEST, _redact_strings(self._manifest), mode=PRIVATE_MODE)

    def update_manifest(self, **fields: Any) -> None:
        """Record more provenance (image, gpus, ...); schema/run_id/status are not settable here."""
        reserved = {"schema", "run_id", "status", "started_at", "finished_at"} & set(fields)
        if reserved:
            raise ValueError(f"manifest field(s) {sorted(reserved)} are managed by the writer")
        with self._lock:
            self._check_open()
            if "env" in fields:
                fields["env"] = (recorded_env(fields["env"], self._env_prefixes)
                                 if fields["env"] is not None else None)
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
        row = _CHECK_UPDATE(dict(update=update, completed_at=completed_at,
                                 accepted_trajectories=accepted_trajectories, assistant_tokens=assistant_tokens,
                                 policy_version=policy_version, mean_policy_age=mean_policy_age))
        with self._lock:
            self._check_open()
            self._tables[UPDATES].append(row)
            self._hand_off_locked()
        if self._on_update is not None:
            self._on_update(row)

    def add_calls(self, rows: Iterable[dict]) -> None:
        coerced = [_CHECK_CALL(r) for r in rows]
        with self._lock:
            self._check_open()
            self._tables[CALLS].extend(coerced)
            self._maybe_hand_off_locked()

    def add_trainer_interval(self, rank: int, update: int, start: float, end: float) -> None:
        row = _CHECK_INTERVAL(dict(rank=rank, update=update, start=start, end=end))
        with self._lock:
            self._check_open()
            self._tables[INTERVALS].append(row)
            self._maybe_hand_off_locked()

    # -- flushing ----------------------------------------------------------------

    def _hand_off_locked(self) -> None:
        """Give the rows recorded since the last hand-off to the background writer as one part each."""
        delta = {}
        for name in _PART_ORDER:
            rows = self._tables[name]
            if len(rows) > self._handed_off[name]:
                delta[name] = rows[self._handed_off[name]:]
                self._handed_off[name] = len(rows)
        self._last_flush = time.monotonic()
        if delta:
            self._seq += 1
            self._background.submit((self._seq, delta))

    def _maybe_hand_off_locked(self) -> None:
        if time.monotonic() - self._last_flush >= self._flush_interval_s:
            self._hand_off_locked()

    def _write_batch(self, batch: tuple[int, dict[str, list[dict]]]) -> None:
        self._write_parts(*batch)

    def _write_parts(self, seq: int, delta: dict[str, list[dict]]) -> None:
        """Background thread: one atomic part per table, the update last; one directory fsync."""
        parts = self.path / PARTS_DIR
        for name in _PART_ORDER:
            if name in delta:
                write_part(parts / part_name(_stem(name), seq), pa.Table.from_pylist(delta[name], schema=_SCHEMAS[name]))
        fsync_dir(parts)

    def _write_whole_tables(self) -> None:
        for name in _PART_ORDER:
            atomic_write_table(self.path / name, pa.Table.from_pylist(self._tables[name], schema=_SCHEMAS[name]),
                               sync_dir=False)
        fsync_dir(self.path)

    def _remove_parts(self) -> None:
        """The whole tables hold every row now; the parts they replace go (a reader prefers whole tables)."""
        parts = self.path / PARTS_DIR
        for f in parts.iterdir():
            f.unlink()
        parts.rmdir()
        fsync_dir(self.path)

    def flush(self) -> None:
        """Make everything recorded so far durable on disk (waits for the background writer)."""
        with self._lock:
            self._check_open()
            self._hand_off_locked()
            self._log_handler.flush()
        self._background.drain()

    def _check_open(self) -> None:
        if self._finished:
            raise RuntimeError(f"evidence writer for run {self.run_id} is already finished")

    def record_interruption(self, signum: int) -> None:
        """Say in the manifest at once that a signal is ending the run (`failed`), for a process
        that may not live to `finish` (Ray's driver can abort while it unwinds); the writer stays
        open, and a later `finish` writes the whole tables and its own error over this one."""
        with self._lock:  # re-entrant: a handler may interrupt the main thread inside the writer
            if self._finished:
                return
            self._manifest["status"] = "failed"
            self._manifest["finished_at"] = utc_now_iso()
            self._manifest["error"] = f"interrupted by {signal.Signals(signum).name}"
            self._write_manifest()

    def finish(self, status: str, error: str | None = None) -> None:
        """Whole tables in place of the parts, then finished_at/status/error in the manifest; the writer closes."""
        if status not in FINAL_STATUSES:
            raise ValueError(f"finish status must be one of {FINAL_STATUSES}, got {status!r}")
        with self._lock:
            self._check_open()
            try:
                background_error = self._background.close()
                if background_error is not None:
                    self.logger.warning("a background evidence write failed (%s: %s); the whole tables "
                                        "are written from memory", type(background_error).__name__, background_error)
                self._write_whole_tables()
                self._remove_parts()
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


def _read_manifest(path: Path, problems: list[str]) -> dict | None:
    f = path / MANIFEST
    if not f.is_file():
        problems.append(f"manifest_missing: {f} not found")
        return None
    try:
        manifest = read_json(f, "manifest", strict=True)
    except JsonFileError as exc:
        problems.append(f"manifest_corrupt: {exc}")
        return None
    if not isinstance(manifest, dict):
        problems.append(f"manifest_corrupt: {f} holds a {type(manifest).__name__}, not a JSON object")
        return None
    return manifest


def _conform(table: pa.Table, shown: str, schema: pa.Schema, optional: frozenset[str],
             code: str, problems: list[str]) -> pa.Table | None:
    """The table in exactly `schema` (optional columns filled with nulls), or None with a problem."""
    missing = [n for n in schema.names if n not in table.column_names and n not in optional]
    if missing:
        problems.append(f"{code}_corrupt: {shown} lacks column(s) {missing}")
        return None
    columns = []
    for fld in schema:
        if fld.name in table.column_names:
            col = table.column(fld.name)
            try:
                col = col.cast(fld.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                problems.append(f"{code}_corrupt: column '{fld.name}' of {shown} is {col.type}, expected {fld.type} ({exc})")
                return None
            if col.null_count and fld.name not in optional:
                problems.append(f"{code}_corrupt: column '{fld.name}' of {shown} has {col.null_count} null value(s)")
                return None
        else:
            col = pa.nulls(table.num_rows, fld.type)
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=schema)


def _read_table(path: Path, name: str, schema: pa.Schema, optional: frozenset[str],
                code: str, problems: list[str]) -> pd.DataFrame:
    """A whole table if present (finished layout), else its parts in order (running or crashed layout)."""
    whole = path / name
    if whole.is_file():
        files = [whole]
    else:
        files = part_files(path, _stem(name))
        if files is None:
            problems.append(f"{code}_missing: {name} not found (nor a {PARTS_DIR}/ directory of parts)")
            return _empty(schema)
    pieces = []
    for f in files:
        shown = str(f.relative_to(path))
        is_part = f.parent.name == PARTS_DIR
        try:
            table = read_part(f) if is_part else pq.read_table(f)
        except Exception as exc:  # pyarrow raises several types for truncated or foreign files
            kind = "a readable Arrow IPC file" if is_part else "readable parquet"
            problems.append(f"{code}_corrupt: {shown} is not {kind} ({type(exc).__name__}: {str(exc).replace(str(f), shown)})")
            return _empty(schema)
        conformed = _conform(table, shown, schema, optional, code, problems)
        if conformed is None:
            return _empty(schema)
        pieces.append(conformed)
    if not pieces:
        return _empty(schema)
    return (pieces[0] if len(pieces) == 1 else pa.concat_tables(pieces)).to_pandas()


#: Every table of an evidence directory, in read order (updates first: a running writer
#: lands an update's calls and intervals before the update itself).
ALL_TABLES = (UPDATES, CALLS, INTERVALS)
_TABLE_READ = {
    UPDATES: (UPDATES_SCHEMA, frozenset(), "updates"),
    CALLS: (CALLS_SCHEMA, CALLS_OPTIONAL, "calls"),
    INTERVALS: (INTERVALS_SCHEMA, frozenset(), "intervals"),
}


def _read_v1_tables(path: Path, tables: Iterable[str], problems: list[str]) -> dict[str, pd.DataFrame]:
    out = {}
    for name in ALL_TABLES:
        schema, optional, code = _TABLE_READ[name]
        out[name] = _read_table(path, name, schema, optional, code, problems) if name in tables else _empty(schema)
    return out


#: The reader of each evidence schema version this code understands. A directory of
#: another version is listed with the reason, never parsed as if it were this one.
READERS: dict[str, Callable[[Path, Iterable[str], list[str]], dict[str, pd.DataFrame]]] = {
    SCHEMA: _read_v1_tables,
}


def read_evidence(path: Path | str, tables: Iterable[str] = ALL_TABLES) -> Evidence:
    """Read an evidence directory without ever raising; problems say what is wrong.

    The manifest's `schema` picks the reader (`READERS`); an unknown version yields the
    manifest, empty tables and a `manifest_schema` problem naming the versions this code
    reads. `tables` limits what is loaded (others come back empty, unchecked): the
    report's timelines need only updates.
    """
    path = Path(path)
    tables = frozenset(tables)
    problems: list[str] = []
    if not path.is_dir():
        problems.append(f"evidence_dir_missing: {path} is not a directory")
        return Evidence(path, None, _empty(UPDATES_SCHEMA), _empty(CALLS_SCHEMA),
                        _empty(INTERVALS_SCHEMA), problems)
    manifest = _read_manifest(path, problems)
    schema = manifest.get("schema") if manifest is not None else SCHEMA  # an unreadable manifest names none
    reader = READERS.get(schema)
    if reader is None:
        problems.append(f"manifest_schema: schema is {schema!r}; this version reads only {sorted(READERS)}, "
                        "so the run's tables are not read")
        reader, tables = _read_v1_tables, frozenset()
    read = reader(path, tables, problems)
    return Evidence(path, manifest, read[UPDATES], read[CALLS], read[INTERVALS], problems)

"""Export records to an MLflow tracking store, idempotently, following the verdict.

A record's key is stored as the tag `rl_bench.key` and the digest of what was logged
(`Record.digest`: params, metrics and artifact bytes) as `rl_bench.digest`. A record
whose key is in the experiment, marked `rl_bench.exported = true`, with the same
digest is kept, so re-exporting changes nothing. One with another digest (the run was
re-summarised: its verdict or figures changed) is replaced: the new MLflow run is
logged, then the old one deleted. A run left half-logged by an interrupted export (key
present, not marked exported) is deleted and logged again.

Exports to one store are serialised on this host by a file lock keyed by the store's
URI (beside a SQLite store; under the user's cache directory for a server), and after
logging an export keeps exactly one finished run per key and digest (the earliest),
so exports racing from several hosts still converge. The default store is SQLite
under results/mlflow/ (artifacts beside it); `http://HOST:PORT` targets a server,
which must answer `/health` before anything is logged.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterable

from .. import paths
from ..records.configfile import ConfigError
from .records import Record

log = logging.getLogger(__name__)

KEY_TAG = "rl_bench.key"
DONE_TAG = "rl_bench.exported"
KIND_TAG = "rl_bench.kind"
DIGEST_TAG = "rl_bench.digest"
#: How long an export waits for another export to the same store to finish.
LOCK_TIMEOUT_S = 900.0
DEFAULT_STORE = Path(paths.MLFLOW_STORE)
BATCH = 900  # MLflow accepts at most 1000 metrics per log_batch call


def default_uri(store: Path | str = DEFAULT_STORE) -> str:
    store = Path(store).resolve()
    store.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{store / 'mlflow.db'}"


def check_server(uri: str, timeout_s: float = 5.0) -> None:
    """An http(s) tracking URI must answer, and a SQLite store's file must be one that can be opened,
    before any work (MLflow retries a store it cannot open for minutes); ConfigError naming it otherwise."""
    if uri.startswith("sqlite:///"):
        db = Path(uri[len("sqlite:///"):])
        if db.exists() and not db.is_file():
            raise ConfigError(f"MLflow store {uri}: {db} is not a regular file (a SQLite store is a file, "
                              f"e.g. sqlite:///{paths.MLFLOW_STORE}/mlflow.db)")
        if not db.parent.is_dir():
            raise ConfigError(f"MLflow store {uri}: directory {db.parent} does not exist")
        return
    if not uri.startswith(("http://", "https://")):
        return
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout_s) as resp:
            if resp.status != 200:
                raise ConfigError(f"MLflow tracking server {uri} answered /health with HTTP {resp.status}")
    except (urllib.error.URLError, OSError) as exc:
        raise ConfigError(f"MLflow tracking server {uri} does not answer ({exc}); start it or fix "
                          "--config mlflow_uri") from None


def _client(uri: str):
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise ConfigError("MLflow is not installed: `uv sync --extra mlflow` (README: Results in MLflow)") from None
    return MlflowClient(tracking_uri=uri)


def _experiment_id(client, name: str, uri: str) -> str:
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    artifact_location = None
    if uri.startswith("sqlite:///"):
        artifact_location = (Path(uri[len("sqlite:///"):]).parent / "artifacts").resolve().as_uri()
    return client.create_experiment(name, artifact_location=artifact_location)


def _existing(client, experiment_id: str, key: str):
    escaped = key.replace("'", "\\'")
    return list(client.search_runs([experiment_id], filter_string=f"tags.`{KEY_TAG}` = '{escaped}'",
                                   max_results=10))


def store_lock_path(uri: str) -> Path:
    """The lock file that serialises exports to `uri` on this host: beside a SQLite store,
    else under the user's cache directory, named by a hash of the URI."""
    if uri.startswith("sqlite:///"):
        db = Path(uri[len("sqlite:///"):])
        return db.parent / f".{db.name}.export.lock"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "rl-bench" / "mlflow-export-locks" / f"{hashlib.sha256(uri.encode('utf-8')).hexdigest()[:24]}.lock"


@contextlib.contextmanager
def store_lock(uri: str, timeout_s: float = LOCK_TIMEOUT_S):
    """Hold the store's export lock; ConfigError naming it when another export holds it too long."""
    from filelock import FileLock, Timeout

    path = store_lock_path(uri)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path), timeout=timeout_s)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        log.info("waiting for another export to %s (lock %s)", uri, path)
        try:
            lock.acquire()
        except Timeout:
            raise ConfigError(f"another `bench mlflow export` to {uri} has held {path} for over {timeout_s:.0f} s; "
                              "wait for it or stop it") from None
    try:
        yield
    finally:
        lock.release()


def _log(client, experiment_id: str, record: Record, digest: str) -> str:
    from mlflow.entities import Metric, Param, RunTag

    run = client.create_run(experiment_id, run_name=record.name,
                            tags={KEY_TAG: record.key, KIND_TAG: record.kind, DIGEST_TAG: digest})
    run_id = run.info.run_id
    now = int(time.time() * 1000)
    params = [Param(k, str(v)[:6000]) for k, v in sorted(record.params.items())]
    metrics = [Metric(k, float(v), now, 0) for k, v in sorted(record.metrics.items())]
    for name, series in sorted(record.metric_steps.items()):
        metrics.extend(Metric(name, float(v), now, int(step)) for step, v in sorted(series.items()))
    client.log_batch(run_id, params=params[:100])
    for i in range(100, len(params), 100):
        client.log_batch(run_id, params=params[i:i + 100])
    for i in range(0, len(metrics), BATCH):
        client.log_batch(run_id, metrics=metrics[i:i + BATCH])
    for path in record.artifacts:
        client.log_artifact(run_id, str(path), artifact_path=path.parent.name)
    client.log_batch(run_id, tags=[RunTag(DONE_TAG, "true")])
    client.set_terminated(run_id, status="FINISHED")
    return run_id


def _finished(runs: list, digest: str | None = None) -> list:
    """Runs marked exported (with `digest`, when given), earliest first (start time, then run id)."""
    done = [r for r in runs if r.data.tags.get(DONE_TAG) == "true"
            and (digest is None or r.data.tags.get(DIGEST_TAG) == digest)]
    return sorted(done, key=lambda r: (r.info.start_time or 0, r.info.run_id))


def _export_one(client, experiment_id: str, record: Record) -> dict:
    digest = record.digest()
    found = _existing(client, experiment_id, record.key)
    current = _finished(found, digest)
    if current:
        action = "kept"
    else:
        for partial in (r for r in found if r.data.tags.get(DONE_TAG) != "true"):
            log.warning("deleting half-exported MLflow run %s of %s", partial.info.run_id, record.key)
            client.delete_run(partial.info.run_id)
        run_id = _log(client, experiment_id, record, digest)
        action = "replaced" if _finished(found) else "logged"
        log.info("%s %s as MLflow run %s", "re-exported (summary changed)" if action == "replaced" else "exported",
                 record.key, run_id)
        found = _existing(client, experiment_id, record.key)  # a racing export elsewhere may have logged it too
        current = _finished(found, digest) or [client.get_run(run_id)]
    keep = current[0]
    for other in _finished(found):
        if other.info.run_id != keep.info.run_id:
            what = "a duplicate" if other.data.tags.get(DIGEST_TAG) == digest else "the out-of-date run"
            log.info("deleting %s %s of %s (kept %s)", what, other.info.run_id, record.key, keep.info.run_id)
            client.delete_run(other.info.run_id)
    return {"key": record.key, "run_id": keep.info.run_id, "action": action, "digest": digest}


def export(records: Iterable[Record], uri: str, experiment: str) -> list[dict]:
    """Log every record not yet in the experiment as it is now; return [{key, run_id, action, digest}] in order
    (action: logged, replaced or kept)."""
    check_server(uri)
    with store_lock(uri):
        client = _client(uri)
        experiment_id = _experiment_id(client, experiment, uri)
        return [_export_one(client, experiment_id, record) for record in records]

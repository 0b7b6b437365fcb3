"""Export records to an MLflow tracking store, idempotently.

A record's key is stored as the tag `rl_bench.key`; a record whose key is already
in the experiment with `rl_bench.exported = true` is skipped, so re-exporting
changes nothing. A run left half-logged by an interrupted export (key present,
not marked exported) is deleted and logged again. The default store is SQLite
under results/mlflow/ (artifacts beside it); `http://HOST:PORT` targets a server,
which must answer `/health` before anything is logged.
"""

from __future__ import annotations

import logging
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterable

from ..configfile import ConfigError
from .records import Record

log = logging.getLogger(__name__)

KEY_TAG = "rl_bench.key"
DONE_TAG = "rl_bench.exported"
KIND_TAG = "rl_bench.kind"
DEFAULT_STORE = Path("results/mlflow")
BATCH = 900  # MLflow accepts at most 1000 metrics per log_batch call


def default_uri(store: Path | str = DEFAULT_STORE) -> str:
    store = Path(store).resolve()
    store.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{store / 'mlflow.db'}"


def check_server(uri: str, timeout_s: float = 5.0) -> None:
    """An http(s) tracking URI must answer before any work; ConfigError naming it otherwise."""
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


def _log(client, experiment_id: str, record: Record) -> str:
    from mlflow.entities import Metric, Param, RunTag

    run = client.create_run(experiment_id, run_name=record.name,
                            tags={KEY_TAG: record.key, KIND_TAG: record.kind})
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


def export(records: Iterable[Record], uri: str, experiment: str) -> list[dict]:
    """Log every record not yet in the experiment; return [{key, run_id, action}] in order."""
    check_server(uri)
    client = _client(uri)
    experiment_id = _experiment_id(client, experiment, uri)
    out = []
    for record in records:
        found = _existing(client, experiment_id, record.key)
        done = [r for r in found if r.data.tags.get(DONE_TAG) == "true"]
        if done:
            out.append({"key": record.key, "run_id": done[0].info.run_id, "action": "kept"})
            continue
        for partial in found:
            log.warning("deleting half-exported MLflow run %s of %s", partial.info.run_id, record.key)
            client.delete_run(partial.info.run_id)
        run_id = _log(client, experiment_id, record)
        log.info("exported %s as MLflow run %s", record.key, run_id)
        out.append({"key": record.key, "run_id": run_id, "action": "logged"})
    return out

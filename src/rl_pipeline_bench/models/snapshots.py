"""Pinned model snapshots: resolve, verify and record exactly which weights a run used.

A benchmark number is only comparable if the model behind it is the pinned revision,
byte for byte. Snapshots live in a Hugging Face cache (`HF_HOME/hub/models--ORG--NAME/`
with `refs/`, `snapshots/REVISION/` and `blobs/`), the layout both `huggingface_hub`
and the backends read. This module checks that layout, hashes every file into an
identity record (`results/models/{model}.json`), re-verifies a record before a run,
and binds a run-local model directory link to the same snapshot.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any, Mapping

from .. import paths
from ..records.atomicfile import write_json_atomic
from ..records.formats import schema_of
from ..records.jsonfile import read_json, read_record

SCHEMA = schema_of("model")
_REVISION = re.compile(r"^[0-9a-f]{40}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
# A snapshot must carry a config, a tokenizer and weights to serve a run.
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tokenizer_config.json")
_WEIGHT_INDEX = "model.safetensors.index.json"


class SnapshotError(RuntimeError):
    """A snapshot is missing, incomplete or altered; the message names the file and the next step."""


def repo_folder(hf_home: Path | str, repo_id: str) -> Path:
    """`HF_HOME/hub/models--ORG--NAME`, the cache folder huggingface_hub uses for a model repo."""
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise SnapshotError(f"repo id '{repo_id}' is not of the form ORG/NAME")
    return Path(hf_home) / "hub" / ("models--" + repo_id.replace("/", "--"))


def snapshot_dir(hf_home: Path | str, repo_id: str, revision: str) -> Path:
    return repo_folder(hf_home, repo_id) / "snapshots" / revision


def check_revision(revision: str | None) -> str:
    """The pinned revision must be a full commit hash: branch names move, hashes do not."""
    if not revision or not _REVISION.match(revision):
        raise SnapshotError(f"model revision '{revision}' is not a 40-hex commit hash; pin the exact commit")
    return revision


def sha256_file(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _snapshot_files(snap: Path) -> list[Path]:
    return sorted(p for p in snap.rglob("*") if not p.is_dir() or p.is_symlink())


def verify_snapshot(hf_home: Path | str, repo_id: str, revision: str, *, model: str | None = None) -> dict[str, str]:
    """Check the hub/ layout of one pinned snapshot and return {relpath: sha256} of its files.

    Catches: a missing repo folder or revision, dangling blob links, LFS blobs whose
    content no longer matches their sha256 name, and a snapshot without config,
    tokenizer or all of its safetensors shards. Raises SnapshotError naming the file.
    """
    check_revision(revision)
    hint = _next_step(model)
    hub = Path(hf_home) / "hub"
    if not hub.is_dir():
        raise SnapshotError(f"no hub/ directory under HF_HOME {hf_home}: it must be an HF_HOME (containing hub/), not a model directory. {hint}")
    repo = repo_folder(hf_home, repo_id)
    if not repo.is_dir():
        raise SnapshotError(f"model repo {repo_id} is not in {hub} (expected {repo.name}/). {hint}")
    snap = repo / "snapshots" / revision
    if not snap.is_dir():
        present = sorted(p.name for p in (repo / "snapshots").iterdir()) if (repo / "snapshots").is_dir() else []
        raise SnapshotError(
            f"pinned revision {revision} of {repo_id} is missing from {repo}/snapshots "
            f"(present: {', '.join(present) or 'none'}). {hint}"
        )
    files: dict[str, str] = {}
    for path in _snapshot_files(snap):
        rel = path.relative_to(snap).as_posix()
        if path.is_symlink():
            target = path.resolve()
            if not target.is_file():
                raise SnapshotError(f"snapshot file {rel} of {repo_id}@{revision} links to a missing blob {target}. {hint}")
        digest = sha256_file(path)
        blob_name = path.resolve().name
        if path.is_symlink() and _SHA256.match(blob_name) and blob_name != digest:
            raise SnapshotError(
                f"snapshot file {rel} of {repo_id}@{revision} was altered: its blob is named {blob_name} "
                f"but its content hashes to {digest}. {hint}"
            )
        files[rel] = digest
    _check_complete(files, snap, f"{repo_id}@{revision}", hint)
    return files


def _check_complete(files: Mapping[str, str], snap: Path, label: str, hint: str) -> None:
    if "config.json" not in files:
        raise SnapshotError(f"snapshot {label} has no config.json. {hint}")
    if not any(name in files for name in _TOKENIZER_FILES):
        raise SnapshotError(f"snapshot {label} has no tokenizer file (one of {', '.join(_TOKENIZER_FILES)}). {hint}")
    shards = {rel for rel in files if rel.endswith(".safetensors")}
    if _WEIGHT_INDEX in files:
        index = read_json(snap / _WEIGHT_INDEX, f"snapshot {label}: {_WEIGHT_INDEX}", SnapshotError, hint=hint)
        try:
            weight_map = index["weight_map"]
        except (KeyError, TypeError) as exc:
            raise SnapshotError(f"snapshot {label}: {_WEIGHT_INDEX} has no weight_map ({exc}). {hint}") from None
        missing = sorted(set(weight_map.values()) - shards)
        if missing:
            raise SnapshotError(f"snapshot {label} lacks weight shards listed in {_WEIGHT_INDEX}: {', '.join(missing[:5])}. {hint}")
    elif not shards:
        raise SnapshotError(f"snapshot {label} has no *.safetensors weights. {hint}")


def _next_step(model: str | None) -> str:
    target = paths.model_record(model or "MODEL")
    return (
        f"Next: re-resolve it with `uv run snakemake --cores 1 --forcerun model_identity {target}` "
        "(needs network to the Hub for hub models), or pass --config hf_cache=PATH naming an HF_HOME whose hub/ holds the pinned revision."
    )


def identity_record(model: str, source: str, repo_id: str, revision: str, hf_home: Path | str) -> dict[str, Any]:
    """Verify a snapshot and describe it as the model identity record (`rl-bench/model/v1`)."""
    if source not in ("local", "hub"):
        raise SnapshotError(f"model source '{source}' is not one of: local, hub")
    hf_home = Path(hf_home).resolve()
    files = verify_snapshot(hf_home, repo_id, revision, model=model)
    return {
        "schema": SCHEMA,
        "model": model,
        "source": source,
        "repo_id": repo_id,
        "revision": revision,
        "hf_home": str(hf_home),
        "snapshot_path": str(snapshot_dir(hf_home, repo_id, revision)),
        "files": files,
    }


def hub_offline() -> bool:
    """True when HF_HUB_OFFLINE asks for no network (read at call time, not import time)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in ("1", "ON", "YES", "TRUE")


def resolve_hub_snapshot(repo_id: str, revision: str, hf_home: Path | str, *, model: str | None = None,
                         offline: bool | None = None) -> Path:
    """Make the pinned revision present in HF_HOME/hub: reuse it when there, else download it.

    Offline (HF_HUB_OFFLINE=1 or offline=True) nothing is fetched: a missing revision
    is an error that says how to provide it.
    """
    check_revision(revision)
    offline = hub_offline() if offline is None else offline
    snap = snapshot_dir(hf_home, repo_id, revision)
    if snap.is_dir():
        return snap
    if offline:
        raise SnapshotError(
            f"offline (HF_HUB_OFFLINE=1) and pinned revision {revision} of {repo_id} is not in {Path(hf_home) / 'hub'}. "
            + _next_step(model)
        )
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError

    try:
        path = snapshot_download(repo_id, revision=revision, cache_dir=Path(hf_home) / "hub")
    except RevisionNotFoundError as exc:
        raise SnapshotError(f"the Hub has no revision {revision} of {repo_id}: check the pin in config.yaml ({exc})") from exc
    except RepositoryNotFoundError as exc:
        raise SnapshotError(f"the Hub has no repo {repo_id} (or it needs a token in HF_TOKEN): {exc}") from exc
    except (LocalEntryNotFoundError, HfHubHTTPError, OSError) as exc:
        raise SnapshotError(
            f"could not download {repo_id}@{revision} into {Path(hf_home) / 'hub'}: {exc}. " + _next_step(model)
        ) from exc
    return Path(path)


def hub_identity(model: str, repo_id: str, revision: str, hf_home: Path | str, *, offline: bool | None = None) -> dict[str, Any]:
    """Resolve (or, offline, only find) a pinned hub snapshot and return its identity record."""
    resolve_hub_snapshot(repo_id, revision, hf_home, model=model, offline=offline)
    return identity_record(model, "hub", repo_id, revision, hf_home)


def hf_home_for(config: Mapping[str, Any], root: Path | str) -> Path:
    """The HF_HOME a workflow uses: config `hf_cache` when set, else paths.HF_HOME under root."""
    if config.get("hf_cache"):
        return Path(config["hf_cache"]).expanduser()
    return Path(root) / paths.HF_HOME


def write_record(record: Mapping[str, Any], path: Path | str) -> Path:
    """Write a record atomically so a reader never sees half of it."""
    return write_json_atomic(record, path)


def load_record(path: Path | str) -> dict[str, Any]:
    path = Path(path)
    return read_record(path, "model", "model identity record", SnapshotError,
                       hint=f"Next: delete it if it is there and `uv run snakemake --cores 1 {path}`")


def verify_record(record: Mapping[str, Any]) -> None:
    """Re-hash the snapshot a record names; any missing, extra or altered file is an error.

    Runs before any GPU lease so a stale or tampered snapshot never costs GPU time.
    """
    model = record.get("model")
    current = verify_snapshot(record["hf_home"], record["repo_id"], record["revision"], model=model)
    recorded = record["files"]
    label = f"{record['repo_id']}@{record['revision']}"
    missing = sorted(set(recorded) - set(current))
    if missing:
        raise SnapshotError(f"snapshot {label} lost recorded files: {', '.join(missing[:5])}. {_next_step(model)}")
    extra = sorted(set(current) - set(recorded))
    if extra:
        raise SnapshotError(f"snapshot {label} has files not in its identity record: {', '.join(extra[:5])}. {_next_step(model)}")
    for rel in sorted(recorded):
        if recorded[rel] != current[rel]:
            raise SnapshotError(
                f"snapshot file {rel} of {label} changed: recorded sha256 {recorded[rel]}, now {current[rel]}. {_next_step(model)}"
            )


def bind_model_dir(record: Mapping[str, Any], run_dir: Path | str, name: str = "model") -> Path:
    """Create `run_dir/name` as a link to the record's snapshot and return it.

    Tokenizer and processor lookups through this link read the very snapshot the
    trainer and inference load, while the model ID itself can stay canonical.
    """
    link = Path(run_dir) / name
    target = Path(record["snapshot_path"])
    if not target.is_dir():
        raise SnapshotError(f"snapshot directory {target} does not exist. {_next_step(record.get('model'))}")
    if link.exists() or link.is_symlink():
        raise SnapshotError(f"run-local model link {link} already exists; a run directory is never reused")
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target, target_is_directory=True)
    verify_binding(link, record)
    return link


def verify_binding(link: Path | str, record: Mapping[str, Any]) -> None:
    """The link must resolve to the recorded snapshot; anything else is a broken binding."""
    link = Path(link)
    resolved = link.resolve()
    expected = Path(record["snapshot_path"]).resolve()
    if not link.is_symlink() or resolved != expected:
        raise SnapshotError(f"model link {link} resolves to {resolved}, not the pinned snapshot {expected}")


def model_rule_params(config: Mapping[str, Any], model: str) -> dict[str, Any]:
    """Everything rule model_identity needs for one model, from the validated config.

    Local models are built by workflow_scripts/build_reference_model.py from their build
    config; hub models are resolved by workflow_scripts/resolve_hub_model.py.
    """
    models = config["models"]
    if model not in models:
        raise ValueError(f"unknown model '{model}' (known models: {', '.join(sorted(models))})")
    m = models[model]
    local = m["source"] == "local"
    return {
        "model": model,
        "source": m["source"],
        "repo_id": m["repo_id"],
        "revision": m.get("revision"),
        "build_config": m.get("build_config"),
        "hf_home": config.get("hf_cache") or paths.HF_HOME,
        "script": "build_reference_model.py" if local else "resolve_hub_model.py",
        "inputs": [m["build_config"], "src/rl_pipeline_bench/models/reference.py"] if local else [],
    }

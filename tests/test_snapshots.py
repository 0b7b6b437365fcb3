"""Snapshot layout checks, identity records and the model_identity rule, on locally built hub/ trees (no network)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rl_pipeline_bench.models import snapshots
from rl_pipeline_bench.models.snapshots import SnapshotError

REPO = Path(__file__).resolve().parents[1]
REPO_ID = "test-org/tiny-model"
REV = "0123456789abcdef0123456789abcdef01234567"


def make_hub_tree(hf_home: Path, repo_id: str = REPO_ID, revision: str = REV, files: dict[str, bytes] | None = None) -> Path:
    """Fixture: a Hugging Face cache tree laid out as huggingface_hub writes it.

    Weights are LFS blobs named by their sha256; small files are git blobs named by
    their git sha1; snapshot entries are relative links into blobs/.
    """
    files = files or {
        "config.json": b'{"model_type": "qwen3_moe"}',
        "tokenizer.json": b'{"version": "1.0"}',
        "model.safetensors": os.urandom(256),
    }
    repo = snapshots.repo_folder(hf_home, repo_id)
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
    snap = repo / "snapshots" / revision
    for rel, data in files.items():
        if rel.endswith(".safetensors"):
            blob = hashlib.sha256(data).hexdigest()
        else:
            blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        (repo / "blobs" / blob).write_bytes(data)
        link = snap / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(repo / "blobs" / blob, link.parent))
    return snap


def test_identity_record_hashes_every_file(tmp_path):
    snap = make_hub_tree(tmp_path)
    rec = snapshots.identity_record("tiny", "hub", REPO_ID, REV, tmp_path)
    assert rec["schema"] == "rl-bench/model/v1"
    assert rec["snapshot_path"] == str(snap.resolve())
    assert set(rec["files"]) == {"config.json", "tokenizer.json", "model.safetensors"}
    assert rec["files"]["model.safetensors"] == hashlib.sha256((snap / "model.safetensors").read_bytes()).hexdigest()
    snapshots.verify_record(rec)  # unchanged snapshot verifies


def test_missing_revision_names_present_ones(tmp_path):
    make_hub_tree(tmp_path)
    other = "f" * 40
    with pytest.raises(SnapshotError, match=f"pinned revision {other}.*present: {REV}"):
        snapshots.verify_snapshot(tmp_path, REPO_ID, other)


def test_not_an_hf_home(tmp_path):
    with pytest.raises(SnapshotError, match="no hub/ directory"):
        snapshots.verify_snapshot(tmp_path, REPO_ID, REV)


def test_branch_name_revision_refused(tmp_path):
    with pytest.raises(SnapshotError, match="40-hex"):
        snapshots.verify_snapshot(tmp_path, REPO_ID, "main")


def test_altered_lfs_blob_detected(tmp_path):
    snap = make_hub_tree(tmp_path)
    blob = (snap / "model.safetensors").resolve()
    blob.write_bytes(blob.read_bytes() + b"x")
    with pytest.raises(SnapshotError, match="model.safetensors .* was altered"):
        snapshots.verify_snapshot(tmp_path, REPO_ID, REV)


def test_dangling_link_detected(tmp_path):
    snap = make_hub_tree(tmp_path)
    (snap / "tokenizer.json").resolve().unlink()
    with pytest.raises(SnapshotError, match="tokenizer.json .*missing blob"):
        snapshots.verify_snapshot(tmp_path, REPO_ID, REV)


def test_incomplete_snapshots(tmp_path):
    make_hub_tree(tmp_path / "a", files={"config.json": b"{}", "model.safetensors": b"w"})
    with pytest.raises(SnapshotError, match="no tokenizer file"):
        snapshots.verify_snapshot(tmp_path / "a", REPO_ID, REV)
    index = json.dumps({"weight_map": {"x": "model-00001.safetensors", "y": "model-00002.safetensors"}}).encode()
    make_hub_tree(tmp_path / "b", files={"config.json": b"{}", "tokenizer.json": b"{}",
                                         "model.safetensors.index.json": index, "model-00001.safetensors": b"w"})
    with pytest.raises(SnapshotError, match="model-00002.safetensors"):
        snapshots.verify_snapshot(tmp_path / "b", REPO_ID, REV)


def test_verify_record_catches_changes(tmp_path):
    snap = make_hub_tree(tmp_path)
    rec = snapshots.identity_record("tiny", "hub", REPO_ID, REV, tmp_path)
    # A non-LFS file replaced in place: only the record can tell.
    cfg = snap / "config.json"
    cfg.unlink()
    cfg.write_text('{"model_type": "other"}')
    with pytest.raises(SnapshotError, match=f"config.json of {REPO_ID}@{REV} changed: recorded sha256 {rec['files']['config.json']}"):
        snapshots.verify_record(rec)
    cfg.unlink()
    with pytest.raises(SnapshotError, match="has no config.json"):
        snapshots.verify_record(rec)


def test_local_snapshot_with_plain_files(tmp_path):
    """A locally built model may store real files in snapshots/REV (no blobs)."""
    snap = snapshots.snapshot_dir(tmp_path, REPO_ID, REV)
    snap.mkdir(parents=True)
    for name, data in {"config.json": b"{}", "tokenizer_config.json": b"{}", "model.safetensors": b"w"}.items():
        (snap / name).write_bytes(data)
    rec = snapshots.identity_record("ref", "local", REPO_ID, REV, tmp_path)
    assert rec["source"] == "local" and len(rec["files"]) == 3


def test_offline_missing_revision_is_clear(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SnapshotError, match="offline .*not in .*hf_cache=PATH"):
        snapshots.hub_identity("m", REPO_ID, REV, tmp_path)


def test_offline_existing_snapshot_verified_without_network(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    make_hub_tree(tmp_path)
    rec = snapshots.hub_identity("m", REPO_ID, REV, tmp_path)
    assert rec["revision"] == REV and rec["source"] == "hub"


def test_bind_model_dir(tmp_path):
    make_hub_tree(tmp_path / "hf")
    rec = snapshots.identity_record("tiny", "hub", REPO_ID, REV, tmp_path / "hf")
    link = snapshots.bind_model_dir(rec, tmp_path / "run")
    assert (link / "config.json").read_bytes() == b'{"model_type": "qwen3_moe"}'
    with pytest.raises(SnapshotError, match="already exists"):
        snapshots.bind_model_dir(rec, tmp_path / "run")
    other = tmp_path / "elsewhere"
    other.mkdir()
    link.unlink()
    link.symlink_to(other)
    with pytest.raises(SnapshotError, match="not the pinned snapshot"):
        snapshots.verify_binding(link, rec)


def test_record_roundtrip(tmp_path):
    make_hub_tree(tmp_path / "hf")
    rec = snapshots.identity_record("tiny", "hub", REPO_ID, REV, tmp_path / "hf")
    path = snapshots.write_record(rec, tmp_path / "results" / "models" / "tiny.json")
    assert snapshots.load_record(path) == rec
    with pytest.raises(SnapshotError, match="does not exist"):
        snapshots.load_record(tmp_path / "nope.json")


def _run_rule(workdir: Path, hf_home: Path) -> subprocess.CompletedProcess:
    config = {"models": {"tiny": {"source": "hub", "repo_id": REPO_ID, "revision": REV}}, "hf_cache": str(hf_home)}
    # model.smk takes its input function from common.smk, which needs a whole suite config; this
    # Snakefile gives the rule its build inputs without common.smk's pre-download check (that check
    # has its own tests in test_readiness.py), so the rule's own offline verification is what runs.
    (workdir / "Snakefile").write_text(
        f"config = {config!r}\ninclude: {str(REPO / 'rules' / 'imports.smk')!r}\n"
        "def model_inputs(wildcards):\n"
        "    return model_rule_params(config, wildcards.model)['inputs']\n"
        f"include: {str(REPO / 'rules' / 'model.smk')!r}\n")
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", "-d", str(workdir), "-s", str(workdir / "Snakefile"),
         "results/models/tiny.json"],
        capture_output=True, text=True, env=env, timeout=300,
    )


@pytest.mark.e2e
def test_model_identity_rule_offline(tmp_path):
    """The rule writes the record from an existing snapshot offline, and fails clearly without one."""
    hf_home = tmp_path / "hf"
    hf_home.mkdir()
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = _run_rule(empty, hf_home)
    assert proc.returncode != 0
    assert "pinned revision" in (empty / "logs" / "models" / "tiny.log").read_text()
    assert not (empty / "results" / "models" / "tiny.json").exists()

    make_hub_tree(hf_home)
    good = tmp_path / "good"
    good.mkdir()
    proc = _run_rule(good, hf_home)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rec = json.loads((good / "results" / "models" / "tiny.json").read_text())
    assert rec["revision"] == REV and rec["hf_home"] == str(hf_home.resolve())
    assert "model.safetensors" in rec["files"]


def test_bench_snapshot_cli_offline(config, tmp_path, capsys):
    """`bench snapshot` uses the pinned revision from config.yaml and never fetches when offline."""
    from rl_pipeline_bench.cli import main

    model = next(name for name, m in config["models"].items() if m["source"] == "hub")
    pinned = config["models"][model]
    rc = main(["snapshot", "--model", model, "--hf-cache", str(tmp_path), "--offline"])
    assert rc == 1 and f"pinned revision {pinned['revision']}" in capsys.readouterr().err
    make_hub_tree(tmp_path, pinned["repo_id"], pinned["revision"])
    out = tmp_path / "rec.json"
    assert main(["snapshot", "--model", model, "--hf-cache", str(tmp_path), "--offline", "--output", str(out)]) == 0
    assert json.loads(out.read_text())["revision"] == pinned["revision"]
    assert main(["snapshot", "--model", "no-such-model", "--offline"]) == 2

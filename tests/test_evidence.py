"""Evidence v1 I/O: fresh directories, atomic files, failure survival, threads, redaction."""

from __future__ import annotations

import json
import logging
import stat
import threading
from datetime import datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rl_pipeline_bench.records.atomicfile import atomic_write_table
from rl_pipeline_bench.evidence.store import CALLS, CALLS_SCHEMA, INTERVALS, INTERVALS_SCHEMA, MANIFEST, MANIFEST_FIELDS, RUN_LOG, UPDATES, UPDATES_SCHEMA, EvidenceWriter, read_evidence
from rl_pipeline_bench.evidence.parts import PARTS_DIR, EvidenceWriteError
from rl_pipeline_bench.records.timestamps import new_run_id

HOST = {"hostname": "test-host"}  # given explicitly so the writer does not probe the machine


def call_row(t: int, **extra) -> dict:
    return dict(group=0, trajectory=t, call=0, prompt_tokens=5, forced_completion_tokens=7,
                completion_tokens=7, accepted=True, started_at=0.1, finished_at=0.2, policy_version=0, **extra)


def tmp_files(path):
    return [p.name for p in path.iterdir() if p.name.endswith(".tmp")]


def test_new_run_id_is_unique_safe_and_time_sorted():
    ids = [new_run_id("smoke suite", "reference", "multi/turn", 1) for _ in range(20)]
    assert len(set(ids)) == 20
    assert ids == sorted(ids)
    for i in ids:
        assert "/" not in i and " " not in i
        assert "trial1" in i and "multi_turn" in i


def test_writer_creates_fresh_dir_and_refuses_existing(tmp_path):
    w = EvidenceWriter(tmp_path, "run-a", {"host": HOST})
    assert sorted(p.name for p in w.path.iterdir()) == sorted([MANIFEST, RUN_LOG, PARTS_DIR])
    ev = read_evidence(w.path)  # a run that has recorded nothing yet reads as empty tables
    assert ev.problems == [] and len(ev.updates) == len(ev.calls) == len(ev.intervals) == 0
    before = (w.path / MANIFEST).read_bytes()
    with pytest.raises(FileExistsError, match="already exists"):
        EvidenceWriter(tmp_path, "run-a", {"host": HOST})
    assert (w.path / MANIFEST).read_bytes() == before  # untouched
    with pytest.raises(ValueError, match="filesystem-safe"):
        EvidenceWriter(tmp_path, "../escape", {})
    w.finish("completed")
    assert sorted(p.name for p in w.path.iterdir()) == sorted([MANIFEST, RUN_LOG, UPDATES, CALLS, INTERVALS])


def test_manifest_fields_and_lifecycle(tmp_path):
    contract = {"warmup_updates": 5, "measured_updates": 15, "headline_updates": 5,
                "trainer_ranks": [0], "offered_trajectories_per_update": 4}
    w = EvidenceWriter(tmp_path, "run-b", {"backend": "reference", "suite": "smoke", "trial": 1,
                                           "contract": contract, "host": HOST, "command": ["bench", "run"]})
    m = json.loads((w.path / MANIFEST).read_text())
    assert set(MANIFEST_FIELDS) <= set(m)
    assert m["schema"] == "rl-bench/evidence/v1" and m["run_id"] == "run-b" and m["status"] == "running"
    assert m["workload"] is None and m["image"] is None and m["finished_at"] is None  # defaults are null
    assert m["contract"] == contract and m["command"] == "bench run"
    assert datetime.fromisoformat(m["started_at"]).utcoffset().total_seconds() == 0
    w.update_manifest(image={"id": "sha256:abc"}, gpus=[{"index": 0, "uuid": "GPU-x"}])
    with pytest.raises(ValueError, match="managed by the writer"):
        w.update_manifest(status="completed")
    t = w.clock()
    assert 0 <= t < 60
    w.finish("completed")
    m = json.loads((w.path / MANIFEST).read_text())
    assert m["status"] == "completed" and m["error"] is None and m["image"] == {"id": "sha256:abc"}
    assert datetime.fromisoformat(m["finished_at"]) >= datetime.fromisoformat(m["started_at"])
    with pytest.raises(RuntimeError, match="already finished"):
        w.add_update(1, 1.0, 1, 1, 1, 0.0)
    with pytest.raises(RuntimeError, match="already finished"):
        w.finish("failed", "again")
    with pytest.raises(ValueError, match="finish status"):
        EvidenceWriter(tmp_path, "run-c", {"host": HOST}).finish("ok")


def test_each_update_lands_as_parts_then_whole_tables(tmp_path):
    w = EvidenceWriter(tmp_path, "run-d", {"host": HOST})
    for u in range(1, 6):
        w.add_calls([call_row(t, update=u) for t in range(3)])
        w.add_trainer_interval(0, u, u - 0.5, u - 0.1)
        w.add_update(u, float(u), 3, 21, u, 0.5)
        w.flush()  # add_update hands off; flush waits until the parts are on disk
        assert tmp_files(w.path / PARTS_DIR) == []
        ev = read_evidence(w.path)  # the running layout: append-only parts, one per table and update
        assert ev.problems == []
        assert ev.updates["update"].tolist() == list(range(1, u + 1))
        assert len(ev.calls) == 3 * u and len(ev.intervals) == u
        assert len(list((w.path / PARTS_DIR).glob("calls-*.arrow"))) == u
        assert not (w.path / CALLS).exists()
    w.finish("completed")
    assert not (w.path / PARTS_DIR).exists() and tmp_files(w.path) == []
    assert pq.read_schema(w.path / UPDATES).remove_metadata() == UPDATES_SCHEMA
    assert pq.read_schema(w.path / CALLS).remove_metadata() == CALLS_SCHEMA
    assert pq.read_schema(w.path / INTERVALS).remove_metadata() == INTERVALS_SCHEMA
    ev = read_evidence(w.path)
    assert str(ev.updates["update"].dtype) == "int64" and str(ev.updates["completed_at"].dtype) == "float64"
    assert ev.calls["accepted"].dtype == bool and ev.calls["update"].tolist()[:3] == [1, 1, 1]


def test_calls_are_buffered_until_flush(tmp_path):
    w = EvidenceWriter(tmp_path, "run-e", {"host": HOST}, flush_interval_s=3600)
    w.add_calls([call_row(0)])  # no update tag: the optional column stays null
    assert len(read_evidence(w.path).calls) == 0
    w.flush()
    calls = read_evidence(w.path).calls
    assert len(calls) == 1 and calls["update"].isna().all()
    w.finish("completed")


def test_bad_rows_are_refused_with_the_column_named(tmp_path):
    w = EvidenceWriter(tmp_path, "run-f", {"host": HOST})
    with pytest.raises(ValueError, match="unknown column.*'tokens'"):
        w.add_calls([{**call_row(0), "tokens": 3}])
    row = call_row(0)
    del row["completion_tokens"]
    with pytest.raises(ValueError, match="missing column.*completion_tokens"):
        w.add_calls([row])
    with pytest.raises(ValueError, match="must be an integer"):
        w.add_update(1, 1.0, 2.5, 1, 1, 0.0)
    w.finish("completed")


def test_run_that_raises_midway_leaves_failed_manifest_and_updates(tmp_path):
    with pytest.raises(RuntimeError, match="rollout worker died"):
        with EvidenceWriter(tmp_path, "run-g", {"host": HOST}) as w:
            for u in range(1, 4):
                w.add_update(u, float(u), 2, 10, u, 0.0)
            w.add_calls([call_row(0, update=4)])
            raise RuntimeError("rollout worker died")
    ev = read_evidence(tmp_path / "run-g")
    assert ev.problems == []
    assert ev.manifest["status"] == "failed"
    assert "RuntimeError: rollout worker died" in ev.manifest["error"]
    assert ev.manifest["finished_at"] is not None
    assert ev.updates["update"].tolist() == [1, 2, 3]
    assert len(ev.calls) == 1  # the final flush kept the pending call
    assert "rollout worker died" in (tmp_path / "run-g" / RUN_LOG).read_text()


def test_concurrent_add_calls_from_threads(tmp_path):
    w = EvidenceWriter(tmp_path, "run-h", {"host": HOST}, flush_interval_s=0.0)  # flush on every add
    n_threads, per_thread = 8, 25
    start = threading.Barrier(n_threads)

    def worker(g: int) -> None:
        start.wait()
        for i in range(per_thread):
            w.add_calls([dict(call_row(i), group=g)])
            if i % 10 == 0:
                w.add_trainer_interval(g, 1, 0.0, 1.0)

    threads = [threading.Thread(target=worker, args=(g,)) for g in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    w.finish("completed")
    ev = read_evidence(w.path)
    assert ev.problems == []
    pairs = set(zip(ev.calls["group"], ev.calls["trajectory"]))
    assert len(ev.calls) == n_threads * per_thread and len(pairs) == n_threads * per_thread
    assert len(ev.intervals) == n_threads * 3
    assert tmp_files(w.path) == []


def test_secrets_never_reach_manifest_or_log(tmp_path, monkeypatch, caplog):
    hf = "hf_PlantedSecretValue0123456789"
    wandb = "wandb-planted-secret-abcdef987654"
    monkeypatch.setenv("HF_TOKEN", hf)
    monkeypatch.setenv("WANDB_API_KEY", wandb)
    monkeypatch.setenv("INNOCENT_URL", "https://user:urlpassword99@example.org/x")
    w = EvidenceWriter(tmp_path, "run-i", {"host": HOST, "command": ["bench", "run", "--token", hf],
                                           "model": {"id": "m", "note": f"pulled with {wandb}"}})
    with caplog.at_level(logging.INFO):
        w.logger.info("authenticating with %s and %s", hf, wandb)
    assert "authenticating with" in caplog.text and hf not in caplog.text  # propagated copies too
    w.update_manifest(image={"registry_auth": hf})
    w.finish("failed", f"HTTP 401 for token {hf}")
    manifest_text = (w.path / MANIFEST).read_text()
    log_text = (w.path / RUN_LOG).read_text()
    for secret in (hf, wandb, "urlpassword99"):
        assert secret not in manifest_text
        assert secret not in log_text
    m = json.loads(manifest_text)
    assert m["env"]["HF_TOKEN"] == "<redacted>"  # run-shaping prefix, secret name
    assert "WANDB_API_KEY" not in m["env"] and "INNOCENT_URL" not in m["env"]  # not on the allow-list
    assert m["command"].startswith("bench run --token")
    assert "authenticating with" in log_text  # the message itself is kept


def test_manifest_and_log_are_owner_only(tmp_path):
    """They hold the environment and the command: other accounts must not read them."""
    w = EvidenceWriter(tmp_path, "run-perm", {"host": HOST})
    w.logger.info("hello")
    w.add_update(1, 1.0, 1, 1, 1, 0.0)
    w.update_manifest(image={"id": "x"})
    for name in (MANIFEST, RUN_LOG):
        assert stat.S_IMODE((w.path / name).stat().st_mode) == 0o600, name
    w.finish("completed")
    assert stat.S_IMODE((w.path / MANIFEST).stat().st_mode) == 0o600
    assert stat.S_IMODE((w.path / UPDATES).stat().st_mode) & 0o044  # tables stay readable like ordinary files


def test_each_log_record_is_redacted_once(tmp_path, monkeypatch, caplog):
    from rl_pipeline_bench.records import private_log

    w = EvidenceWriter(tmp_path, "run-once", {"host": HOST})
    calls = []
    real = private_log.redact_text
    monkeypatch.setattr(private_log, "redact_text", lambda text, *a, **k: calls.append(text) or real(text, *a, **k))
    with caplog.at_level(logging.INFO):
        w.logger.info("update %d done", 3)
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            w.logger.exception("failed")
    w.flush()
    assert [c for c in calls if "update 3 done" in c] == ["update 3 done"]
    assert len([c for c in calls if "failed" in c]) == 1 and len([c for c in calls if "RuntimeError: boom" in c]) == 1
    log_text = (w.path / RUN_LOG).read_text()
    assert "update 3 done" in log_text and "RuntimeError: boom" in log_text
    w.finish("completed")


@pytest.mark.parametrize("victim", [MANIFEST, UPDATES, CALLS, INTERVALS])
def test_read_evidence_reports_missing_and_corrupt_files(tmp_path, victim):
    w = EvidenceWriter(tmp_path, "run-j", {"host": HOST})
    w.add_update(1, 1.0, 1, 1, 1, 0.0)
    w.finish("completed")
    code = {MANIFEST: "manifest", UPDATES: "updates", CALLS: "calls", INTERVALS: "intervals"}[victim]
    data = (w.path / victim).read_bytes()
    (w.path / victim).write_bytes(data[: len(data) // 2])
    ev = read_evidence(w.path)
    assert [p.split(":")[0] for p in ev.problems] == [f"{code}_corrupt"]
    (w.path / victim).unlink()
    ev = read_evidence(w.path)
    assert [p.split(":")[0] for p in ev.problems] == [f"{code}_missing"]
    assert list(ev.updates.columns) == UPDATES_SCHEMA.names  # empty frames keep the schema


def test_read_evidence_missing_dir(tmp_path):
    ev = read_evidence(tmp_path / "absent")
    assert ev.manifest is None and len(ev.updates) == 0
    assert ev.problems[0].startswith("evidence_dir_missing: ")


def test_crashed_layout_reads_parts_and_names_a_corrupt_part(tmp_path):
    w = EvidenceWriter(tmp_path, "run-k", {"host": HOST})
    for u in (1, 2, 3):
        w.add_calls([call_row(t, update=u) for t in range(2)])
        w.add_update(u, float(u), 2, 14, u, 0.0)
        w.flush()  # one part per update; then the process "dies": no finish, the parts stay
    ev = read_evidence(w.path)
    assert ev.problems == [] and ev.manifest["status"] == "running"
    assert ev.updates["update"].tolist() == [1, 2, 3] and ev.calls["update"].tolist() == [1, 1, 2, 2, 3, 3]
    victim = sorted((w.path / PARTS_DIR).glob("calls-*.arrow"))[1]
    victim.write_bytes(victim.read_bytes()[:20])
    problems = read_evidence(w.path).problems
    assert len(problems) == 1 and problems[0].startswith(f"calls_corrupt: {PARTS_DIR}/{victim.name} is not a readable Arrow IPC file")
    # A crash inside finish (whole table written, parts not yet removed): the whole table wins.
    atomic_write_table(w.path / CALLS, pa.Table.from_pylist([call_row(9, update=1)], schema=CALLS_SCHEMA))
    ev = read_evidence(w.path)
    assert ev.problems == [] and ev.calls["trajectory"].tolist() == [9]


def test_a_failed_background_write_fails_the_run_and_finish_keeps_every_row(tmp_path, monkeypatch):
    w = EvidenceWriter(tmp_path, "run-l", {"host": HOST})
    w.add_update(1, 1.0, 1, 7, 1, 0.0)
    w.flush()

    def disk_full(seq, delta):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(w, "_write_parts", disk_full)
    w.add_update(2, 2.0, 1, 7, 2, 0.0)  # handed off; the background write fails
    with pytest.raises(EvidenceWriteError, match="No space left on device"):
        w.flush()
    with pytest.raises(EvidenceWriteError, match="No space left on device"):
        w.add_update(3, 3.0, 1, 7, 3, 0.0)
    w.finish("failed", "disk full")
    ev = read_evidence(w.path)
    assert ev.problems == [] and ev.updates["update"].tolist() == [1, 2, 3]  # from memory, nothing lost
    assert "background evidence write failed" in (w.path / RUN_LOG).read_text()


_CRASH_CHILD = """
import sys
from rl_pipeline_bench.evidence.store import EvidenceWriter
w = EvidenceWriter(sys.argv[1], "run-kill", {"host": {"hostname": "test"}})
u = 0
while True:
    u += 1
    w.add_calls([dict(group=g, trajectory=0, call=0, prompt_tokens=5, forced_completion_tokens=7,
                      completion_tokens=7, accepted=True, started_at=0.1, finished_at=0.2,
                      policy_version=u - 1, update=u) for g in range(4)])
    w.add_trainer_interval(0, u, u - 0.5, u - 0.1)
    w.add_update(u, float(u), 4, 28, u, 0.0)
"""


def test_sigkill_while_writing_leaves_every_landed_update_whole(tmp_path):
    """A writer killed at an arbitrary instant: whole parts only, each update with its calls and interval."""
    import os
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "-c", _CRASH_CHILD, str(tmp_path)])
    run = tmp_path / "run-kill"
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            if run.is_dir() and len(read_evidence(run).updates) >= 30:
                break
            time.sleep(0.02)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    ev = read_evidence(run)
    assert ev.problems == [] and ev.manifest["status"] == "running"
    n = len(ev.updates)
    assert n >= 30 and ev.updates["update"].tolist() == list(range(1, n + 1))
    landed = ev.calls[ev.calls["update"] <= n]
    assert sorted(landed["update"].tolist()) == sorted(u for u in range(1, n + 1) for _ in range(4))
    assert ev.intervals[ev.intervals["update"] <= n]["update"].tolist() == list(range(1, n + 1))


def test_each_schema_version_has_its_reader_and_an_unknown_one_is_named(tmp_path):
    w = EvidenceWriter(tmp_path, "run-m", {"host": HOST})
    w.add_calls([call_row(0, update=1)])
    w.add_update(1, 1.0, 1, 7, 1, 0.0)
    w.finish("completed")
    only_updates = read_evidence(w.path, tables=[UPDATES])  # what the report's timelines load
    assert only_updates.problems == [] and len(only_updates.updates) == 1 and len(only_updates.calls) == 0
    manifest = json.loads((w.path / MANIFEST).read_text())
    (w.path / MANIFEST).write_text(json.dumps(manifest | {"schema": "rl-bench/evidence/v9"}))
    ev = read_evidence(w.path)
    assert ev.manifest["schema"] == "rl-bench/evidence/v9" and len(ev.updates) == 0  # never parsed as v1
    assert ev.problems == ["manifest_schema: schema is 'rl-bench/evidence/v9'; this version reads only "
                           "['rl-bench/evidence/v1'], so the run's tables are not read"]


def test_hand_offs_that_queue_up_behind_a_slow_write_land_as_one_part(tmp_path, monkeypatch):
    import time

    w = EvidenceWriter(tmp_path, "run-n", {"host": HOST})
    write = w._write_parts
    seen = []
    busy = threading.Event()

    def slow_write(seq, delta):
        seen.append(seq)
        if len(seen) == 1:
            busy.set()
            time.sleep(0.3)  # the disk is busy; the next four updates queue up meanwhile
        write(seq, delta)

    monkeypatch.setattr(w, "_write_parts", slow_write)
    for u in range(1, 6):
        w.add_calls([call_row(t, update=u) for t in range(2)])
        w.add_update(u, float(u), 2, 14, u, 0.0)
        if u == 1:
            assert busy.wait(10)
    w.flush()
    assert seen == [1, 5]  # the backlog became one batch, named by its last hand-off
    assert [p.name for p in sorted((w.path / PARTS_DIR).glob("updates-*"))] == ["updates-000001.arrow",
                                                                                "updates-000005.arrow"]
    ev = read_evidence(w.path)
    assert ev.updates["update"].tolist() == [1, 2, 3, 4, 5]
    assert ev.calls["update"].tolist() == [u for u in range(1, 6) for _ in range(2)]
    w.finish("completed")


def test_atomic_write_without_replace_keeps_an_existing_file(tmp_path):
    from rl_pipeline_bench.records.atomicfile import atomic_write_json

    target = tmp_path / "run.json"
    atomic_write_json(target, {"run_id": "first"}, replace=False)
    with pytest.raises(FileExistsError):
        atomic_write_json(target, {"run_id": "second"}, replace=False)
    assert json.loads(target.read_text()) == {"run_id": "first"}
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # no temp file left behind

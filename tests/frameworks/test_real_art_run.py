"""ART's `run(ctx)` end to end with the real openpipe-art 0.5.23 (framework venv).

ART's own TrainableModel and its registration, PipelineTrainer (rollout workers,
online autotuner, off-policy accounting, train log via Model.log into history.jsonl),
its OpenAI client and its profile store run the plan; the driver's timed backend
subclass, publication waits and history follower run as in the image. Doubled,
because they need GPUs:

- vLLM: `bench_fixtures.FakeChatServer` on loopback (forced lengths, token ids,
  each decode held briefly so weight publications land while calls are in flight).
- MegatronBackend (`RecordingMegatronBackend` below): in 0.5.23 every method of
  it that trains or serves goes through its DistributedMegatronService into the
  Megatron ranks and vLLM runtime that ArtRuntime launches (packing included), so the
  double takes the backend's place and answers as it does: a train call returns the
  next step with the step metrics ART's trainer streams, and the service's
  wait_for_serving returns once the loopback vLLM serves that step. ART's own
  MegatronBackend._get_service is run in test_real_art.py.

SIGTERM mid-run: `bench run`'s handler raises where the signal lands; on ART's event loop
that was often inside a rollout task, whose gather(return_exceptions=True) absorbed it
(the run then completed). The driver runs ART's loop through async_signals, and the test
below signals while rollouts are in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import signal
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from openai.types.chat.chat_completion import Choice

from bench_fixtures import N, FakeChatServer, require, run_as_bench_run, small_context, wordlevel_tokenizer

art = require("art")

from art.preprocessing.vllm_tokens import choice_completion_tokens  # noqa: E402
from art.serving_capabilities import ART_SERVING_PROTOCOL_VERSION, ServingCapabilities  # noqa: E402

from rl_pipeline_bench.backends import get  # noqa: E402
from rl_pipeline_bench.backends.art import driver  # noqa: E402
from rl_pipeline_bench.evidence.store import read_evidence  # noqa: E402


#: Updates' worth of plan groups offered: ART's online autotuner may take several groups per step.
PLAN = 8 * N


class RecordingMegatronBackend:
    """Stands in for art.megatron.MegatronBackend (see the module docstring); records what it trains."""

    publish_delay_s = 0.3  # a LoRA publication to vLLM takes time: calls are in flight across it

    def __init__(self, *, path: str | None = None, enable_expert_replay: bool = True):
        self._path, self.enable_expert_replay = path, enable_expert_replay
        self.step = 0
        self.trained: list[dict] = []  # per train call: groups, trajectories, kwargs ART passed
        self.served: list[int] = []
        self.closed = False

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def close(self) -> None:
        self.closed = True

    async def register(self, model) -> None:
        self.model = model

    async def _prepare_backend_for_training(self, model, config=None) -> tuple[str, str]:
        # Where ART's service would start its vLLM runtime, and what that runtime reports it serves.
        object.__setattr__(model, "_serving_capabilities", ServingCapabilities(
            runtime="art_vllm", protocol_version=ART_SERVING_PROTOCOL_VERSION, in_flight_lora_updates=True,
            policy_token_spans=True))
        return SERVER.base_url, "loopback"

    def _model_inference_name(self, model, step: int | None = None) -> str:
        return f"{model.name}@{self.step if step is None else step}"

    async def _get_step(self, model) -> int:
        return self.step

    async def train(self, model, trajectory_groups, **kwargs):
        groups = list(trajectory_groups)
        await asyncio.sleep(0.2)  # the Megatron step
        self.step += 1
        # The Megatron trainer's trainable assistant tokens: the completion tokens vLLM returned.
        tokens = sum(choice_completion_tokens(c) for g in groups for t in g.trajectories
                     for c in t.messages_and_choices if isinstance(c, Choice))
        self.trained.append({"groups": len(groups), "trajectories": sum(len(g.trajectories) for g in groups),
                             "tokens": tokens, "kwargs": sorted(kwargs)})
        return SimpleNamespace(step=self.step, metrics={"data/step_trainable_assistant_tokens": float(tokens)},
                               checkpoint_path=None)

    async def collect_train_step_vllm_metrics(self, model) -> dict[str, float]:
        """The gauges ART's vLLM runtime reports to the online autotuner (LocalBackend's names)."""
        running = len(SERVER.requests) - len(SERVER.served)
        return {"vllm/num_requests_running": float(running), "vllm/num_requests_waiting": 0.0,
                "vllm/num_requests_waiting_capacity": 64.0, "vllm/kv_cache_usage_perc": 0.05,
                "vllm/num_preemptions_total": 0.0}

    async def _resolve_grad_accumulation_sequences(self, service, config) -> int:
        return int(config.grad_accumulation_sequences or 1)  # the Megatron service: data-parallel size 1

    async def _get_service(self, model):
        return self  # the DistributedMegatronService: its wait_for_serving

    async def wait_for_serving(self, step: int) -> None:
        await asyncio.sleep(self.publish_delay_s)
        # In-flight LoRA: vLLM swaps the adapter while decodes run (if any are running within 5 s).
        deadline = time.monotonic() + 5
        while len(SERVER.requests) == len(SERVER.served) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        SERVER.policy = step  # vLLM now serves the step's LoRA
        self.served.append(step)


SERVER: FakeChatServer  # the loopback vLLM of the current test


@pytest.fixture
def gpu_edges(monkeypatch):
    with installed_gpu_edges(monkeypatch) as edges:
        yield edges


@contextlib.contextmanager
def installed_gpu_edges(monkeypatch, delay_s: float = 0.2):
    global SERVER
    backends: list[RecordingMegatronBackend] = []

    class Recorded(RecordingMegatronBackend):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            backends.append(self)

    with FakeChatServer(wordlevel_tokenizer(), delay_s=delay_s, policy_spans=True) as server:
        SERVER = server
        # The driver's timed subclass is built over the double instead of MegatronBackend (the
        # support check before it still probes ART's own MegatronBackend).
        timed = driver.timed_backend_class
        monkeypatch.setattr(driver, "timed_backend_class", lambda _megatron, clock, times: timed(Recorded, clock, times))
        cwd = os.getcwd()
        try:
            yield server, backends
        finally:
            os.chdir(cwd)  # run(ctx) works in its native directory


def test_art_run_end_to_end(tmp_path, gpu_edges):
    server, backends = gpu_edges
    ctx = small_context(tmp_path, "art", plan_updates=PLAN)
    get("art").run(ctx)
    ctx.writer.finish("completed")
    ev = read_evidence(ctx.writer.path)
    (backend,) = backends
    assert backend.closed and backend.enable_expert_replay  # the native backend settings, closed with the run

    # N updates, each logged by ART's Model.log and turned into evidence once vLLM served it.
    assert ev.updates["update"].tolist() == list(range(1, N + 1)) == backend.served
    assert ev.updates["policy_version"].tolist() == list(range(1, N + 1))
    assert ev.updates["assistant_tokens"].tolist() == [t["tokens"] for t in backend.trained]
    assert ev.updates["accepted_trajectories"].tolist() == [t["trajectories"] for t in backend.trained]
    assert ev.intervals["update"].tolist() == list(range(1, N + 1))
    # An update completes at its publication, after its train call ended.
    assert (ev.updates["completed_at"].to_numpy() >= ev.intervals["end"].to_numpy()).all()
    assert ev.manifest["framework"]["name"] == "openpipe-art" and ev.manifest["framework"]["support_gaps"] == {}
    assert "art_autotuner" in ev.manifest

    # A multi-call workload: every request forced, sent through ART's client with its template kwargs.
    calls = ev.calls
    assert (calls["completion_tokens"] == calls["forced_completion_tokens"]).all()
    per_traj = calls.groupby(["update", "group", "trajectory"]).size()
    assert set(per_traj) == {ctx.workload_spec.new_calls} and ctx.workload_spec.new_calls > 1
    assert all(b["min_tokens"] == b["max_tokens"] and b["ignore_eos"] for b in server.requests)
    # Per-call policy version: PipelineTrainer's policy_version when the call started, which
    # moves to a step once its train call returns.
    ordered = calls.sort_values("started_at")
    ends = ev.intervals.sort_values("update")["end"].to_numpy()
    for started, version in zip(ordered["started_at"], ordered["policy_version"]):
        assert version <= int((ends <= started).sum()), (started, version, ends)
    assert ordered["policy_version"].is_monotonic_increasing and ordered["policy_version"].max() >= 1
    # In-flight LoRA: some decodes were served across a publication.
    assert any(arrived != answered for arrived, answered in server.served)


def test_contract_summary_reads_the_run(tmp_path, gpu_edges):
    """The project's own `bench summarize` reads the evidence ART's run wrote."""
    ctx = small_context(tmp_path, "art", plan_updates=PLAN)
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


def test_a_publication_that_never_comes_fails_the_run_by_name(tmp_path, gpu_edges, monkeypatch):
    async def unserved(self, step):
        raise TimeoutError(f"vLLM did not serve step {step}")

    monkeypatch.setattr(RecordingMegatronBackend, "wait_for_serving", unserved)
    ctx = small_context(tmp_path, "art", plan_updates=PLAN)
    with pytest.raises(RuntimeError, match=r"^publication_failed: step 1: TimeoutError: vLLM did not serve step 1;"):
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
        run_as_bench_run(small_context(tmp, "art", plan_updates=PLAN))


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

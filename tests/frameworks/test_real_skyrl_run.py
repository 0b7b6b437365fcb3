"""SkyRL's `run(ctx)` end to end with the real skyrl 0.4.0 (framework venv).

SkyRL's own BasePPOExp, fully asynchronous trainer, generation workers, staleness
manager, dataloader, Tracking and a real local Ray run the plan; only the GPU edges
are doubles (skyrl_doubles.py): a loopback vLLM (bench_fixtures.FakeChatServer,
which puts special tokens inside forced spans and holds each decode briefly), a
worker dispatch that records what it is asked to train, and SkyRL's NVLink
peer-access probe (a two-GPU Ray task) answered as the H200 host would, and the
metrics URLs Ray's agents would give pointed at the loopback vLLM.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
import sys
from types import SimpleNamespace
from pathlib import Path

import pytest

from bench_fixtures import N, FakeChatServer, require, run_as_bench_run, small_context, wordlevel_tokenizer

require("skyrl")

import ray  # noqa: E402
from skyrl.train.entrypoints.main_base import BasePPOExp  # noqa: E402
from skyrl.train.trainer import RayPPOTrainer  # noqa: E402
from skyrl.train.utils import utils as skyrl_utils  # noqa: E402
from skyrl.train.utils import vllm_metrics_scraper  # noqa: E402

from skyrl_doubles import LoopbackInference, RecordingWorkerDispatch  # noqa: E402

from rl_pipeline_bench.backends import get  # noqa: E402
from rl_pipeline_bench.evidence.store import read_evidence  # noqa: E402

MEGATRON_WORKER = "skyrl.backends.skyrl_train.workers.megatron.megatron_worker"


@pytest.fixture
def gpu_edges(monkeypatch):
    """Install the doubles where SkyRL would start vLLM servers and Megatron workers."""
    with installed_gpu_edges(monkeypatch) as edges:
        yield edges


@contextlib.contextmanager
def installed_gpu_edges(monkeypatch, delay_s: float = 0.05, hold_first_decode_s: float = 0.0):
    tok = wordlevel_tokenizer()
    with FakeChatServer(tok, delay_s=delay_s, hold_first_decode_s=hold_first_decode_s) as server:
        dispatch = RecordingWorkerDispatch(server, sync_delay_s=0.1)
        root = server.base_url.removesuffix("/v1")
        monkeypatch.setattr(BasePPOExp, "get_inference_client", lambda self: LoopbackInference(proxy_url=root))
        # Ray's metrics agents (which carry vLLM's Prometheus metrics on the GPU host) do not run
        # here; SkyRL's per-step scrape reads the loopback vLLM's /metrics instead.
        monkeypatch.setattr(vllm_metrics_scraper, "discover_ray_metrics_urls", lambda: [f"{root}/metrics"])
        # The Megatron worker classes (placed on the training GPUs by build_models) need Megatron-Core.
        monkeypatch.setitem(sys.modules, MEGATRON_WORKER, SimpleNamespace(
            PolicyWorker=None, CriticWorker=None, RefWorker=None))
        monkeypatch.setattr(RayPPOTrainer, "build_models",
                            lambda self, *workers: setattr(self, "dispatch", dispatch))
        # The NVLink peer-access probe schedules a two-GPU Ray task; the contract host's H200s answer yes.
        monkeypatch.setattr(skyrl_utils, "peer_access_supported", lambda max_num_gpus_per_node: True)
        try:
            yield server, dispatch
        finally:
            if ray.is_initialized():
                ray.shutdown()


def test_skyrl_run_end_to_end(tmp_path, monkeypatch):
    # The first decode is held until step 1's weights are published: generation may otherwise
    # finish every group it may start (the staleness budget) before the trainer's first sync,
    # and then nothing is in flight across a publication (seen on a loaded 2-core CI machine).
    with installed_gpu_edges(monkeypatch, hold_first_decode_s=60) as (server, dispatch):
        ctx = small_context(tmp_path, "skyrl")
        get("skyrl").run(ctx)
    ctx.writer.finish("completed")
    ev = read_evidence(ctx.writer.path)
    manifest = ev.manifest
    assert manifest["framework"]["native_config"]["trainer"]["bf16"] is True
    assert manifest["trainer_timing"]["source"] == "controller_interval"

    # N updates, each with its native training interval, trained on what the generator sent.
    assert ev.updates["update"].tolist() == list(range(1, N + 1))
    assert ev.intervals["rank"].tolist() == [0] * N and ev.intervals["update"].tolist() == list(range(1, N + 1))
    assert len(dispatch.trained) == N and dispatch.syncs == N + 1  # the initial sync, then one per step
    assert [t["loss_mask_tokens"] for t in dispatch.trained] == ev.updates["assistant_tokens"].tolist()

    # Every completions request was token ids, forced, and each later prompt extended the earlier.
    calls = ev.calls
    assert (calls["completion_tokens"] == calls["forced_completion_tokens"]).all()
    assert len(calls) <= len(server.requests)  # requests cancelled in flight at the end have no call row
    # Accepted calls come in whole trajectories; calls of groups cancelled at the end are kept, not accepted.
    per_traj = calls[calls["accepted"]].groupby(["update", "group", "trajectory"]).size()
    assert set(per_traj) == {ctx.workload_spec.new_calls}
    by_prefix = sorted((b["prompt"] for b in server.requests), key=len)
    assert all(isinstance(t, int) for p in by_prefix for t in p)
    eos = server.tokenizer.eos_token_id
    assert any(eos in p[1:] for p in by_prefix)  # special tokens from earlier completions are kept in prompts

    # Per-call policy version: the policy vLLM served when the call started (SkyRL's
    # global_step is one ahead until the step's weights are synced).
    done = ev.updates["completed_at"].to_numpy()
    for started, version in zip(calls["started_at"], calls["policy_version"]):
        assert version == int((done <= started).sum()), (started, version, done)
    # In-flight spans: some decodes were served across a weight publication.
    assert any(arrived != answered for arrived, answered in server.served)


def test_skyrl_generator_failure_leaves_evidence_before_the_process_exits(tmp_path, gpu_edges, monkeypatch):
    """SkyRL's generation worker ends the process with os._exit(1) on any exception; the manifest says why first."""
    import os

    from skyrl.train import fully_async_trainer

    exits: list[int] = []

    def no_exit(code):  # os._exit would end pytest: record it and end the run instead
        exits.append(code)
        raise SystemExit(code)

    # Only SkyRL's trainer module sees the recording _exit (Ray's own processes keep theirs).
    monkeypatch.setattr(fully_async_trainer, "os", SimpleNamespace(**{**vars(os), "_exit": no_exit}))
    server, _dispatch = gpu_edges
    server.short_by = 1  # the server ignores the forced length: the generator raises
    ctx = small_context(tmp_path, "skyrl")
    with pytest.raises(SystemExit):
        get("skyrl").run(ctx)
    assert exits and set(exits) == {1}  # each generation worker that failed ended the process
    manifest = json.loads((ctx.writer.path / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    assert manifest["error"].startswith("generator_failed: CompletionLengthError: completion length")
    assert os.path.exists(ctx.writer.path / "run.log")


MID_RUN = "mid-run"  # the marker file sigterm_run writes once step 1 is trained and published


def sigterm_run(evidence_root: str) -> None:
    """Subprocess entry: a SkyRL run as `bench run` makes it in the image (SIGTERM handler, evidence kept)."""
    tmp = Path(evidence_root)
    with pytest.MonkeyPatch.context() as mp, installed_gpu_edges(mp) as (_server, dispatch):
        publish = dispatch.save_weights_for_sampler

        async def publish_then_stall(model_id=None):
            """After step 1's weights are out the run is mid-way: say so, and stay there."""
            await publish(model_id)
            if dispatch.trained:
                (tmp / MID_RUN).touch()
                await asyncio.sleep(600)

        dispatch.save_weights_for_sampler = publish_then_stall
        run_as_bench_run(small_context(tmp, "skyrl"))


def test_sigterm_mid_run_fails_the_run_with_its_evidence(tmp_path):
    here = Path(__file__).parent
    code = f"import sys; sys.path.insert(0, {str(here)!r}); import test_real_skyrl_run as t; t.sigterm_run({str(tmp_path)!r})"
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=here.parents[1], start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    calls_dir = tmp_path / "evidence" / "run-1"
    try:
        # Not a fixed sleep: on a fast machine the whole run ended within it, on a slow one
        # it had not started training. The run says when step 1 is trained and published.
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline and proc.poll() is None and not (tmp_path / MID_RUN).exists():
            time.sleep(0.5)
        assert (tmp_path / MID_RUN).exists() and proc.poll() is None, proc.communicate()[0][-3000:]
        os.kill(proc.pid, signal.SIGTERM)
        out = proc.communicate(timeout=300)[0]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode != 0, out[-3000:]
    ev = read_evidence(calls_dir)
    assert ev.manifest["status"] == "failed", out[-3000:]
    # Ray's driver (started inside run(ctx) by SkyRL's initialize_ray) replaces the SIGTERM
    # handler with its own sys.exit(signum): the failure is recorded as that exit.
    error = ev.manifest["error"]
    assert "interrupted by SIGTERM" in error or error == f"SystemExit: {int(signal.SIGTERM)}", error
    assert len(ev.calls) > 0  # what ran before the signal is kept

"""The two GPU edges of a SkyRL run, as test doubles for `run(ctx)` in the framework venv.

- `loopback_inference(url)`: SkyRL's own `RemoteInferenceClient` (what
  `BasePPOExp.get_inference_client()` builds over the vLLM servers on the inference GPUs
  behind SkyRL's router), pointed at the loopback server (bench_fixtures.FakeChatServer),
  which answers the router's data plane (completions, `/finish_session`).
- `RecordingWorkerDispatch`: stands in for the `WorkerDispatch` that
  `RayPPOTrainer.build_models` makes over the Megatron policy workers on the
  training GPUs. It stages mini-batches with SkyRL's own `MeshDispatch.stage_chunks`
  (Ray's object store, as the real dispatch does), records what each
  forward_backward is asked to train, and answers with SkyRL's `WorkerOutput`.
  Its weight sync moves the loopback server to the next policy version.

Everything else (BasePPOExp, the fully asynchronous trainer, its generation workers,
staleness manager, dataloader, Ray, Tracking) is SkyRL's own code.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import ray
from skyrl.backends.skyrl_train.distributed.dispatch import MeshDispatch, WorkerOutput


def loopback_inference(url: str):
    """SkyRL's client with the loopback server as its router and its one engine."""
    from skyrl.backends.skyrl_train.inference_servers.remote_inference_client import RemoteInferenceClient

    return RemoteInferenceClient(proxy_url=url, server_urls=[url], data_parallel_size=1)


@dataclass
class RecordingWorkerDispatch:
    server: Any  # the loopback vLLM; its `policy` is the version it serves
    dp_size: int = 2
    trained: list[dict[str, Any]] = field(default_factory=list)
    syncs: int = 0
    sync_delay_s: float = 0.0
    fail_training_at: int | None = None

    def init_weight_sync_state(self, inference_engine_client) -> None:
        self.inference_engine_client = inference_engine_client

    async def save_weights_for_sampler(self, model_id=None) -> None:
        await asyncio.sleep(self.sync_delay_s)
        self.syncs += 1
        self.server.policy = len(self.trained)  # vLLM now serves the weights of the steps trained so far

    def get_timing_metrics(self) -> dict[str, float]:
        return {}

    def get_lcm_dp_size(self) -> int:
        return self.dp_size

    def stage_data(self, model, data, mini_batch_boundaries):
        return MeshDispatch.stage_chunks(self.dp_size, data, mini_batch_boundaries)

    def forward_backward_from_staged(self, model, chunk_refs, **_kwargs) -> WorkerOutput:
        chunks = ray.get(list(chunk_refs))
        if self.fail_training_at is not None and len(self.trained) + 1 == self.fail_training_at:
            raise RuntimeError("recorded trainer failure")
        self.trained.append({
            "model": model,
            "sequences": sum(int(c["sequences"].shape[0]) for c in chunks),
            "loss_mask_tokens": sum(int(c["loss_mask"].sum()) for c in chunks),
        })
        return WorkerOutput(loss_fn_output_type="scalar", loss_fn_outputs=[], metrics={"policy_loss": 0.0})

    def optim_step(self, model, model_id=None) -> float:
        return 1.0

    def empty_cache(self, model=None) -> None:
        pass

    def finalize_pending_saves(self, model) -> None:
        pass

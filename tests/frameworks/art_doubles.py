"""The GPU edges of an ART run, as test doubles for `run(ctx)` in the framework venv.

ART's own `MegatronBackend` runs (packing requests, the distributed trajectory queue,
the pipeline dispatch fence, train, publication waits, close). What it reaches below
needs GPUs and Monarch (not installed here), so two things it builds are doubled, where
they cross into other processes:

- `LoopbackArtRuntime` stands in for the `ArtRuntime` that `ArtRuntime.start_local`
  starts (Monarch host services, trainer ranks, vLLM replicas). Its `pack` does what
  `ArtRuntime.pack` does through `MonarchPackingEndpoint`: it hands the `PackingRequest`
  (pickled, as Monarch sends it) to a packing host in another process, started with
  `cwd=/` (Monarch starts its worker without a cwd, monarch_bootstrap.py:921-933; `/`
  proves nothing there depends on the driver's working directory). That host runs ART's
  own packer, `MegatronBackend._get_packed_tensors` (its tokenizer by the bare model ID,
  tokenisation, routing-replay alignment, prefix-tree packing), and stores the packed
  batch in ART's shared-memory `PackedBatchInbox`, as `ArtHostService.pack_batch` does
  (art/distributed/monarch_actor.py:530-600, which needs Monarch to import).
- `LoopbackMegatronService` stands in for the `DistributedMegatronService` that drives
  the Megatron ranks and vLLM through that runtime: its OpenAI server is the loopback
  vLLM (bench_fixtures.FakeChatServer, answering with token ids, logprobs, policy spans
  and ART's binary routed experts, as ART's vLLM runtime does), a train job maps the
  packed batch from shared memory as a Megatron rank would and records its trainable
  tokens, sets the dispatch fence, and publishes the new step to the loopback vLLM a
  little later (in-flight LoRA: decodes run across it).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from typing import Any

#: The packing host's own state (module globals in its process, as the actor's attributes are).
_HOST: dict[str, Any] = {}
HOST_ID = "loopback-host"


def host_pack(request, batch_id: str):
    """In the packing host's process: what ArtHostService.pack_batch does for an inline request
    (returned with the process's working directory)."""
    from art.distributed.data_plane import PackedBatchInbox
    from art.distributed.packing import PackingResult
    from art.megatron.backend import MegatronBackend

    groups = [bundle.build() for bundle in request.trajectory_groups]
    if request.collect_packing_shapes:
        for group in groups:
            group._collect_packing_shape = True
    if request.trajectory_log_path is not None:
        from art.utils.trajectory_logging import write_trajectory_groups_parquet

        os.makedirs(os.path.dirname(request.trajectory_log_path), exist_ok=True)
        write_trajectory_groups_parquet(groups, request.trajectory_log_path)
    packer = _HOST.setdefault("packer", MegatronBackend(path=f"/tmp/art-packing-{os.getpid()}",
                                                        enable_expert_replay=request.include_moe_routing))
    started = time.monotonic()
    packed = packer._get_packed_tensors(
        request.model.build(), groups, advantage_balance=request.advantage_balance,
        allow_training_without_logprobs=request.allow_training_without_logprobs, scale_rewards=request.scale_rewards,
        plot_tensors=request.plot_tensors, packed_sequence_length=request.packed_sequence_length,
        logprob_calculation_chunk_size=request.logprob_calculation_chunk_size,
        include_moe_routing=request.include_moe_routing)
    shapes = tuple(group._packed_group_shape for group in groups)
    if packed is None:
        return PackingResult(ref=None, packed_group_shapes=shapes, generation_id=request.generation_id), os.getcwd()
    inbox = _HOST.setdefault("inbox", PackedBatchInbox(host_id=HOST_ID, capacity_bytes=1 << 30))
    ref = inbox.store.create(packed, batch_id=batch_id, group_ids=request.group_ids, record_ids=request.record_ids,
                             min_source_version=request.min_source_version,
                             max_source_version=request.max_source_version)
    mask = packed["assistant_mask"]
    return PackingResult(ref=ref, packed_group_shapes=shapes, generation_id=request.generation_id,
                         trainable_assistant_tokens=int(mask.sum().item()),
                         loss_bearing_tokens=int(mask[:, 1:].sum().item()),
                         non_padding_tokens=int((packed["group_ids"] != -1).sum().item()),
                         trajectory_log_path=request.trajectory_log_path,
                         packing_core_s=time.monotonic() - started), os.getcwd()


def host_start() -> None:
    """The packing host's process starts in `/` with a resource tracker of its own (a Monarch host is
    not this test's child: shared memory it creates is its own to unlink)."""
    from multiprocessing import resource_tracker

    os.chdir("/")
    resource_tracker._resource_tracker._fd = None  # spawn handed it the parent's tracker; start its own


def host_reclaim(batch_id: str) -> bool:
    inbox = _HOST.get("inbox")
    return bool(inbox and inbox.store.reclaim(batch_id, fence=False))


class LoopbackArtRuntime:
    """Stands in for ArtRuntime (see the module docstring); `topology` is ART's own compiled local topology."""

    def __init__(self, topology):
        self.topology = topology
        #: per packed batch, the scenario ids of its groups (the driver's "u<update>-g<group>")
        self.packed: list[list[str]] = []
        #: the working directories the packing host packed in
        self.host_cwds: set[str] = set()
        self._host: ProcessPoolExecutor | None = None

    def _executor(self) -> ProcessPoolExecutor:
        if self._host is None:  # started on first use: it inherits the environment the driver set up
            self._host = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=host_start)
        return self._host

    async def _call(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self._executor(), fn, *args)

    async def pack(self, request):
        from art.distributed.art_runtime import DistributedPackedBatch
        from art.distributed.data_plane import PackedBatchLeaseSet

        started = time.monotonic()
        result, cwd = await self._call(host_pack, request, uuid.uuid4().hex)
        self.host_cwds.add(cwd)
        if result.ref is None:
            return None
        self.packed.append([bundle.build().metadata.get("scenario_id") for bundle in request.trajectory_groups])
        return DistributedPackedBatch(
            leases=PackedBatchLeaseSet(ref=result.ref, host_refs={HOST_ID: result.ref}),
            packed_group_shapes=result.packed_group_shapes, trainable_assistant_tokens=result.trainable_assistant_tokens,
            loss_bearing_tokens=result.loss_bearing_tokens, non_padding_tokens=result.non_padding_tokens,
            trajectory_log_path=result.trajectory_log_path, packing_rpc_s=time.monotonic() - started,
            packing_core_s=result.packing_core_s, packing_generation_id=result.generation_id)

    async def release_batch(self, batch) -> None:
        await self._call(host_reclaim, batch.leases.ref.batch_id)

    async def close(self) -> None:
        if self._host is not None:
            self._host.shutdown(wait=True)
            self._host = None


class LoopbackMegatronService:
    """Stands in for DistributedMegatronService (see the module docstring)."""

    #: a Megatron step, and a LoRA publication to vLLM: calls are in flight across both
    train_s = 0.2
    publish_delay_s = 0.3
    server: Any = None  # the loopback vLLM of the current test (FakeChatServer)
    instances: list["LoopbackMegatronService"] = []

    def __init__(self, *, model_name, base_model, config, output_dir, runtime, enable_expert_replay):
        self.model_name, self.base_model, self.config = model_name, base_model, config
        self.output_dir, self.runtime, self.enable_expert_replay = output_dir, runtime, enable_expert_replay
        self.step = 0
        self.trained: list[dict[str, Any]] = []  # per train job: packed sequences and trainable tokens it got
        self.served: list[int] = []
        self.server_config: dict | None = None
        self._serving: dict[int, asyncio.Future] = {}
        self._dispatch: asyncio.Event | None = None
        self.closed = False
        type(self).instances.append(self)

    # -- serving
    async def start_openai_server(self, config):
        self.server_config = dict(config or {})
        return "127.0.0.1", self.openai_server_port

    @property
    def openai_server_port(self) -> int:
        return self.server.httpd.server_address[1]

    _managed_service_name = None

    async def get_serving_capabilities(self):
        from art.serving_capabilities import ART_SERVING_PROTOCOL_VERSION, ServingCapabilities

        from art.serving_capabilities import FastMetricsEndpoint

        from bench_fixtures import FAST_METRICS_PATH

        return ServingCapabilities(
            runtime="art_vllm", protocol_version=ART_SERVING_PROTOCOL_VERSION, binary_routed_experts=True,
            in_flight_lora_updates=True, policy_token_spans=True,
            fast_metrics=FastMetricsEndpoint(url=f"http://127.0.0.1:{self.openai_server_port}{FAST_METRICS_PATH}"))

    async def wait_for_serving(self, step: int) -> None:
        if step <= 0 or step in self.served:
            return
        if step not in self._serving:
            raise RuntimeError(f"learner step {step} has no serving publication")
        await asyncio.shield(self._serving[step])

    def drain_publication_metrics(self) -> dict[str, float]:
        return {}

    async def finalize_publication_metrics(self, step: int) -> dict[str, float]:
        await self.wait_for_serving(step)
        return {}

    # -- training
    def prefetch_trainer(self) -> None:
        pass

    async def prepare_for_packing(self) -> int:
        return self.step

    async def resolve_global_grad_accumulation_sequences(self, config) -> int:
        if config.grad_accumulation_sequences is not None:
            return int(config.grad_accumulation_sequences)
        mesh = self.runtime.topology.trainer
        return len(mesh.ranks) // (mesh.topology.tp * mesh.topology.cp * mesh.topology.pp)

    async def prepare_cp_lookahead(self, batch, *, global_grad_accumulation_sequences) -> dict[str, float]:
        return {}

    def arm_pipeline_train_dispatch(self, event: asyncio.Event) -> None:
        if self._dispatch is not None:
            raise RuntimeError("pipeline trainer dispatch fence is already armed")
        self._dispatch = event

    def cancel_pipeline_train_dispatch(self, event: asyncio.Event) -> None:
        if self._dispatch is event:
            self._dispatch = None

    async def train_packed(self, batch, config, experimental_config):
        from art.distributed.data_plane import MappedPackedBatch

        dispatch, self._dispatch = self._dispatch, None
        if dispatch is not None:
            dispatch.set()  # the job reached the trainer ranks
        with MappedPackedBatch.open(batch.leases.host_refs[HOST_ID]) as mapped:  # what a Megatron rank reads
            tokens = int(mapped.tensors["assistant_mask"].sum().item())
            sequences = int(mapped.tensors["tokens"].shape[0])
        await asyncio.sleep(self.train_s)
        self.step += 1
        step = self.step
        self.trained.append({"step": step, "sequences": sequences, "trainable_tokens": tokens,
                             "routed": batch.leases.ref.moe_routing_replay is not None})
        self._serving[step] = asyncio.get_running_loop().create_task(self._publish(step))
        yield {"loss/train": 0.0}

    async def _publish(self, step: int) -> None:
        await asyncio.sleep(self.publish_delay_s)
        # In-flight LoRA: vLLM swaps the adapter while decodes run (if any are running within 5 s).
        deadline = time.monotonic() + 5
        while len(self.server.requests) == len(self.server.served) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        self.server.policy = step
        self.served.append(step)

    def checkpoint_materialization(self, step: int):
        async def done() -> None:
            return None

        return asyncio.get_running_loop().create_task(done())

    async def aclose(self) -> None:
        self.closed = True
        for task in self._serving.values():
            task.cancel()

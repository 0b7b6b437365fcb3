"""ART driver: the native PipelineTrainer on MegatronBackend (openpipe-art 0.5.23), fed the shared plan.

Runs inside the ART image with four GPUs. Each plan group is one PipelineTrainer
scenario, offered in plan order; the online autotuner decides how many groups make
a step. A rollout sends the plan's calls through the model's own OpenAI client
(which merges the internal config's chat-template kwargs under our per-request
options). Evidence comes from ART's train log (history.jsonl), followed while the
run goes, plus the backend train call and publication timed around ART's own
MegatronBackend.train and its service's wait_for_serving. The backend is an async context manager, so ART's vLLM
and Megatron processes end with the run. Executed end to end here only with the
MegatronBackend and vLLM doubled (tests/frameworks/test_real_art_run.py); never on GPUs.
"""

from __future__ import annotations

import asyncio
import os
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

from ..framework.async_signals import run_until_signalled
from ..framework.driver import driver_opening
from ..framework.rollout import evidence_rows, run_trajectory, synthetic_reward
from . import metrics
from .config import build_art_config
from .support import check_support


def bind_model_dir(run_dir: Path, repo_id: str, snapshot_path: str | Path) -> Path:
    """Link `run_dir/ORG/NAME` to the pinned snapshot.

    With the run directory as working directory, ART and transformers resolve the
    canonical model ID to this local directory, so tokenizer/processor lookups and
    training read the same immutable snapshot while the ID stays canonical.
    """
    snapshot = Path(snapshot_path).resolve()
    if not (snapshot / "config.json").exists():
        raise FileNotFoundError(f"model snapshot {snapshot} has no config.json")
    link = Path(run_dir) / repo_id
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        if link.resolve() != snapshot:
            raise FileExistsError(f"{link} already points at {link.resolve()}, not {snapshot}")
        return link
    link.symlink_to(snapshot, target_is_directory=True)
    return link


class HistoryFollower:
    """Turns new train rows of history.jsonl into evidence once their publication is seen."""

    def __init__(self, path: Path, writer, clock: metrics.ClockMap, times: metrics.TrainCallTimes):
        self.path, self.writer, self.clock, self.times = path, writer, clock, times
        self.offset = 0
        self.rows: list[dict[str, Any]] = []
        self.pending: dict[int, dict[str, Any]] = {}
        self.updates: set[int] = set()

    def poll(self) -> None:
        for offset, row in metrics.iter_history(self.path, self.offset):
            self.offset = offset
            if metrics.is_train_row(row):
                self.rows.append(row)
                self.pending[int(row.get(metrics.TRAIN_KEYS["step"], -1))] = row
        for step in sorted(self.pending):
            if step in self.times.published and step not in self.updates:
                row = self.pending.pop(step)
                self.writer.add_update(**metrics.update_row(row, self.clock, self.times))
                self.writer.add_trainer_interval(**self.times.interval(step))
                self.updates.add(step)


def timed_backend_class(megatron_backend: type, clock, times: metrics.TrainCallTimes) -> type:
    """ART's MegatronBackend, with each train call and the publication it starts timed on `clock`."""

    class TimedMegatronBackend(megatron_backend):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.publication_waits: set[asyncio.Task] = set()
            #: step -> why its publication wait failed (kept: a failed wait must name its cause).
            self.publication_failures: dict[int, str] = {}

        async def train(self, model, trajectory_groups, **kwargs):
            start = clock()
            result = await super().train(model, trajectory_groups, **kwargs)
            step = int(result.step)
            times.calls[step] = (start, clock())
            task = asyncio.create_task(self._await_publication(model, step))
            self.publication_waits.add(task)
            task.add_done_callback(self.publication_waits.discard)
            return result

        async def _await_publication(self, model, step: int) -> None:
            # The Megatron service's wait_for_serving returns once vLLM serves policy `step`.
            try:
                service = await self._get_service(model)
                await service.wait_for_serving(step)
            except Exception as exc:
                self.publication_failures[step] = f"{type(exc).__name__}: {exc}"
                return
            times.published[step] = clock()

    return TimedMegatronBackend


def publication_failed(failures: dict[int, str]) -> str:
    """One line naming each step whose wait for vLLM to serve it failed, and why."""
    return "publication_failed: " + "; ".join(f"step {s}: {why}" for s, why in sorted(failures.items()))


def run(ctx) -> None:
    with driver_opening(ctx, "art") as opened:
        import art
        from art.megatron import MegatronBackend
        from art.pipeline_trainer import PipelineTrainer
        from art.pipeline_tuner.store import PipelineTunerProfileStore
        from transformers import AutoTokenizer

    writer, log, native_dir, n = ctx.writer, ctx.log, opened.native_dir, opened.n
    snapshot = Path(ctx.model["snapshot_path"]).resolve()
    native = build_art_config(ctx.run_spec, run_name=writer.path.name, art_path=native_dir / "art",
                              model_path=snapshot)
    support = check_support(native)
    writer.update_manifest(framework={"name": opened.framework, "version": support["version"], "native_config": native,
                                      "support_gaps": support["gaps"], "support_facts": support["facts"]},
                           trainer_timing=metrics.TRAINER_TIMING)
    if support["gaps"]:
        raise RuntimeError(
            f"installed {opened.framework} {support['version']} cannot express the measurement contract: "
            + "; ".join(f"{k}: {v}" for k, v in support["gaps"].items())
        )
    art.init_megatron_runtime_config(topology=art.MegatronTopologyConfig(**native["megatron_runtime"]["topology"]),
                                     packed_sequence_length=native["megatron_runtime"]["packed_sequence_length"])

    model_dir = bind_model_dir(native_dir, native["model"]["base_model"], snapshot)
    os.environ.setdefault("HF_HOME", str(ctx.model.get("hf_home") or ""))
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.chdir(native_dir)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))

    groups = {key: rows for key, rows in ctx.plan.groupby(["update", "group"], sort=True)}
    scenarios = [{"update": int(u), "group": int(g), "metadata": {"scenario_id": f"u{int(u)}-g{int(g)}"}}
                 for (u, g) in groups]
    model = art.TrainableModel(**native["model"], _internal_config=native["internal_config"],
                               base_path=native["backend"]["path"])
    times = metrics.TrainCallTimes()
    backend_cls = timed_backend_class(MegatronBackend, writer.clock, times)
    clock = metrics.ClockMap(wall0=time.time(), run0=writer.clock())
    follower = HistoryFollower(Path(model._get_output_dir()) / "history.jsonl", writer, clock, times)
    holder: dict[str, Any] = {}

    async def rollout(model_, scenario, _config):
        rows = groups[(scenario["update"], scenario["group"])]
        client = model_.openai_client()
        trainer = holder["trainer"]

        async def one(t_rows):
            result = await run_trajectory(
                client.chat.completions.create, model_.get_inference_name(), tokenizer, t_rows,
                clock=writer.clock, policy_version=lambda: trainer.state.policy_version,
                template_defaults=None,  # ART's client merges the internal config's chat-template kwargs
            )
            writer.add_calls(evidence_rows(result.calls, n))
            traj = int(t_rows["trajectory"].iloc[0])
            return art.Trajectory(messages_and_choices=result.messages_and_choices,
                                  reward=synthetic_reward(traj, ctx.workload_spec.group_size))

        trajs = [one(r.sort_values("call")) for _, r in rows.groupby("trajectory", sort=True)]
        return art.TrajectoryGroup(await asyncio.gather(*trajs, return_exceptions=True))

    async def follow(stop: asyncio.Event):
        while not stop.is_set():
            follower.poll()
            try:
                await asyncio.wait_for(stop.wait(), timeout=0.5)
            except asyncio.TimeoutError:
                pass
        follower.poll()

    async def main():
        kwargs = dict(native["pipeline_trainer"])
        kwargs["autotune"] = art.PipelineAutotuneConfig(**kwargs["autotune"])
        async with backend_cls(**native["backend"]) as backend:
            await model.register(backend)
            trainer = PipelineTrainer(model, backend, rollout, scenarios, None, **kwargs)
            holder["trainer"] = trainer
            stop = asyncio.Event()
            follower_task = asyncio.create_task(follow(stop))
            try:
                await trainer.train(handle_signals=False)
                await asyncio.gather(*list(backend.publication_waits), return_exceptions=True)
                holder["publication_failures"] = backend.publication_failures
            finally:
                stop.set()
                await follower_task
        return kwargs["autotune"]

    log.info("ART %s: PipelineTrainer on MegatronBackend, %s", version(opened.framework), native["contract"])
    # Not plain asyncio.run: a SIGTERM raised inside a rollout task would be one failed
    # trajectory to gather(return_exceptions=True), and the run would go on.
    autotune = run_until_signalled(main)
    profile = PipelineTunerProfileStore.for_model(model).resolve(autotune.profile or autotune.output_name)
    writer.update_manifest(art_autotuner=metrics.autotuner_health(follower.rows, profile, n))
    failures = holder.get("publication_failures") or {}
    if failures:
        raise RuntimeError(publication_failed(failures))
    if sorted(follower.updates) != list(range(1, n + 1)):
        raise RuntimeError(f"ART logged updates {sorted(follower.updates)} with publication, expected 1..{n}"
                           + (f"; rows waiting for publication: {sorted(follower.pending)}" if follower.pending else ""))

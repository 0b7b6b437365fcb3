"""ART driver: the native PipelineTrainer on MegatronBackend, fed the shared plan.

Runs inside the ART image with four GPUs. Each plan group is one PipelineTrainer
scenario; its rollout sends the plan's calls through the model's own OpenAI
client (which merges the internal config's chat-template kwargs under our
per-request options). Evidence comes from ART's train log (history.jsonl),
followed while the run goes. Not executed end to end by this project.
"""

from __future__ import annotations

import asyncio
import os
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

from ...rollout import run_trajectory, synthetic_reward
from ...topology import preflight
from . import metrics
from .config import build_art_config, native_support_gaps


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


class _HistoryFollower:
    """Turns new train rows of history.jsonl into evidence as they appear."""

    def __init__(self, path: Path, writer, clock: metrics.ClockMap):
        self.path, self.writer, self.clock = path, writer, clock
        self.offset = 0
        self.rows: list[dict[str, Any]] = []
        self.updates: set[int] = set()

    def poll(self) -> None:
        for offset, row in metrics.iter_history(self.path, self.offset):
            self.offset = offset
            if not metrics.is_train_row(row):
                continue
            self.rows.append(row)
            upd = metrics.update_row(row, self.clock)
            if upd["update"] in self.updates:
                continue
            self.updates.add(upd["update"])
            self.writer.add_update(**upd)
            self.writer.add_trainer_interval(**metrics.trainer_interval(row, self.clock))


def run(ctx) -> None:
    preflight(ctx.config, ctx.suite, "art")
    try:
        import art
        from art.megatron.runtime.backend import MegatronBackend
        from art.pipeline_trainer import PipelineTrainer
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise RuntimeError(f"the ART driver runs inside the ART image; openpipe-art is not importable here ({exc})") from exc

    writer, log = ctx.writer, ctx.log
    native_dir = Path(writer.path) / "native"
    native_dir.mkdir(parents=True, exist_ok=True)
    native = build_art_config(ctx.config, ctx.suite, spec=ctx.spec, n_updates=int(ctx.plan["update"].max()),
                              run_name=writer.path.name, art_path=native_dir / "art")
    gaps = native_support_gaps(native)
    writer.update_manifest(framework={"name": "openpipe-art", "version": version("openpipe-art"),
                                      "native_config": native, "support_gaps": gaps})
    if gaps:
        raise RuntimeError(
            "installed openpipe-art " + version("openpipe-art") + " cannot express the measurement contract: "
            + "; ".join(f"{k}: {v}" for k, v in gaps.items())
        )

    model_dir = bind_model_dir(native_dir, native["model"]["base_model"], ctx.model["snapshot_path"])
    os.environ.update(native["env"])
    os.environ.setdefault("HF_HOME", str(ctx.model.get("hf_home") or ""))
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.chdir(native_dir)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))

    groups = {key: rows for key, rows in ctx.plan.groupby(["update", "group"], sort=True)}
    scenarios = [{"update": int(u), "group": int(g), "metadata": {"scenario_id": f"u{int(u)}-g{int(g)}"}}
                 for (u, g) in groups]
    model = art.TrainableModel(**native["model"], _internal_config=native["internal_config"],
                               base_path=str(native_dir / "art"))
    backend = MegatronBackend(path=str(native_dir / "art"))
    clock = metrics.ClockMap(wall0=time.time(), run0=writer.clock())
    history = Path(model._get_output_dir()) / "history.jsonl"
    follower = _HistoryFollower(history, writer, clock)
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
            writer.add_calls([c.as_row() for c in result.calls])
            traj = int(t_rows["trajectory"].iloc[0])
            return art.Trajectory(messages_and_choices=result.messages_and_choices,
                                  reward=synthetic_reward(traj, ctx.spec.group_size))

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
        await model.register(backend)
        trainer = PipelineTrainer(model, backend, rollout, scenarios, None, **native["pipeline_trainer"])
        holder["trainer"] = trainer
        stop = asyncio.Event()
        follower_task = asyncio.create_task(follow(stop))
        try:
            await trainer.train(handle_signals=False)
        finally:
            stop.set()
            await follower_task

    log.info("ART %s: PipelineTrainer on MegatronBackend, %s", version("openpipe-art"), native["contract"])
    asyncio.run(main())
    writer.update_manifest(art_autotuner=metrics.autotuner_health(follower.rows))
    expected = int(ctx.plan["update"].max())
    if sorted(follower.updates) != list(range(1, expected + 1)):
        raise RuntimeError(f"ART logged updates {sorted(follower.updates)}, expected 1..{expected}")

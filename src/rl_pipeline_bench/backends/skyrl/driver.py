"""SkyRL driver: the native fully asynchronous trainer, fed the shared plan.

Runs inside the SkyRL image with four GPUs. The experiment is SkyRL's own
`BasePPOExp` with three hooks replaced: the trainer is
`FullyAsyncRayPPOTrainer` (skyrl 0.4.0) whose phase gauge also reports each
`timed_phase` on the run's clock, the generator sends the plan's calls to
SkyRL's vLLM router through its OpenAI-compatible completions endpoint as token
ids (token_calls), its failures recorded in the evidence before SkyRL exits,
and the tracker forwards every native record to the evidence writer as it is
logged. Not executed end to end by this project.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from dataclasses import replace
from importlib.metadata import version
from pathlib import Path
from typing import Any

from ..framework.async_signals import record_before
from ..framework.driver import driver_opening
from ..framework.rollout import CHAT_TEMPLATE_KWARGS, CallRecord, evidence_rows, synthetic_reward
from . import metrics
from .config import ENV_CLASS, MERGE_LORA, build_skyrl_config
from .token_calls import run_token_trajectory


async def generate_group(complete, model: str, tokenizer, rows, *, clock, policy_version, group_size: int,
                         template_kwargs=CHAT_TEMPLATE_KWARGS, on_call=None):
    """Run one plan group as token-id calls (token_calls); return (GeneratorOutput dict, trajectories).

    SkyRL trains on exactly the tokens sampled, with their logprobs; the tool
    observations between calls are masked out; rewards are the synthetic within-group rewards.
    """
    from skyrl.train.generators.utils import get_rollout_metrics

    trajs = [r for _, r in rows.groupby("trajectory", sort=True)]
    results = await asyncio.gather(*[
        run_token_trajectory(complete, model, tokenizer, t, clock=clock, policy_version=policy_version,
                             template_kwargs=template_kwargs, on_call=on_call)
        for t in trajs
    ])
    out: dict[str, list] = {
        "prompt_token_ids": [r.prompt_ids for r in results],
        "response_ids": [r.response_ids for r in results],
        "loss_masks": [r.loss_mask for r in results],
        "rollout_logprobs": [r.logprobs for r in results],
    }
    rewards = [synthetic_reward(int(t["trajectory"].iloc[0]), group_size) for t in trajs]
    return {
        **out,
        "rewards": rewards,
        "stop_reasons": ["length"] * len(rewards),
        "rollout_metrics": get_rollout_metrics(out["response_ids"], rewards, loss_masks=out["loss_masks"]),
    }, results


def generator_failed(exc: BaseException) -> str:
    """The manifest error of a run whose generator raised (SkyRL then ends the process with os._exit(1))."""
    return f"generator_failed: {type(exc).__name__}: {exc}"


class ServedPolicy:
    """The policy version vLLM serves: 0 at start, then step s once step s's sync_weights phase ends.

    SkyRL's `global_step` is the step being worked on (fully_async_trainer.py:7-8, :494), one
    ahead of the served policy until the step's weights are synced.
    """

    def __init__(self):
        self.version = 0

    def phase(self, name: str, trainer) -> None:
        if name == metrics.PUBLICATION_PHASE:
            self.version = int(trainer.global_step)


def write_prompt_dataset(path: Path, n_groups: int) -> Path:
    """One dataset row per plan group; the generator takes plan groups in plan order."""
    with path.open("w") as fh:
        for i in range(n_groups):
            fh.write(json.dumps({"prompt": [{"role": "user", "content": f"plan group {i}"}],
                                 "env_class": ENV_CLASS}) + "\n")
    return path


def run(ctx) -> None:
    with driver_opening(ctx, "skyrl") as opened:
        import datasets
        from omegaconf import OmegaConf
        from openai import AsyncOpenAI
        from skyrl.backends.skyrl_train.inference_servers.utils import resolve_policy_model_name
        from skyrl.train.config import SkyRLTrainConfig
        from skyrl.train.dataset import PromptDataset
        from skyrl.train.entrypoints.main_base import BasePPOExp
        from skyrl.train.fully_async_trainer import FullyAsyncRayPPOTrainer
        from skyrl.train.generators.base import GeneratorInterface
        from skyrl.train.utils import validate_cfg
        from skyrl.train.utils.tracking import Tracking
        from skyrl.train.utils.utils import initialize_ray
        from transformers import AutoTokenizer

    writer, log, native_dir, n = ctx.writer, ctx.log, opened.native_dir, opened.n
    plan = ctx.plan
    groups = [rows for _, rows in plan.groupby(["update", "group"], sort=True)]
    data_path = write_prompt_dataset(native_dir / "plan_prompts.jsonl", len(groups))
    nested = build_skyrl_config(
        ctx.run_spec, workload_spec=ctx.workload_spec,
        model_path=ctx.model["snapshot_path"], data_path=data_path, run_dir=native_dir,
        run_name=writer.path.name, max_completion_tokens=int(plan["forced_completion_tokens"].max()),
    )
    cfg = SkyRLTrainConfig.from_dict_config(OmegaConf.create(nested))
    validate_cfg(cfg)
    writer.update_manifest(framework={"name": opened.framework, "version": version(opened.framework), "native_config": nested,
                                      "merge_lora": MERGE_LORA}, trainer_timing=metrics.TRAINER_TIMING)
    os.environ["HF_HUB_OFFLINE"] = "1"
    tokenizer = AutoTokenizer.from_pretrained(ctx.model["snapshot_path"])
    group_size = int(ctx.workload_spec.group_size)

    def emit(update: dict[str, Any], interval: dict[str, Any]) -> None:
        writer.add_update(**update)
        writer.add_trainer_interval(**interval)

    collector = metrics.StepCollector(clock=writer.clock, on_update=emit)

    class EvidenceTracking(Tracking):
        """SkyRL's console tracker that also hands each record to the collector."""

        def log(self, data, step, commit=False):
            super().log(data, step, commit=commit)
            collector.record(dict(data), step, commit)

    class PlanPrompts(PromptDataset):
        """SkyRL's prompt dataset over the plan's placeholder rows (write_prompt_dataset), read as is.

        Every row is a few words, so SkyRL's prompt-length filter (a `datasets` map in
        worker processes) has nothing to remove.
        """

        def _read_files_and_tokenize(self):
            rows = [json.loads(line) for path in self.datasets for line in Path(path).read_text().splitlines()]
            self.dataframe = datasets.Dataset.from_list(rows)

    class PlanGenerator(GeneratorInterface):
        """Each generate() call runs the next plan group through the shared rollout."""

        def __init__(self, inference_client):
            self._groups = iter(groups)
            self._lock = asyncio.Lock()
            self._client = AsyncOpenAI(base_url=f"{inference_client.proxy_url}/v1", api_key="EMPTY")

        async def generate(self, input_batch, **_kwargs):
            answered: list[CallRecord] = []
            try:
                async with self._lock:
                    rows = next(self._groups)
                out, _ = await generate_group(
                    self._client.completions.create, resolve_policy_model_name(cfg), tokenizer, rows,
                    clock=writer.clock, policy_version=lambda: served.version, group_size=group_size,
                    template_kwargs=cfg.generator.chat_template_kwargs, on_call=answered.append,
                )
            except asyncio.CancelledError:
                # SkyRL cancels its generation workers after the last step: the answered calls of an
                # unfinished group are kept as evidence, never accepted.
                writer.add_calls(evidence_rows([replace(c, accepted=False) for c in answered], n))
                raise
            except Exception as exc:
                # SkyRL's generation worker ends the process with os._exit(1) on any exception
                # (fully_async_trainer.py:958-962): the evidence must say why before that.
                if not writer.finished:
                    writer.finish("failed", error=generator_failed(exc))
                raise
            writer.add_calls(evidence_rows(answered, n))
            out["trajectory_ids"] = input_batch.get("trajectory_ids")
            return out

    served = ServedPolicy()

    class BenchExp(BasePPOExp):
        def get_train_dataset(self):
            return PlanPrompts(datasets=self.cfg.data.train_data, tokenizer=self.tokenizer,
                               max_prompt_length=self.cfg.trainer.max_prompt_length, num_workers=1)

        def get_tracker(self):
            return EvidenceTracking(project_name=cfg.trainer.project_name, experiment_name=cfg.trainer.run_name,
                                    backend="console", config=cfg)

        def get_generator(self, cfg_, tokenizer_, inference_engine_client):
            return PlanGenerator(inference_engine_client)

        def get_trainer(self, **kwargs):
            trainer = FullyAsyncRayPPOTrainer(**kwargs)

            def phase(name: str, start: float, end: float) -> None:
                collector.phase(name, start, end)
                served.phase(name, trainer)

            trainer._phase_gauge = metrics.PhaseClock(trainer._phase_gauge, writer.clock, phase)
            return trainer

    log.info("SkyRL %s: fully async trainer, %s", version(opened.framework), nested["trainer"]["fully_async"])
    initialize_ray(cfg)
    # Ray's driver now owns SIGTERM (sys.exit(15)), and its core worker may abort the process
    # before the exit unwinds to the caller's failure path: the manifest says it first.
    record_before(signal.SIGTERM, writer.record_interruption)
    BenchExp(cfg).run()
    if len(collector.committed) != n:
        raise RuntimeError(f"SkyRL committed {len(collector.committed)} steps, expected {n}")

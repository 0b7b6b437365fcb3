"""SkyRL driver: the native fully asynchronous trainer, fed the shared plan.

Runs inside the SkyRL image with four GPUs. The experiment is SkyRL's own
`BasePPOExp` with three hooks replaced: the trainer is
`FullyAsyncRayPPOTrainer` (skyrl 0.4.0) whose phase gauge also reports each
`timed_phase` on the run's clock, the generator sends the plan's calls to
SkyRL's vLLM router through its OpenAI-compatible endpoint (the shared rollout),
and the tracker forwards every native record to the evidence writer as it is
logged. Not executed end to end by this project.
"""

from __future__ import annotations

import asyncio
import json
import os
from importlib.metadata import version
from pathlib import Path
from typing import Any

from ...rollout import default_extra_body, evidence_rows, run_trajectory, synthetic_reward
from ...topology import preflight
from . import metrics
from .config import ENV_CLASS, MERGE_LORA, build_skyrl_config


def assemble_sequences(responses: list[Any]) -> tuple[list[int], list[int], list[int], list[float]]:
    """(prompt ids, response ids, loss mask, logprobs) of one multi-call trajectory.

    Uses vLLM's `prompt_token_ids` / choice `token_ids` (requested with
    return_token_ids). Each later prompt must extend the previous prompt plus its
    completion; the extension (tool observation and template tokens) is masked out.
    """
    prompt: list[int] = []
    ids: list[int] = []
    mask: list[int] = []
    logprobs: list[float] = []
    for k, resp in enumerate(responses):
        p = list(getattr(resp, "prompt_token_ids", None) or [])
        choice = resp.choices[0]
        c = list(getattr(choice, "token_ids", None) or [])
        if not p or not c:
            raise ValueError("response lacks prompt_token_ids/token_ids; the server ignored return_token_ids")
        if k == 0:
            prompt = p
        else:
            consumed = prompt + ids
            if p[: len(consumed)] != consumed:
                raise ValueError(f"call {k} prompt does not extend call {k - 1}'s prompt and completion")
            extension = p[len(consumed):]
            ids += extension
            mask += [0] * len(extension)
            logprobs += [0.0] * len(extension)
        lp = getattr(choice, "logprobs", None)
        content = getattr(lp, "content", None) or []
        if len(content) != len(c):
            raise ValueError(f"call {k}: {len(content)} logprobs for {len(c)} tokens")
        ids += c
        mask += [1] * len(c)
        logprobs += [float(t.logprob) for t in content]
    return prompt, ids, mask, logprobs


async def generate_group(create, model: str, tokenizer, rows, *, clock, policy_version, group_size: int):
    """Run one plan group through the shared rollout; return (GeneratorOutput dict, results).

    Requests vLLM's token ids and logprobs so SkyRL trains on exactly the tokens
    sampled; rewards are the synthetic within-group rewards.
    """
    from skyrl.train.generators.utils import get_rollout_metrics

    trajs = [r.sort_values("call") for _, r in rows.groupby("trajectory", sort=True)]
    results = await asyncio.gather(*[
        run_trajectory(create, model, tokenizer, t, clock=clock, policy_version=policy_version,
                       template_defaults=default_extra_body(),
                       extra_body={"return_token_ids": True, "logprobs": True})
        for t in trajs
    ])
    out: dict[str, list] = {"prompt_token_ids": [], "response_ids": [], "loss_masks": [], "rollout_logprobs": []}
    rewards = []
    for t, res in zip(trajs, results):
        for k, v in zip(out, assemble_sequences(res.responses)):
            out[k].append(v)
        rewards.append(synthetic_reward(int(t["trajectory"].iloc[0]), group_size))
    return {
        **out,
        "rewards": rewards,
        "stop_reasons": ["length"] * len(rewards),
        "rollout_metrics": get_rollout_metrics(out["response_ids"], rewards, loss_masks=out["loss_masks"]),
    }, results


def write_prompt_dataset(path: Path, n_groups: int) -> Path:
    """One dataset row per plan group; the generator takes plan groups in plan order."""
    with path.open("w") as fh:
        for i in range(n_groups):
            fh.write(json.dumps({"prompt": [{"role": "user", "content": f"plan group {i}"}],
                                 "env_class": ENV_CLASS}) + "\n")
    return path


def run(ctx) -> None:
    preflight(ctx.run_spec, "skyrl")
    try:
        from omegaconf import OmegaConf
        from openai import AsyncOpenAI
        from skyrl.backends.skyrl_train.inference_servers.utils import resolve_policy_model_name
        from skyrl.train.config import SkyRLTrainConfig
        from skyrl.train.entrypoints.main_base import BasePPOExp
        from skyrl.train.fully_async_trainer import FullyAsyncRayPPOTrainer
        from skyrl.train.generators.base import GeneratorInterface
        from skyrl.train.utils import validate_cfg
        from skyrl.train.utils.tracking import Tracking
        from skyrl.train.utils.utils import initialize_ray
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise RuntimeError(f"the SkyRL driver runs inside the SkyRL image; skyrl is not importable here ({exc})") from exc

    writer, log = ctx.writer, ctx.log
    native_dir = Path(writer.path) / "native"
    native_dir.mkdir(parents=True, exist_ok=True)
    plan = ctx.plan
    groups = [rows for _, rows in plan.groupby(["update", "group"], sort=True)]
    data_path = write_prompt_dataset(native_dir / "plan_prompts.jsonl", len(groups))
    n = ctx.trained_updates
    nested = build_skyrl_config(
        ctx.run_spec, spec=ctx.spec,
        model_path=ctx.model["snapshot_path"], data_path=data_path, run_dir=native_dir,
        run_name=writer.path.name, max_completion_tokens=int(plan["forced_completion_tokens"].max()),
    )
    cfg = SkyRLTrainConfig.from_dict_config(OmegaConf.create(nested))
    validate_cfg(cfg)
    writer.update_manifest(framework={"name": "skyrl", "version": version("skyrl"), "native_config": nested,
                                      "merge_lora": MERGE_LORA})
    os.environ["HF_HUB_OFFLINE"] = "1"
    tokenizer = AutoTokenizer.from_pretrained(ctx.model["snapshot_path"])
    group_size = int(ctx.spec.group_size)

    def emit(update: dict[str, Any], interval: dict[str, Any]) -> None:
        writer.add_update(**update)
        writer.add_trainer_interval(**interval)

    collector = metrics.StepCollector(clock=writer.clock, on_update=emit)

    class EvidenceTracking(Tracking):
        """SkyRL's console tracker that also hands each record to the collector."""

        def log(self, data, step, commit=False):
            super().log(data, step, commit=commit)
            collector.record(dict(data), step, commit)

    class PlanGenerator(GeneratorInterface):
        """Each generate() call runs the next plan group through the shared rollout."""

        def __init__(self, inference_client, trainer_ref):
            self._groups = iter(groups)
            self._lock = asyncio.Lock()
            self._client = AsyncOpenAI(base_url=f"{inference_client.proxy_url}/v1", api_key="EMPTY")
            self._trainer_ref = trainer_ref

        async def generate(self, input_batch, **_kwargs):
            async with self._lock:
                rows = next(self._groups)

            def step() -> int:
                return int(getattr(self._trainer_ref.get("trainer"), "global_step", 0))

            out, results = await generate_group(
                self._client.chat.completions.create, resolve_policy_model_name(cfg), tokenizer, rows,
                clock=writer.clock, policy_version=step, group_size=group_size,
            )
            for res in results:
                writer.add_calls(evidence_rows(res.calls, ctx.trained_updates))
            out["trajectory_ids"] = input_batch.get("trajectory_ids")
            return out

    trainer_ref: dict[str, Any] = {}

    class BenchExp(BasePPOExp):
        def get_tracker(self):
            return EvidenceTracking(project_name=cfg.trainer.project_name, experiment_name=cfg.trainer.run_name,
                                    backend="console", config=cfg)

        def get_generator(self, cfg_, tokenizer_, inference_engine_client):
            return PlanGenerator(inference_engine_client, trainer_ref)

        def get_trainer(self, **kwargs):
            trainer = FullyAsyncRayPPOTrainer(**kwargs)
            trainer._phase_gauge = metrics.PhaseClock(trainer._phase_gauge, writer.clock, collector.phase)
            trainer_ref["trainer"] = trainer
            return trainer

    log.info("SkyRL %s: fully async trainer, %s", version("skyrl"), nested["trainer"]["fully_async"])
    initialize_ray(cfg)
    BenchExp(cfg).run()
    if len(collector.committed) != n:
        raise RuntimeError(f"SkyRL committed {len(collector.committed)} steps, expected {n}")

"""SkyRL driver against the real skyrl package (runs in the framework venv).

Builds the native config from the suites and lets SkyRL's typed config,
CLI-override parser and validator take it; runs a plan group through the
shared rollout and SkyRL's own rollout-metric functions against a loopback
stand-in for vLLM; feeds SkyRL-keyed records through a real Tracking.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import itertools

import pandas as pd
import pytest

from bench_fixtures import FakeChatServer, require, small_plan_rows, wordlevel_tokenizer

require("skyrl")

from omegaconf import OmegaConf  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402
from skyrl.train import fully_async_trainer, trainer as base_trainer  # noqa: E402
from skyrl.train.config import SkyRLTrainConfig  # noqa: E402
from skyrl.train.generators import utils as gen_utils  # noqa: E402
from skyrl.train.generators.base import GeneratorOutput  # noqa: E402
from skyrl.train.utils import validate_cfg  # noqa: E402
from skyrl.train.utils.tracking import Tracking  # noqa: E402

from rl_pipeline_bench.backends.art.config import validate_typed_dict  # noqa: E402
from rl_pipeline_bench.backends.skyrl.config import build_skyrl_config, to_cli_overrides  # noqa: E402
from rl_pipeline_bench.backends.skyrl import metrics as sky_metrics  # noqa: E402
from rl_pipeline_bench.backends.skyrl.config import check_dataclass_types  # noqa: E402
from rl_pipeline_bench.backends.skyrl.driver import assemble_sequences, generate_group  # noqa: E402
from rl_pipeline_bench.config import get_suite, load_config  # noqa: E402
from rl_pipeline_bench.rollout import CHAT_TEMPLATE_KWARGS  # noqa: E402
from rl_pipeline_bench.workloads import load_workload  # noqa: E402


@pytest.fixture(scope="module")
def config():
    return load_config()


def _nested(config, **suite_changes):
    cfg = copy.deepcopy(config)
    cfg["suites"]["comparison"].update(suite_changes)
    suite = get_suite(cfg, "comparison")
    return build_skyrl_config(cfg, suite, spec=load_workload(cfg, "multi_turn", suite["scale"]))


@pytest.mark.parametrize("changes, batch, workers, rank", [({}, 4, 12, 8), ({"skyrl_batch_size": 1, "rank": 1}, 1, 3, 1)])
def test_config_builds_and_validates_in_skyrl(config, changes, batch, workers, rank):
    nested = _nested(config, **changes)
    cfg = SkyRLTrainConfig.from_dict_config(OmegaConf.create(nested))
    assert SkyRLTrainConfig.from_cli_overrides(to_cli_overrides(nested)) == cfg
    assert check_dataclass_types(cfg) == []
    validate_cfg(cfg)
    t = cfg.trainer
    assert t.fully_async.enabled and t.fully_async.max_staleness_steps == 4
    assert t.fully_async.num_parallel_generation_workers == workers
    assert t.train_batch_size == t.policy_mini_batch_size == batch
    mc = t.policy.megatron_config
    assert (mc.tensor_model_parallel_size, mc.context_parallel_size, mc.expert_model_parallel_size) == (1, 1, 2)
    assert t.placement.policy_num_gpus_per_node == 2 and not t.placement.colocate_all
    assert cfg.generator.inference_engine.num_engines == 2
    assert (t.policy.model.lora.rank, t.policy.model.lora.alpha) == (rank, 32)
    assert cfg.generator.chat_template_kwargs == CHAT_TEMPLATE_KWARGS
    # The fully async trainer's own admission rule for workers vs batch and staleness.
    assert batch <= workers <= batch * (t.fully_async.max_staleness_steps + 1)


def test_unknown_and_mistyped_keys_fail(config):
    nested = _nested(config)
    typo = copy.deepcopy(nested)
    typo["trainer"]["fully_async"]["max_stalenes_steps"] = 4
    with pytest.raises(ValueError, match="Invalid fields .*max_stalenes_steps"):
        SkyRLTrainConfig.from_dict_config(OmegaConf.create(typo))
    with pytest.raises(ValueError, match="Invalid fields"):
        SkyRLTrainConfig.from_cli_overrides(to_cli_overrides(typo))
    wrong = copy.deepcopy(nested)
    wrong["trainer"]["policy"]["megatron_config"]["expert_model_parallel_size"] = "2"
    problems = check_dataclass_types(SkyRLTrainConfig.from_dict_config(OmegaConf.create(wrong)))
    assert any(p.startswith("trainer.policy.megatron_config.expert_model_parallel_size") for p in problems)


def test_metric_keys_are_the_ones_skyrl_logs():
    sources = "\n".join(inspect.getsource(m) for m in (fully_async_trainer, base_trainer, gen_utils))
    for key in ("generate/batch_num_seq", "generate/avg_assistant_tokens", "async/staleness_mean", "trainer/global_step"):
        assert f'"{key}"' in sources, key
    async_src = inspect.getsource(fully_async_trainer)
    assert '"timing/" + k' in async_src
    for key in [sky_metrics.KEYS["run_training"], sky_metrics.KEYS["step_time"], *sky_metrics.AFTER_TRAINING]:
        assert f'Timer("{key.removeprefix("timing/")}"' in async_src, key


def _group_rows():
    return pd.DataFrame(small_plan_rows(group_size=3))


def test_generate_group_builds_a_skyrl_generator_output():
    tok = wordlevel_tokenizer()
    ticks = itertools.count()
    with FakeChatServer(tok) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="x")
        out, results = asyncio.run(generate_group(client.chat.completions.create, "policy", tok, _group_rows(),
                                                  clock=lambda: float(next(ticks)), policy_version=lambda: 2,
                                                  group_size=3))
    assert validate_typed_dict(GeneratorOutput, out) == []
    assert len(out["response_ids"]) == 3 and out["rewards"] == [0.0, 0.5, 1.0]
    for ids, mask, lps in zip(out["response_ids"], out["loss_masks"], out["rollout_logprobs"]):
        assert len(ids) == len(mask) == len(lps)
        assert sum(mask) == 3 + 5 + 2  # exactly the forced completion tokens are trained
    for body in server.requests:
        assert body["chat_template_kwargs"] == CHAT_TEMPLATE_KWARGS
        assert body["min_tokens"] == body["max_tokens"] and body["ignore_eos"] and body["return_token_ids"]
    assert all(c.policy_version == 2 for r in results for c in r.calls)
    # SkyRL's own batch assembly accepts it and computes the assistant-token metric from the masks.
    merged = gen_utils.concatenate_generator_outputs([out, out])
    assert merged["rollout_metrics"]["generate/avg_assistant_tokens"] == pytest.approx(10.0)


def test_assemble_refuses_a_prompt_that_does_not_extend():
    tok = wordlevel_tokenizer()
    with FakeChatServer(tok) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="x")

        async def two():
            base = [{"role": "user", "content": "bab"}]
            kw = {"extra_body": {"return_token_ids": True, "chat_template_kwargs": {"enable_thinking": False}},
                  "logprobs": True}
            a = await client.chat.completions.create(model="m", messages=base, max_tokens=2, **kw)
            b = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "dad"}],
                                                     max_tokens=2, **kw)
            return a, b

        a, b = asyncio.run(two())
    p, ids, mask, _ = assemble_sequences([a])
    assert ids and mask == [1, 1] and p
    with pytest.raises(ValueError, match="does not extend"):
        assemble_sequences([a, b])


def test_collector_turns_tracker_records_into_evidence():
    emitted = []
    now = iter([10.0, 10.5, 20.0, 20.5])
    collector = sky_metrics.StepCollector(clock=lambda: next(now), on_update=lambda u, i: emitted.append((u, i)))

    class Forwarding(Tracking):
        def log(self, data, step, commit=False):
            super().log(data, step, commit=commit)
            collector.record(dict(data), step, commit)

    tracker = Forwarding(project_name="p", experiment_name="e", backend="console")
    rollout = gen_utils.get_rollout_metrics([[1, 2, 3], [4, 5]], [0.0, 1.0], loss_masks=[[1, 1, 0], [1, 1]])
    for step in (1, 2):
        tracker.log({**rollout, "generate/batch_num_seq": 2, "async/staleness_mean": 0.5,
                     "trainer/epoch": 0, "trainer/global_step": step}, step=step, commit=False)
        tracker.log({"timing/step": 3.0, "timing/run_training": 2.0, "timing/sync_weights": 0.25,
                     "timing/convert_to_training_input": 0.1}, step=step, commit=True)
    assert [u["update"] for u, _ in emitted] == [1, 2]
    upd, iv = emitted[0]
    assert upd == {"update": 1, "completed_at": 10.5, "accepted_trajectories": 2, "assistant_tokens": 4,
                   "policy_version": 1, "mean_policy_age": 0.5}
    assert iv == {"rank": 0, "update": 1, "start": pytest.approx(8.25), "end": pytest.approx(10.25)}
    with pytest.raises(sky_metrics.MetricRecordError, match="generate/batch_num_seq"):
        sky_metrics.update_from_step({"trainer/global_step": 3}, 3, 1.0)

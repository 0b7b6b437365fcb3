"""SkyRL driver against the real skyrl 0.4.0 package (runs in the framework venv).

Builds the native config from the suites and lets SkyRL's typed config,
CLI-override parser and validator take it; runs a plan group through the
shared rollout and SkyRL's own rollout-metric functions against a loopback
stand-in for vLLM; feeds records through a real Tracking and phases through
SkyRL's own TrainingPhaseGauge.timed_phase; shows the real 0.3.0 release refused.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import inspect
import itertools
import sys
import time
from importlib.metadata import version
from types import SimpleNamespace

import pandas as pd
import pytest

from bench_fixtures import FakeChatServer, overlay_env, require, small_plan_rows, wordlevel_tokenizer

require("skyrl")

from omegaconf import OmegaConf  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402
from skyrl.train import fully_async_trainer, trainer as base_trainer  # noqa: E402
from skyrl.train.config import SkyRLTrainConfig  # noqa: E402
from skyrl.train.generators import utils as gen_utils  # noqa: E402
from skyrl.train.generators.base import GeneratorOutput  # noqa: E402
from skyrl.backends.skyrl_train.inference_servers.remote_inference_client import RemoteInferenceClient  # noqa: E402
from skyrl.train.utils import validate_cfg  # noqa: E402
from skyrl.train.utils.metrics import TrainingPhaseGauge  # noqa: E402
from skyrl.train.utils.tracking import Tracking  # noqa: E402

from rl_pipeline_bench.backends import get  # noqa: E402
from rl_pipeline_bench.backends.framework.native_types import check_dataclass_types, validate_typed_dict  # noqa: E402
from rl_pipeline_bench.backends.skyrl.config import build_skyrl_config, to_cli_overrides  # noqa: E402
from rl_pipeline_bench.backends.skyrl import metrics as sky_metrics  # noqa: E402
from rl_pipeline_bench.backends.skyrl.driver import ServedPolicy, generate_group, generator_failed  # noqa: E402
from rl_pipeline_bench.backends.skyrl.token_calls import observation_ids  # noqa: E402
from rl_pipeline_bench.backends.skyrl.support import CONTRACT_SETTINGS, check_support  # noqa: E402
from rl_pipeline_bench.backends.framework.support import SupportError, check_in_python, refuse_gaps  # noqa: E402
from rl_pipeline_bench.settings.config import load_config  # noqa: E402
from rl_pipeline_bench.settings.spec import build_spec, check_spec  # noqa: E402
from rl_pipeline_bench.backends.framework.rollout import CHAT_TEMPLATE_KWARGS  # noqa: E402
from rl_pipeline_bench.plan.workloads import load_workload  # noqa: E402


@pytest.fixture(scope="module")
def config():
    return load_config()


def _nested(config, **suite_changes):
    cfg = copy.deepcopy(config)
    cfg["suites"]["comparison"].update(suite_changes)
    run_spec = check_spec(build_spec(cfg, "comparison"))
    return build_skyrl_config(run_spec, workload_spec=load_workload(cfg, "multi_turn", run_spec.settings["scale"]))


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
    # Per-expert adapters, published to vLLM as an adapter (not merged into the base weights).
    assert t.policy.model.lora.share_expert_adapters is False
    assert (mc.lora_config.lora_type, mc.lora_config.merge_lora, mc.lora_config.experts_shared_outer_loras) == (
        "lora", False, False)
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


def test_version_under_test():
    assert version("skyrl") == "0.4.0"


def test_metric_keys_and_phases_are_the_ones_skyrl_logs():
    """Keys the trainer writes into its records, and the phases its step loop times (read from its source)."""
    sources = "\n".join(inspect.getsource(m) for m in (fully_async_trainer, base_trainer, gen_utils))
    for key in ("generate/batch_num_seq", "generate/avg_assistant_tokens", "async/staleness_mean", "trainer/global_step"):
        assert f'"{key}"' in sources, key
    loop = inspect.getsource(fully_async_trainer.FullyAsyncRayPPOTrainer.train)
    assert 'Timer("step", self.all_timings)' in loop and '"timing/" + k' in loop
    for phase in (sky_metrics.TRAINING_PHASE, *sky_metrics.COMPLETION_PHASES):
        assert f'self._phase_gauge.timed_phase("{phase}", self.all_timings)' in loop, phase
    assert "self._phase_gauge = TrainingPhaseGauge()" in inspect.getsource(fully_async_trainer.FullyAsyncRayPPOTrainer)
    # The driver reaches the router through the client's proxy_url.
    assert "proxy_url" in {f.name for f in dataclasses.fields(RemoteInferenceClient)}


def test_installed_skyrl_expresses_every_contract_setting(config):
    result = check_support(get("skyrl").native_support(check_spec(build_spec(config, "comparison"))))
    assert result["version"] == "0.4.0" and result["gaps"] == {}, result["gaps"]
    assert result["facts"]["per_expert_lora"]["share_expert_adapters"] is False
    assert result["facts"]["adapter_publication"] == {"merge_lora": False}


def test_an_older_skyrl_release_is_refused_naming_each_missing_setting(config):
    """The real skyrl 0.3.0 (first on the path) through the preflight's own entry point."""
    native = get("skyrl").native_support(check_spec(build_spec(config, "comparison")))
    answer = check_in_python("skyrl", native, sys.executable, env=overlay_env("skyrl-0.3.0"))
    assert answer["version"] == "0.3.0"
    assert set(answer["gaps"]) == {"config", "per_expert_lora", "phase_timing"}, answer["gaps"]
    assert "share_expert_adapters" in answer["gaps"]["per_expert_lora"]
    with pytest.raises(SupportError) as err:
        refuse_gaps("skyrl", answer)
    for point, why in answer["gaps"].items():
        assert why.startswith(CONTRACT_SETTINGS[point]) and f"{point}: {why}" in str(err.value)


def _group_rows():
    return pd.DataFrame(small_plan_rows(group_size=3))


def _generate(server, tok, rows, version=lambda: 2):
    client = AsyncOpenAI(base_url=server.base_url, api_key="x")
    ticks = itertools.count()
    return asyncio.run(generate_group(client.completions.create, "policy", tok, rows,
                                      clock=lambda: float(next(ticks)), policy_version=version, group_size=3))


def test_generate_group_builds_a_skyrl_generator_output():
    tok = wordlevel_tokenizer()
    with FakeChatServer(tok) as server:
        out, results = _generate(server, tok, _group_rows())
    assert validate_typed_dict(GeneratorOutput, out) == []
    assert len(out["response_ids"]) == 3 and out["rewards"] == [0.0, 0.5, 1.0]
    for ids, mask, lps in zip(out["response_ids"], out["loss_masks"], out["rollout_logprobs"]):
        assert len(ids) == len(mask) == len(lps)
        assert sum(mask) == 3 + 5 + 2  # exactly the forced completion tokens are trained
    for body in server.requests:
        assert body["min_tokens"] == body["max_tokens"] and body["ignore_eos"] and body["return_token_ids"]
        assert all(isinstance(t, int) for t in body["prompt"]) and body["logprobs"] == 1
    assert all(c.policy_version == 2 for r in results for c in r.calls)
    # SkyRL's own batch assembly accepts it and computes the assistant-token metric from the masks.
    merged = gen_utils.concatenate_generator_outputs([out, out])
    assert merged["rollout_metrics"]["generate/avg_assistant_tokens"] == pytest.approx(10.0)


def test_later_calls_extend_earlier_ones_even_with_special_tokens_in_completions():
    """The loopback vLLM puts end-of-turn tokens inside forced spans and strips them from the text."""
    tok = wordlevel_tokenizer()
    with FakeChatServer(tok) as server:
        out, results = _generate(server, tok, _group_rows())
    eos = tok.eos_token_id
    for traj, res in zip(out["response_ids"], results):
        sent = res.prompts
        assert any(eos in ids for ids in [traj])  # special tokens were sampled inside the forced spans
        for k in range(1, len(sent)):
            # Each later prompt is the earlier prompt + what the server returned + the observation.
            assert sent[k][: len(sent[k - 1])] == sent[k - 1]
        assert sent[-1] == res.prompt_ids + res.response_ids[: len(sent[-1]) - len(res.prompt_ids)]
    # The observation is rendered as SkyRL's multi-turn generator renders it (fixed base conversation).
    obs = [{"role": "tool", "content": "bab bad"}]
    ids = observation_ids(tok, obs, CHAT_TEMPLATE_KWARGS)
    text = tok.decode(ids)
    assert text.startswith("<|im_start|> user <tool_response> bab bad </tool_response> <|im_end|>")
    assert text.endswith("<|im_start|> assistant <think> </think>")


def test_a_short_completion_is_refused():
    from rl_pipeline_bench.backends.framework.rollout import CompletionLengthError

    tok = wordlevel_tokenizer()
    with FakeChatServer(tok, short_by=1) as server:
        with pytest.raises(CompletionLengthError, match="completion length 2 != forced 3"):
            _generate(server, tok, _group_rows())


def test_served_policy_follows_skyrls_weight_sync_not_global_step():
    """SkyRL's global_step is the step being trained; vLLM serves it only after its sync_weights phase."""
    served, trainer = ServedPolicy(), SimpleNamespace(global_step=1)
    served.phase("run_training", trainer)
    assert served.version == 0
    served.phase("sync_weights", trainer)
    assert served.version == 1
    assert generator_failed(KeyError("x")) == "generator_failed: KeyError: 'x'"


def _run_steps(collector, tracker, gauge, steps, *, with_staleness=True):
    """Drive SkyRL's own Tracking and timed_phase the way its fully async step loop does."""
    rollout = gen_utils.get_rollout_metrics([[1, 2, 3], [4, 5]], [0.0, 1.0], loss_masks=[[1, 1, 0], [1, 1]])
    for step in steps:
        timings: dict[str, float] = {}
        for phase in ("convert_to_training_input", "run_training", "sync_weights"):
            with gauge.timed_phase(phase, timings):
                time.sleep(0.01)
        metrics = {**rollout, "generate/batch_num_seq": 2, "trainer/epoch": 0, "trainer/global_step": step}
        if with_staleness:
            metrics["async/staleness_mean"] = 0.5
        tracker.log(metrics, step=step, commit=False)
        tracker.log({"timing/" + k: v for k, v in {**timings, "step": 1.0}.items()}, step=step, commit=True)


def _forwarding_tracker(collector):
    class Forwarding(Tracking):
        def log(self, data, step, commit=False):
            super().log(data, step, commit=commit)
            collector.record(dict(data), step, commit)

    return Forwarding(project_name="p", experiment_name="e", backend="console")


def test_collector_takes_times_from_skyrls_own_phases():
    emitted = []
    clock = time.monotonic
    collector = sky_metrics.StepCollector(clock=clock, on_update=lambda u, i: emitted.append((u, i)))
    gauge = sky_metrics.PhaseClock(TrainingPhaseGauge(), clock, collector.phase)
    _run_steps(collector, _forwarding_tracker(collector), gauge, (1, 2))
    assert [u["update"] for u, _ in emitted] == [1, 2]
    for (upd, iv), rec in zip(emitted, collector.committed):
        train = rec.phase("run_training")
        sync = rec.phase("sync_weights")
        assert iv == {"rank": 0, "update": upd["update"], "start": train[0], "end": train[1]}
        assert train[1] - train[0] >= 0.01 and sync[0] >= train[1]
        # Completion: the step's metrics record (after the weight sync), not the later timing commit.
        assert upd["completed_at"] == rec.logged_at and rec.logged_at >= sync[1]
        assert (upd["accepted_trajectories"], upd["assistant_tokens"], upd["mean_policy_age"]) == (2, 4, 0.5)
    with pytest.raises(sky_metrics.MetricRecordError, match="generate/batch_num_seq"):
        sky_metrics.update_from_step(sky_metrics.StepRecord(metrics={"trainer/global_step": 3}, logged_at=1.0), 3)
    with pytest.raises(sky_metrics.MetricRecordError, match="no timed 'run_training' phase"):
        sky_metrics.interval_from_step(sky_metrics.StepRecord(metrics={"trainer/global_step": 3}), 3)


def test_missing_staleness_is_an_error_not_zero():
    collector = sky_metrics.StepCollector(clock=time.monotonic, on_update=lambda u, i: None)
    gauge = sky_metrics.PhaseClock(TrainingPhaseGauge(), time.monotonic, collector.phase)
    with pytest.raises(sky_metrics.MetricRecordError, match="async/staleness_mean"):
        _run_steps(collector, _forwarding_tracker(collector), gauge, (1,), with_staleness=False)

"""ART driver against the real openpipe-art package (runs in the framework venv).

Builds the native config from the suites and lets ART's own classes take it;
sends plan calls through ART's own OpenAI client to a loopback stand-in for
vLLM; reads a train log written by ART's own Model.log.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
from importlib.metadata import version

import pytest

from bench_fixtures import FakeChatServer, require, small_plan_rows, wordlevel_tokenizer

art = require("art")

from art.dev import InternalModelConfig  # noqa: E402
from art.megatron.runtime.backend import MegatronBackend  # noqa: E402
from art.pipeline_trainer import PipelineTrainer  # noqa: E402

from rl_pipeline_bench.backends.art.config import build_art_config  # noqa: E402
from rl_pipeline_bench.backends.art import metrics as art_metrics  # noqa: E402
from rl_pipeline_bench.backends.art.config import CONTRACT_FEATURES, native_support_gaps, validate_typed_dict  # noqa: E402
from rl_pipeline_bench.backends.art.driver import bind_model_dir  # noqa: E402
from rl_pipeline_bench.config import get_suite, load_config  # noqa: E402
from rl_pipeline_bench.rollout import CHAT_TEMPLATE_KWARGS, run_trajectory, synthetic_reward  # noqa: E402
from rl_pipeline_bench.workloads import load_workload  # noqa: E402


@pytest.fixture(scope="module")
def config():
    return load_config()


def _native(config, rank=None, tmp_path=None):
    cfg = copy.deepcopy(config)
    if rank is not None:
        cfg["suites"]["comparison"]["rank"] = rank
    suite = get_suite(cfg, "comparison")
    spec = load_workload(cfg, "multi_turn", suite["scale"])
    return build_art_config(cfg, suite, spec=spec, art_path=tmp_path)


@pytest.mark.parametrize("rank", [None, 1])
def test_internal_config_is_valid_for_arts_typed_config(config, rank):
    native = _native(config, rank)
    assert validate_typed_dict(InternalModelConfig, native["internal_config"]) == []
    ic = native["internal_config"]
    assert ic["chat_template_kwargs"] == CHAT_TEMPLATE_KWARGS
    assert ic["chat_template_tool_schema_format"] == "vllm_openai"
    assert ic["init_args"]["max_seq_length"] == 131072
    assert ic["peft_args"] == {"r": rank or 8, "lora_alpha": 32}
    assert native["model"]["base_model"] == "Qwen/Qwen3.5-35B-A3B"


def test_unknown_or_mistyped_keys_fail_validation(config):
    ic = _native(config)["internal_config"]
    typo = {**ic, "init_args": {"max_seq_lenght": 131072}}
    assert any("init_args.max_seq_lenght: unknown key for InitArgs" in p for p in validate_typed_dict(InternalModelConfig, typo))
    top = {**ic, "chat_template_kwarg": {}}
    assert any("chat_template_kwarg: unknown key" in p for p in validate_typed_dict(InternalModelConfig, top))
    wrong = {**ic, "trainer_gpu_ids": ["0", "1"], "chat_template_tool_schema_format": "openai"}
    problems = validate_typed_dict(InternalModelConfig, wrong)
    assert any(p.startswith("trainer_gpu_ids") for p in problems)
    assert any(p.startswith("chat_template_tool_schema_format") for p in problems)


def test_pipeline_trainer_accepts_the_native_kwargs(config, tmp_path):
    native = _native(config, tmp_path=tmp_path / "art")
    ic = {**native["internal_config"], "inference_gpu_ids": [2]}  # 0.5.18 takes one inference GPU
    model = art.TrainableModel(**native["model"], _internal_config=ic, base_path=str(tmp_path / "art"))
    backend = MegatronBackend(path=str(tmp_path / "art"))

    async def rollout(*_):
        raise AssertionError("not called")

    trainer = PipelineTrainer(model, backend, rollout, [], None, **native["pipeline_trainer"])
    assert trainer.max_steps_off_policy == 4 and trainer.packed_sequence_length == 131072
    assert trainer.max_steps == 20 and trainer.min_batch_size == trainer.max_batch_size == 8
    with pytest.raises(TypeError):
        PipelineTrainer(model, backend, rollout, [], None, **native["pipeline_trainer"], max_stps=3)
    with pytest.raises(ValueError, match="max_steps_off_policy"):
        PipelineTrainer(model, backend, rollout, [], None, **{**native["pipeline_trainer"], "max_steps_off_policy": -1})


def test_support_gaps_of_the_installed_art_are_reported(config):
    gaps = native_support_gaps(_native(config))
    assert set(gaps) <= set(CONTRACT_FEATURES) | {"megatron_topology"}
    if version("openpipe-art") == "0.5.18":
        # What this registry release lacks against the contract (see docs/backends.md).
        assert set(gaps) == {"online_autotuning", "mean_policy_age_limit", "two_inference_gpus", "context_parallel",
                             "routing_replay"}
        assert "Multi-GPU inference not yet supported" in gaps["two_inference_gpus"]


def test_rollout_through_arts_own_client_keeps_template_defaults(config, tmp_path):
    native = _native(config)
    tok = wordlevel_tokenizer()
    rows = [r for r in small_plan_rows() if r["trajectory"] == 1]
    with FakeChatServer(tok) as server:
        model = art.Model(name="probe", project="p", inference_base_url=server.base_url, inference_api_key="x",
                          base_path=str(tmp_path))
        object.__setattr__(model, "_internal_config", native["internal_config"])
        client = model.openai_client()
        ticks = itertools.count()
        result = asyncio.run(run_trajectory(client.chat.completions.create, "probe", tok, rows,
                                            clock=lambda: float(next(ticks)), template_defaults=None))
    assert [c.completion_tokens for c in result.calls] == [3, 5, 2]
    for body in server.requests:
        assert body["chat_template_kwargs"] == CHAT_TEMPLATE_KWARGS  # merged in by ART's client
        assert body["min_tokens"] == body["max_tokens"] and body["ignore_eos"] is True
    traj = art.Trajectory(messages_and_choices=result.messages_and_choices, reward=synthetic_reward(1, 2))
    assert len(traj.messages()) == len(server.requests[-1]["messages"]) + 1
    group = art.TrajectoryGroup([traj, art.Trajectory(messages_and_choices=result.messages_and_choices, reward=0.0)])
    assert len(group.trajectories) == 2


def test_reader_accepts_the_train_log_art_writes(config, tmp_path):
    native = _native(config)
    model = art.TrainableModel(**native["model"], _internal_config=native["internal_config"], base_path=str(tmp_path))
    trajs = [art.Trajectory(messages_and_choices=[{"role": "user", "content": "a"},
                                                   {"role": "assistant", "content": "b"}], reward=float(r))
             for r in range(3)]
    groups = [art.TrajectoryGroup(trajs), art.TrajectoryGroup(trajs[:2])]
    # The metrics PipelineTrainer passes after backend.train() (its own keys and the backend's).
    step_metrics = {"steps_off_policy": 1.5, "time/step_trainer_s": 2.25, "time/step_wall_s": 3.0,
                    "data/step_trainer_tokens": 321.0}
    asyncio.run(model.log(groups, split="train", step=1, metrics=step_metrics))
    asyncio.run(model.log(groups, split="val", step=1))
    history = tmp_path / model.project / "models" / model.name / "history.jsonl"
    assert history.exists(), list(tmp_path.rglob("*"))
    rows = [row for _, row in art_metrics.iter_history(history)]
    train = [r for r in rows if art_metrics.is_train_row(r)]
    assert len(rows) == 2 and len(train) == 1
    wall = art_metrics.recorded_wall(train[0])
    clock = art_metrics.ClockMap(wall0=wall - 10.0, run0=1.0)
    upd = art_metrics.update_row(train[0], clock)
    assert upd == {"update": 1, "completed_at": pytest.approx(11.0), "accepted_trajectories": 5,
                   "assistant_tokens": 321, "policy_version": 1, "mean_policy_age": 1.5}
    iv = art_metrics.trainer_interval(train[0], clock)
    assert iv["rank"] == 0 and iv["end"] - iv["start"] == pytest.approx(2.25)
    assert art_metrics.autotuner_health(train) == {"available": False, "metrics": {}}
    broken = {k: v for k, v in train[0].items() if k != "data/step_trainer_tokens"}
    with pytest.raises(art_metrics.MetricRecordError, match="data/step_trainer_tokens"):
        art_metrics.update_row(broken, clock)
    json.dumps(upd)


def test_model_dir_binding_points_at_the_snapshot(tmp_path):
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "config.json").write_text("{}")
    link = bind_model_dir(tmp_path / "run", "Qwen/Qwen3.5-35B-A3B", snap)
    assert link.resolve() == snap.resolve() and link.name == "Qwen3.5-35B-A3B"
    assert bind_model_dir(tmp_path / "run", "Qwen/Qwen3.5-35B-A3B", snap) == link
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text("{}")
    with pytest.raises(FileExistsError):
        bind_model_dir(tmp_path / "run", "Qwen/Qwen3.5-35B-A3B", other)


def test_run_refuses_before_any_work_when_art_lacks_contract_features(config, tmp_path):
    """run(ctx) with the installed ART: clear refusal naming the gaps, recorded in the manifest."""
    from types import SimpleNamespace

    from rl_pipeline_bench.backends import get
    from rl_pipeline_bench.evidence import EvidenceWriter, read_evidence
    from rl_pipeline_bench.workloads import offered_plan

    suite = get_suite(config, "comparison")
    spec = load_workload(config, "multi_turn", suite["scale"])
    writer = EvidenceWriter(tmp_path / "evidence", "run-1", {"backend": "art"})
    ctx = SimpleNamespace(config=config, suite=suite, spec=spec, plan=offered_plan(spec, config["seed"], 20),
                          model={"snapshot_path": str(tmp_path / "missing")}, writer=writer, log=writer.logger)
    gaps = native_support_gaps(_native(config))
    if not gaps:
        pytest.skip("installed ART expresses every contract point; run() would proceed to the GPU run")
    with pytest.raises(RuntimeError, match="cannot express the measurement contract: .*online_autotuning"):
        get("art").run(ctx)
    writer.finish("failed", error="test")
    manifest = read_evidence(writer.path).manifest
    assert manifest["framework"]["version"] == version("openpipe-art")
    assert set(manifest["framework"]["support_gaps"]) == set(gaps)
    assert manifest["framework"]["native_config"]["pipeline_trainer"]["max_steps"] == 20

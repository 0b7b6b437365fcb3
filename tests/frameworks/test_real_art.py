"""ART driver against the real openpipe-art 0.5.23 package (runs in the framework venv).

Builds the native config from the suites and lets ART's own classes and functions
take it; sends plan calls through ART's own OpenAI client to a loopback stand-in
for vLLM; reads train rows written by ART's own Model.log and an autotuner profile
written by ART's own profile store; shows the real 0.5.18 release refused by name.
The one test double at a hardware edge: torch.cuda.device_count() reports the
contract's four GPUs where MegatronBackend counts them (this machine has none).
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench_fixtures import FakeChatServer, overlay_env, require, small_plan_rows, wordlevel_tokenizer

art = require("art")

import torch  # noqa: E402
from art.dev import InternalModelConfig, LoRAConfig, validate_dedicated_config  # noqa: E402
from art.dev.get_model_config import get_model_config  # noqa: E402
from art.megatron import MegatronBackend  # noqa: E402
from art.pipeline_trainer import PipelineTrainer  # noqa: E402
from art.pipeline_tuner.config import PipelineAutotunerProfile, PipelineTuneSettings  # noqa: E402
from art.pipeline_tuner.store import PipelineTunerProfileStore  # noqa: E402
from art.types import MegatronRuntimeConfig  # noqa: E402

from rl_pipeline_bench.backends import get  # noqa: E402
from rl_pipeline_bench.backends.art.config import build_art_config  # noqa: E402
from rl_pipeline_bench.backends.art import metrics as art_metrics  # noqa: E402
from rl_pipeline_bench.backends.art.driver import HistoryFollower, bind_model_dir  # noqa: E402
from rl_pipeline_bench.backends.art.support import CONTRACT_SETTINGS, check_support  # noqa: E402
from rl_pipeline_bench.backends.framework.native_types import unknown_model_keys, validate_typed_dict  # noqa: E402
from rl_pipeline_bench.settings.config import load_config  # noqa: E402
from rl_pipeline_bench.settings.spec import build_spec, check_spec  # noqa: E402
from rl_pipeline_bench.backends.framework.support import support_main  # noqa: E402
from rl_pipeline_bench.backends.framework.rollout import CHAT_TEMPLATE_KWARGS, run_trajectory, synthetic_reward  # noqa: E402



@pytest.fixture(scope="module")
def config():
    return load_config()


def _native(config, rank=None, tmp_path=None):
    cfg = copy.deepcopy(config)
    if rank is not None:
        cfg["suites"]["comparison"]["rank"] = rank
    return build_art_config(check_spec(build_spec(cfg, "comparison")), art_path=tmp_path)


def _model(native, base):
    return art.TrainableModel(**native["model"], _internal_config=native["internal_config"], base_path=str(base))


@pytest.fixture
def four_gpus(monkeypatch):
    """MegatronBackend counts GPUs with torch.cuda.device_count(); the contract host has four."""
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_version_under_test():
    assert version("openpipe-art") == "0.5.23"


@pytest.mark.parametrize("rank", [None, 1])
def test_native_config_is_taken_by_arts_own_classes(config, rank, tmp_path):
    native = _native(config, rank)
    ic = native["internal_config"]
    assert validate_typed_dict(InternalModelConfig, ic) == []
    assert validate_typed_dict(LoRAConfig, native["model"]["lora_config"]) == []
    model = _model(native, tmp_path)
    assert (model.run_name, model.lora_config) == (native["model"]["run_name"], {"rank": rank or 8, "alpha": 32})
    # ART's own resolution of the model config: dedicated mode, in-flight LoRA, per-expert targets.
    resolved = get_model_config(model.base_model, str(tmp_path), ic, model.lora_config)
    validate_dedicated_config(resolved)
    assert resolved["rollout_weight_update_mode"] == "in_flight_lora"
    assert resolved["engine_args"]["tensor_parallel_size"] == 2 and not resolved["engine_args"]["enable_sleep_mode"]
    assert "experts" in resolved["lora_config"]["target_modules"]
    assert (resolved["lora_config"]["rank"], resolved["lora_config"]["alpha"]) == (rank or 8, 32)
    runtime = MegatronRuntimeConfig.model_validate(native["megatron_runtime"])
    assert (runtime.topology.tp, runtime.topology.cp, runtime.topology.ep, runtime.topology.etp) == (1, 2, 2, 1)
    assert runtime.packed_sequence_length == 131072
    assert unknown_model_keys(art.MegatronTopologyConfig, native["megatron_runtime"]["topology"]) == []
    assert ic["chat_template_kwargs"] == CHAT_TEMPLATE_KWARGS and ic["chat_template_tool_schema_format"] == "vllm_openai"


def test_misspelled_or_mistyped_settings_fail(config, tmp_path):
    native = _native(config)
    ic = native["internal_config"]
    typo = {**ic, "init_args": {"max_seq_lenght": 131072}}
    assert any("init_args.max_seq_lenght: unknown key for InitArgs" in p for p in validate_typed_dict(InternalModelConfig, typo))
    wrong = {**ic, "trainer_gpu_ids": ["0", "1"], "rollout_weight_update_mode": "in_flight"}
    problems = validate_typed_dict(InternalModelConfig, wrong)
    assert any(p.startswith("trainer_gpu_ids") for p in problems)
    assert any(p.startswith("rollout_weight_update_mode") for p in problems)
    with pytest.raises(ValueError, match="rollout_weight_update_mode"):
        validate_dedicated_config({**ic, "rollout_weight_update_mode": "in_flight"})
    # Removed spellings raise in ART itself.
    with pytest.raises(ValueError, match="peft_args"):
        get_model_config(native["model"]["base_model"], str(tmp_path), {**ic, "peft_args": {"r": 8}})
    with pytest.raises(ValueError, match="rollout_weights_mode"):
        validate_dedicated_config({**ic, "rollout_weights_mode": "lora"})
    with pytest.raises(TypeError):
        art.TrainableModel(**{k: v for k, v in native["model"].items() if k != "run_name"}, base_path=str(tmp_path))
    # pydantic would drop a misspelled topology key silently; the key check names it.
    assert unknown_model_keys(art.MegatronTopologyConfig, {"tp": 1, "cpp": 2}) != []
    with pytest.raises(TypeError, match="packed_sequence_length"):
        asyncio.run(MegatronBackend(path=str(tmp_path)).train(_model(native, tmp_path), [], packed_sequence_length=8))


def test_pipeline_trainer_on_megatron_backend_takes_the_native_kwargs(config, tmp_path, four_gpus):
    native = _native(config, tmp_path=tmp_path / "art")
    art.init_megatron_runtime_config(topology=art.MegatronTopologyConfig(**native["megatron_runtime"]["topology"]),
                                     packed_sequence_length=native["megatron_runtime"]["packed_sequence_length"])
    model = _model(native, tmp_path / "art")
    backend = MegatronBackend(**native["backend"])
    kwargs = {**native["pipeline_trainer"], "autotune": art.PipelineAutotuneConfig(**native["pipeline_trainer"]["autotune"])}

    async def rollout(*_):
        raise AssertionError("not called")

    trainer = PipelineTrainer(model, backend, rollout, [], None, **kwargs)
    assert trainer.autotune.mode == "online" and trainer.limit_mean_steps_off_policy == 4
    assert trainer.max_steps_off_policy is None and trainer.max_steps == 20
    assert backend._supports_concurrent_training_and_inference(model)  # dedicated mode, per ART's topology
    # ART's own rules: the autotuner owns the pipeline settings; unknown keywords are refused.
    with pytest.raises(ValueError, match="autotuning is enabled"):
        PipelineTrainer(model, backend, rollout, [], None, **kwargs, num_rollout_workers=8)
    with pytest.raises(TypeError):
        PipelineTrainer(model, backend, rollout, [], None, **kwargs, limit_mean_step_off_policy=4)


def test_installed_art_expresses_every_contract_setting(config):
    result = check_support(get("art").native_support(check_spec(build_spec(config, "comparison"))))
    assert result["version"] == "0.5.23" and result["gaps"] == {}, result["gaps"]
    facts = result["facts"]
    # Per-expert LoRA for Qwen3.5-35B-A3B, as recorded in the manifest: ART's model-support
    # registry maps the model to its MoE spec, whose LoRA targets (trainer and vLLM) include "experts".
    assert facts["per_expert_lora"]["support_spec"] == "qwen3_5_moe" and facts["per_expert_lora"]["is_moe"]
    assert facts["two_inference_gpus"] == {"trainer_gpus": [0, 1], "vllm_gpus": [2, 3], "temporal_gpu_sharing": False,
                                           "vllm_parallel": {"tp": 2, "pp": 1, "dp": 1, "enable_expert_parallel": False}}
    assert facts["routing_replay"] == {"active_for_model": True}


def test_an_older_art_release_is_refused_naming_each_missing_setting(config):
    """The real openpipe-art 0.5.18 (first on the path) met by `bench preflight`, which runs before any lease."""
    proc = subprocess.run([sys.executable, "-m", "rl_pipeline_bench.cli", "preflight", "--suite", "comparison",
                           "--backend", "art", "--runtime", "native"],
                          env={**overlay_env("openpipe-art-0.5.18"), "RL_BENCH_ENV_ROOT": ""},
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "installed openpipe-art 0.5.18" in proc.stderr and "missing settings:" in proc.stderr
    named = {line.split(":", 1)[0].strip() for line in proc.stderr.splitlines() if line.startswith("  ")}
    assert {"megatron_runtime", "two_inference_gpus", "routing_replay", "online_autotuning", "mean_policy_age_limit",
            "in_flight_updates", "lora", "metric_names"} <= named, proc.stderr
    for point in named:
        assert f"  {point}: {CONTRACT_SETTINGS[point]}" in proc.stderr


def test_support_command_line_exits_1_on_gaps(capsys):
    """The entry point's exit status, with the 0.5.18 answer standing in for a re-run (it takes a minute)."""
    answer = {"framework": "openpipe-art", "version": "0.5.18", "gaps": {"lora": "x"}, "facts": {}}
    assert support_main(lambda native: answer, "m", ["{}"]) == 1
    assert support_main(lambda native: answer, "m", ["--report", "{}"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == answer
    assert support_main(lambda native: answer, "m", []) == 2


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


def _groups():
    trajs = [art.Trajectory(messages_and_choices=[{"role": "user", "content": "a"},
                                                   {"role": "assistant", "content": "b"}], reward=float(r))
             for r in range(3)]
    return [art.TrajectoryGroup(trajs), art.TrajectoryGroup(trajs[:2])]


def _trainer_settings_metrics(native, tmp_path):
    """The pipeline_settings/* metrics a real PipelineTrainer with online autotuning logs."""
    model = _model(native, tmp_path)
    kwargs = {**native["pipeline_trainer"], "autotune": art.PipelineAutotuneConfig(mode="online")}

    async def rollout(*_):
        raise AssertionError("not called")

    return PipelineTrainer(model, None, rollout, [], None, **kwargs)._pipeline_settings_metrics()


def _log_steps(model, steps, settings, *, age=True):
    for step in steps:
        # The metrics PipelineTrainer passes to Model.log for a train step (0.5.23 names).
        metrics = {"time/step_backend_train_s": 2.25, "time/step_wall_s": 3.0,
                   "data/step_trainable_assistant_tokens": 321.0, **settings}
        if age:
            metrics["offpolicy/token_weighted_policy_age_steps"] = 1.5
        asyncio.run(model.log(_groups(), split="train", step=step, metrics=metrics))
    asyncio.run(model.log(_groups(), split="val", step=steps[-1]))


def test_reader_takes_the_train_log_art_writes(config, tmp_path):
    native = _native(config)
    model = _model(native, tmp_path)
    _log_steps(model, [1, 2], _trainer_settings_metrics(native, tmp_path / "t"))
    history = Path(model._get_output_dir()) / "history.jsonl"
    rows = [row for _, row in art_metrics.iter_history(history)]
    train = [r for r in rows if art_metrics.is_train_row(r)]
    assert len(rows) == 3 and len(train) == 2
    wall = art_metrics.recorded_wall(train[0])
    clock = art_metrics.ClockMap(wall0=wall - 10.0, run0=1.0)
    times = art_metrics.TrainCallTimes(calls={1: (5.0, 7.25), 2: (8.0, 10.25)}, published={1: 7.5, 2: 99.0})
    upd = art_metrics.update_row(train[0], clock, times)
    assert upd == {"update": 1, "completed_at": pytest.approx(11.0), "accepted_trajectories": 5,
                   "assistant_tokens": 321, "policy_version": 1, "mean_policy_age": 1.5}
    assert art_metrics.update_row(train[1], clock, times)["completed_at"] == 99.0  # publication after the log
    assert times.interval(1) == {"rank": 0, "update": 1, "start": 5.0, "end": 7.25}
    for key in ("data/step_trainable_assistant_tokens", "offpolicy/token_weighted_policy_age_steps"):
        broken = {k: v for k, v in train[0].items() if k != key}
        with pytest.raises(art_metrics.MetricRecordError, match=key):
            art_metrics.update_row(broken, clock, times)
    with pytest.raises(art_metrics.MetricRecordError, match="publication"):
        art_metrics.update_row(train[0], clock, art_metrics.TrainCallTimes(calls=times.calls))


def test_missing_policy_age_is_an_error_not_zero(config, tmp_path):
    native = _native(config)
    model = _model(native, tmp_path)
    _log_steps(model, [1], {}, age=False)
    row = next(r for _, r in art_metrics.iter_history(Path(model._get_output_dir()) / "history.jsonl")
               if art_metrics.is_train_row(r))
    times = art_metrics.TrainCallTimes(calls={1: (0.0, 1.0)}, published={1: 1.0})
    with pytest.raises(art_metrics.MetricRecordError, match="offpolicy/token_weighted_policy_age_steps"):
        art_metrics.update_row(row, art_metrics.ClockMap(0.0, 0.0), times)


def test_follower_waits_for_publication(config, tmp_path):
    native = _native(config)
    model = _model(native, tmp_path)
    _log_steps(model, [1, 2], {})
    added: dict[str, list] = {"updates": [], "intervals": []}
    writer = SimpleNamespace(add_update=lambda **k: added["updates"].append(k),
                             add_trainer_interval=lambda **k: added["intervals"].append(k))
    times = art_metrics.TrainCallTimes(calls={1: (1.0, 2.0), 2: (3.0, 4.0)}, published={1: 2.5})
    follower = HistoryFollower(Path(model._get_output_dir()) / "history.jsonl", writer,
                               art_metrics.ClockMap(0.0, 0.0), times)
    follower.poll()
    assert [u["update"] for u in added["updates"]] == [1] and sorted(follower.pending) == [2]
    times.published[2] = 4.5
    follower.poll()
    assert [u["update"] for u in added["updates"]] == [1, 2] and follower.pending == {}
    assert added["intervals"][1] == {"rank": 0, "update": 2, "start": 3.0, "end": 4.0}


def test_autotuner_health_from_arts_own_records(config, tmp_path):
    native = _native(config)
    model = _model(native, tmp_path)
    settings = _trainer_settings_metrics(native, tmp_path / "t")
    assert sorted(settings) == sorted(art_metrics.PIPELINE_SETTINGS_KEYS)
    _log_steps(model, [1, 2], settings)
    rows = [r for _, r in art_metrics.iter_history(Path(model._get_output_dir()) / "history.jsonl")
            if art_metrics.is_train_row(r)]
    store = PipelineTunerProfileStore.for_model(model)
    profile_path = store.resolve(None)
    missing = art_metrics.autotuner_health(rows, profile_path, 2)
    assert not missing["healthy"] and "was not written" in missing["problems"][0]
    tuned = PipelineTuneSettings(num_rollout_workers=16, min_batch_size=4, max_batch_size=8, queue_maxsize=40,
                                 target_groups_per_step=8)
    store.save("latest", PipelineAutotunerProfile(settings=tuned, config=art.PipelineAutotuneConfig(mode="online")))
    health = art_metrics.autotuner_health(rows, profile_path, 2)
    assert health["healthy"], health["problems"]
    assert health["final_settings"] == {k: rows[1][k] for k in art_metrics.PIPELINE_SETTINGS_KEYS}
    short = art_metrics.autotuner_health(rows, profile_path, 3)
    assert not short["healthy"] and short["problems"] == ["no train row for step 3"]
    bare = [{k: v for k, v in r.items() if not k.startswith("pipeline_settings/")} for r in rows]
    assert any("lacks pipeline_settings/" in p for p in art_metrics.autotuner_health(bare, profile_path, 2)["problems"])


PINNED = "59d61f3ce65a6d9863b86d2e96597125219dc754"


def _hub_snapshot(root: Path, repo_id: str = "Qwen/Qwen3.5-35B-A3B", revision: str = PINNED) -> Path:
    """A Hugging Face cache holding only the pinned revision, as a download by commit hash leaves it (no refs/)."""
    snap = root / "hub" / f"models--{repo_id.replace('/', '--')}" / "snapshots" / revision
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    return snap


def test_a_cache_without_refs_resolves_only_the_pinned_revision(tmp_path):
    """Why ART must be given the snapshot: the bare name resolves `main`, which this cache does not have."""
    from huggingface_hub import try_to_load_from_cache

    snap = _hub_snapshot(tmp_path)
    cache = tmp_path / "hub"
    assert try_to_load_from_cache("Qwen/Qwen3.5-35B-A3B", "config.json", cache_dir=cache) is None
    assert Path(try_to_load_from_cache("Qwen/Qwen3.5-35B-A3B", "config.json", cache_dir=cache,
                                       revision=PINNED)) == snap / "config.json"


def test_model_identity_reaches_every_process_art_launches(config, tmp_path, four_gpus, monkeypatch):
    """The vLLM argv and the Megatron trainer spec ART builds carry the snapshot and the pinned revision.

    ART's own MegatronBackend._get_service resolves the config and builds its
    DistributedMegatronService; only the runtime that would launch processes (ArtRuntime
    over Monarch, vLLM) is replaced by the topology ART compiled for it.
    """
    from art.distributed.vllm_replica import ReplicaLaunchTemplate, ReplicaManager
    from art.vllm_runtime import build_vllm_runtime_server_cmd

    snap = _hub_snapshot(tmp_path)
    native = build_art_config(check_spec(build_spec(config, "comparison")), art_path=tmp_path / "art", model_path=snap)
    art.init_megatron_runtime_config(topology=art.MegatronTopologyConfig(**native["megatron_runtime"]["topology"]),
                                     packed_sequence_length=native["megatron_runtime"]["packed_sequence_length"])
    model = _model(native, tmp_path / "art")
    backend = MegatronBackend(**native["backend"])

    async def topology_only_runtime(self, model_, resolved):
        return SimpleNamespace(topology=self._compile_local_topology(model_, resolved, service_ports=(40001, 40002)),
                               runtime_id="test", nixl_transport=None)

    monkeypatch.setattr(MegatronBackend, "_ensure_runtime", topology_only_runtime)
    service = asyncio.run(backend._get_service(model))
    trainer = service._runtime_spec()  # what each Megatron rank is started with (MODEL_IDENTIFIER, revision)
    assert (trainer.model_identifier, trainer.model_revision, trainer.dtype) == (str(snap), PINNED, "bfloat16")
    vllm_spec = service._model_service_spec()
    template = ReplicaLaunchTemplate(served_model_name="rl-bench@0", lora_path=str(tmp_path / "lora"),
                                     engine_args=service._engine_args(None), server_args=service._server_args(None))
    request = ReplicaManager(vllm_spec, {m.host_id: object() for m in vllm_spec.members}, template)._launch_request(
        vllm_spec.members[0])
    monkeypatch.setenv("ART_VLLM_RUNTIME_BIN", str(tmp_path / ".venv" / "bin" / "art-vllm-runtime-server"))
    argv = build_vllm_runtime_server_cmd(request.launch_config)
    assert f"--model={snap}" in argv and "--cuda-visible-devices=2,3" in argv
    engine = json.loads(next(a for a in argv if a.startswith("--engine-args-json=")).split("=", 1)[1])
    assert (engine["revision"], engine["tokenizer_revision"], engine["dtype"]) == (PINNED, PINNED, "bfloat16")
    assert not any(a == "--model=Qwen/Qwen3.5-35B-A3B" for a in argv)


def test_a_failed_publication_wait_names_its_cause(config, tmp_path):
    from rl_pipeline_bench.backends.art.driver import publication_failed, timed_backend_class

    class Unserved:
        async def wait_for_serving(self, step):
            raise TimeoutError(f"vLLM did not serve step {step} within 600 s")

    times = art_metrics.TrainCallTimes()
    backend = timed_backend_class(MegatronBackend, lambda: 1.0, times)(path=str(tmp_path))

    async def service(model):
        return Unserved()

    backend._get_service = service
    asyncio.run(backend._await_publication(None, 3))
    assert times.published == {} and backend.publication_failures == {
        3: "TimeoutError: vLLM did not serve step 3 within 600 s"}
    assert publication_failed(backend.publication_failures) == (
        "publication_failed: step 3: TimeoutError: vLLM did not serve step 3 within 600 s")


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


def test_run_records_the_framework_then_needs_the_snapshot(config, tmp_path):
    """run(ctx) with the installed ART: support facts and version in the manifest before any model work."""
    from rl_pipeline_bench.evidence.store import EvidenceWriter, read_evidence
    from rl_pipeline_bench.plan.workloads import load_workload, offered_plan

    run_spec = check_spec(build_spec(config, "comparison"))
    spec = load_workload(config, "multi_turn", run_spec.settings["scale"])
    writer = EvidenceWriter(tmp_path / "evidence", "run-1", {"backend": "art"})
    ctx = SimpleNamespace(run_spec=run_spec, workload_spec=spec, plan=offered_plan(spec, config["seed"], 20),
                          trained_updates=run_spec.trained_updates, contract=dict(run_spec.settings["contract"]),
                          model={"snapshot_path": str(tmp_path / "missing")},
                          writer=writer, log=writer.logger)
    cwd = os.getcwd()
    try:
        with pytest.raises(FileNotFoundError, match="has no config.json"):
            get("art").run(ctx)
    finally:
        os.chdir(cwd)
    writer.finish("failed", error="test")
    framework = read_evidence(writer.path).manifest["framework"]
    assert framework["version"] == "0.5.23" and framework["support_gaps"] == {}
    assert framework["native_config"]["pipeline_trainer"]["max_steps"] == 20
    assert framework["support_facts"]["per_expert_lora"]["is_moe"]


def _commands(script: str) -> list[list[str]]:
    """The uv / HybridEP / vLLM-runtime commands of a shell script, continuation lines joined."""
    import shlex

    text = script.replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        words = shlex.split(line.split(" #")[0], posix=True) if line.strip() and not line.strip().startswith("#") else []
        words = [w for w in words if "=" not in w or w.startswith("--")]  # drop VAR=value prefixes
        if words[:2] in (["uv", "sync"], ["uv", "pip"]) or "art.megatron.hybrid_ep_setup" in words \
                or any(w.endswith("vllm_runtime/setup.sh") for w in words):
            out.append(words)
    return out


def _step(words: list[str]) -> tuple[str, ...]:
    if words[0] == "uv":
        return tuple(words[:3])
    if "art.megatron.hybrid_ep_setup" in words:
        return ("hybrid_ep_setup", words[0].replace("${repo_root}", "$SRC"))
    return ("vllm_runtime/setup.sh",)


def test_art_recipe_installs_art_the_way_its_own_megatron_setup_does():
    """containers/art/setup.sh against the installed release's art/megatron/setup.sh, step by step."""
    arts = (Path(art.__file__).parent / "megatron" / "setup.sh").read_text()
    ours = (Path(__file__).resolve().parents[2] / "containers" / "art" / "setup.sh").read_text()
    theirs, mine = _commands(arts), _commands(ours)
    assert len(theirs) == len(mine) == 5, (theirs, mine)
    for a, b in zip(theirs, mine):
        flags_a = [w for w in a if w.startswith("--")]
        # The recipe may add only the pinned interpreter (--python) where ART's script lets uv choose.
        flags_b = [w for w in b if w.startswith("--") and (w != "--python" or "--python" in flags_a)]
        assert flags_a == flags_b, (a, b)
        assert _step(a) == _step(b), (a, b)
    # The extras ART derives for CUDA 12 are the ones the recipe pins; `backend` is never combined.
    assert 'root_extra=megatron' in arts and 'runtime_extra=cuda12' in arts
    pins = (Path(__file__).resolve().parents[2] / "containers" / "art" / "pins.env").read_text()
    assert "ART_MEGATRON_ROOT_EXTRA=megatron\n" in pins and "ART_MEGATRON_RUNTIME_EXTRA=cuda12\n" in pins
    assert "--extra backend" not in ours


def test_runtime_interpreters_are_the_ones_art_itself_resolves(tmp_path, monkeypatch):
    """The manifest's vLLM and Megatron-Core versions are read where ART 0.5.23 runs them from."""
    from art import vllm_runtime
    from art.megatron.runtime import managed

    from rl_pipeline_bench.backends.art import runtimes

    # Unset: the Megatron trainer's source-checkout runtime, the vLLM runtime project's venv.
    monkeypatch.delenv("ART_MEGATRON_RUNTIME_PYTHON", raising=False)
    monkeypatch.delenv("ART_VLLM_RUNTIME_BIN", raising=False)
    assert runtimes.megatron_python() == str(managed._source_runtime_python())
    assert runtimes.vllm_python() == str(vllm_runtime._runtime_python(vllm_runtime.get_vllm_runtime_project_root()))
    # Set: the interpreter beside the runtime server ART is told to start.
    server = tmp_path / "rt" / ".venv" / "bin" / vllm_runtime.RUNTIME_SERVER
    server.parent.mkdir(parents=True)
    server.write_text("#!/bin/sh\n")
    server.chmod(0o755)
    monkeypatch.setenv("ART_VLLM_RUNTIME_BIN", str(server))
    assert runtimes.vllm_python() == str(vllm_runtime._resolve_vllm_runtime_python())

"""ART's answer to "can the installed release express the contract?" (see backends/framework/support.py).

Each check hands one contract setting (from `build_art_config`) to the installed
ART's own classes and functions and inspects what ART made of it; none needs a GPU,
vLLM or Megatron-Core. Entry point:
`python -m rl_pipeline_bench.backends.art.support [--report] NATIVE_CONFIG_JSON`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from typing import Any, Callable, Iterator
from unittest import mock

from ..framework.support import run_checks, support_main
from . import BACKEND

#: Contract point -> the native setting that expresses it (named in every refusal).
CONTRACT_SETTINGS = {
    "megatron_runtime": "art.init_megatron_runtime_config(topology=MegatronTopologyConfig(tp=1, cp=2, ep=2, etp=1), "
                        "packed_sequence_length=131072)",
    "context_parallel": "context parallelism (CP2) for the model in ART's Megatron model-support registry",
    "lora": "TrainableModel(run_name=..., lora_config={'rank': R, 'alpha': 32})",
    "per_expert_lora": "LoRA target module 'experts' (one adapter per expert) in ART's model-support registry",
    "in_flight_updates": "_internal_config rollout_weight_update_mode='in_flight_lora'",
    "two_inference_gpus": "dedicated mode on trainer GPUs 0,1 and one vLLM engine over inference GPUs 2,3 "
                          "(engine_args tensor_parallel_size=2)",
    "routing_replay": "MegatronBackend(enable_expert_replay=True) replaying the MoE model's routed experts",
    "online_autotuning": "PipelineTrainer(autotune=PipelineAutotuneConfig(mode='online')) with no fixed pipeline settings",
    "mean_policy_age_limit": "PipelineTrainer(limit_mean_steps_off_policy=4)",
    "cleanup": "MegatronBackend as an async context manager (close() ends vLLM and trainer processes)",
    "metric_names": "train-log keys data/step_trainable_assistant_tokens, time/step_backend_train_s, "
                    "offpolicy/token_weighted_policy_age_steps",
}


@contextlib.contextmanager
def _no_visible_devices_override() -> Iterator[None]:
    """ART's local topology maps GPU ids through CUDA_VISIBLE_DEVICES; check with plain indices."""
    with mock.patch.dict(os.environ):
        os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        yield


def _resolved_model_config(native: dict[str, Any], workdir: str) -> dict[str, Any]:
    from art.dev.get_model_config import get_model_config

    return get_model_config(native["model"]["base_model"], workdir, native["internal_config"],
                            native["model"]["lora_config"])


def _check_megatron_runtime(native, workdir, facts):
    import art

    cfg = art.init_megatron_runtime_config(topology=art.MegatronTopologyConfig(**native["megatron_runtime"]["topology"]),
                                           packed_sequence_length=native["megatron_runtime"]["packed_sequence_length"])
    got = {k: getattr(cfg.topology, k, None) for k in native["megatron_runtime"]["topology"]}
    facts["megatron_runtime"] = {"topology": got, "packed_sequence_length": cfg.packed_sequence_length}
    if got != native["megatron_runtime"]["topology"]:
        return f"ART kept topology {got}, asked {native['megatron_runtime']['topology']}"
    if cfg.packed_sequence_length != native["megatron_runtime"]["packed_sequence_length"]:
        return f"ART kept packed_sequence_length {cfg.packed_sequence_length}"
    return None


def _check_context_parallel(native, workdir, facts):
    from art.megatron.model_support import model_supports_context_parallel

    ok = model_supports_context_parallel(native["model"]["base_model"])
    return None if ok else f"ART's model support for {native['model']['base_model']} has cp_supported=False"


def _check_lora(native, workdir, facts):
    import art

    model = art.TrainableModel(**native["model"], _internal_config=native["internal_config"], base_path=workdir)
    lora = _resolved_model_config(native, workdir)["lora_config"]
    want = native["model"]["lora_config"]
    facts["lora"] = {"rank": lora.get("rank"), "alpha": lora.get("alpha"), "run_name": model.run_name}
    if (lora.get("rank"), lora.get("alpha")) != (want["rank"], want["alpha"]):
        return f"ART resolved LoRA rank/alpha {lora.get('rank')}/{lora.get('alpha')}, asked {want['rank']}/{want['alpha']}"
    return None


def _check_per_expert_lora(native, workdir, facts):
    from art.megatron.model_support import get_model_support_spec

    spec = get_model_support_spec(native["model"]["base_model"])
    targets = _resolved_model_config(native, workdir)["lora_config"].get("target_modules") or []
    vllm_targets = _resolved_model_config(native, workdir)["engine_args"].get("lora_target_modules") or []
    facts["per_expert_lora"] = {"support_spec": spec.key, "is_moe": spec.is_moe, "target_modules": list(targets),
                                "vllm_lora_target_modules": list(vllm_targets)}
    if not spec.is_moe:
        return f"ART's model support spec {spec.key} is not a mixture-of-experts spec"
    if "experts" not in targets or "experts" not in vllm_targets:
        return f"ART's LoRA targets {list(targets)} (vLLM: {list(vllm_targets)}) do not include 'experts'"
    return None


def _check_in_flight_updates(native, workdir, facts):
    from art.dev import validate_dedicated_config

    resolved = _resolved_model_config(native, workdir)
    validate_dedicated_config(resolved)
    mode = resolved.get("rollout_weight_update_mode")
    return None if mode == "in_flight_lora" else f"ART resolved rollout_weight_update_mode={mode!r}"


def _check_two_inference_gpus(native, workdir, facts):
    from art.dev import validate_dedicated_config
    from art.megatron.runtime.local import compile_local_runtime_topology

    resolved = _resolved_model_config(native, workdir)
    validate_dedicated_config(resolved)
    ic = native["internal_config"]
    with _no_visible_devices_override():
        topo = compile_local_runtime_topology(
            resolved, model_name=native["model"]["name"], base_model=native["model"]["base_model"],
            artifact_root=workdir, visible_gpu_count=len(ic["trainer_gpu_ids"]) + len(ic["inference_gpu_ids"]))
    services = topo.model_services
    trainer = [p.gpu_id for p in topo.trainer.ranks]
    serving = [g for s in services for m in s.members for g in m.gpu_ids]
    facts["two_inference_gpus"] = {"trainer_gpus": trainer, "vllm_gpus": serving,
                                   "vllm_parallel": services[0].parallel.model_dump() if services else None,
                                   "temporal_gpu_sharing": services[0].temporal_gpu_sharing if services else None}
    if trainer != ic["trainer_gpu_ids"] or len(services) != 1 or serving != ic["inference_gpu_ids"]:
        return f"ART placed the trainer on {trainer} and vLLM on {serving} ({len(services)} service(s))"
    if services[0].temporal_gpu_sharing:
        return "ART would time-share GPUs between training and inference (not dedicated mode)"
    return None


def _check_routing_replay(native, workdir, facts):
    import art
    from art.megatron import MegatronBackend

    backend = MegatronBackend(path=workdir, **{k: v for k, v in native["backend"].items() if k != "path"})
    model = art.TrainableModel(**native["model"], _internal_config=native["internal_config"], base_path=workdir)
    active = bool(backend._model_uses_expert_replay(model))
    facts["routing_replay"] = {"active_for_model": active}
    return None if active else "MegatronBackend would not replay routed experts for this model"


def _pipeline_trainer(native, workdir, *, with_autotune: bool):
    import art
    from art.pipeline_trainer import PipelineTrainer

    model = art.TrainableModel(**native["model"], _internal_config=native["internal_config"], base_path=workdir)
    kwargs = dict(native["pipeline_trainer"])
    autotune = kwargs.pop("autotune")
    if with_autotune:
        kwargs["autotune"] = art.PipelineAutotuneConfig(**autotune)

    async def rollout(*_args):  # never called: the trainer is only constructed
        raise AssertionError("not a run")

    # PipelineTrainer checks backend-specific support only for LocalBackend instances;
    # the dedicated-mode placement is checked by _check_two_inference_gpus through ART's topology.
    return PipelineTrainer(model, None, rollout, [], None, **kwargs)


def _check_online_autotuning(native, workdir, facts):
    trainer = _pipeline_trainer(native, workdir, with_autotune=True)
    kinds = [type(a).__name__ for a in trainer._attachments]
    facts["online_autotuning"] = {"mode": trainer.autotune.mode, "attachments": kinds}
    if trainer.autotune.mode != "online" or "PipelineAutotunerAttachment" not in kinds:
        return f"PipelineTrainer kept autotune mode {trainer.autotune.mode!r} with attachments {kinds}"
    return None


def _check_mean_policy_age_limit(native, workdir, facts):
    trainer = _pipeline_trainer(native, workdir, with_autotune=False)
    want = native["pipeline_trainer"]["limit_mean_steps_off_policy"]
    facts["mean_policy_age_limit"] = {"limit_mean_steps_off_policy": trainer.limit_mean_steps_off_policy,
                                      "max_steps_off_policy": trainer.max_steps_off_policy}
    if trainer.limit_mean_steps_off_policy != want or trainer.max_steps_off_policy is not None:
        return (f"PipelineTrainer kept limit_mean_steps_off_policy={trainer.limit_mean_steps_off_policy}, "
                f"max_steps_off_policy={trainer.max_steps_off_policy}")
    return None


def _check_cleanup(native, workdir, facts):
    from art.megatron import MegatronBackend

    async def enter_and_close():
        async with MegatronBackend(path=workdir) as backend:
            return backend

    asyncio.run(enter_and_close())
    return None


def _check_metric_names(native, workdir, facts):
    from art.model import WANDB_CANONICAL_METRIC_KEYS

    from .metrics import RENAMED_IN_0_5_20

    missing = [k for k in RENAMED_IN_0_5_20 if k not in WANDB_CANONICAL_METRIC_KEYS]
    return f"ART's metric taxonomy lacks {', '.join(missing)}" if missing else None


CHECKS: dict[str, Callable[[dict, str, dict], str | None]] = {
    "megatron_runtime": _check_megatron_runtime,
    "context_parallel": _check_context_parallel,
    "lora": _check_lora,
    "per_expert_lora": _check_per_expert_lora,
    "in_flight_updates": _check_in_flight_updates,
    "two_inference_gpus": _check_two_inference_gpus,
    "routing_replay": _check_routing_replay,
    "online_autotuning": _check_online_autotuning,
    "mean_policy_age_limit": _check_mean_policy_age_limit,
    "cleanup": _check_cleanup,
    "metric_names": _check_metric_names,
}


def check_support(native: dict[str, Any]) -> dict[str, Any]:
    """{framework, version, gaps: {point: 'setting: why'}, facts}: what the installed framework did with each setting."""
    return run_checks(BACKEND.framework, CHECKS, CONTRACT_SETTINGS, native, workdir=True)


if __name__ == "__main__":
    sys.exit(support_main(check_support, __spec__.name))

"""ART native configuration built from a suite: pure data, no ART import needed.

`build_art_config` returns the keyword arguments of ART's own objects
(`art.TrainableModel`, its `_internal_config` (`art.dev.InternalModelConfig`),
`MegatronBackend` and `PipelineTrainer`) plus the environment the Megatron
service reads. The tests feed them to those classes from the installed
`openpipe-art`; `native_support_gaps` reports the contract points that the
installed ART has no native setting for, so a run refuses instead of silently
benchmarking another configuration.
"""

from __future__ import annotations

import importlib.util
import inspect
import typing
from pathlib import Path
from typing import Any

from ...config import Suite
from ...rollout import CHAT_TEMPLATE_KWARGS
from ...topology import LORA_ALPHA, MAX_SEQ_LENGTH, lora_rank
from .contract import MAX_POLICY_AGE as ART_MAX_POLICY_AGE
from .contract import PACKED_SEQUENCE_LENGTH as ART_PACKED_SEQUENCE_LENGTH
from .contract import TOPOLOGY as ART_TOPOLOGY

#: Environment knobs of ART's Megatron provider that carry the contract topology.
MEGATRON_ENV = {
    "ART_MEGATRON_TENSOR_MODEL_PARALLEL_SIZE": str(ART_TOPOLOGY.tp),
    "ART_MEGATRON_CONTEXT_PARALLEL_SIZE": str(ART_TOPOLOGY.cp),
    "ART_MEGATRON_EXPERT_MODEL_PARALLEL_SIZE": str(ART_TOPOLOGY.ep),
}
#: Contract points and the native setting name ART must expose for each.
CONTRACT_FEATURES = {
    "online_autotuning": "a PipelineTrainer parameter for online autotuning",
    "mean_policy_age_limit": "a PipelineTrainer parameter bounding the mean policy age",
    "two_inference_gpus": "dedicated mode with inference_gpu_ids of two GPUs",
    "context_parallel": "the ART_MEGATRON_CONTEXT_PARALLEL_SIZE knob of the Megatron provider",
    "routing_replay": "a PipelineTrainer or backend.train setting for MoE routing replay",
}


def build_art_config(
    config: dict[str, Any],
    suite: Suite,
    *,
    spec: Any = None,
    n_updates: int | None = None,
    run_name: str = "rl-bench",
    project: str = "rl-pipeline-bench",
    art_path: str | Path | None = None,
) -> dict[str, Any]:
    """ART's native settings for this suite (see the module docstring for the keys).

    spec: the workload spec (batch = its groups_per_update, workers = its
    offered trajectories); n_updates: the contract's N (warmup + measured).
    """
    model = config["models"][suite["model"]]
    contract = suite.contract
    n = int(n_updates if n_updates is not None else contract["warmup_updates"] + contract["measured_updates"])
    groups = int(getattr(spec, "groups_per_update", 1) if spec is not None else 1)
    trainer_ids = list(range(ART_TOPOLOGY.train_gpus))
    inference_ids = list(range(ART_TOPOLOGY.train_gpus, ART_TOPOLOGY.train_gpus + ART_TOPOLOGY.inference_gpus))
    internal_config = {
        "init_args": {"max_seq_length": MAX_SEQ_LENGTH},
        "peft_args": {"r": lora_rank(suite), "lora_alpha": LORA_ALPHA},
        "chat_template_kwargs": dict(CHAT_TEMPLATE_KWARGS),
        "chat_template_tool_schema_format": "vllm_openai",
        "trainer_gpu_ids": trainer_ids,
        "inference_gpu_ids": inference_ids,
        "rollout_weights_mode": "lora",
    }
    pipeline_trainer = {
        # Each scenario is one plan group; a batch is one plan update.
        "num_rollout_workers": groups,
        "min_batch_size": groups,
        "max_batch_size": groups,
        "max_steps_off_policy": ART_MAX_POLICY_AGE,
        "packed_sequence_length": ART_PACKED_SEQUENCE_LENGTH,
        "max_steps": n,
        "loss_fn": "cispo",
        "eval_every_n_steps": 0,
        "eval_at_start": False,
        "save_checkpoint": False,
        "resume": False,
    }
    return {
        "model": {
            "name": run_name,
            "project": project,
            # Canonical ID for ART's support registry; lookups bind to the snapshot
            # through the run-local model directory (see driver.bind_model_dir).
            "base_model": model["repo_id"],
        },
        "internal_config": internal_config,
        "backend": {"path": str(art_path) if art_path is not None else None},
        "pipeline_trainer": pipeline_trainer,
        "env": dict(MEGATRON_ENV),
        "contract": {
            "topology": ART_TOPOLOGY.label(),
            "lora_rank": lora_rank(suite),
            "lora_alpha": LORA_ALPHA,
            "max_policy_age": ART_MAX_POLICY_AGE,
            "packed_sequence_length": ART_PACKED_SEQUENCE_LENGTH,
            "updates": n,
        },
    }


def _is_typeddict(tp: Any) -> bool:
    import typing_extensions

    return typing_extensions.is_typeddict(tp) or typing.is_typeddict(tp)


def validate_typed_dict(td: type, value: Any, path: str = "") -> list[str]:
    """Check a dict against a (nested) TypedDict: unknown keys and wrong value types.

    Leaf values are validated by pydantic against the TypedDict's own annotation;
    returns problems (empty when the value conforms).
    """
    from pydantic import TypeAdapter, ValidationError

    if not isinstance(value, dict):
        return [f"{path or '(top)'}: expected a mapping for {td.__name__}, got {type(value).__name__}"]
    hints = typing.get_type_hints(td)
    problems = []
    for key, item in value.items():
        where = f"{path}.{key}" if path else key
        if key not in hints:
            problems.append(f"{where}: unknown key for {td.__name__} (known: {', '.join(sorted(hints))})")
            continue
        ann = hints[key]
        inner = [a for a in typing.get_args(ann) if _is_typeddict(a)] if not _is_typeddict(ann) else [ann]
        if inner and isinstance(item, dict):
            problems += validate_typed_dict(inner[0], item, where)
            continue
        try:
            TypeAdapter(ann).validate_python(item, strict=True)
        except ValidationError as exc:
            problems.append(f"{where}: {exc.errors()[0]['msg']} (annotation {ann})")
    return problems


def _provider_source() -> str | None:
    spec = importlib.util.find_spec("art.megatron.provider")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).read_text()


def native_support_gaps(native: dict[str, Any]) -> dict[str, str]:
    """Contract points the installed ART cannot express natively: {feature: why}.

    Reads the installed package (signatures, its own config validator and the
    Megatron provider's source); never imports Megatron itself.
    """
    from art.dev import validate_dedicated_config
    from art.local.backend import LocalBackend
    from art.pipeline_trainer import PipelineTrainer

    gaps: dict[str, str] = {}
    params = inspect.signature(PipelineTrainer.__init__).parameters
    if not any("autotun" in p for p in params):
        gaps["online_autotuning"] = "PipelineTrainer has no online-autotuning parameter"
    if not any("policy_age" in p for p in params):
        gaps["mean_policy_age_limit"] = (
            "PipelineTrainer bounds staleness per group (max_steps_off_policy), not the mean policy age"
        )
    train_params = inspect.signature(LocalBackend.train).parameters
    if not any("routing" in p for p in [*params, *train_params]):
        gaps["routing_replay"] = "neither PipelineTrainer nor backend.train takes a routing-replay setting"
    try:
        validate_dedicated_config(native["internal_config"])
    except ValueError as exc:
        gaps["two_inference_gpus"] = f"art.dev.validate_dedicated_config: {exc}"
    source = _provider_source()
    missing = [k for k in native["env"] if source is None or k not in source]
    if missing:
        gaps["context_parallel" if "ART_MEGATRON_CONTEXT_PARALLEL_SIZE" in missing else "megatron_topology"] = (
            f"art.megatron.provider reads no {', '.join(missing)}"
        )
    return gaps

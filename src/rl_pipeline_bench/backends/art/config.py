"""ART native configuration built from a run spec: pure data, no ART import needed.

`build_art_config` returns the keyword arguments of ART's own objects, as
`openpipe-art` 0.5.23 names them (read from that release's source):

- `model`: `art.TrainableModel(name, run_name, project, base_model, lora_config)`;
  `run_name` is required and LoRA is the top-level `lora_config` (`peft_args` raises).
- `internal_config`: its `_internal_config` (`art.dev.InternalModelConfig`):
  the pinned model (`init_args.model_name`: the snapshot directory, the one field
  both ART's vLLM launch and its Megatron trainer load from; `init_args.revision`:
  the pinned commit, which ART hands vLLM and records in the trainer's identity),
  BF16 for trainer (`init_args.dtype`) and vLLM (`engine_args.dtype`), dedicated
  mode (`trainer_gpu_ids` 0,1 / `inference_gpu_ids` 2,3), in-flight LoRA
  updates (`rollout_weight_update_mode="in_flight_lora"`), one vLLM engine with
  `engine_args.tensor_parallel_size=2` over both inference GPUs (see INFERENCE_LAYOUT),
  chat-template kwargs.
- `megatron_runtime`: `art.init_megatron_runtime_config(topology=MegatronTopologyConfig(
  tp=1, cp=2, ep=2, etp=1), packed_sequence_length=131072)`: the only place ART
  0.5.20+ takes the trainer topology and packing length (its workers overwrite any
  `ART_MEGATRON_*` variable from it).
- `backend`: `art.megatron.MegatronBackend(path, enable_expert_replay=True)`: MoE
  routing replay (vLLM's routed experts replayed in Megatron).
- `pipeline_trainer`: `PipelineTrainer(...)` keywords: online autotuning
  (`autotune={"mode": "online", ...}`, built into `PipelineAutotuneConfig` by the driver,
  with the tuner's start and growth settings at 0.5.23's defaults, set explicitly because
  the offered plan is sized by them: `contract.AUTOTUNER_BOUNDS`)
  with no fixed worker/batch settings (the autotuner owns them; ART raises when both
  are given), the mean policy-age limit `limit_mean_steps_off_policy=4` and no
  per-group hard cap (`max_steps_off_policy=None`: the contract bounds the mean).

The tests feed every part to ART's own classes and functions; `support.py` checks
the installed ART accepts each contract setting before a run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..framework.rollout import CHAT_TEMPLATE_KWARGS
from ..topology import LORA_ALPHA, MAX_SEQ_LENGTH, lora_rank
from .contract import AUTOTUNER_BOUNDS
from .contract import MAX_POLICY_AGE as ART_MAX_POLICY_AGE
from .contract import PACKED_SEQUENCE_LENGTH as ART_PACKED_SEQUENCE_LENGTH
from .contract import TOPOLOGY as ART_TOPOLOGY

#: Trainer and vLLM precision, set explicitly (ART's defaults happen to agree today).
DTYPE = "bfloat16"

#: vLLM layout on the two inference GPUs, and why (recorded in the manifest).
INFERENCE_LAYOUT = {
    "engine_args": {"tensor_parallel_size": ART_TOPOLOGY.inference_gpus},
    "why": (
        "one vLLM engine, tensor parallel over both inference GPUs: the only multi-GPU inference "
        "layout art.dev.validate_dedicated_config admits (tensor_parallel_size must equal "
        "len(inference_gpu_ids)); MegatronBackend's local topology places exactly TP*PP*DP "
        "inference GPUs, so TP2 uses both. data_parallel_size=2 compiles in MegatronBackend's "
        "topology but is refused by ART's dedicated-mode validator."
    ),
}


def build_art_config(
    spec: Any,
    *,
    run_name: str = "rl-bench",
    project: str = "rl-pipeline-bench",
    art_path: str | Path | None = None,
    model_path: str | Path | None = None,
) -> dict[str, Any]:
    """ART's native settings for this run spec (rl_pipeline_bench.settings.spec.RunSpec; see the module
    docstring for the keys); it trains N steps (the spec's ContractSettings).

    model_path: the pinned snapshot directory (None: the canonical ID, for checks
    that never load weights).
    """
    model = spec.model
    init_args: dict[str, Any] = {"max_seq_length": MAX_SEQ_LENGTH, "dtype": DTYPE}
    if model_path is not None:
        init_args["model_name"] = str(model_path)
    if model.get("revision"):
        init_args["revision"] = str(model["revision"])
    n = spec.contract.total_updates
    trainer_ids = list(range(ART_TOPOLOGY.train_gpus))
    inference_ids = list(range(ART_TOPOLOGY.train_gpus, ART_TOPOLOGY.train_gpus + ART_TOPOLOGY.inference_gpus))
    topo = ART_TOPOLOGY
    return {
        "model": {
            # `name` is the inference alias; `run_name` names the checkpoint/history lineage.
            "name": run_name,
            "run_name": run_name,
            "project": project,
            # Canonical ID for ART's model-support registry and the controller's tokenizer
            # (bound to the snapshot through the run-local directory, driver.bind_model_dir);
            # ART's vLLM and trainer processes load init_args.model_name instead.
            "base_model": model["repo_id"],
            "lora_config": {"rank": lora_rank(spec), "alpha": LORA_ALPHA},
        },
        "internal_config": {
            "init_args": init_args,
            "engine_args": {**INFERENCE_LAYOUT["engine_args"], "dtype": DTYPE},
            "chat_template_kwargs": dict(CHAT_TEMPLATE_KWARGS),
            "chat_template_tool_schema_format": "vllm_openai",
            "trainer_gpu_ids": trainer_ids,
            "inference_gpu_ids": inference_ids,
            "rollout_weight_update_mode": "in_flight_lora",
        },
        "megatron_runtime": {
            "topology": {"tp": topo.tp, "cp": topo.cp, "ep": topo.ep, "etp": topo.etp},
            "packed_sequence_length": ART_PACKED_SEQUENCE_LENGTH,
        },
        "backend": {"path": str(art_path) if art_path is not None else None, "enable_expert_replay": True},
        "pipeline_trainer": {
            # ART's own start and growth settings, explicit: the plan is sized by them (contract.py).
            "autotune": {"mode": "online", **AUTOTUNER_BOUNDS},
            "limit_mean_steps_off_policy": float(ART_MAX_POLICY_AGE),
            "max_steps_off_policy": None,
            "max_steps": n,
            "loss_fn": "cispo",
            "eval_every_n_steps": 0,
            "eval_at_start": False,
            "save_checkpoint": False,
            "resume": False,
        },
        "contract": {
            "topology": topo.label(),
            "lora_rank": lora_rank(spec),
            "lora_alpha": LORA_ALPHA,
            "mean_policy_age_limit": ART_MAX_POLICY_AGE,
            "packed_sequence_length": ART_PACKED_SEQUENCE_LENGTH,
            "inference_layout": INFERENCE_LAYOUT["why"],
            "updates": n,
        },
    }

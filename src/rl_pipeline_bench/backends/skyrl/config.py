"""SkyRL native configuration built from a run spec: pure data, no SkyRL import needed.

`build_skyrl_config` returns the nested mapping of SkyRL's typed config
(`skyrl.train.config.SkyRLTrainConfig`, skyrl 0.4.0): fully asynchronous trainer,
Megatron TP1 CP1 EP2 DP2 on two training GPUs, two single-GPU vLLM engines,
per-expert LoRA (`lora.share_expert_adapters=false`) published as an adapter
(`megatron_config.lora_config.merge_lora=false`), chat-template kwargs. `to_cli_overrides` flattens it into SkyRL's own
`key.path=value` override form. The tests build the real config class from both.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..framework.rollout import CHAT_TEMPLATE_KWARGS
from ..topology import LORA_ALPHA, MAX_SEQ_LENGTH, lora_rank
from .contract import STALENESS as SKYRL_STALENESS
from .contract import TOPOLOGY as SKYRL_TOPOLOGY
from .contract import skyrl_batch, skyrl_workers

#: Weight publication to vLLM, decided explicitly and recorded in the manifest.
MERGE_LORA = {
    "merge_lora": False,
    "why": (
        "in-flight LoRA publication: with merge_lora=false SkyRL 0.4.0's weight sync is adapter-only "
        "(its LoRAConfig.sync_mode docs: PEFT tensors, per expert with share_expert_adapters=false) and "
        "vLLM serves the adapter, as ART publishes its LoRA; merge_lora=true would merge LoRA into the base "
        "weights and sync every base parameter each step."
    ),
}
#: env_class written into the prompt dataset; the driver's generator ignores it.
ENV_CLASS = "rl_bench_plan"


def build_skyrl_config(
    run_spec: Any,
    *,
    workload_spec: Any = None,
    model_path: str | Path = "Qwen/Qwen3.5-35B-A3B",
    data_path: str | Path = "plan_prompts.jsonl",
    run_dir: str | Path = ".",
    run_name: str = "rl-bench",
    max_completion_tokens: int = 4096,
) -> dict[str, Any]:
    """Nested SkyRLTrainConfig values for this run spec (only keys the contract sets); it trains N steps.

    run_spec: the resolved run spec (rl_pipeline_bench.settings.spec.RunSpec).
    workload_spec: the workload spec (group size, new calls per trajectory), when known.
    """
    n = run_spec.contract.total_updates
    batch, workers = skyrl_batch(run_spec), skyrl_workers(run_spec)
    group_size = int(getattr(workload_spec, "group_size", 4) if workload_spec is not None else 4)
    new_calls = int(getattr(workload_spec, "new_calls", 1) if workload_spec is not None else 1)
    run_dir = Path(run_dir)
    topo = SKYRL_TOPOLOGY
    return {
        "data": {"train_data": [str(data_path)], "val_data": [], "dataloader": {"num_workers": 0}},
        "trainer": {
            "strategy": "megatron",
            "placement": {
                "colocate_all": False,
                "colocate_policy_ref": False,
                "policy_num_nodes": 1,
                "policy_num_gpus_per_node": topo.train_gpus,
            },
            "policy": {
                "model": {
                    "path": str(model_path),
                    "lora": {
                        "rank": lora_rank(run_spec),
                        "alpha": LORA_ALPHA,
                        "target_modules": "all-linear",
                        # Default true shares one adapter across an EP rank's grouped experts.
                        "share_expert_adapters": False,
                    },
                },
                "megatron_config": {
                    "tensor_model_parallel_size": topo.tp,
                    "context_parallel_size": topo.cp,
                    "expert_model_parallel_size": topo.ep,
                    "pipeline_model_parallel_size": topo.pp,
                    # Per-expert LoRA (no shared outer factors, full rank on experts), published
                    # to vLLM as an adapter, not merged: see MERGE_LORA.
                    "lora_config": {
                        "lora_type": "lora",
                        "merge_lora": MERGE_LORA["merge_lora"],
                        "experts_shared_outer_loras": False,
                        "normalize_moe_lora": False,
                    },
                },
            },
            "algorithm": {
                # Fully async trains on rollout logprobs; stale policies are not kept.
                "policy_loss_type": "rollout_is",
                "use_kl_loss": False,
                "max_seq_len": MAX_SEQ_LENGTH,
            },
            "fully_async": {
                "enabled": True,
                "max_staleness_steps": SKYRL_STALENESS,
                "num_parallel_generation_workers": workers,
            },
            "bf16": True,  # BF16 trainer, explicit (SkyRLTrainConfig.trainer.bf16; vLLM: model_dtype below)
            "train_batch_size": batch,
            "policy_mini_batch_size": batch,
            "epochs": 1,
            "max_training_steps": n,
            "eval_interval": -1,
            "eval_before_train": False,
            "ckpt_interval": -1,
            "hf_save_interval": -1,
            "resume_mode": "none",
            "max_prompt_length": MAX_SEQ_LENGTH,
            "logger": "console",
            "project_name": "rl-pipeline-bench",
            "run_name": run_name,
            "log_path": str(run_dir / "logs"),
            "ckpt_path": str(run_dir / "ckpts"),
            "export_path": str(run_dir / "exports"),
        },
        "generator": {
            "n_samples_per_prompt": group_size,
            "batched": False,
            "max_turns": new_calls,
            "chat_template_kwargs": dict(CHAT_TEMPLATE_KWARGS),
            "sampling_params": {"max_generate_length": int(max_completion_tokens), "logprobs": 1},
            "inference_engine": {
                "backend": "vllm",
                "num_engines": topo.inference_gpus,
                "tensor_parallel_size": 1,
                "model_dtype": "bfloat16",
            },
        },
        "environment": {"env_class": ENV_CLASS},
    }


def _cli_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (dict, list)):
        return json.dumps(value)  # JSON is YAML flow syntax, which OmegaConf's CLI parser reads
    return str(value)


def to_cli_overrides(nested: dict[str, Any], prefix: str = "") -> list[str]:
    """Flatten to SkyRL's `a.b.c=value` overrides (lists and free-form dicts stay whole)."""
    out: list[str] = []
    for key, value in nested.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict) and value and key not in ("chat_template_kwargs",):
            out += to_cli_overrides(value, path)
        else:
            out.append(f"{path}={_cli_value(value)}")
    return out

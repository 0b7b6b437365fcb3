"""Policy copies of the reference backend: loading, device placement, LoRA, publication.

Rollout and trainer hold separate copies of the snapshot (as an inference server and a
trainer would), each with the same LoRA adapter layout. Publishing a policy means
copying the trainer's adapter weights into the rollout copy; nothing else moves.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

ATTENTION_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj")
#: Per-expert projections of older transformers (experts as a ModuleList of MLPs).
EXPERT_LINEARS = ("gate_proj", "up_proj", "down_proj")


class ReferenceBackendError(RuntimeError):
    """The reference backend cannot run as asked; the message names the cause."""


def pick_devices(device: str) -> tuple[torch.device, torch.device]:
    """(rollout, trainer) devices: cuda:0/cuda:1 with two visible GPUs, cuda:0 twice with one, else cpu."""
    if device == "cpu":
        return torch.device("cpu"), torch.device("cpu")
    if device != "cuda":
        raise ReferenceBackendError(f"device '{device}' is not one of: cpu, cuda")
    if not torch.cuda.is_available() or torch.cuda.device_count() < 1:
        raise ReferenceBackendError("device 'cuda' was requested but torch sees no CUDA device")
    if torch.cuda.device_count() >= 2:
        return torch.device("cuda", 0), torch.device("cuda", 1)
    return torch.device("cuda", 0), torch.device("cuda", 0)


def load_tokenizer(snapshot: Path | str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(snapshot), local_files_only=True)


def load_base_model(snapshot: Path | str, device: torch.device) -> nn.Module:
    """The snapshot's causal LM in the dtype it was saved in, on `device` (local files only: a run never downloads)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(snapshot), local_files_only=True, dtype="auto")
    return model.to(device)


@dataclass
class LoraPlan:
    """Which modules and parameters the adapter covers, as recorded in the manifest."""

    rank: int
    alpha: int
    target_modules: list[str]
    target_parameters: list[str] = field(default_factory=list)
    experts: str = "none"  # "per_expert_parameters" | "per_expert_modules" | "none"
    note: str = ""

    def manifest(self) -> dict[str, Any]:
        return {
            "rank": self.rank, "alpha": self.alpha, "target_modules": self.target_modules,
            "target_parameters": self.target_parameters, "experts": self.experts, "note": self.note,
        }


def _peft_supports_target_parameters() -> bool:
    from peft import LoraConfig

    return "target_parameters" in inspect.signature(LoraConfig).parameters


def plan_lora(model: nn.Module, rank: int, alpha: int) -> LoraPlan:
    """Attention projections always; experts per expert where this peft/transformers can.

    Fused experts (3-D `gate_up_proj`/`down_proj` parameters, transformers >= 5) need
    peft's `target_parameters`, whose LoRA holds one rank-r pair per expert. Experts as
    separate Linear modules (older transformers) are targeted module by module.
    """
    names = [n for n, _ in model.named_modules()]
    attn = sorted({n.rsplit(".", 1)[-1] for n in names if n.rsplit(".", 1)[-1] in ATTENTION_PROJECTIONS})
    if not attn:
        raise ReferenceBackendError("the model has no attention projections (q/k/v/o_proj) to put LoRA on")
    fused = sorted({
        f"mlp.experts.{pname}"
        for n, m in model.named_modules() if n.endswith("mlp.experts")
        for pname, p in m.named_parameters(recurse=False) if p.ndim == 3
    })
    per_module = any(re.search(r"experts\.\d+\.(gate_proj|up_proj|down_proj)$", n) for n in names)
    plan = LoraPlan(rank=int(rank), alpha=int(alpha), target_modules=list(attn))
    if fused and _peft_supports_target_parameters():
        plan.target_parameters = fused
        plan.experts = "per_expert_parameters"
    elif per_module:
        plan.target_modules = [rf".*\.({'|'.join(attn)})$|.*experts\.\d+\.({'|'.join(EXPERT_LINEARS)})$"]
        plan.experts = "per_expert_modules"
    else:
        plan.note = "experts not targeted: this peft has no target_parameters for fused expert weights" if fused else \
            "experts not targeted: the model has no expert weights peft can wrap"
    return plan


def apply_lora(model: nn.Module, plan: LoraPlan):
    from peft import LoraConfig, get_peft_model

    kwargs: dict[str, Any] = dict(r=plan.rank, lora_alpha=plan.alpha, lora_dropout=0.0, bias="none")
    if plan.experts == "per_expert_modules":
        kwargs["target_modules"] = plan.target_modules[0]  # one regex
    else:
        kwargs["target_modules"] = list(plan.target_modules)
    if plan.target_parameters:
        kwargs["target_parameters"] = list(plan.target_parameters)
    return get_peft_model(model, LoraConfig(**kwargs))


def adapter_parameters(model: nn.Module) -> dict[str, nn.Parameter]:
    """The adapter's weights by name (the only parameters that train and get published)."""
    params = {n: p for n, p in model.named_parameters() if "lora_" in n}
    if not params:
        raise ReferenceBackendError("the model carries no LoRA parameters")
    return params


def expert_adapter_names(params: dict[str, Any]) -> list[str]:
    return sorted(n for n in params if ".experts." in n)


def copy_adapter(src: dict[str, nn.Parameter], dst: dict[str, nn.Parameter]) -> int:
    """Copy adapter weights src -> dst in place (across devices); returns the number of tensors."""
    if set(src) != set(dst):
        missing = sorted(set(src) ^ set(dst))[:5]
        raise ReferenceBackendError(f"rollout and trainer adapters differ in layout: {missing}")
    with torch.no_grad():
        for name, p in src.items():
            dst[name].copy_(p.detach(), non_blocking=False)
    return len(src)


def cache_keyword(model: nn.Module) -> str:
    """The forward() keyword for a KV cache: `cache` in newer transformers, `past_key_values` before."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    params = inspect.signature(base.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def new_cache(model: nn.Module):
    from transformers import DynamicCache

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    try:
        return DynamicCache(config=base.config)
    except TypeError:  # older signature without config
        return DynamicCache()

"""The contract's LoRA layout on the embedded Qwen3-MoE models, through peft.

Attention projections always; the experts per expert where this peft/transformers can.
The reference backend trains this adapter and the checkpoint probe saves and loads one
of the same layout, so both take it from here.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Any

from torch import nn

ATTENTION_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj")
#: Per-expert projections of older transformers (experts as a ModuleList of MLPs).
EXPERT_LINEARS = ("gate_proj", "up_proj", "down_proj")


class LoraError(RuntimeError):
    """The model has nothing the contract's adapter can be put on; the message names what."""


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
        raise LoraError("the model has no attention projections (q/k/v/o_proj) to put LoRA on")
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

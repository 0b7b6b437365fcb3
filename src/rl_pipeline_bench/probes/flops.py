"""Trainer FLOPs from the model config: a model's matmul shapes, then FLOPs per trained sequence.

`model_card` builds the model from its snapshot's config on PyTorch's meta device (no
weights, no memory) and records every matrix multiply it holds: nn.Linear layers and
fused 3-D expert weights, grouped by name with layer numbers folded (`layers.*.`).
Expert weights count at top_k / num_experts (the active parameters of an MoE), routers
fully;
embedding lookups count nothing; norms, convolutions and linear-attention recurrences
are not counted (small next to the projections).

`training_flops` applies the usual accounting per sequence of S tokens, one forward
and one backward pass, 2 FLOPs per multiply-add:
  base matmuls    2 * P_active * S forward; backward 2x that with full fine-tuning
                  (activation + weight gradients), 1x with LoRA (frozen base weights
                  need activation gradients only, no weight gradients);
  LoRA adapters   2 * P_lora_active * S forward, backward 2x (they train);
  attention       2 * heads * head_dim * S * (S + 1) forward per full-attention
                  layer (causal QK^T and AV), backward 2x.
Extra passes a framework makes (reference/old log-probs, activation recomputation)
are not counted: this is model FLOPs, as in MFU.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
from ..records.formats import schema_of

CARD_SCHEMA = schema_of("model-flops")
_LAYER_INDEX = re.compile(r"\.(\d+)\.")
_EXPERT_INDEX = re.compile(r"experts\.\d+\.")


def _pattern(name: str) -> str:
    return _LAYER_INDEX.sub(".*.", _LAYER_INDEX.sub(".*.", name))


def _expert_count(cfg: Any) -> tuple[int | None, int | None]:
    experts = next((getattr(cfg, k) for k in ("num_experts", "num_local_experts", "n_routed_experts")
                    if getattr(cfg, k, None)), None)
    return (int(experts) if experts else None,
            int(cfg.num_experts_per_tok) if getattr(cfg, "num_experts_per_tok", None) else None)


def model_card(snapshot_dir: Path | str) -> dict[str, Any]:
    """The matmul inventory of the snapshot's model, from its config alone (meta device)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(str(snapshot_dir), local_files_only=True)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(text)
    n_experts, top_k = _expert_count(text)
    groups: dict[str, dict[str, Any]] = {}

    def add(name: str, kind: str, shape: list[int], params: int, active: float) -> None:
        g = groups.setdefault(_pattern(name), {"pattern": _pattern(name), "example": name, "kind": kind,
                                               "shape": shape, "count": 0, "params": 0, "active_params": 0.0})
        g["count"] += 1
        g["params"] += params
        g["active_params"] += params * active

    attention_layers = 0
    embedding_params = 0
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Embedding):
            embedding_params += module.weight.numel()
        elif isinstance(module, torch.nn.Linear):
            expert = bool(_EXPERT_INDEX.search(name)) and n_experts and top_k
            add(name, "expert_linear" if expert else "linear", [module.in_features, module.out_features],
                module.weight.numel(), top_k / n_experts if expert else 1.0)
            if name.endswith("self_attn.q_proj"):
                attention_layers += 1
        elif name.rsplit(".", 1)[-1] in ("gate", "router") and getattr(module, "weight", None) is not None \
                and module.weight.ndim == 2:  # an MoE router that is not an nn.Linear
            add(name, "router", list(module.weight.shape[::-1]), module.weight.numel(), 1.0)
        elif name.endswith("experts"):
            for pname, p in module.named_parameters(recurse=False):
                if p.ndim == 3:  # fused experts [E, out, in]: top_k of E run per token
                    frac = (top_k / p.shape[0]) if top_k else 1.0
                    add(f"{name}.{pname}", "experts_3d", list(p.shape), p.numel(), frac)
    heads = int(text.num_attention_heads)
    head_dim = int(getattr(text, "head_dim", None) or text.hidden_size // heads)
    ordered = sorted(groups.values(), key=lambda g: g["pattern"])
    return {
        "schema": CARD_SCHEMA,
        "architecture": type(model).__name__,
        "model_type": getattr(text, "model_type", None),
        "dtype": str(getattr(text, "dtype", None) or getattr(config, "torch_dtype", None)),
        "groups": ordered,
        "matmul_params": int(sum(g["params"] for g in ordered)),
        "active_matmul_params": float(sum(g["active_params"] for g in ordered)),
        "embedding_params": int(embedding_params),
        "experts": {"num_experts": n_experts, "top_k": top_k},
        "attention": {"full_attention_layers": attention_layers, "heads": heads, "head_dim": head_dim,
                      "layer_types": sorted(set(getattr(text, "layer_types", None) or []))},
        "not_counted": "embedding lookups, norms, convolutions, linear-attention recurrences, softmax/activations",
    }


def _lora_matches(group: dict[str, Any], lora: dict[str, Any]) -> bool:
    """Does peft's target selection (as recorded in the run's manifest) cover this group?"""
    name = group["example"]
    if group["kind"] == "experts_3d":
        return any(name == t or name.endswith("." + t) for t in lora.get("target_parameters") or [])
    targets = lora.get("target_modules") or []
    if isinstance(targets, str):
        targets = [targets]
    for t in targets:
        if any(c in t for c in "*()|$\\[") and re.fullmatch(t, name):  # a regex, as peft takes one
            return True
        if name == t or name.endswith("." + t):
            return True
    return False


def lora_params(card: dict[str, Any], lora: dict[str, Any] | None) -> dict[str, float]:
    """Adapter parameters (total and active per token) for the recorded LoRA layout."""
    if not lora:
        return {"params": 0.0, "active_params": 0.0}
    rank = int(lora["rank"])
    total = active = 0.0
    for g in card["groups"]:
        if not _lora_matches(g, lora):
            continue
        frac = g["active_params"] / g["params"] if g["params"] else 0.0
        if g["kind"] == "experts_3d":  # one rank-r pair per expert: E * r * (in + out)
            experts, a, b = g["shape"]
            p = g["count"] * experts * rank * (a + b)
        else:
            p = g["count"] * rank * (g["shape"][0] + g["shape"][1])
        total += p
        active += p * frac
    return {"params": total, "active_params": active}


def training_flops(card: dict[str, Any], seq_lens, lora: dict[str, Any] | None, *, lora_training: bool = True) -> dict[str, Any]:
    """Model FLOPs of one forward + one backward pass over sequences of the given lengths."""
    s = np.asarray(seq_lens, dtype="float64")
    tokens = float(s.sum())
    p_active = float(card["active_matmul_params"])
    att = card["attention"]
    adapters = lora_params(card, lora)
    base_mult = 2.0 if lora_training else 3.0  # forward + (activation grads) [+ weight grads]
    base = base_mult * 2.0 * p_active * tokens
    adapter = 3.0 * 2.0 * adapters["active_params"] * tokens
    attention = 3.0 * 2.0 * att["heads"] * att["head_dim"] * att["full_attention_layers"] * float((s * (s + 1)).sum())
    total = base + adapter + attention
    return {
        "sequences": int(len(s)), "tokens": tokens, "flops": total, "base_matmul_flops": base,
        "lora_flops": adapter, "attention_flops": attention,
        "flops_per_token": total / tokens if tokens else None,
        "active_matmul_params": p_active, "lora_active_params": adapters["active_params"],
        "lora_params": adapters["params"],
        "accounting": ("LoRA: frozen base weights cost forward + activation gradients (4 FLOPs per active "
                       "parameter per token), adapters forward + both gradients (6), attention 3x its forward"
                       if lora_training else "full fine-tuning: 6 FLOPs per active parameter per token, attention 3x forward"),
    }

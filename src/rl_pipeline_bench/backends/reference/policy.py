"""Policy copies of the reference backend: loading, device placement, adapter copies, publication.

Rollout and trainer hold separate copies of the snapshot (as an inference server and a
trainer would), each with the same LoRA adapter layout (rl_pipeline_bench.models.lora). Publishing a policy means
copying the trainer's adapter weights into the rollout copy; nothing else moves.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import torch
from torch import nn

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

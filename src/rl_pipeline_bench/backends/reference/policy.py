"""Policy copies of the reference backend: loading, device placement, adapter copies, publication.

Rollout and trainer hold separate copies of the snapshot (as an inference server and a
trainer would), each with the same LoRA adapter layout (rl_pipeline_bench.models.lora). Publishing a policy means
copying the trainer's adapter weights into the rollout copy; nothing else moves. The rollout
copy decodes with the adapter merged into its weights (MergedAdapter), as an inference
server that folds a published adapter into its weights does.
"""

from __future__ import annotations

import inspect
import time
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


def _merge_target(layer) -> torch.Tensor:
    """The base weight a peft LoRA layer merges its delta into (a wrapped parameter, or the Linear's weight)."""
    return layer.get_param() if hasattr(layer, "get_param") else layer.get_base_layer().weight


def _sync(device: torch.device) -> None:
    """Wait for this thread's stream on `device` (not the whole device: the other thread's work goes on)."""
    if device.type == "cuda":
        torch.cuda.current_stream(device).synchronize()


class MergedAdapter:
    """The rollout copy's adapter, merged into the base weights it decodes with.

    Un-merged, peft runs two extra matmuls per targeted projection at every decode step and,
    for the fused experts, builds a delta the size of all the experts' weights at every
    forward; merged, a decode step reads the base weights alone. A publication puts back the
    pristine base weights (kept once, so bf16 rounding of repeated merges never accumulates),
    copies the trainer's adapter in and merges it with peft's own `merge_adapter`. Each
    publication's merge time is kept (`merge_seconds`) for the manifest; it is part of the
    publication, inside the rollout's model lock.
    """

    def __init__(self, model, params: dict[str, nn.Parameter], device: torch.device) -> None:
        from peft.tuners.tuners_utils import BaseTunerLayer

        self.model = model
        self.params = params
        self.device = device
        self.layers = [m for m in model.modules() if isinstance(m, BaseTunerLayer)]
        if not self.layers:
            raise ReferenceBackendError("the rollout model has no LoRA layers to merge")
        with torch.no_grad():
            self.pristine = [_merge_target(m).detach().clone() for m in self.layers]
            model.merge_adapter()
        _sync(device)
        self.merge_seconds: list[float] = []

    def publish(self, src: dict[str, nn.Parameter]) -> int:
        """Replace the merged adapter by `src`'s weights; returns the number of adapter tensors copied."""
        t0 = time.perf_counter()
        with torch.no_grad():
            self.model.unmerge_adapter()  # peft's merged flags off (its subtraction is then overwritten)
            for layer, saved in zip(self.layers, self.pristine, strict=True):
                _merge_target(layer).copy_(saved)
            n = copy_adapter(src, self.params)
            self.model.merge_adapter()
        _sync(self.device)  # the new weights are in place before the rollout may read them
        self.merge_seconds.append(time.perf_counter() - t0)
        return n

    def record(self) -> dict[str, Any]:
        """The manifest's account of how the rollout applies the adapter."""
        times = self.merge_seconds
        return {"adapter": "merged into the rollout copy's weights at each publication (peft merge_adapter)",
                "merged_layers": len(self.layers), "publications": len(times),
                "merge_s_mean": sum(times) / len(times) if times else None,
                "merge_s_max": max(times) if times else None}


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

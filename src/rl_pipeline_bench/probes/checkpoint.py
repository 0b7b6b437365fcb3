"""Checkpoint probe: save and load time of the suite's model and of a LoRA adapter, as safetensors.

Model: each safetensors shard of the pinned snapshot is read onto the probe's device,
then timed: saved (device -> host copy, `safetensors.torch.save_file`, fsync) into a
scratch folder in the probe directory, and after all shards are saved and their
cached pages dropped (posix_fadvise DONTNEED, best effort), loaded back onto the
device. One shard is in memory at a time. Adapter: peft's LoRA layout for the
model (the reference backend's targets: attention projections and every expert) is
built on the meta device, filled with seeded values in the model's dtype and written
as peft writes it (`adapter_model.safetensors` + `adapter_config.json`), then loaded.
The scratch folder is removed afterwards, also on failure.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

from .storage import HEADROOM_BYTES, StorageProbeError, _human, _make_dirs, _remove_dirs, check_directory
from ..records.formats import schema_of

CHECKPOINT_SCHEMA = schema_of("probe-checkpoint")


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _save(tensors: dict, path: Path, device) -> float:
    from safetensors.torch import save_file

    start = time.perf_counter()
    host = {k: v.detach().to("cpu").contiguous() for k, v in tensors.items()}
    save_file(host, str(path), metadata={"format": "pt"})
    _fsync(path)
    return time.perf_counter() - start


def _load(path: Path, device) -> tuple[float, int]:
    from safetensors.torch import load_file

    start = time.perf_counter()
    tensors = load_file(str(path), device=str(device))
    _sync(device)
    elapsed = time.perf_counter() - start
    return elapsed, len(tensors)


def _adapter_state(snapshot: Path, rank: int, alpha: int, seed: int) -> tuple[dict, Any]:
    """peft's adapter state dict for this model (values seeded, not trained) and its config."""
    import torch
    from peft.utils import get_peft_model_state_dict
    from transformers import AutoConfig, AutoModelForCausalLM

    from ..models.lora import apply_lora, plan_lora

    config = AutoConfig.from_pretrained(str(snapshot), local_files_only=True)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(text)
    peft_model = apply_lora(model, plan_lora(model, rank, alpha))
    layout = get_peft_model_state_dict(peft_model)
    gen = torch.Generator().manual_seed(seed)
    state = {k: (torch.randn(tuple(v.shape), generator=gen) * 0.01).to(v.dtype) for k, v in layout.items()}
    return state, peft_model.peft_config["default"]


def run_checkpoint_probe(snapshot_dir: Path | str, directory: Path | str, *, lora_rank: int, lora_alpha: int,
                         device: str = "cpu", seed: int = 0, label: str | None = None, log=print) -> dict[str, Any]:
    """Time model and adapter save/load; returns the probe record. Leaves nothing behind."""
    import torch
    from safetensors.torch import load_file

    snapshot = Path(snapshot_dir)
    shards = sorted(snapshot.glob("*.safetensors"))
    if not shards:
        raise StorageProbeError(f"model snapshot {snapshot} holds no *.safetensors files")
    dev = torch.device(device)
    model_bytes = sum(p.stat().st_size for p in shards)
    directory = Path(directory).absolute()
    if directory.exists() and not directory.is_dir():
        raise StorageProbeError(f"probe directory {directory} is not a directory")
    created = _make_dirs(directory)
    scratch = directory / f".rl-bench-checkpoint-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        check_directory(directory, model_bytes + HEADROOM_BYTES)
        scratch.mkdir()
        log(f"checkpoint: {len(shards)} shard(s), {_human(model_bytes)}, via {device} into {scratch}")
        read_s = save_s = 0.0
        saved = []
        for shard in shards:
            start = time.perf_counter()
            tensors = load_file(str(shard), device=str(dev))
            _sync(dev)
            read_s += time.perf_counter() - start
            dst = scratch / shard.name
            save_s += _save(tensors, dst, dev)
            saved.append(dst)
            del tensors
        load_s, n_tensors = 0.0, 0
        for dst in saved:
            t, n = _load(dst, dev)
            load_s += t
            n_tensors += n
        log(f"checkpoint: model save {save_s:.3f} s, load {load_s:.3f} s")

        state, peft_config = _adapter_state(snapshot, lora_rank, lora_alpha, seed)
        adapter_dir = scratch / "adapter"
        adapter_dir.mkdir()
        adapter = {k: v.to(dev) for k, v in state.items()}
        _sync(dev)
        adapter_file = adapter_dir / "adapter_model.safetensors"
        adapter_save_s = _save(adapter, adapter_file, dev)
        peft_config.save_pretrained(str(adapter_dir))
        adapter_load_s, _ = _load(adapter_file, dev)
        adapter_bytes = adapter_file.stat().st_size
        log(f"checkpoint: adapter save {adapter_save_s:.4f} s, load {adapter_load_s:.4f} s")
    except OSError as exc:
        raise StorageProbeError(f"checkpoint probe in {directory} failed: {exc}") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        _remove_dirs(created)
    return {
        "schema": CHECKPOINT_SCHEMA, "label": label, "directory": str(directory), "device": str(dev),
        "snapshot": str(snapshot), "format": "safetensors",
        "model": {"shards": len(shards), "tensors": n_tensors, "bytes": model_bytes, "snapshot_read_s": read_s,
                  "save_s": save_s, "load_s": load_s},
        "adapter": {"rank": lora_rank, "alpha": lora_alpha, "tensors": len(state), "bytes": adapter_bytes,
                    "parameters": int(sum(v.numel() for v in state.values())),
                    "target_modules": sorted(peft_config.target_modules or []) if not isinstance(
                        peft_config.target_modules, str) else peft_config.target_modules,
                    "target_parameters": list(getattr(peft_config, "target_parameters", None) or []),
                    "save_s": adapter_save_s, "load_s": adapter_load_s},
        "scratch_removed": not scratch.exists(),
    }

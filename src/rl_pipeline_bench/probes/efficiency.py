"""Trainer efficiency of one run: achieved model FLOP/s over the headline window, and MFU.

The window and its length are the contract's trainer window: the union of every
rank's trainer intervals tagged with the headline updates. The work is every accepted
call of those updates as the trainer sees it, prompt plus completion tokens (the
trainer runs the whole sequence; only the completion carries loss), priced by
`flops.training_flops`. MFU divides by the peak of the run's trainer GPUs from the
peaks table (bf16 dense datasheet figure and, where there is one, the measured GEMM
figure); a CPU run gets achieved FLOP/s and no MFU.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..contract.intervals import interval_union_length
from ..contract.settings import ContractSettings
from . import flops, reference_data


def _dtype(manifest: dict) -> str | None:
    """The trained dtype a run recorded: in its backend's own manifest section (named after the
    backend, as the embedded backend writes it) or in the framework section a driver writes."""
    for section in (str(manifest.get("backend") or ""), "framework"):
        value = (manifest.get(section) or {}).get("dtype")
        if value:
            return str(value)
    return None


def trainer_efficiency(ev, card: dict[str, Any] | None) -> dict[str, Any]:
    """{status, window, tokens, flops, achieved_tflops, mfu_*, peak, notes} for one run's evidence."""
    m = ev.manifest or {}
    settings = ContractSettings.recorded(m.get("contract") or {}) or ContractSettings()
    first, last = settings.trainer_window
    out: dict[str, Any] = {"status": "unavailable", "first_update": first, "last_update": last, "notes": []}
    if card is None:
        out["reason"] = "no model FLOPs card for this run's model"
        return out
    calls = ev.calls
    if calls.empty or calls["update"].isna().all():
        out["reason"] = "calls.parquet tags no call with its update; the trained tokens of a window are unknown"
        return out
    tagged = calls[calls["accepted"].astype(bool) & calls["update"].between(first, last)]
    head = ev.intervals[ev.intervals["update"].between(first, last)]
    union = interval_union_length(zip(head["start"], head["end"])) if len(head) else 0.0
    if tagged.empty or union <= 0:
        out["reason"] = f"no accepted calls or no trainer interval in updates {first}-{last}"
        return out
    seqs = (tagged["prompt_tokens"] + tagged["completion_tokens"]).to_numpy(dtype=np.int64)
    lora = m.get("lora")
    work = flops.training_flops(card, seqs, lora, lora_training=True)
    achieved = work["flops"] / union
    gpus = m.get("gpus") or []
    ranks = (m.get("contract") or {}).get("trainer_ranks") or [0]
    trainer_gpus = min(len(ranks), len(gpus)) if gpus else 0
    device_name = gpus[0].get("name") if gpus else None
    peak = reference_data.gpu_peak(device_name)
    notes = [work["accounting"]]
    if lora is None:
        notes.append("the manifest records no LoRA layout: LoRA training assumed (every backend here trains "
                     "LoRA adapters) and adapter FLOPs not counted")
    dtype = _dtype(m)
    if dtype and "bfloat16" not in dtype and "bf16" not in dtype:
        notes.append(f"this trainer computes in {dtype}; the bf16 dense peak is out of its reach, so its MFU "
                     "against it is a lower bound of how busy the tensor cores could be")
    out.update(
        status="estimated", union_s=union, sequences=work["sequences"], tokens=work["tokens"],
        flops=work["flops"], flops_per_token=work["flops_per_token"], flops_breakdown={
            k: work[k] for k in ("base_matmul_flops", "lora_flops", "attention_flops")},
        active_matmul_params=work["active_matmul_params"], lora_active_params=work["lora_active_params"],
        achieved_tflops=achieved / 1e12, trainer_dtype=dtype, device_name=device_name, trainer_gpus=trainer_gpus,
        peak=peak, mfu_datasheet=None, mfu_measured=None,
    )
    if not gpus:
        notes.append("no leased GPU (a CPU run): no peak to compare with")
    elif peak is None:
        notes.append(f"no peak for GPU {device_name!r} in probes/data/gpu_peaks.yaml")
    else:
        denominator = 1e12 * trainer_gpus
        out["mfu_datasheet"] = achieved / (peak["bf16_dense_tflops"] * denominator)
        if peak.get("measured_bf16_tflops"):
            out["mfu_measured"] = achieved / (peak["measured_bf16_tflops"] * denominator)
    out["notes"] = notes
    return out

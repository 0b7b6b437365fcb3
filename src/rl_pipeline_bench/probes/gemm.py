"""Dense GEMM throughput: the measured peak beside the datasheet peak in the MFU table.

Square n x n x n matrix products (2 n^3 FLOPs each) after warm-up, timed with one
synchronisation at the end; on CUDA with CUDA events. This is what
`measured_bf16_tflops` in data/gpu_peaks.yaml means (n = 8192, bf16, on an H200).
"""

from __future__ import annotations

import time
from typing import Any
from ..records.formats import schema_of

GEMM_SCHEMA = schema_of("probe-gemm")


def run_gemm(n: int = 8192, dtype: str = "bfloat16", device: str = "cuda", warmup: int = 10,
             iters: int = 50) -> dict[str, Any]:
    import torch

    dev = torch.device(device)
    dt = getattr(torch, dtype)
    gen = torch.Generator(device=dev).manual_seed(0)
    a = torch.randn((n, n), dtype=dt, device=dev, generator=gen)
    b = torch.randn((n, n), dtype=dt, device=dev, generator=gen)
    out = torch.empty((n, n), dtype=dt, device=dev)
    for _ in range(warmup):
        torch.matmul(a, b, out=out)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            torch.matmul(a, b, out=out)
        end.record()
        torch.cuda.synchronize(dev)
        seconds = start.elapsed_time(end) / 1e3
        name = torch.cuda.get_device_name(dev)
    else:
        t0 = time.perf_counter()
        for _ in range(iters):
            torch.matmul(a, b, out=out)
        seconds = time.perf_counter() - t0
        name = "cpu"
    flops = 2.0 * n**3 * iters
    return {"schema": GEMM_SCHEMA, "n": n, "dtype": dtype, "device": str(dev), "device_name": name,
            "warmup": warmup, "iters": iters, "seconds": seconds, "tflops": flops / seconds / 1e12,
            "torch_version": torch.__version__}

"""All-reduce bandwidth probe: one process per rank through torch.distributed (NCCL on GPUs, gloo on CPU).

Mirrors nccl-tests' `all_reduce_perf -b 8 -e 1G -f 2` (doc/PERFORMANCE.md, src/common.cu):
message sizes double from `min_bytes` to `max_bytes`; warm-up iterations at the largest
and the smallest size; per size one untimed operation, a barrier, then `iters` timed
operations and one synchronisation, time = elapsed / iters averaged over ranks;
`algbw = bytes / time` and `busbw = algbw * 2(n-1)/n`, in GB/s with GB = 10^9 bytes.
Differences: torch's all_reduce is in-place (nccl-tests also reports out-of-place),
float32 sum only, and results are checked once (every rank holds n after summing ones).

At world size 1 nothing crosses a link: busbw is 0 by its definition, and algbw only
measures the cost of a local operation. Bus bandwidth needs at least 2 GPUs.
NVLink multicast (NVLS) stays off: shared hosts must not use it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ..records.redaction import recorded_env
from ..records.formats import schema_of
from ..records.jsonfile import read_json

ALLREDUCE_SCHEMA = schema_of("probe-allreduce")

#: Set for every rank, whatever the caller's environment says (recorded in the result).
FORCED_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
#: Environment variables recorded with the result (prefixes).
RECORDED_ENV_PREFIXES = ("NCCL_", "TORCH_NCCL", "TORCH_SYMM_MEM", "NVSHMEM_", "CUDA_VISIBLE_DEVICES", "GLOO_")

_DTYPE_BYTES = {"float32": 4}


class AllReduceError(RuntimeError):
    """The probe could not run as asked; names the setting or the rank that failed."""


def bus_bandwidth(algbw: float, world_size: int) -> float:
    """nccl-tests' all-reduce bus bandwidth: algbw * 2(n-1)/n."""
    if world_size < 1:
        raise ValueError(f"world size must be >= 1, got {world_size}")
    return algbw * 2.0 * (world_size - 1) / world_size


def message_sizes(min_bytes: int, max_bytes: int, dtype: str = "float32") -> list[int]:
    """min_bytes, 2*min_bytes, ... up to max_bytes (each a whole number of elements)."""
    elem = _DTYPE_BYTES[dtype]
    if min_bytes < elem or max_bytes < min_bytes:
        raise AllReduceError(f"message sizes: need {elem} <= min_bytes <= max_bytes, got {min_bytes}..{max_bytes}")
    if min_bytes % elem:
        raise AllReduceError(f"min_bytes {min_bytes} is not a whole number of {dtype} elements ({elem} B)")
    sizes, size = [], int(min_bytes)
    while size <= max_bytes:
        sizes.append(size)
        size *= 2
    return sizes


def sweep_rows(sizes: list[int], seconds: list[float], world_size: int, dtype: str = "float32") -> list[dict[str, Any]]:
    """Per size: bytes, elements, time (us), algbw and busbw (GB/s, GB = 1e9 bytes)."""
    rows = []
    for size, sec in zip(sizes, seconds, strict=True):
        algbw = size / sec / 1e9
        rows.append({"bytes": size, "elements": size // _DTYPE_BYTES[dtype], "dtype": dtype, "time_us": sec * 1e6,
                     "algbw_gbps": algbw, "busbw_gbps": bus_bandwidth(algbw, world_size)})
    return rows


# --------------------------------------------------------------------------- worker (one rank)


def _worker(rank: int, world_size: int, backend: str, init_file: str, settings: dict, out: str) -> None:
    import torch
    import torch.distributed as dist

    device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    kwargs = {"device_id": device} if device.type == "cuda" else {}
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=world_size, **kwargs)
    try:
        sizes = message_sizes(settings["min_bytes"], settings["max_bytes"])
        dtype = torch.float32

        def sync() -> None:
            if device.type == "cuda":
                torch.cuda.synchronize(device)

        buf = torch.zeros(max(sizes) // 4, dtype=dtype, device=device)  # zeros: sums never overflow
        check = torch.ones(2, dtype=dtype, device=device)
        dist.all_reduce(check)
        sync()
        if not torch.all(check == world_size):
            raise AllReduceError(f"rank {rank}: all_reduce of ones gave {check.tolist()}, expected {world_size}")
        for size in (max(sizes), min(sizes)):  # nccl-tests' warm-up: largest, then smallest
            for _ in range(settings["warmup_iters"]):
                dist.all_reduce(buf[: size // 4])
            sync()
        seconds = []
        for size in sizes:
            x = buf[: size // 4]
            dist.all_reduce(x)
            sync()
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(settings["iters"]):
                dist.all_reduce(x)
            sync()
            elapsed = torch.tensor([(time.perf_counter() - t0) / settings["iters"]], dtype=torch.float64, device=device)
            dist.all_reduce(elapsed)  # average over ranks, as nccl-tests does
            seconds.append(float(elapsed.item()) / world_size)
        if rank == 0:
            info = {"torch": torch.__version__, "device_names": [], "nccl_version": None}
            if device.type == "cuda":
                info["device_names"] = [torch.cuda.get_device_name(i) for i in range(world_size)]
                v = torch.cuda.nccl.version()
                info["nccl_version"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
            Path(out).write_text(json.dumps({"seconds": seconds, "sizes": sizes, **info}))
    finally:
        dist.destroy_process_group()


def _worker_main(argv: list[str]) -> int:
    rank, world_size, backend, init_file, settings, out = argv
    _worker(int(rank), int(world_size), backend, init_file, json.loads(settings), out)
    return 0


# --------------------------------------------------------------------------- launcher


def _recorded_env(env: dict[str, str]) -> dict[str, str]:
    """The communication settings of `env`, through the one allow-list and scrubbing (redaction.recorded_env)."""
    return {k: v for k, v in recorded_env(env).items() if k.startswith(RECORDED_ENV_PREFIXES)}


def run_probe(world_size: int, backend: str, *, min_bytes: int = 8, max_bytes: int = 1 << 30, warmup_iters: int = 5,
              iters: int = 20, timeout_s: float = 600.0, label: str | None = None,
              log=print) -> dict[str, Any]:
    """Run the sweep with `world_size` local ranks and return the probe record (rows included)."""
    if backend not in ("nccl", "gloo"):
        raise AllReduceError(f"backend must be 'nccl' or 'gloo', got {backend!r}")
    if world_size < 1:
        raise AllReduceError(f"world size must be >= 1, got {world_size}")
    sizes = message_sizes(min_bytes, max_bytes)
    if backend == "nccl":
        import torch

        visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if visible < world_size:
            raise AllReduceError(f"NCCL all-reduce at world size {world_size} needs {world_size} visible GPU(s); "
                                 f"torch sees {visible} (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})")
    settings = {"min_bytes": int(min_bytes), "max_bytes": int(max_bytes), "warmup_iters": int(warmup_iters),
                "iters": int(iters)}
    env = dict(os.environ, **FORCED_ENV)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="rl-bench-allreduce-") as tmp:
        init_file, out = os.path.join(tmp, "rendezvous"), os.path.join(tmp, "rank0.json")
        argv = [sys.executable, "-m", "rl_pipeline_bench.probes.allreduce", "--worker"]
        logs = [open(os.path.join(tmp, f"rank{r}.log"), "w+") for r in range(world_size)]  # files: no pipe can fill
        procs = [subprocess.Popen([*argv, str(r), str(world_size), backend, init_file, json.dumps(settings), out],
                                  env=env, stdout=logs[r], stderr=subprocess.STDOUT) for r in range(world_size)]
        log(f"allreduce: {world_size} rank(s) over {backend}, {len(sizes)} sizes {sizes[0]} B..{sizes[-1]} B, "
            f"{warmup_iters} warm-up + {iters} timed iterations each")
        deadline = time.monotonic() + timeout_s
        try:
            codes = [p.wait(timeout=max(1.0, deadline - time.monotonic())) for p in procs]
        except subprocess.TimeoutExpired:
            for p in procs:  # only the ranks this probe started
                if p.poll() is None:
                    p.kill()
                    p.wait()
            raise AllReduceError(f"all-reduce probe did not finish within {timeout_s:g} s (world size {world_size}, "
                                 f"{backend}); its ranks were stopped") from None
        finally:
            texts = []
            for fh in logs:
                fh.seek(0)
                texts.append(fh.read())
                fh.close()
        failed = [(r, c) for r, c in enumerate(codes) if c != 0]
        if failed:
            r, c = failed[0]
            tail = texts[r].strip().splitlines()[-15:]
            raise AllReduceError(f"all-reduce rank {r} exited {c}:\n  " + "\n  ".join(tail))
        result = read_json(out, "all-reduce result", AllReduceError)
    rows = sweep_rows(result["sizes"], result["seconds"], world_size)
    largest = rows[-1]
    return {
        "schema": ALLREDUCE_SCHEMA, "label": label, "backend": backend, "world_size": world_size,
        "device": "cuda" if backend == "nccl" else "cpu", "dtype": "float32", "op": "sum", "in_place": True,
        **settings, "device_names": result["device_names"], "nccl_version": result["nccl_version"],
        "torch_version": result["torch"], "env": _recorded_env(env), "forced_env": dict(FORCED_ENV),
        "rows": rows, "largest": largest, "wall_s": time.perf_counter() - started,
        "busbw_note": None if world_size >= 2 else
        "world size 1: no data crosses a link, busbw is 0 by definition; bus bandwidth needs at least 2 GPUs",
    }


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--worker"]:
        return _worker_main(argv[1:])
    raise SystemExit("usage: python -m rl_pipeline_bench.probes.allreduce --worker RANK WORLD BACKEND INIT SETTINGS OUT "
                     "(internal; run the probe with `bench probe allreduce`)")


if __name__ == "__main__":
    sys.exit(main())

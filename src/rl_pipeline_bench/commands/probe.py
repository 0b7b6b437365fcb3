"""`bench probe ...`: the infrastructure probes and the per-run infrastructure summary.

What the rules in rules/probes.smk run, and what a person runs by hand. Each writes
one JSON record atomically (the all-reduce sweep also a parquet beside it) and exits
non-zero with a message naming the problem when the probe cannot run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _emit(record: dict, output: Path | None) -> None:
    from ..evidence import atomic_write_json

    if output is None:
        print(json.dumps(record, indent=2))
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(output, record)
    print(f"bench probe: wrote {output}")


def _log(msg: str) -> None:
    print(msg, flush=True)


def _allreduce(args) -> int:
    from ..probes.allreduce import AllReduceError, run_probe

    try:
        record = run_probe(args.world_size, args.backend, min_bytes=args.min_bytes, max_bytes=args.max_bytes,
                           warmup_iters=args.warmup_iters, iters=args.iters, timeout_s=args.timeout,
                           label=args.label, log=_log)
    except AllReduceError as exc:
        print(f"bench probe allreduce: {exc}", file=sys.stderr)
        return 1
    for row in record["rows"]:
        print(f"  {row['bytes']:>12} B  {row['time_us']:>12.2f} us  algbw {row['algbw_gbps']:>9.3f} GB/s  "
              f"busbw {row['busbw_gbps']:>9.3f} GB/s")
    if record["busbw_note"]:
        print(f"  note: {record['busbw_note']}")
    if args.output is not None:
        import pyarrow as pa

        from ..evidence import atomic_write_table

        args.output.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_table(args.output.with_suffix(".parquet"), pa.Table.from_pylist(record["rows"]))
    _emit(record, args.output)
    return 0


def _storage(args) -> int:
    from ..probes.storage import StorageProbeError, run_storage_probe

    try:
        record = run_storage_probe(args.directory, args.size_bytes, block_bytes=args.block_bytes, engine=args.engine,
                                   timeout_s=args.timeout, label=args.label, log=_log)
    except StorageProbeError as exc:
        print(f"bench probe storage: {exc}", file=sys.stderr)
        return 1
    _emit(record, args.output)
    return 0


def _snapshot_of(model_record: Path) -> Path:
    record = json.loads(model_record.read_text(encoding="utf-8"))
    snapshot = record.get("snapshot_path")
    if not snapshot or not Path(snapshot).is_dir():
        raise SystemExit(f"bench probe: {model_record} names no existing snapshot_path ({snapshot!r})")
    return Path(snapshot)


def _checkpoint(args) -> int:
    from ..probes.checkpoint import run_checkpoint_probe
    from ..probes.storage import StorageProbeError

    try:
        record = run_checkpoint_probe(_snapshot_of(args.model_record), args.directory, lora_rank=args.lora_rank,
                                      lora_alpha=args.lora_alpha, device=args.device, label=args.label, log=_log)
    except StorageProbeError as exc:
        print(f"bench probe checkpoint: {exc}", file=sys.stderr)
        return 1
    record["model_record"] = str(args.model_record)
    _emit(record, args.output)
    return 0


def _gemm(args) -> int:
    from ..probes.gemm import run_gemm

    record = run_gemm(args.n, args.dtype, args.device, args.warmup, args.iters)
    print(f"gemm: {record['n']}^3 {record['dtype']} on {record['device_name']}: {record['tflops']:.1f} TFLOP/s")
    _emit(record, args.output)
    return 0


def _model_flops(args) -> int:
    from ..probes.flops import model_card

    record = json.loads(args.model_record.read_text(encoding="utf-8"))
    card = model_card(_snapshot_of(args.model_record))
    card.update({k: record.get(k) for k in ("model", "repo_id", "revision")})
    print(f"model-flops: {card['architecture']}: {card['active_matmul_params']:,.0f} active of "
          f"{card['matmul_params']:,} matmul parameters")
    _emit(card, args.output)
    return 0


def _summarize_run(args) -> int:
    from ..probes.run_infra import summarize_run_json

    summary = summarize_run_json(args.run_json, args.flops_card, args.output)
    t = summary["telemetry"]
    e = summary["trainer_efficiency"]
    print(f"bench probe summarize-run: wrote {args.output}; telemetry {t['status']}"
          + (f" ({t['reason']})" if t.get("reason") else "")
          + f"; trainer efficiency {e['status']}" + (f" ({e.get('reason')})" if e.get("reason") else ""))
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("probe", help="infrastructure probes: all-reduce, storage, checkpoint, GEMM, run telemetry")
    sub = p.add_subparsers(dest="probe", required=True, metavar="PROBE")

    a = sub.add_parser("allreduce", help="all-reduce bandwidth sweep (NCCL on GPUs, gloo on CPU)")
    a.add_argument("--world-size", type=int, required=True, help="ranks (one per GPU with nccl)")
    a.add_argument("--backend", choices=["nccl", "gloo"], required=True)
    a.add_argument("--min-bytes", type=int, default=8)
    a.add_argument("--max-bytes", type=int, default=1 << 30)
    a.add_argument("--warmup-iters", type=int, default=5)
    a.add_argument("--iters", type=int, default=20)
    a.add_argument("--timeout", type=float, default=600.0, help="seconds before the ranks are stopped")
    a.add_argument("--label")
    a.add_argument("--output", type=Path, help="JSON record (the sweep also as .parquet beside it)")
    a.set_defaults(func=_allreduce)

    s = sub.add_parser("storage", help="sequential write then read throughput in a directory (fio, else O_DIRECT)")
    s.add_argument("--directory", type=Path, required=True, help="where checkpoints go; created and removed if absent")
    s.add_argument("--size-bytes", type=int, required=True)
    s.add_argument("--block-bytes", type=int, default=1 << 20)
    s.add_argument("--engine", choices=["auto", "fio", "python"], default="auto")
    s.add_argument("--timeout", type=float, default=900.0)
    s.add_argument("--label")
    s.add_argument("--output", type=Path)
    s.set_defaults(func=_storage)

    c = sub.add_parser("checkpoint", help="safetensors save/load time of the model snapshot and a LoRA adapter")
    c.add_argument("--model-record", type=Path, required=True, help="results/models/MODEL.json")
    c.add_argument("--directory", type=Path, required=True)
    c.add_argument("--device", default="cpu", help="where tensors are loaded to and saved from (cpu, cuda)")
    c.add_argument("--lora-rank", type=int, required=True)
    c.add_argument("--lora-alpha", type=int, required=True)
    c.add_argument("--label")
    c.add_argument("--output", type=Path)
    c.set_defaults(func=_checkpoint)

    g = sub.add_parser("gemm", help="dense square GEMM throughput (the measured peak for MFU)")
    g.add_argument("--n", type=int, default=8192)
    g.add_argument("--dtype", default="bfloat16")
    g.add_argument("--device", default="cuda")
    g.add_argument("--warmup", type=int, default=10)
    g.add_argument("--iters", type=int, default=50)
    g.add_argument("--output", type=Path)
    g.set_defaults(func=_gemm)

    f = sub.add_parser("model-flops", help="the model's matmul inventory (FLOPs card) from its snapshot config")
    f.add_argument("--model-record", type=Path, required=True)
    f.add_argument("--output", type=Path)
    f.set_defaults(func=_model_flops)

    r = sub.add_parser("summarize-run", help="run.json -> the run's infrastructure summary (telemetry phases, MFU)")
    r.add_argument("run_json", type=Path, metavar="RUN_JSON")
    r.add_argument("--flops-card", type=Path, help="results/probes/flops/MODEL.json (omit: no MFU)")
    r.add_argument("--output", type=Path, required=True)
    r.set_defaults(func=_summarize_run)

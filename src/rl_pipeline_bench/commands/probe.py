"""`bench probe ...`: the infrastructure probes and the per-run infrastructure summary.

What the rules in rules/probes.smk run (`--spec`: the probe's settings are the run spec's
`probes`), and what a person runs by hand (a spec resolved from the config, flags on top). Each writes
one JSON record atomically (the all-reduce sweep also a parquet beside it) and exits
non-zero with a message naming the problem when the probe cannot run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .. import paths


def _emit(record: dict, output: Path | None) -> None:
    from ..records.atomicfile import atomic_write_json

    if output is None:
        print(json.dumps(record, indent=2))
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(output, record)
    print(f"bench probe: wrote {output}")


def _log(msg: str) -> None:
    print(msg, flush=True)


def _settings(args, section: str) -> dict:
    """The probe's settings: the --spec file's `probes.<section>` (the workflow), else the spec
    resolved from --configfile/--config/--suite with any flag given on top (by hand).

    Sets args.label (default: the suite's name) and args.spec_ref (the spec it ran under).
    """
    from .run import spec_of

    given = {k: getattr(args, k) for k in _FLAGS[section] if getattr(args, k) is not None}
    if args.spec is not None and given:
        flags = ", ".join("--timeout" if k == "timeout_s" else "--" + k.replace("_", "-") for k in given)
        raise SystemExit(f"bench probe {section}: {flags} and --spec: the spec's probes.{section} gives the "
                         "settings (drop the flags, or drop --spec and name a --suite)")
    from ..settings.config import check_options

    check_options(given, f"probes/{section}",  # the flags refuse what the config keys refuse
                  {k: "--timeout" if k == "timeout_s" else "--" + k.replace("_", "-") for k in given})
    spec = spec_of(args)
    settings = {**spec.probes[section], **given}
    args.label = args.label or spec.suite_name
    args.spec_ref = {"id": spec.id, "hash": spec.hash, "path": str(args.spec) if args.spec else None,
                     "overridden": sorted(given)}
    return settings


#: Per probe, the flags that override its spec settings by hand (argparse dest == settings key).
_FLAGS = {
    "allreduce": ("world_size", "backend", "min_bytes", "max_bytes", "warmup_iters", "iters", "timeout_s"),
    "storage": ("directory", "size_bytes", "block_bytes", "engine", "timeout_s"),
    "checkpoint": ("directory", "device", "lora_rank", "lora_alpha"),
}


def _allreduce(args) -> int:
    from ..probes.allreduce import AllReduceError, run_probe

    s = _settings(args, "allreduce")
    try:
        record = run_probe(int(s["world_size"]), s["backend"], min_bytes=s["min_bytes"], max_bytes=s["max_bytes"],
                           warmup_iters=s["warmup_iters"], iters=s["iters"], timeout_s=s["timeout_s"],
                           label=args.label, log=_log)
    except AllReduceError as exc:
        print(f"bench probe allreduce: {exc}", file=sys.stderr)
        return 1
    record["spec"] = args.spec_ref
    for row in record["rows"]:
        print(f"  {row['bytes']:>12} B  {row['time_us']:>12.2f} us  algbw {row['algbw_gbps']:>9.3f} GB/s  "
              f"busbw {row['busbw_gbps']:>9.3f} GB/s")
    if record["busbw_note"]:
        print(f"  note: {record['busbw_note']}")
    if args.output is not None:
        import pyarrow as pa

        from ..records.atomicfile import atomic_write_table

        args.output.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_table(args.output.with_suffix(".parquet"), pa.Table.from_pylist(record["rows"]))
    _emit(record, args.output)
    return 0


def _storage(args) -> int:
    from ..probes.storage import StorageProbeError, run_storage_probe

    s = _settings(args, "storage")
    try:
        record = run_storage_probe(Path(s["directory"]), s["size_bytes"], block_bytes=s["block_bytes"],
                                   engine=s["engine"], timeout_s=s["timeout_s"], label=args.label, log=_log)
    except StorageProbeError as exc:
        print(f"bench probe storage: {exc}", file=sys.stderr)
        return 1
    record["spec"] = args.spec_ref
    _emit(record, args.output)
    return 0


def _snapshot_of(model_record: Path) -> Path:
    from ..records.jsonfile import read_json

    record = read_json(model_record, "model record")
    snapshot = record.get("snapshot_path")
    if not snapshot or not Path(snapshot).is_dir():
        raise SystemExit(f"bench probe: {model_record} names no existing snapshot_path ({snapshot!r})")
    return Path(snapshot)


def _checkpoint(args) -> int:
    from ..probes.checkpoint import run_checkpoint_probe
    from ..probes.storage import StorageProbeError

    s = _settings(args, "checkpoint")
    try:
        record = run_checkpoint_probe(_snapshot_of(args.model_record), Path(s["directory"]), lora_rank=s["lora_rank"],
                                      lora_alpha=s["lora_alpha"], device=s["device"], label=args.label, log=_log)
    except StorageProbeError as exc:
        print(f"bench probe checkpoint: {exc}", file=sys.stderr)
        return 1
    record["model_record"] = str(args.model_record)
    record["spec"] = args.spec_ref
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

    from ..records.jsonfile import read_json

    record = read_json(args.model_record, "model record")
    card = model_card(_snapshot_of(args.model_record))
    card.update({k: record.get(k) for k in ("model", "repo_id", "revision")})
    print(f"model-flops: {card['architecture']}: {card['active_matmul_params']:,.0f} active of "
          f"{card['matmul_params']:,} matmul parameters")
    _emit(card, args.output)
    return 0


def _summarize_run(args) -> int:
    from ..jobs import summarize_run_infra

    summary = summarize_run_infra(args.run_json, args.flops_card, args.output, spec_path=args.spec)
    t = summary["telemetry"]
    e = summary["trainer_efficiency"]
    print(f"bench probe summarize-run: wrote {args.output}; telemetry {t['status']}"
          + (f" ({t['reason']})" if t.get("reason") else "")
          + f"; trainer efficiency {e['status']}" + (f" ({e.get('reason')})" if e.get("reason") else ""))
    return 0


def register(subparsers) -> None:
    from .run import add_spec_args

    p = subparsers.add_parser("probe", help="infrastructure probes: all-reduce, storage, checkpoint, GEMM, run telemetry")
    sub = p.add_subparsers(dest="probe", required=True, metavar="PROBE")

    by_hand = "by hand, overrides the spec's probes.{}.{} (not with --spec)"
    a = sub.add_parser("allreduce", help="all-reduce bandwidth sweep (NCCL on GPUs, gloo on CPU)",
                       description="Settings from the run spec's probes.allreduce (--spec, or resolved from the config).")
    add_spec_args(a)
    a.add_argument("--world-size", type=int, help="ranks, one per GPU with nccl; " + by_hand.format("allreduce", "world_size"))
    a.add_argument("--backend", choices=["nccl", "gloo"], help=by_hand.format("allreduce", "backend"))
    a.add_argument("--min-bytes", type=int, help=by_hand.format("allreduce", "min_bytes"))
    a.add_argument("--max-bytes", type=int, help=by_hand.format("allreduce", "max_bytes"))
    a.add_argument("--warmup-iters", type=int, help=by_hand.format("allreduce", "warmup_iters"))
    a.add_argument("--iters", type=int, help=by_hand.format("allreduce", "iters"))
    a.add_argument("--timeout", dest="timeout_s", type=float,
                   help="seconds before the ranks are stopped; " + by_hand.format("allreduce", "timeout_s"))
    a.add_argument("--label", help="row label in the report (default: the suite's name)")
    a.add_argument("--output", type=Path, help="JSON record (the sweep also as .parquet beside it)")
    a.set_defaults(func=_allreduce)

    s = sub.add_parser("storage", help="sequential write then read throughput in a directory (fio, else O_DIRECT)",
                       description="Settings from the run spec's probes.storage (--spec, or resolved from the config).")
    add_spec_args(s)
    s.add_argument("--directory", help="where checkpoints go; created and removed if absent; "
                   + by_hand.format("storage", "directory"))
    s.add_argument("--size-bytes", type=int, help=by_hand.format("storage", "size_bytes"))
    s.add_argument("--block-bytes", type=int, help=by_hand.format("storage", "block_bytes"))
    s.add_argument("--engine", choices=["auto", "fio", "python"], help=by_hand.format("storage", "engine"))
    s.add_argument("--timeout", dest="timeout_s", type=float, help=by_hand.format("storage", "timeout_s"))
    s.add_argument("--label", help="row label in the report (default: the suite's name)")
    s.add_argument("--output", type=Path)
    s.set_defaults(func=_storage)

    c = sub.add_parser("checkpoint", help="safetensors save/load time of the model snapshot and a LoRA adapter",
                       description="Settings from the run spec's probes.checkpoint (--spec, or resolved from the config).")
    add_spec_args(c)
    c.add_argument("--model-record", type=Path, required=True, help=str(paths.model_record("MODEL")))
    c.add_argument("--directory", help=by_hand.format("checkpoint", "directory"))
    c.add_argument("--device", help="where tensors are loaded to and saved from (cpu, cuda); "
                   + by_hand.format("checkpoint", "device"))
    c.add_argument("--lora-rank", type=int, help=by_hand.format("checkpoint", "lora_rank"))
    c.add_argument("--lora-alpha", type=float, help=by_hand.format("checkpoint", "lora_alpha"))
    c.add_argument("--label", help="row label in the report (default: the suite's name)")
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
    r.add_argument("--flops-card", type=Path, help=f"{paths.flops_card('MODEL')} (omit: no MFU)")
    r.add_argument("--spec", type=Path, help="run spec the run belongs to: run.json and the evidence must name its hash")
    r.add_argument("--output", type=Path, required=True)
    r.set_defaults(func=_summarize_run)

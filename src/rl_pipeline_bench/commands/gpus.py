"""`bench gpus`: the host's GPUs as NVML sees them, with the lease that holds each one."""

from __future__ import annotations

import argparse
import json
import sys

from ..host.gpus import InventoryError, query_inventory
from ..leases import LockDir, LockDirError, list_leases, resolve_lock_dir


def register(subparsers) -> None:
    _add_arguments(subparsers.add_parser("gpus", help="list GPUs (index, UUID, memory, compute processes, lease)"))


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--lock-dir", help="lock directory whose records to show (default as for `bench lease`)")
    parser.set_defaults(func=cmd_gpus)


def gpus_report(lock_dir=None) -> dict:
    """Inventory plus, per device, the record (if any) that reserves it."""
    inv = query_inventory()
    ld = LockDir(resolve_lock_dir(lock_dir))
    notes = list(inv.notes)
    try:
        rows = list_leases(ld)
    except LockDirError as exc:  # an untrusted directory's records say nothing
        rows = []
        notes.append(f"leases not shown: {exc}")
    holders: dict[str, list[dict]] = {}
    for row in rows:
        for dev in row.get("devices", []):
            holders.setdefault(dev["uuid"], []).append(
                {k: row.get(k) for k in ("run_id", "state", "status", "record")})
    unreadable = [row["record"] for row in rows if row["state"] == "unreadable"]
    gpus = []
    for g in inv.gpus:
        d = g.to_dict()
        d["lease"] = (holders.get(g.uuid) or [None])[0]
        gpus.append(d)
    return {"source": inv.source, "driver": inv.driver, "notes": notes, "lock_dir": str(ld.path),
            "unreadable_records": unreadable, "gpus": gpus}


def cmd_gpus(args) -> int:
    try:
        report = gpus_report(args.lock_dir)
    except InventoryError as exc:
        print(f"bench gpus: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"source: {report['source']}; driver {report['driver']}; lock directory {report['lock_dir']}")
    for note in report["notes"]:
        print(f"note: {note}")
    header = f"{'IDX':>3}  {'UUID':<40}  {'NAME':<24}  {'MEM USED/TOTAL MiB':>18}  {'PROCS':>5}  LEASE"
    print(header)
    for g in report["gpus"]:
        mem = f"{g['memory_used_mib']}/{g['memory_total_mib']}"
        lease = g["lease"]
        held = f"{lease['run_id']} ({lease['state']})" if lease else "-"
        print(f"{g['index']:>3}  {g['uuid']:<40}  {g['name'][:24]:<24}  {mem:>18}  {len(g['processes']):>5}  {held}")
    for path in report["unreadable_records"]:
        print(f"warning: unreadable record {path} blocks every lease")
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m rl_pipeline_bench.commands.gpus`: the same as `bench gpus` without loading other commands."""
    parser = argparse.ArgumentParser(prog="python -m rl_pipeline_bench.commands.gpus")
    _add_arguments(parser)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())

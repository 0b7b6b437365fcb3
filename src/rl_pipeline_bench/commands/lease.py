"""`bench lease run|list|clear`: run a command under a GPU lease and manage reservation records."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from ..leases import (
    EXIT_CLEANUP_UNCONFIRMED,
    EXIT_REFUSED,
    ClearRefused,
    LockDir,
    LockDirError,
    clear_lease,
    list_leases,
    resolve_lock_dir,
    supervise,
)

_RUN_EPILOG = f"""\
SPEC: host physical indices ('0,1,2,3') or exact UUIDs from `bench gpus`. Repeat --gpus to
offer several explicit sets; the first free one is taken and the record says which.
Exit codes: the command's own code (128+N if it died of signal N); {EXIT_REFUSED} = lease refused
(nothing reserved, the message names GPU, reason and record); {EXIT_CLEANUP_UNCONFIRMED} = cleanup
unconfirmed (record kept; it blocks those GPUs until `bench lease clear`); 127/126 = COMMAND
could not be started (lease released)."""


def register(subparsers) -> None:
    parser = subparsers.add_parser("lease", help="run a command under a GPU lease; list or clear reservation records")
    add_lease_arguments(parser)


def add_lease_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="lease_action", required=True, metavar="ACTION")

    run = sub.add_parser("run", help="lease GPUs, run COMMAND, release once all its processes are gone",
                         epilog=_RUN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("--gpus", action="append", required=True, metavar="SPEC", help="GPU set to lease (repeatable)")
    run.add_argument("--count", type=int, required=True, metavar="N", help="required number of distinct devices")
    run.add_argument("--run-id", help="run id for the record (default: adhoc-<utc time>-<pid>)")
    run.add_argument("--lock-dir", help="lock directory (default: $RL_BENCH_LOCK_DIR, config lease.lock_dir, /tmp/rl-bench-locks-$USER)")
    run.add_argument("--memory-threshold-mib", type=int, metavar="MIB",
                     help="refuse a device with more memory in use (default: config lease.memory_threshold_mib)")
    run.add_argument("--cleanup-timeout", type=float, default=60.0, metavar="S",
                     help="how long to wait for the command's leftover processes before keeping the record (default 60)")
    run.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ...")
    run.set_defaults(func=cmd_run)

    lst = sub.add_parser("list", help="show reservation records: live or stale, which processes are alive")
    lst.add_argument("--lock-dir")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(func=cmd_list)

    clr = sub.add_parser("clear", help="remove one record whose processes are all gone (never automatic)")
    clr.add_argument("--gpu", required=True, metavar="UUID", help="a GPU UUID the record holds")
    clr.add_argument("--run-id", required=True, help="the record's run id (must match)")
    clr.add_argument("--lock-dir")
    clr.add_argument("--json", action="store_true")
    clr.set_defaults(func=cmd_clear)


def cmd_run(args) -> int:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not args.cleanup_timeout >= 0:  # NaN too
        print("bench lease: --cleanup-timeout must be >= 0", file=sys.stderr)
        return EXIT_REFUSED
    if args.memory_threshold_mib is not None:
        from ..settings.config import ConfigError, check_options

        try:  # as config `lease.memory_threshold_mib`; -5 used to refuse every GPU as "in use"
            check_options({"memory_threshold_mib": args.memory_threshold_mib}, "lease",
                          {"memory_threshold_mib": "--memory-threshold-mib"})
        except ConfigError as exc:
            print(f"bench lease: {exc}", file=sys.stderr)
            return EXIT_REFUSED
    run_id = args.run_id or f"adhoc-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}"
    return supervise(
        args.gpus, args.count, command, run_id=run_id, lock_dir=args.lock_dir,
        memory_threshold_mib=args.memory_threshold_mib, cleanup_timeout_s=args.cleanup_timeout,
    )


def cmd_list(args) -> int:
    ld = LockDir(resolve_lock_dir(args.lock_dir))
    try:
        rows = list_leases(ld)
    except LockDirError as exc:
        print(f"bench lease list: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"lock_dir": str(ld.path), "leases": rows}, indent=2))
        return 0
    print(f"lock directory: {ld.path}")
    if not rows:
        print("no reservation records")
    for r in rows:
        if "run_id" not in r:
            print(f"{r['state'].upper():10} {r['record']}: {r.get('error') or ''} {r.get('note', '')}".rstrip())
            continue
        gpus = ", ".join(f"{d['index']}={d['uuid']}" for d in r["devices"])
        alive = ", ".join(f"{a['role']} {a['pid']}" for a in r["alive_processes"]) or "none"
        print(f"{r['state'].upper():10} run {r['run_id']} status {r['status']} since {r['started_at']} on {r['host']}")
        print(f"{'':10} GPUs {gpus}; alive: {alive}")
        print(f"{'':10} record {r['record']}")
    return 0


def cmd_clear(args) -> int:
    ld = LockDir(resolve_lock_dir(args.lock_dir))
    try:
        removed = clear_lease(ld, args.gpu, args.run_id)
    except ClearRefused as exc:
        print(f"bench lease clear: refused: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(removed, indent=2))
    else:
        gpus = ", ".join(f"{g['index']}={g['uuid']}" for g in removed["gpus"])
        print(f"removed record {removed['removed_record']} (run {removed['run_id']}, status {removed['status']}, GPUs {gpus})")
        for path in removed["removed_lock_files"]:
            print(f"removed lock file {path}")
    return 0


# `python -m rl_pipeline_bench.commands.lease run|list|clear`: the same as `bench lease`, without
# importing every other `bench` subcommand (some pull in torch), which keeps lease start-up fast.
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rl_pipeline_bench.commands.lease", description="GPU lease supervisor")
    add_lease_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ValueError as exc:
        from ..records.configfile import ConfigError  # lazy: jsonschema is read only when no flag/env says it all

        if not isinstance(exc, ConfigError):
            raise
        print(f"bench lease: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""`bench summarize EVIDENCE_DIR`: the measurement contract applied to one run's evidence.

Validity is part of the JSON (valid/reasons), so an invalid run still exits 0; only a
path that is not there at all is a usage error (exit 2).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "summarize",
        help="summarize one evidence directory (rates, validity, reasons) as JSON",
        description="Print the summary of results/evidence/RUN_ID as JSON (schema rl-bench/summary/v1).",
    )
    p.add_argument("evidence_dir", metavar="EVIDENCE_DIR", type=Path, help="a results/evidence/{run_id} directory")
    p.add_argument("--output", "-o", type=Path, default=None, help="also write the summary JSON here (atomically)")
    p.set_defaults(func=run)

    r = subparsers.add_parser(
        "summarize-run",
        help="run.json -> summary.json (what the workflow's summarize_run rule executes)",
    )
    r.add_argument("run_json", metavar="RUN_JSON", type=Path, help="results/runs/.../run.json")
    r.add_argument("--output", "-o", type=Path, required=True, help="summary.json to write (atomically)")
    r.add_argument("--spec", type=Path, default=None,
                   help="run spec the run belongs to: its run.json and evidence manifest must name this spec's hash")
    r.add_argument("--attempts-index", type=Path, default=None,
                   help="attempts index to append the verdict to (default: attempts.jsonl beside the evidence root)")
    r.add_argument("--log", type=Path, default=None, help="job log file (default: stderr)")
    r.set_defaults(func=run_from_record)


def run(args: argparse.Namespace) -> int:
    path: Path = args.evidence_dir
    if not path.exists():
        print(f"bench summarize: evidence directory not found: {path}", file=sys.stderr)
        return 2
    if not path.is_dir():
        print(f"bench summarize: not a directory: {path} (expected results/evidence/RUN_ID)", file=sys.stderr)
        return 2
    from ..contract.summary import summarize, summarize_to_file  # pandas: import only when summarizing

    summary = summarize_to_file(path, args.output) if args.output else summarize(path)
    print(json.dumps(summary, indent=2))
    return 0


def run_from_record(args: argparse.Namespace) -> int:
    from ..jobs import summarize_run

    summarize_run(args.run_json, args.output, args.log, spec_path=args.spec, attempts_index=args.attempts_index)
    return 0

"""`bench summarize EVIDENCE_DIR`: the measurement contract applied to one run's evidence.

Validity is part of the JSON (valid/reasons), so an invalid run still exits 0; only a
path that is not there at all is a usage error (exit 2).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .. import paths


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "summarize",
        help="summarize one evidence directory (rates, validity, reasons) as JSON",
        description=f"Print the summary of {paths.EVIDENCE_ROOT}/RUN_ID as JSON (schema rl-bench/summary/v1).",
    )
    p.add_argument("evidence_dir", metavar="EVIDENCE_DIR", type=Path, help=f"a {paths.EVIDENCE_ROOT}/RUN_ID directory")
    p.add_argument("--output", "-o", type=Path, default=None, help="also write the summary JSON here (atomically)")
    p.add_argument("--spec", type=Path, default=None,
                   help=f"the run spec to check the evidence against (default: the one its manifest names, "
                        f"{paths.spec_file('ID')} or its recorded path; none found: not checked)")
    p.add_argument("--plan", type=Path, default=None,
                   help=f"the offered plan of the run's workload ({paths.plan_file('SPEC', 'WORKLOAD')}; "
                        "default: made again from the spec)")
    p.set_defaults(func=run)

    r = subparsers.add_parser(
        "summarize-run",
        help="run.json -> summary.json (what the workflow's summarize_run rule executes)",
    )
    r.add_argument("run_json", metavar="RUN_JSON", type=Path, help=paths.RUN_RECORD)
    r.add_argument("--output", "-o", type=Path, required=True, help="summary.json to write (atomically)")
    r.add_argument("--spec", type=Path, default=None,
                   help="run spec the run belongs to: its run.json and evidence manifest must name this spec's hash")
    r.add_argument("--plan", type=Path, default=None,
                   help="the spec's offered plan of the run's workload: every recorded call must be the plan's")
    r.add_argument("--infra-output", type=Path, default=None,
                   help="also write the run's infrastructure summary here (infra.json: telemetry phases, MFU)")
    r.add_argument("--flops-card", type=Path, default=None, help="the model's FLOPs card, for infra.json's MFU")
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
        print(f"bench summarize: not a directory: {path} (expected {paths.EVIDENCE_ROOT}/RUN_ID)", file=sys.stderr)
        return 2
    from ..contract.summary import summarize, summarize_to_file  # pandas: import only when summarizing
    from ..evidence.store import read_evidence
    from ..settings.spec import load_spec, named_spec

    manifest = read_evidence(path, tables=()).manifest
    spec = load_spec(args.spec) if args.spec else named_spec(manifest)
    plan = None
    if spec is not None:
        from ..plan.workloads import read_plan, spec_plan

        workload = (manifest or {}).get("workload")
        plan = read_plan(args.plan) if args.plan else (
            spec_plan(spec, workload)[1] if workload in spec.workloads else None)
    summary = (summarize_to_file(path, args.output, spec=spec, plan=plan) if args.output
               else summarize(path, spec=spec, plan=plan))
    print(json.dumps(summary, indent=2))
    return 0


def run_from_record(args: argparse.Namespace) -> int:
    from ..jobs import summarize_run

    summarize_run(args.run_json, args.output, args.log, spec_path=args.spec, attempts_index=args.attempts_index,
                  plan_path=args.plan, infra_path=args.infra_output, card_path=args.flops_card)
    return 0

"""`bench report`: render the comparison report from summaries, plans and evidence.

This is what the workflow's render_report rule runs; it never runs a benchmark.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers) -> None:
    p = subparsers.add_parser("report", help="render reports/comparison.html from retained evidence")
    p.add_argument("--suite", required=True)
    p.add_argument("--summaries", nargs="+", required=True, type=Path, metavar="SUMMARY_JSON")
    p.add_argument("--plans", nargs="+", required=True, type=Path, metavar="PLAN_PARQUET")
    p.add_argument("--eval-summaries", nargs="*", default=[], type=Path, metavar="EVAL_SUMMARY_JSON",
                   help="task-quality evaluation summaries to include (rules/eval.smk)")
    p.add_argument("--offered-figures", nargs="+", default=None, type=Path, metavar="PNG",
                   help="the plans' offered-length figures, in the order of --plans (drawn when absent)")
    p.add_argument("--evidence-root", type=Path, default=Path("results/evidence"))
    p.add_argument("--html", type=Path, default=Path("reports/comparison.html"))
    p.add_argument("--tables", type=Path, default=Path("reports/tables"))
    p.add_argument("--figures", type=Path, default=Path("reports/figures"))
    p.add_argument("--config", type=Path, default=None, help="config file (default: config.yaml)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="top-level config override")
    p.add_argument("--log", type=Path, default=None, help="job log file (default: stderr)")
    p.add_argument("--run-infra", nargs="*", type=Path, default=None, metavar="INFRA_JSON",
                   help="per-run infrastructure summaries (bench probe summarize-run); adds the Infrastructure section")
    p.add_argument("--probes", nargs="*", type=Path, default=None, metavar="PROBE_JSON",
                   help="probe records (all-reduce, storage, checkpoint, GEMM) for the Infrastructure section")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..config import load_config
    from ..jobs import render_report
    from ..paths import CONFIG_PATH
    from .run import _parse_overrides

    config = load_config(args.config or CONFIG_PATH, _parse_overrides(args.set))
    render_report(args.summaries, args.plans, args.evidence_root, args.html, args.tables, args.figures,
                  args.suite, config, log_path=args.log, run_infra=args.run_infra, probes=args.probes,
                  eval_summaries=args.eval_summaries,
                  offered_figures=args.offered_figures)
    print(f"bench report: wrote {args.html}, {args.tables}/, {args.figures}/")
    return 0

"""`bench report` and `bench paper`: the comparison report and the paper report from retained evidence.

These are what the workflow's report rules run; they never run a benchmark. `bench report`
alone renders the config's suite from what is on disk, as the report rule would.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import paths


def _inputs(p: argparse.ArgumentParser) -> None:
    """What both reports read (the same arguments, so the rules pass the same inputs)."""
    p.add_argument("--spec", type=Path, default=None,
                   help=f"resolved run spec {paths.spec_file('SUITE-HASH')} (the workflow passes it)")
    p.add_argument("--suite", default=None, help="suite name (default: the spec's)")
    p.add_argument("--summaries", nargs="+", type=Path, metavar="SUMMARY_JSON",
                   help="run summaries (default: those of the config's suite on disk, trials as the config asks)")
    p.add_argument("--plans", nargs="+", type=Path, metavar="PLAN_PARQUET",
                   help="offered plans (default: the spec's plans on disk)")
    p.add_argument("--eval-summaries", nargs="*", default=[], type=Path, metavar="EVAL_SUMMARY_JSON",
                   help="task-quality evaluation summaries to include (rules/eval.smk)")
    p.add_argument("--evidence-root", type=Path, default=Path(paths.EVIDENCE_ROOT))
    p.add_argument("--attempts-index", type=Path, default=None,
                   help="attempts index (default: the one beside the evidence root, as in paths.ATTEMPTS_INDEX)")
    p.add_argument("--cv-bound", type=float, default=None, help="noise warning above this CV (default 0.05)")
    p.add_argument("--min-trials", type=int, default=None, help="noise warning below this many valid trials (default 3)")
    p.add_argument("--confidence", type=float, default=None, help="confidence level of the intervals (default 0.95)")
    p.add_argument("--bootstrap-resamples", type=int, default=None, help="bootstrap resamples (default 9999)")
    p.add_argument("--log", type=Path, default=None, help="job log file (default: stderr)")
    p.add_argument("--run-infra", nargs="*", type=Path, default=None, metavar="INFRA_JSON",
                   help="per-run infrastructure summaries (bench probe summarize-run); adds the Infrastructure section")
    p.add_argument("--probes", nargs="*", type=Path, default=None, metavar="PROBE_JSON",
                   help="probe records (all-reduce, storage, checkpoint, GEMM) for the Infrastructure section")
    from .run import add_config_args

    add_config_args(p)  # without --spec and --summaries: which suite's records on disk to render


def register(subparsers) -> None:
    p = subparsers.add_parser("report", help=f"render {paths.REPORT_HTML} from retained evidence")
    _inputs(p)
    p.add_argument("--offered-figures", nargs="+", default=None, type=Path, metavar="PNG",
                   help="the plans' offered-length figures, in the order of --plans (drawn when absent)")
    p.add_argument("--html", type=Path, default=Path(paths.REPORT_HTML))
    p.add_argument("--tables", type=Path, default=Path(paths.REPORT_TABLES))
    p.add_argument("--figures", type=Path, default=Path(paths.REPORT_FIGURES))
    p.set_defaults(func=run)

    paper = subparsers.add_parser("paper", help="the paper report: LaTeX tables, PDF figures, paper.tex, paper.pdf")
    steps = paper.add_subparsers(dest="paper_command", required=True, metavar="STEP")
    src = steps.add_parser("sources", help="write tables/*.tex, figures/*.pdf and paper.tex from retained evidence")
    _inputs(src)
    src.add_argument("--out", type=Path, default=Path(paths.PAPER_SOURCES), help="directory to write")
    src.set_defaults(func=run_paper_sources)
    comp = steps.add_parser("compile", help="copy the sources to --out and compile paper.pdf there (latexmk)")
    comp.add_argument("--sources", type=Path, default=Path(paths.PAPER_SOURCES))
    comp.add_argument("--out", type=Path, default=Path(paths.PAPER_DIR))
    comp.set_defaults(func=run_paper_compile)


def _on_disk(args: argparse.Namespace):
    """`bench report` alone: the config's suite (or --suite), its spec and every record of it on disk, as the
    report rule would pass them (trials as the config asks; the report names any other trial it finds)."""
    from ..settings.config import load_config
    from ..settings.spec import build_spec, check_spec
    from .run import config_overrides

    if args.spec is not None:
        from ..settings.spec import load_spec

        spec = load_spec(args.spec)
    else:
        spec = check_spec(build_spec(load_config(overrides=config_overrides(args), configfiles=args.configfile),
                                     args.suite))
    targets = paths.run_targets(spec.id, spec.backends, spec.workloads, spec.trials)
    summaries = [s for t in targets if (s := Path(paths.RUN_SUMMARY.format(**t._asdict()))).is_file()]
    if not summaries:
        raise SystemExit(f"bench {args.command}: no run summary of spec {spec.id} under "
                         f"{paths.spec_runs_dir(spec.id)}/ yet: `uv run snakemake --cores 1 {paths.REPORT_HTML}"
                         f"{'' if args.suite is None else ' --config suite=' + spec.suite_name}` runs what is "
                         "missing and renders the report")
    args.summaries = summaries
    args.plans = [p for w in spec.workloads if (p := paths.plan_file(spec.id, w)).is_file()]
    if args.run_infra is None:
        args.run_infra = [i for t in targets if (i := Path(paths.RUN_INFRA.format(**t._asdict()))).is_file()]
    if args.probes is None:
        args.probes = [p for p in paths.probe_records(spec.id) if Path(p).is_file()]
    if getattr(args, "offered_figures", None) is None and hasattr(args, "offered_figures"):
        figures = [paths.offered_figure(spec.id, w) for w in spec.workloads if paths.plan_file(spec.id, w).is_file()]
        args.offered_figures = figures if all(f.is_file() for f in figures) and figures else None
    return spec


def _common(args: argparse.Namespace):
    """(spec, suite, stats settings, attempts index) from the shared arguments."""
    from ..evidence.attempts import index_for
    from ..report.stats import StatsSettings
    from ..settings.spec import load_spec

    if args.summaries is None and args.plans is None:
        spec = _on_disk(args)
    elif args.summaries is None or args.plans is None:
        raise SystemExit(f"bench {args.command}: give both --summaries and --plans, or neither (the config's "
                         "suite as it is on disk)")
    elif args.config or args.configfile:
        raise SystemExit(f"bench {args.command}: --config and --configfile pick the records on disk; with "
                         "--summaries the spec is --spec")
    else:
        spec = load_spec(args.spec) if args.spec is not None else None
    suite = args.suite or (spec.suite_name if spec is not None else None)
    if suite is None:
        raise SystemExit(f"bench {args.command}: give --spec (or at least --suite)")
    from ..settings.config import check_options

    given = {k: v for k in ("cv_bound", "min_trials", "confidence", "bootstrap_resamples")
             if (v := getattr(args, k)) is not None}
    check_options(given, "statistics", {k: "--" + k.replace("_", "-") for k in given})  # as config `statistics:`
    settings = StatsSettings.from_mapping(given)
    return spec, suite, settings, args.attempts_index or index_for(args.evidence_root)


def run(args: argparse.Namespace) -> int:
    from ..jobs import render_report

    spec, suite, settings, index = _common(args)
    render_report(args.summaries, args.plans, args.evidence_root, args.html, args.tables, args.figures,
                  suite, spec, log_path=args.log, attempts_index=index,
                  stats_settings=settings, run_infra=args.run_infra, probes=args.probes,
                  eval_summaries=args.eval_summaries, offered_figures=args.offered_figures)
    print(f"bench report: wrote {args.html}, {args.tables}/, {args.figures}/")
    return 0


def run_paper_sources(args: argparse.Namespace) -> int:
    from ..jobs import job_log
    from ..report.paper import render_paper_sources

    spec, suite, settings, index = _common(args)
    with job_log(args.log):
        written = render_paper_sources(args.summaries, args.plans, args.evidence_root, args.out, suite, spec,
                                       attempts_index=index, stats_settings=settings,
                                       eval_summary_paths=args.eval_summaries, run_infra_paths=args.run_infra,
                                       probe_paths=args.probes)
    print(f"bench paper sources: wrote {len(written)} file(s) under {args.out}/")
    return 0


def run_paper_compile(args: argparse.Namespace) -> int:
    from ..report.paper import PaperBuildError, compile_paper

    try:
        pdf = compile_paper(args.sources, args.out)
    except PaperBuildError as exc:
        print(f"bench paper compile: {exc}", file=sys.stderr)
        return 1
    print(f"bench paper compile: wrote {pdf}")
    return 0

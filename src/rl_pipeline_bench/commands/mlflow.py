"""`bench mlflow export`: every benchmark run, probe and evaluation as an MLflow run (idempotent)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import paths


def register(subparsers) -> None:
    p = subparsers.add_parser("mlflow", help="results in MLflow")
    sub = p.add_subparsers(dest="mlflow_command", required=True, metavar="MLFLOW_COMMAND")
    e = sub.add_parser("export", help=f"log every summary under {paths.RESULTS}/ not yet in the tracking store")
    e.add_argument("--results", type=Path, default=Path(paths.RESULTS), help="results directory to scan")
    e.add_argument("--summaries", nargs="*", type=Path, default=None, metavar="SUMMARY_JSON",
                   help="benchmark summaries to export instead of scanning")
    e.add_argument("--eval-summaries", nargs="*", type=Path, default=None, metavar="EVAL_SUMMARY_JSON")
    e.add_argument("--probe-summaries", nargs="*", type=Path, default=None, metavar="PROBE_SUMMARY_JSON")
    e.add_argument("--uri", default=None, help=f"tracking URI (default: SQLite under {paths.MLFLOW_STORE}/)")
    e.add_argument("--experiment", default="RLinf")
    e.add_argument("--record", type=Path, default=None, help="JSON list of exported keys and MLflow run ids")
    e.add_argument("--log", type=Path, default=None)
    e.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    from ..records.atomicfile import atomic_write_json
    from ..jobs import job_log
    from ..tracking import mlflow_export
    from ..tracking.records import BUILDERS, discover

    explicit = {"benchmark": args.summaries, "evaluation": args.eval_summaries, "probe": args.probe_summaries}
    scanning = all(v is None for v in explicit.values())
    if scanning and not args.results.is_dir():  # a mistyped --results is an error, not "0 logged"
        raise FileNotFoundError(2, "no such results directory", str(args.results))
    found = discover(args.results) if scanning else \
        {k: list(v or []) for k, v in explicit.items()}
    uri = args.uri or mlflow_export.default_uri(args.results / Path(paths.MLFLOW_STORE).relative_to(paths.RESULTS))
    mlflow_export.check_server(uri)  # an unreachable server stops before anything is read
    with job_log(args.log):
        records = [BUILDERS[kind](p) for kind in ("benchmark", "probe", "evaluation") for p in found[kind]]
        exported = mlflow_export.export(records, uri, args.experiment)
    if args.record:
        args.record.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(args.record, {"uri": uri, "experiment": args.experiment, "runs": exported})
    count = {a: sum(1 for e in exported if e["action"] == a) for a in ("logged", "replaced", "kept")}
    print(f"bench mlflow export: {count['logged']} logged, {count['replaced']} replaced (summary changed), "
          f"{count['kept']} already there ({uri}, experiment {args.experiment!r})")
    return 0

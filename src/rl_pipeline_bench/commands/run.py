"""`bench run` (one benchmark run), `bench plan` (what a suite would run), `bench write-plan`.

Inside the workflow every command gets `--spec results/specs/{suite}-{hash}.json` (paths.SPEC_FILE), the
settings Snakemake resolved; by hand, without --spec, the spec is resolved from config.yaml,
`--configfile FILE` and `--config KEY=VALUE` the way Snakemake resolves them.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..records.configfile import ConfigError
from .. import paths
from ..paths import CONFIG_PATH, ROOT


def add_config_args(p) -> None:
    """--configfile FILE and --config KEY=VALUE, meaning what they mean to Snakemake."""
    p.add_argument("--configfile", action="extend", nargs="+", type=Path, default=[], metavar="FILE",
                   help="merged over config.yaml key by key, as snakemake --configfile FILE does (repeatable)")
    p.add_argument("--config", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                   help="settings merged over those, as snakemake --config KEY=VALUE does, e.g. suite=comparison or "
                        "'suites={smoke: {trials: 2}}'")


def config_overrides(args) -> dict:
    """The `--config` items of a command as one mapping (settings.overrides.parse_config_items)."""
    from ..settings.overrides import parse_config_items

    return parse_config_items(args.config)


def add_spec_args(p, *, suite: bool = True) -> None:
    """--spec FILE, or --configfile/--config/--suite to resolve one (outside a workflow)."""
    p.add_argument("--spec", type=Path, default=None,
                   help=f"resolved run spec {paths.spec_file('SUITE-HASH')} (the workflow passes it)")
    add_config_args(p)
    if suite:
        p.add_argument("--suite", default=None, help="without --spec: suite name (default: config 'suite')")


def spec_of(args):
    """The RunSpec a command works under: the --spec file, else resolved from the config."""
    from ..settings.spec import load_spec, spec_from_config_file

    if args.spec is not None:
        if args.config or args.configfile:
            raise ConfigError("--spec is a resolved spec: drop --config/--configfile (or drop --spec)")
        spec = load_spec(args.spec)
        if getattr(args, "suite", None) not in (None, spec.suite_name):
            raise SystemExit(f"bench: --suite {args.suite} contradicts spec {spec.id} (suite {spec.suite_name})")
        return spec
    return spec_from_config_file(CONFIG_PATH, getattr(args, "suite", None), config_overrides(args),
                                 args.configfile)


def quiet_libraries() -> None:
    """A run's terminal and log carry its own progress lines: no library progress bars, no deprecation
    notices a user cannot act on (transformers about peft's use of its API)."""
    import os
    import warnings

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # read when huggingface_hub/transformers load
    warnings.filterwarnings("ignore", message=r"`is_gradient_checkpointing` is deprecated", category=FutureWarning)


def cmd_run(args) -> int:
    quiet_libraries()
    from ..runs.runner import execute_run

    if (args.backend is None) != (args.workload is None):
        raise ConfigError("run: give both --backend and --workload (one run), or neither (the whole suite, "
                          "through the workflow: bench run --suite NAME [--gpus SET])")
    if args.backend is None or args.gpus is not None:
        from ..runs.workflow_launch import run_through_workflow, suite_of_run

        args.suite = suite_of_run(args, config_overrides(args))
        return run_through_workflow(args, spec_of(args))
    spec = spec_of(args)
    if args.dry_run:
        raise ConfigError("run: --dry-run applies to the workflow forms (--suite alone, or --gpus)")
    if args.suite is None and args.spec is None and args.backend not in spec.backends:
        from ..runs.workflow_launch import suite_of_run

        args.suite = suite_of_run(args, config_overrides(args))
        if args.suite is not None:  # the run is another suite's: say which, and how that suite runs it
            gpus = int(spec_of(args).settings["gpus"])
            how = f" --gpus {','.join(map(str, range(gpus)))}" if gpus else ""
            raise ConfigError(f"backend '{args.backend}' is not in the config's suite {spec.suite_name} "
                              f"(its backends: {', '.join(spec.backends)}); it runs in suite {args.suite}: "
                              f"bench run --suite {args.suite} --backend {args.backend} --workload {args.workload}{how}")
    model_record = args.model_record or paths.model_record(spec.settings["model"]["name"], ROOT)
    return execute_run(
        spec, args.backend, args.workload, args.trial,
        model_record=Path(model_record), plan_path=args.plan, run_json=args.run_json,
        recipe_record=args.recipe_record, source_record=args.source_record, image_record=args.image_record,
        evidence_dir_root=args.evidence_root, attempts_index=args.attempts_index, run_id=args.run_id,
        replace_run_json=args.replace_run_json,
    )


def plan_runs(spec) -> list[dict]:
    """The spec's runs (paths.run_targets, trials as asked now) as `bench plan` lists them, each with its run.json target."""
    return [{"suite": spec.suite_name, **t._asdict(), "target": paths.RUN_RECORD.format(**t._asdict())}
            for t in paths.run_targets(spec.id, spec.backends, spec.workloads, spec.trials)]


def cmd_plan(args) -> int:
    spec = spec_of(args)
    runs = plan_runs(spec)
    probes = [str(p) for p in paths.probe_records(spec.id)]
    if args.json:
        print(json.dumps({"suite": spec.suite_name, "spec": spec.doc, "runs": runs, "probes": probes}, indent=2))
        return 0
    s = spec.settings
    print(f"suite {spec.suite_name}, spec {spec.id}: {(spec.doc['about'].get('description') or '').strip()}")
    print(f"  backends={','.join(s['backends'])} runtime={s['runtime']} device={s['device']} gpus={s['gpus']} "
          f"trials={spec.trials} model={s['model']['name']}")
    print("  scale: " + ", ".join(f"{w}={v:g}" for w, v in s["workload_scale"].items()))
    print(f"  contract: {spec.contract.describe()}; {spec.extra_offered_updates} more updates offered, never trained")
    print(f"  spec file: {paths.spec_file(spec.id)}")
    for r in runs:
        print(f"  {r['backend']:<10} {r['workload']:<18} trial{r['trial']}  -> {r['target']}")
    print("  probes: " + " ".join(probes))
    return 0


def cmd_write_plan(args) -> int:
    from ..plan.workloads import spec_plan, write_plan

    spec = spec_of(args)
    ws, plan, meta = spec_plan(spec, args.workload)
    write_plan(plan, args.output, meta)
    if args.offered_figure:  # depends on the plan alone: drawn here once, embedded by every report
        from ..report.figures import write_offered_figure

        write_offered_figure(plan, args.workload, args.offered_figure)
    print(f"wrote {args.output}: workload={ws.name} spec={spec.id} scale={ws.scale:g} seed={meta['seed']} "
          f"updates={meta['n_updates']} (trained {meta['trained_updates']}) rows={len(plan)} "
          f"trajectories/update={ws.trajectories_per_update}")
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "run", help="run one benchmark (fresh evidence directory every time), or a suite through the workflow",
        description="With --backend and --workload: one run here, now, in a fresh evidence directory. "
                    "With --gpus SET as well: that run through the workflow, leased on SET as the run rule leases. "
                    "With neither: the whole suite through the workflow (every run serially, stopping at the first "
                    f"failure, then the report), like `snakemake --cores 1 {paths.REPORT_HTML} --config suite=NAME`.")
    add_spec_args(p)
    p.add_argument("--backend", default=None, help="a registered backend of the suite (omit both it and --workload "
                                                   "to run the whole suite)")
    p.add_argument("--workload", default=None)
    p.add_argument("--gpus", default=None, metavar="SET",
                   help="GPU indices or UUIDs, e.g. 0,1,2,3: run through the workflow, leased on this set "
                        "(it becomes the suite's gpu_sets)")
    p.add_argument("--dry-run", action="store_true",
                   help="with the workflow forms: show what Snakemake would run, and each command, without running")
    p.add_argument("--trial", type=int, default=1)
    p.add_argument("--model-record", type=Path, default=None, help=paths.MODEL_RECORD)
    p.add_argument("--plan", type=Path, default=None, help="offered plan parquet of this spec (computed if absent)")
    p.add_argument("--run-json", type=Path, default=None,
                   help="where to write run.json on success; an existing one is refused (see --replace-run-json)")
    p.add_argument("--replace-run-json", action="store_true",
                   help=f"replace an existing --run-json (its earlier run's evidence stays in {paths.EVIDENCE_ROOT}/)")
    p.add_argument("--recipe-record", type=Path, default=None)
    p.add_argument("--source-record", type=Path, default=None)
    p.add_argument("--image-record", type=Path, default=None)
    p.add_argument("--evidence-root", type=Path, default=None, help=f"default: {paths.EVIDENCE_ROOT}")
    p.add_argument("--attempts-index", type=Path, default=None,
                   help="attempts index to append to (default: attempts.jsonl beside the evidence root)")
    p.add_argument("--run-id", default=None,
                   help="use this run id (a container run's host passes the one it chose; default: a fresh one)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("plan", help="list the runs a suite contains, its spec id and its contract")
    add_spec_args(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("write-plan", help="write one workload's offered plan of a spec (the workload_plan rule)")
    add_spec_args(p)
    p.add_argument("--workload", required=True)
    p.add_argument("--output", type=Path, required=True, help=f"the plan file to write ({paths.plan_file('SPEC', 'WORKLOAD')})")
    p.add_argument("--offered-figure", type=Path, default=None,
                   help=f"also draw the offered-length figure (PNG) here ({paths.offered_figure('SPEC', 'WORKLOAD')})")
    p.set_defaults(func=cmd_write_plan)

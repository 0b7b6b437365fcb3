"""`bench eval`: task-quality evaluation (spec, run, summarize, tasks, checkpoints).

The workflow's eval rules call these; every job reads the resolved eval spec file,
never config.yaml on its own. Paths a user brings (assets, checkpoints, a policy
entry point) arrive as options.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .. import paths


def register(subparsers) -> None:
    p = subparsers.add_parser("eval", help="task-quality evaluation (LIBERO, RoboTwin, robosuite smoke)")
    sub = p.add_subparsers(dest="eval_command", required=True, metavar="EVAL_COMMAND")

    s = sub.add_parser("spec", help="resolve an eval suite's protocol settings into a hashed spec file")
    s.add_argument("--suite", required=True)
    s.add_argument("--settings-json", default=None,
                   help="the eval suite's settings as JSON (the workflow passes its resolved config); default: config.yaml")
    s.add_argument("--seed", type=int, default=None, help="top-level seed (default: config.yaml's)")
    s.add_argument("--expect-hash", default=None, help="refuse if the settings hash differs (the target's name)")
    s.add_argument("--output", type=Path, default=None, help="spec file (default: print)")
    s.set_defaults(func=cmd_spec)

    r = sub.add_parser("run", help="play every episode of one run of one policy; writes fresh evidence")
    r.add_argument("--spec", type=Path, required=True)
    r.add_argument("--policy", required=True, help="built-in policy name or checkpoint id")
    r.add_argument("--run", type=int, required=True, help="run number, 1-based")
    r.add_argument("--checkpoint", default=None, help="checkpoint directory behind --policy")
    r.add_argument("--entry-point", default=None, help="module:function building a Policy from a checkpoint path")
    r.add_argument("--libero-assets", default=None)
    r.add_argument("--robotwin-assets", default=None)
    r.add_argument("--workers", type=int, default=None, help="episode worker processes (default: the spec's)")
    r.add_argument("--evidence-root", type=Path, default=Path(paths.EVAL_EVIDENCE_ROOT))
    r.add_argument("--pointer", type=Path, default=None, help="eval.json to write, pointing at the evidence")
    r.add_argument("--log", type=Path, default=None, help="job log file (default: stderr)")
    r.set_defaults(func=cmd_run)

    m = sub.add_parser("summarize", help="success rates over runs from the evidence the eval.json files point at")
    m.add_argument("--spec", type=Path, required=True)
    m.add_argument("--policy", required=True)
    m.add_argument("--runs", nargs="+", type=Path, required=True, metavar="EVAL_JSON")
    m.add_argument("--output", type=Path, required=True)
    m.add_argument("--log", type=Path, default=None)
    m.set_defaults(func=cmd_summarize)

    t = sub.add_parser("tasks", help="list an eval suite's tasks and scenarios from the installed benchmark package")
    t.add_argument("--suite", required=True)
    t.set_defaults(func=cmd_tasks)

    c = sub.add_parser("checkpoints", help="checkpoints (global_step_*) under a directory, with their eval ids")
    c.add_argument("directory", type=Path)
    c.set_defaults(func=cmd_checkpoints)


def _spec_from_config(suite: str, settings_json: str | None, seed: int | None) -> dict:
    from ..settings.config import load_config
    from ..eval import spec as eval_spec

    config = load_config()
    if settings_json is not None:
        config = dict(config)
        try:
            settings = json.loads(settings_json)
        except ValueError as exc:
            from ..settings.config import ConfigError

            raise ConfigError(f"--settings-json is not JSON: {exc}") from None
        config["eval_suites"] = {**(config.get("eval_suites") or {}), suite: settings}
    if seed is not None:
        config["seed"] = seed
    return eval_spec.resolve(config, suite)


def cmd_spec(args: argparse.Namespace) -> int:
    from ..records.configfile import ConfigError
    from ..records.atomicfile import atomic_write_json

    spec = _spec_from_config(args.suite, args.settings_json, args.seed)
    if args.expect_hash and args.expect_hash != spec["hash"]:
        raise ConfigError(f"eval suite '{args.suite}': settings hash {spec['hash']} differs from the "
                          f"target's {args.expect_hash}")
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(args.output, spec)
        print(f"bench eval spec: wrote {args.output} (hash {spec['hash']})")
    else:
        print(json.dumps(spec, indent=2))
    return 0


def _user_config(args) -> dict:
    from ..records.configfile import ConfigError
    from ..eval.policies.loader import checkpoint_id

    config = {"libero_assets": args.libero_assets, "robotwin_assets": args.robotwin_assets,
              "eval_policy_entry_point": args.entry_point, "eval_checkpoint": args.checkpoint}
    if args.checkpoint and checkpoint_id(args.checkpoint) != args.policy:
        raise ConfigError(f"--checkpoint {args.checkpoint} has eval id {checkpoint_id(args.checkpoint)}, "
                          f"not --policy {args.policy}")
    return config


def cmd_run(args: argparse.Namespace) -> int:
    from ..eval import spec as eval_spec
    from ..eval.envs import EnvUnavailable
    from ..eval.runner import run_evaluation
    from ..jobs import job_log

    try:
        with job_log(args.log):
            spec = eval_spec.load(args.spec)
            directory = run_evaluation(spec, _user_config(args), args.policy, args.run, args.evidence_root,
                                       pointer=args.pointer, workers=args.workers)
    except EnvUnavailable as exc:
        print(f"bench eval run: {exc}", file=sys.stderr)
        return 3
    print(directory)
    return 0


def cmd_summarize(args: argparse.Namespace) -> int:
    from ..eval.summary import summarize_runs
    from ..jobs import job_log

    with job_log(args.log):
        summary = summarize_runs(args.spec, args.policy, args.runs, args.output)
    print(f"bench eval summarize: {args.output} (overall success "
          f"{summary['overall']['success_rate_mean'] if summary['overall'] else None}, complete={summary['complete']})")
    return 0


def cmd_tasks(args: argparse.Namespace) -> int:
    from ..settings.config import load_config
    from ..eval import envs, spec as eval_spec

    config = load_config()
    spec = eval_spec.resolve(config, args.suite)
    tasks = envs.list_tasks(spec, config)
    for t in tasks:
        print(f"{t.suite_task}\t{t.task_index}\t{t.task}\t{spec['max_steps'][t.suite_task]} steps")
    print(f"{len(tasks)} tasks x {spec['scenarios_per_task']} scenarios x {spec['runs']} runs", file=sys.stderr)
    return 0


def cmd_checkpoints(args: argparse.Namespace) -> int:
    from ..eval.policies.loader import checkpoint_id
    from ..eval.schedule import find_checkpoints

    for p in find_checkpoints(args.directory):
        print(f"{checkpoint_id(p)}\t{p}")
    return 0

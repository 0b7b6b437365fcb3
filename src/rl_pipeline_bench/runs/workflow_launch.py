"""The original launcher's `bench run` forms, answered by the workflow itself.

Users of rl-systems-bench type `bench run --suite comparison --gpus 0,1,2,3` (the
whole suite, serially, stopping on the first failure) and `bench run --backend art
--workload multi_turn --gpus 0,1,2,3` (one run on that GPU set). Both become one
Snakemake call on the same targets a user would ask for (the report; one run's
summary), so they plan, preflight, lease and record exactly as the workflow does: the
GPU set becomes the suite's `gpu_sets` (not hashed: the spec id stays the same) and the
lease the run rule takes is `bench lease run --gpus SET`. The default profile keeps
runs serial (one `bench_slot`) and Snakemake stops at the first failed job.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from .. import paths
from ..records.configfile import ConfigError, check_member
from ..paths import CONFIG_PATH, ROOT

#: What the whole suite is asked for (rules/report.smk): every run, summary, probe and the report.
SUITE_TARGET = paths.REPORT_HTML


def suite_of_run(args, overrides: dict) -> str | None:
    """The suite of `--backend B --workload W` without --suite: the config's suite when it has that run,
    else the one suite that has it (the original launcher's runs were the comparison's)."""
    if args.suite is not None or args.spec is not None or args.backend is None:
        return args.suite
    from ..settings.config import load_config

    config = load_config(CONFIG_PATH, overrides, args.configfile)
    suites = config["suites"]

    def has_run(name: str) -> bool:
        return args.backend in suites[name]["backends"] and args.workload in suites[name]["workloads"]

    if has_run(config["suite"]):
        return config["suite"]
    candidates = [name for name in suites if has_run(name)]
    return candidates[0] if len(candidates) == 1 else None


def gpu_settings(suite_name: str, suite_gpus: int, gpus: str) -> tuple[str, list[str]]:
    """The `--config` item and `--resources` that put every GPU job of the suite on the GPU set `gpus`."""
    devices = [d.strip() for d in gpus.split(",") if d.strip()]
    if suite_gpus == 0:
        raise ConfigError(f"suite {suite_name} runs on CPU (gpus: 0): drop --gpus")
    if len(devices) != suite_gpus or len(set(devices)) != len(devices):
        raise ConfigError(f"--gpus {gpus} names {len(set(devices))} distinct device(s); "
                          f"suite {suite_name} runs on {suite_gpus}")
    gpu_set = ",".join(devices)
    return f'suites={{{suite_name}: {{gpu_sets: ["{gpu_set}"]}}}}', ["--resources", f"gpu={suite_gpus}"]


def snakemake_argv(targets: list[str], spec, args) -> list[str]:
    """The Snakemake command for `targets` under the same config, overrides and GPU set as `args`."""
    argv = [sys.executable, "-m", "snakemake", "--cores", "1", *targets]
    for f in args.configfile:
        argv += ["--configfile", str(f)]
    config = [f"suite={spec.suite_name}", *args.config]  # one --config: Snakemake keeps only the last one given
    resources: list[str] = []
    if args.gpus:
        item, resources = gpu_settings(spec.suite_name, int(spec.settings["gpus"]), args.gpus)
        config.append(item)
    argv += ["--config", *config, *resources]
    if args.dry_run:
        argv += ["--dry-run", "--printshellcmds"]
    return argv


#: `bench run` options of a direct run that the workflow sets itself (rules/runs.smk).
_DIRECT_RUN_ONLY = ("model_record", "plan", "run_json", "replace_run_json", "recipe_record", "source_record",
                    "image_record", "evidence_root", "attempts_index", "run_id")


def _refuse_outside_workflow(args) -> None:
    given = [f"--{name.replace('_', '-')}" for name in _DIRECT_RUN_ONLY if getattr(args, name)]
    if given:
        raise ConfigError(f"run: {', '.join(given)} apply to a direct run (--backend and --workload without --gpus); "
                          "the workflow sets them itself")
    if args.spec is not None:
        raise ConfigError("run: --spec is for a single run inside the workflow; "
                          "drop it (the workflow resolves the spec from the config)")


def run_through_workflow(args, spec) -> int:
    """`bench run --suite S [--gpus SET]` or `bench run --backend B --workload W --gpus SET`."""
    _refuse_outside_workflow(args)
    if args.backend is not None:
        check_member("backend", args.backend, spec.backends)
        check_member("workload", args.workload, spec.workloads)
        if not 1 <= args.trial <= spec.trials:  # the workflow plans trials 1..trials of this config
            raise ConfigError(f"trial {args.trial} is outside 1..{spec.trials} for suite {spec.suite_name}")
    if args.backend is None:
        argv = snakemake_argv([SUITE_TARGET], spec, args)
    else:
        run_dir = paths.run_dir(spec.id, args.backend, args.workload, args.trial)
        argv = snakemake_argv([f"{run_dir}/run.json", f"{run_dir}/summary.json"], spec, args)
        if os.path.lexists(ROOT / run_dir / "run.json"):
            raise ConfigError(f"{run_dir}/run.json exists (an earlier run); to run it again, delete it first "
                              "(README: Re-running a benchmark)")
    # Shell rules call `bench`, which sits beside this interpreter.
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    print(f"bench: {shlex.join(['snakemake', *argv[3:]])}", file=sys.stderr, flush=True)
    return subprocess.run(argv, cwd=ROOT, env=env).returncode

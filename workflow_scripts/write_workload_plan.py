"""Write one workload's offered plan to parquet (results/workloads/{suite}/{workload}.parquet),
and the figure of its offered length distributions beside it ({workload}.offered.png).

Run by Snakemake as a `script:` (uses the injected `snakemake` object: config,
wildcards.workload, output.plan / output.offered_figure, log[0], params.suite / scale /
n_updates, each param optional), or by hand for debugging:

    uv run python workflow_scripts/write_workload_plan.py --workload multi_turn --suite smoke --output /tmp/plan.parquet

The logic lives in rl_pipeline_bench.workloads; this file only wires arguments.
"""

# No `from __future__` import: Snakemake prepends its own preamble to `script:` files.
import argparse
import sys
import traceback
from pathlib import Path


def write(config: dict, workload: str, output: str, suite=None, scale=None, n_updates=None, log=None,
          offered_figure=None) -> None:
    from rl_pipeline_bench.config import validate_config
    from rl_pipeline_bench.workloads import suite_plan, write_plan

    config = validate_config(config)
    spec, plan, meta = suite_plan(config, workload, suite=suite, scale=scale, n_updates=n_updates)
    write_plan(plan, output, meta)
    if offered_figure:
        from rl_pipeline_bench.report.figures import write_offered_figure

        write_offered_figure(plan, workload, offered_figure)
    line = (
        f"wrote {output}: workload={spec.name} suite={meta['suite']} scale={spec.scale} seed={meta['seed']} "
        f"updates={meta['n_updates']} rows={len(plan)} trajectories/update={spec.trajectories_per_update}\n"
    )
    if log:
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        Path(log).write_text(line)
    sys.stderr.write(line)


def _from_snakemake(sm) -> None:
    params = sm.params
    log = sm.log[0] if len(sm.log) else None
    try:
        write(
            dict(sm.config), sm.wildcards.workload, sm.output.plan,
            suite=getattr(params, "suite", None), scale=getattr(params, "scale", None),
            n_updates=getattr(params, "n_updates", None), log=log,
            offered_figure=getattr(sm.output, "offered_figure", None),
        )
    except Exception:
        if log:  # Snakemake shows the log of a failed job; put the reason there
            Path(log).parent.mkdir(parents=True, exist_ok=True)
            Path(log).write_text(traceback.format_exc())
        raise


def main(argv=None) -> int:
    from rl_pipeline_bench.config import ConfigError, load_config
    from rl_pipeline_bench.paths import CONFIG_PATH

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--suite", default=None, help="suite whose scale and contract apply (default: the config's suite)")
    p.add_argument("--config", type=Path, default=CONFIG_PATH)
    p.add_argument("--scale", type=float, default=None, help="override the suite's scale")
    p.add_argument("--n-updates", type=int, default=None, help="override warmup + measured updates")
    p.add_argument("--offered-figure", default=None, help="also draw the offered-length figure (PNG) here")
    args = p.parse_args(argv)
    try:
        write(load_config(args.config), args.workload, args.output, args.suite, args.scale, args.n_updates,
              offered_figure=args.offered_figure)
    except ConfigError as e:
        print(f"write_workload_plan: {e}", file=sys.stderr)
        return 2
    return 0


if "snakemake" in globals():
    _from_snakemake(snakemake)  # noqa: F821 (injected by Snakemake)
elif __name__ == "__main__":
    sys.exit(main())

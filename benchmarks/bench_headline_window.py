"""Does the headline window measure steady state? Smoke runs with and without extra offered work.

Runs the smoke suite in a fresh clone twice through the real pipeline, once with
`extra_offered_updates: 0` (the plan ends at the last trained update: generation runs
dry before the window ends) and once with the default (the staleness limit), and prints
per run the headline and measured-window rates, the rollout's activity in the headline
window (busy share there and before it, calls finished, idle tail) and the warnings.
Evidence for the README's "headline window" decision; not part of the tests.

    uv run python benchmarks/bench_headline_window.py [--workloads long_generation,tool_history] [--trials 2]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_smoke import ROOT, fresh_clone, snakemake  # noqa: E402

from rl_pipeline_bench import paths  # noqa: E402

VARIANTS = {"extra=0": "    contract: {{warmup_updates: 5, measured_updates: 15, headline_updates: 5, extra_offered_updates: 0}}\n",
            "extra=default": ""}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="long_generation,tool_history")
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--keep", type=Path, default=None, help="clone here and keep it (default: a temp dir)")
    args = parser.parse_args()
    base, workdir = fresh_clone(args.keep, "rl-bench-window-")
    rows = []
    for name, contract in VARIANTS.items():
        override = workdir / f"{name.replace('=', '-')}.yaml"
        override.write_text(f"suites:\n  smoke:\n    workloads: [{args.workloads}]\n    trials: {args.trials}\n"
                            + contract.format())
        pipeline_s = snakemake(workdir, paths.REPORT_HTML, "--configfile", str(override))
        print(f"{name}: pipeline {pipeline_s:.0f} s", flush=True)
        specs = sorted(glob.glob(str(paths.spec_file("smoke-*", workdir))), key=os.path.getmtime)
        spec = Path(specs[-1]).stem
        for path in sorted(glob.glob(str(workdir / paths.RUN_SUMMARY.format(spec=spec, backend="*", workload="*", trial="*")))):
            s = json.loads(Path(path).read_text())
            h, m, a = s["e2e"]["headline"], s["e2e"]["measured"], s["rollout"]["headline"]
            rows.append((name, s["workload"], s["trial"], s["valid"], h["trajectories_per_s"], m["trajectories_per_s"],
                         h["window_s"], a["busy_share"], a["steady_busy_share"], a["calls_finished"], a["idle_tail_s"],
                         ",".join(w.split(":")[0] for w in s["warnings"]) or "-"))
    print()
    print("variant        workload          trial valid  head/s  meas/s  head/meas  window_s  busy  busy_before"
          "  calls_in_window  idle_tail_s  warnings")
    def pct(v):
        return "-" if v is None else f"{v:.0%}"

    for r in rows:
        print(f"{r[0]:<14} {r[1]:<17} {r[2]:>5} {str(r[3]):<5} {r[4]:7.3f} {r[5]:7.3f} {r[4] / r[5]:9.2f} {r[6]:9.2f}"
              f" {pct(r[7]):>5} {pct(r[8]):>11} {r[9]:16d} {r[10]:12.3f}  {r[11]}")
    if args.keep is None:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

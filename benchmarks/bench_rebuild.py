"""Report rebuild cost of two commits, side by side: `rm -rf reports && snakemake reports/comparison.html`.

Target (issue 9): the run spec, attempts index and trial statistics may grow the smoke
report's rebuild by at most 20 %. Clones this repository once per commit (default: the
last commit before issue 9, and HEAD), runs the default smoke pipeline in each so both
have their own evidence, then times the rebuild alternately (before, after, before, ...)
so both see the same machine load, and prints every timing, the medians, the growth and
the load average. Each clone runs its own code (bench_smoke.clone_env). Not a test.

    uv run python benchmarks/bench_rebuild.py [--before 4c1cac8] [--after HEAD] [--repeats 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_smoke import ROOT, snakemake  # noqa: E402
from verdict import MISSED, mean_verdict  # noqa: E402

TARGET_GROWTH = 0.20


def clone_at(rev: str, workdir: Path) -> str:
    subprocess.run(["git", "clone", "--quiet", "--local", str(ROOT), str(workdir)], check=True)
    subprocess.run(["git", "-C", str(workdir), "checkout", "--quiet", rev], check=True)
    return subprocess.run(["git", "-C", str(workdir), "rev-parse", "--short", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()


def load() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="4c1cac8", help="commit before the change (default: before issue 9)")
    parser.add_argument("--after", default="HEAD", help="commit with the change (default: HEAD)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", type=Path, default=None,
                        help="clone here and keep it; clones kept there from an earlier call are reused (default: a temp dir)")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="rl-bench-rebuild-"))
    clones = {}
    for label, rev in (("before", args.before), ("after", args.after)):
        workdir = base / label
        if (workdir / "reports/comparison.html").is_file():  # a kept clone whose pipeline ran: time only
            commit = subprocess.run(["git", "-C", str(workdir), "rev-parse", "--short", "HEAD"], check=True,
                                    capture_output=True, text=True).stdout.strip()
            print(f"{label} ({commit}): reusing {workdir}", flush=True)
        else:
            commit = clone_at(rev, workdir)
            pipeline_s = snakemake(workdir, "reports/comparison.html")
            print(f"{label} ({commit}): smoke pipeline {pipeline_s:.0f} s; load average {load()}", flush=True)
        clones[label] = (commit, workdir)
    times: dict[str, list[float]] = {label: [] for label in clones}
    for i in range(args.repeats):
        for label, (_commit, workdir) in clones.items():
            shutil.rmtree(workdir / "reports")
            times[label].append(snakemake(workdir, "reports/comparison.html"))
            print(f"  rebuild {i + 1} {label}: {times[label][-1]:.1f} s (load average {load()})", flush=True)
    med = {label: statistics.median(t) for label, t in times.items()}
    growth = med["after"] / med["before"] - 1
    for label, (commit, _w) in clones.items():
        print(f"{label} ({commit}): median rebuild {med[label]:.1f} s of {', '.join(f'{t:.1f}' for t in times[label])}")
    # Each round times both commits back to back: its ratio is one repeat of the growth.
    v = mean_verdict([a / b - 1 for a, b in zip(times["after"], times["before"])], TARGET_GROWTH)
    print(f"growth of the medians: {growth:+.0%}; per round: {v.text('{:+.1%}')}; cores={os.cpu_count()}, "
          f"load average {load()}")
    if args.keep is None:
        shutil.rmtree(base, ignore_errors=True)
    return 1 if v.status == MISSED else 0


if __name__ == "__main__":
    sys.exit(main())

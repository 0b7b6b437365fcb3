"""Time the newcomer's path: fresh clone -> rendered smoke report, then a report rebuild.

Targets (issue 2): fresh clone to report <= 300 s on a 2-core machine (model build
included, install excluded: it reuses this environment), and rebuilding
reports/comparison.html from existing evidence <= 10 s. Prints the figures; exits 1
if a target is missed so it can gate a release, but it is not part of the tests.

    uv run python benchmarks/bench_smoke.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rl_pipeline_bench import paths

ROOT = Path(__file__).resolve().parents[1]
TARGET_PIPELINE_S = 300.0
TARGET_REBUILD_S = 10.0


def clone_env(workdir: Path) -> dict[str, str]:
    """Environment that runs the clone's own workflow and package with this interpreter."""
    env = dict(os.environ, RL_BENCH_ROOT=str(workdir))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    # The environment's editable install points at this checkout's src/; the clone's own
    # package must win, or a clone of another commit would run today's code.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(workdir / "src"), env.get("PYTHONPATH")]))
    return env


def snakemake(workdir: Path, *args: str) -> float:
    """Seconds one `snakemake --cores 1 ARGS` takes in `workdir`; exits naming the failure."""
    env = clone_env(workdir)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", *args], cwd=workdir, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-4000:]}")
    return elapsed


def fresh_clone(keep: Path | None, prefix: str) -> tuple[Path, Path]:
    """Clone HEAD into KEEP/clone (or a new temp dir): every benchmark measures a fresh checkout."""
    base = keep or Path(tempfile.mkdtemp(prefix=prefix))
    workdir = base / "clone"
    subprocess.run(["git", "clone", "--quiet", "--local", str(ROOT), str(workdir)], check=True)
    print(f"fresh clone of {ROOT} (HEAD) at {workdir}; cores={os.cpu_count()}", flush=True)
    return base, workdir


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, default=None, help="clone here and keep it (default: a temp dir)")
    args = parser.parse_args()
    base, workdir = fresh_clone(args.keep, "rl-bench-smoke-")

    pipeline_s = snakemake(workdir, paths.REPORT_HTML)
    print(f"fresh clone -> {paths.REPORT_HTML} (smoke suite): {pipeline_s:.1f} s (target <= {TARGET_PIPELINE_S:.0f} s)")

    shutil.rmtree(workdir / "reports")
    rebuild_s = snakemake(workdir, paths.REPORT_HTML)
    print(f"rebuild {paths.REPORT_HTML} from existing evidence: {rebuild_s:.1f} s (target <= {TARGET_REBUILD_S:.0f} s)")

    # Where the rebuild time goes: Snakemake's own start-up and DAG (nothing to do),
    # and the report command alone (interpreter, pandas/matplotlib imports, rendering).
    noop_s = snakemake(workdir, paths.REPORT_HTML)
    print(f"  of which: snakemake start-up + DAG with nothing to do: {noop_s:.1f} s")
    env = clone_env(workdir)
    start = time.perf_counter()
    (spec,) = sorted(workdir.glob(str(paths.spec_file("smoke-*"))))
    subprocess.run([sys.executable, "-m", "rl_pipeline_bench.cli", "report", "--spec", str(spec),
                    "--summaries", *map(str, sorted(workdir.glob(paths.RUN_SUMMARY.format(spec=spec.stem, backend="*", workload="*", trial="*")))),
                    "--plans", *map(str, sorted(workdir.glob(str(paths.plan_file(spec.stem, "*"))))),
                    "--evidence-root", str(paths.evidence_root(workdir)), "--html", str(base / "direct/comparison.html"),
                    "--tables", str(base / "direct/tables"), "--figures", str(base / "direct/figures")],
                   cwd=workdir, env=env, check=True, capture_output=True)
    print(f"  of which: `bench report` alone (same inputs, fresh interpreter): {time.perf_counter() - start:.1f} s")

    with open(workdir / paths.REPORT_TABLES / "headline.csv", newline="") as fh:
        for row in csv.reader(fh):
            print("  headline.csv:", ",".join(row))
    if args.keep is None:
        shutil.rmtree(base, ignore_errors=True)
    return 0 if pipeline_s <= TARGET_PIPELINE_S and rebuild_s <= TARGET_REBUILD_S else 1


if __name__ == "__main__":
    sys.exit(main())

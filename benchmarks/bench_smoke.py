"""Time the newcomer's path: fresh clone -> rendered smoke report, then a report rebuild.

Targets (issue 2): fresh clone to report <= 300 s on a 2-core machine (model build
included, install excluded: it reuses this environment), and rebuilding
reports/comparison.html from existing evidence <= 10 s. Prints the figures with a
verdict from their repeats (benchmarks/verdict.py: one pipeline run resolves nothing;
`--pipeline-repeats` clones again); exits 1 if a target is missed so it can gate a
release, but it is not part of the tests.

    uv run python benchmarks/bench_smoke.py [--keep DIR] [--pipeline-repeats N] [--rebuild-repeats N]
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

sys.path.insert(0, str(Path(__file__).parent))
from verdict import MISSED, mean_verdict  # noqa: E402

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
    parser.add_argument("--pipeline-repeats", type=int, default=1, help="fresh clones timed (default 1)")
    parser.add_argument("--rebuild-repeats", type=int, default=3, help="report rebuilds timed (default 3)")
    args = parser.parse_args()
    pipeline = []
    for i in range(args.pipeline_repeats):
        base, workdir = fresh_clone(args.keep / f"clone{i + 1}" if args.keep and args.pipeline_repeats > 1 else args.keep,
                                    "rl-bench-smoke-")
        pipeline.append(snakemake(workdir, "reports/comparison.html"))
        if i + 1 < args.pipeline_repeats and args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    v_pipeline = mean_verdict(pipeline, TARGET_PIPELINE_S)
    print(f"fresh clone -> reports/comparison.html (smoke suite): {v_pipeline.text('{:.1f}', ' s')}")

    rebuilds = []
    for _ in range(args.rebuild_repeats):
        shutil.rmtree(workdir / "reports")
        rebuilds.append(snakemake(workdir, "reports/comparison.html"))
    v_rebuild = mean_verdict(rebuilds, TARGET_REBUILD_S)
    print(f"rebuild reports/comparison.html from existing evidence: {v_rebuild.text('{:.1f}', ' s')}")

    # Where the rebuild time goes: Snakemake's own start-up and DAG (nothing to do),
    # and the report command alone (interpreter, pandas/matplotlib imports, rendering).
    noop_s = snakemake(workdir, "reports/comparison.html")
    print(f"  of which: snakemake start-up + DAG with nothing to do: {noop_s:.1f} s")
    env = clone_env(workdir)
    start = time.perf_counter()
    (spec,) = sorted(workdir.glob("results/specs/smoke-*.json"))
    subprocess.run([sys.executable, "-m", "rl_pipeline_bench.cli", "report", "--spec", str(spec),
                    "--summaries", *map(str, sorted(workdir.glob(f"results/runs/{spec.stem}/*/*/trial*/summary.json"))),
                    "--plans", *map(str, sorted(workdir.glob(f"results/workloads/{spec.stem}/*.parquet"))),
                    "--evidence-root", str(workdir / "results/evidence"), "--html", str(base / "direct/comparison.html"),
                    "--tables", str(base / "direct/tables"), "--figures", str(base / "direct/figures")],
                   cwd=workdir, env=env, check=True, capture_output=True)
    print(f"  of which: `bench report` alone (same inputs, fresh interpreter): {time.perf_counter() - start:.1f} s")

    with open(workdir / "reports/tables/headline.csv", newline="") as fh:
        for row in csv.reader(fh):
            print("  headline.csv:", ",".join(row))
    if args.keep is None:
        shutil.rmtree(base, ignore_errors=True)
    return 1 if MISSED in (v_pipeline.status, v_rebuild.status) else 0


if __name__ == "__main__":
    sys.exit(main())

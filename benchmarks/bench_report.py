"""Report speed: rebuild from existing evidence, reports over many runs, and planning many runs.

Prints each figure against its target (issue 13), all on the machine it runs on:

- rebuild: `rm -rf reports && snakemake --cores 1 reports/comparison.html` in WORKDIR,
  a checkout whose smoke suite has run (median of --repeat); target <= 10 s. The paper
  report's rebuild (`rm -rf reports/paper*`, `snakemake reports/paper`) is printed beside it.
- scale: `bench report` over N runs of SYNTHESISED evidence: the smoke suite's real
  evidence directories and summaries copied N/4 times each under new run ids and trial
  numbers (tables hard-linked, manifests and summaries rewritten), with their attempts
  index. Wall time and the process's peak RSS; targets 1000 runs <= 10 s, 10 000 runs
  <= 60 s, memory linear in runs.
- planning: `snakemake -n reports/comparison.html` with the smoke suite at trials=250
  (1000 planned runs); target <= 10 s.

Wall and CPU seconds are printed (CPU includes the jobs Snakemake starts), with the load
average: on a shared machine the wall time grows with the load, CPU time much less.
`--shim-scontrol` measures Snakemake without the SLURM executor plugin's start-up call
to `scontrol` (see `scontrol_wait`), for machines with SLURM's client but no controller.

    uv run python benchmarks/bench_report.py --workdir DIR [--runs 1000 10000] [--repeat 3] [--shim-scontrol]

WORKDIR must have run `uv run snakemake --cores 1 reports/comparison.html` (this
checkout by default). Each verdict comes from the repeats' interval (benchmarks/verdict.py;
a figure measured once is "not resolved at this noise"). Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rl_pipeline_bench import paths

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from verdict import MISSED, mean_verdict  # noqa: E402

TARGET_REBUILD_S = 10.0
TARGET_SCALE_S = {1000: 10.0, 10000: 60.0}
TARGET_PLAN_S = 10.0
PLANNED_TRIALS = 250  # x 4 smoke workloads = 1000 planned runs


#: With --shim-scontrol: a directory whose `scontrol` fails at once, put first on PATH.
SHIM_DIR: Path | None = None


def _env(workdir: Path) -> dict[str, str]:
    env = dict(os.environ, RL_BENCH_ROOT=str(workdir))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    if SHIM_DIR is not None:
        env["PATH"] = f"{SHIM_DIR}{os.pathsep}{env['PATH']}"
    return env


def scontrol_wait() -> float | None:
    """Seconds `scontrol show config` takes, or None without SLURM tools.

    snakemake-executor-plugin-slurm runs it when Snakemake loads its plugins, i.e. at
    every `snakemake` start; with SLURM's client installed but no reachable controller it
    waits for the connection to fail (about 9 s here), on a cluster or a machine without
    SLURM it costs nothing.
    """
    if shutil.which("scontrol") is None:
        return None
    start = time.perf_counter()
    subprocess.run(["scontrol", "show", "config"], capture_output=True, timeout=30)
    return time.perf_counter() - start


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, int, float]:
    """(wall seconds, peak RSS in MiB, CPU seconds) of the process; exits naming the command when it fails."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = proc.stdout.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd[:4])} ... failed ({proc.returncode}):\n{out.decode(errors='replace')[-4000:]}")
    return elapsed, usage.ru_maxrss // 1024, usage.ru_utime + usage.ru_stime


def snakemake(workdir: Path, *args: str) -> tuple[float, float]:
    """(wall, CPU) seconds of one Snakemake call, its jobs' processes included."""
    wall, _rss, cpu = timed([sys.executable, "-m", "snakemake", "--cores", "1", *args], workdir, _env(workdir))
    return wall, cpu


def _median(runs: list[tuple[float, float]]) -> str:
    walls, cpus = [w for w, _ in runs], [c for _, c in runs]
    return (f"{statistics.median(walls):.1f} s wall (median of {[round(w, 1) for w in walls]}), "
            f"{statistics.median(cpus):.1f} s CPU")


def smoke_inputs(workdir: Path) -> tuple[Path, list[Path], list[Path]]:
    specs = sorted(workdir.glob(str(paths.spec_file("smoke-*"))))
    if not specs:
        sys.exit(f"{workdir} has no smoke run spec: run `uv run snakemake --cores 1 {paths.REPORT_HTML}` there")
    spec = specs[-1]
    summaries = sorted(workdir.glob(paths.RUN_SUMMARY.format(spec=spec.stem, backend="*", workload="*", trial="*")))
    plans = sorted(workdir.glob(str(paths.plan_file(spec.stem, "*"))))
    if not summaries:
        sys.exit(f"{workdir} has no smoke summaries under {paths.spec_runs_dir(spec.stem)}/")
    return spec, summaries, plans


def synthesise(workdir: Path, n_runs: int, dest: Path) -> list[Path]:
    """n_runs summaries + evidence dirs + attempts index under dest, copied from the smoke runs."""
    from rl_pipeline_bench.evidence.attempts import EVENT_SCHEMA, started_fields

    spec, sources, _plans = smoke_inputs(workdir)
    evidence_root = paths.evidence_root(dest)
    evidence_root.mkdir(parents=True)
    originals = [json.loads(p.read_text()) for p in sources]
    lines, out = [], []
    for i in range(n_runs):
        base = originals[i % len(originals)]
        trial = i // len(originals) + 1
        run_id = f"{base['run_id']}-copy{trial:05d}"
        src_dir = Path(base["evidence_dir"])
        if not src_dir.is_absolute():
            src_dir = workdir / src_dir
        ev = evidence_root / run_id
        ev.mkdir()
        for f in src_dir.iterdir():
            if f.is_file() and f.name != "manifest.json":
                os.link(f, ev / f.name)
        manifest = json.loads((src_dir / "manifest.json").read_text())
        manifest.update(run_id=run_id, trial=trial)
        (ev / "manifest.json").write_text(json.dumps(manifest, sort_keys=True))
        summary = dict(base, run_id=run_id, trial=trial, evidence_dir=str(ev))
        path = dest / paths.RUN_SUMMARY.format(spec=spec.stem, backend=base["backend"], workload=base["workload"], trial=trial)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(summary, sort_keys=True))
        out.append(path)
        for event, fields in (("started", started_fields(manifest, ev)),
                              ("finished", {"status": manifest.get("status"), "finished_at": manifest.get("finished_at")}),
                              ("summarized", {"valid": summary["valid"], "reasons": summary["reasons"]})):
            lines.append(json.dumps({"schema": EVENT_SCHEMA, "event": event, "run_id": run_id, **fields},
                                    sort_keys=True, default=str))
    paths.attempts_index(dest).write_text("\n".join(lines) + "\n")
    return out


def bench_scale(workdir: Path, n_runs: int) -> tuple[float, int, float]:
    spec, _sources, plans = smoke_inputs(workdir)
    with tempfile.TemporaryDirectory(prefix=f"rl-bench-scale{n_runs}-") as tmp:
        dest = Path(tmp)
        t0 = time.perf_counter()
        summaries = synthesise(workdir, n_runs, dest)
        print(f"  synthesised {n_runs} runs (copies of {workdir}'s smoke evidence) in {time.perf_counter() - t0:.1f} s",
              flush=True)
        # As the render_report rule calls it (the plan rule's offered-length figures included);
        # relative paths, as the workflow passes them (10 000 absolute ones come near ARG_MAX).
        rel = [str(p.relative_to(dest)) for p in summaries]
        cmd = [str(Path(sys.executable).parent / "bench"), "report", "--spec", str(spec), "--summaries", *rel,
               "--plans", *map(str, plans), "--offered-figures", *(str(p.with_suffix(".offered.png")) for p in plans),
               "--evidence-root", paths.EVIDENCE_ROOT,
               "--attempts-index", paths.ATTEMPTS_INDEX, "--html", paths.REPORT_HTML,
               "--tables", paths.REPORT_TABLES, "--figures", paths.REPORT_FIGURES]
        return timed(cmd, dest, _env(workdir))


def bench_planning(workdir: Path) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="rl-bench-plan-") as tmp:
        copy = Path(tmp) / "repo"
        shutil.copytree(workdir, copy, symlinks=True, ignore=shutil.ignore_patterns(
            ".venv", ".git", "results", "reports", "logs", ".snakemake", "__pycache__", ".pytest_cache"))
        cfg = Path(tmp) / "many.yaml"
        cfg.write_text(f"suites:\n  smoke:\n    trials: {PLANNED_TRIALS}\n")
        return snakemake(copy, "-n", paths.REPORT_HTML, "--configfile", str(cfg))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=ROOT, help="a checkout whose smoke suite has run")
    parser.add_argument("--runs", type=int, nargs="*", default=[1000, 10000], help="report sizes to time")
    parser.add_argument("--repeat", type=int, default=3, help="rebuild and planning repeats (median)")
    parser.add_argument("--skip", nargs="*", default=[], choices=["rebuild", "scale", "planning"])
    parser.add_argument("--shim-scontrol", action="store_true",
                        help="put a failing `scontrol` first on PATH for Snakemake (a machine with SLURM's client "
                             "but no controller otherwise adds its connection timeout to every Snakemake start)")
    args = parser.parse_args()
    wait = scontrol_wait()
    if wait is not None:
        print(f"scontrol show config: {wait:.1f} s (the SLURM executor plugin runs it at every Snakemake start)"
              + ("; measuring with a failing scontrol shim first on PATH" if args.shim_scontrol else ""))
    if args.shim_scontrol:
        global SHIM_DIR
        SHIM_DIR = Path(tempfile.mkdtemp(prefix="rl-bench-shim-"))
        (SHIM_DIR / "scontrol").write_text("#!/bin/sh\nexit 1\n")
        (SHIM_DIR / "scontrol").chmod(0o755)
    workdir = args.workdir.resolve()
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
          f"workdir {workdir}", flush=True)
    ok = True
    if "rebuild" not in args.skip:
        smoke_inputs(workdir)
        html, paper = [], []
        for _ in range(args.repeat):
            shutil.rmtree(workdir / "reports", ignore_errors=True)
            html.append(snakemake(workdir, paths.REPORT_HTML))
            paper.append(snakemake(workdir, paths.PAPER_DIR))
        v = mean_verdict([w for w, _ in html], TARGET_REBUILD_S)
        ok &= v.status != MISSED
        print(f"rebuild {paths.REPORT_HTML} (rm -rf reports; snakemake): {_median(html)}; wall {v.text('{:.1f}', ' s')}")
        print(f"rebuild {paths.PAPER_DIR} after it (sources + latexmk): {_median(paper)} (no target)", flush=True)
    if "scale" not in args.skip:
        sizes = {}
        for n in args.runs:
            wall, rss, cpu = bench_scale(workdir, n)
            sizes[n] = (wall, rss)
            target = TARGET_SCALE_S.get(n)
            v = mean_verdict([wall], target) if target else None  # one timing: not resolved
            ok &= v is None or v.status != MISSED
            print(f"bench report over {n} runs: {wall:.1f} s wall, {cpu:.1f} s CPU, peak RSS {rss} MiB"
                  + (f"; wall {v.text('{:.1f}', ' s')}" if v else ""), flush=True)
        if len(sizes) >= 2:
            (n0, (_, r0)), (n1, (_, r1)) = sorted(sizes.items())[0], sorted(sizes.items())[-1]
            print(f"  memory per added run: {(r1 - r0) * 1024 / (n1 - n0):.1f} KiB ({n0} -> {n1} runs)")
    if "planning" not in args.skip:
        plans = [bench_planning(workdir) for _ in range(args.repeat)]
        v = mean_verdict([w for w, _ in plans], TARGET_PLAN_S)
        ok &= v.status != MISSED
        print(f"snakemake -n over {PLANNED_TRIALS * 4} planned runs: {_median(plans)}; wall {v.text('{:.1f}', ' s')}")
    load = os.getloadavg()
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

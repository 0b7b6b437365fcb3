"""Harness overhead during a benchmark run: the evidence writer's share of the measured window.

Runs real smoke-suite reference runs (CPU) with the project's EvidenceWriter, timing
every call the pipeline makes into it (add_update, add_calls, add_trainer_interval,
update_manifest, flush, and every record logged to run.log) on the caller's thread,
plus the writer's own background work where it has any. The share is that time,
clipped to the measured window (completion of the last warmup update to completion of
the last update), divided by the window's length. Target (issue 13): <= 1 %.

    uv run python benchmarks/bench_harness.py [--workload multi_turn ...] [--repeat 1]

Needs results/models/<model>.json and the smoke plans:
`uv run snakemake --cores 1 results/models/reference-tiny-qwen3moe.json`.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import threading
import time

from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from verdict import MISSED, mean_verdict  # noqa: E402

TARGET_SHARE = 0.01
TIMED_METHODS = ("add_update", "add_calls", "add_trainer_interval", "update_manifest", "flush")


class Spans:
    """Thread-safe list of (start, end) spans on the writer's clock, by kind."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_kind: dict[str, list[tuple[float, float]]] = {}

    def add(self, kind: str, start: float, end: float) -> None:
        with self.lock:
            self.by_kind.setdefault(kind, []).append((start, end))

    def clipped(self, kind: str, lo: float, hi: float) -> float:
        return sum(max(0.0, min(e, hi) - max(s, lo)) for s, e in self.by_kind.get(kind, []))


def timing_writer_class(spans: Spans):
    """An EvidenceWriter whose public methods and run.log records are timed into `spans`."""
    from rl_pipeline_bench.evidence import store as evidence

    base = evidence.EvidenceWriter

    class TimedWriter(base):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            log_fn = self.logger._log

            @functools.wraps(log_fn)
            def timed_log(*a, **k):
                t, cpu = self.clock(), time.thread_time()
                try:
                    return log_fn(*a, **k)
                finally:
                    spans.add("caller", t, self.clock())
                    spans.add("caller_cpu", t, t + (time.thread_time() - cpu))

            self.logger._log = timed_log

    if hasattr(base, "_write_parts"):  # the writer's own thread: off the critical path, timed apart
        write_parts = base._write_parts

        def timed_parts(self, *a, **k):
            t, cpu = self.clock(), time.thread_time()
            try:
                return write_parts(self, *a, **k)
            finally:
                end = self.clock()
                spans.add("background", t, end)
                spans.add("background_cpu", t, t + (time.thread_time() - cpu))

        TimedWriter._write_parts = timed_parts

    def timed(name):
        fn = getattr(base, name)

        @functools.wraps(fn)
        def wrapper(self, *a, **k):
            t, cpu = self.clock(), time.thread_time()
            try:
                return fn(self, *a, **k)
            finally:
                spans.add("caller", t, self.clock())
                spans.add("caller_cpu", t, t + (time.thread_time() - cpu))

        return wrapper

    for name in TIMED_METHODS:
        setattr(TimedWriter, name, timed(name))
    return TimedWriter


def one_run(spec, workload: str, model_record: Path, plan: Path, root: Path) -> dict:
    from rl_pipeline_bench.runs import runner
    from rl_pipeline_bench.evidence.store import read_evidence

    spans = Spans()
    original = runner.EvidenceWriter
    runner.EvidenceWriter = timing_writer_class(spans)
    try:
        rc = runner.execute_run(spec, "reference", workload, 1, model_record=model_record,
                                plan_path=plan if plan.exists() else None, evidence_dir_root=root)
    finally:
        runner.EvidenceWriter = original
    if rc != 0:
        sys.exit(f"run of {workload} failed (exit {rc}); see the evidence under {root}")
    evidence_dir = max(root.iterdir(), key=lambda p: p.stat().st_mtime)
    ev = read_evidence(evidence_dir)
    if ev.problems:
        sys.exit(f"{evidence_dir}: {ev.problems}")
    done = dict(zip(ev.updates["update"], ev.updates["completed_at"]))
    first, last = spec.contract.measured_window
    lo, hi = float(done[first - 1]), float(done[last])
    window = hi - lo
    caller = spans.clipped("caller", lo, hi)
    caller_cpu = spans.clipped("caller_cpu", lo, hi)
    background = spans.clipped("background", lo, hi)
    background_cpu = spans.clipped("background_cpu", lo, hi)
    return {"workload": workload, "window_s": window, "updates": last - first + 1,
            "caller_s": caller, "caller_cpu_s": caller_cpu, "background_s": background, "background_cpu_s": background_cpu,
            "share": caller / window, "background_share": background / window,
            "background_cpu_share": background_cpu / window}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", action="append", default=None,
                        help="workload(s) to run (default: every workload of the smoke suite)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per workload (default 1)")
    args = parser.parse_args()

    from rl_pipeline_bench import paths
    from rl_pipeline_bench.paths import CONFIG_PATH, ROOT
    from rl_pipeline_bench.settings.spec import spec_from_config_file

    spec = spec_from_config_file(CONFIG_PATH, "smoke")
    model_record = paths.model_record(spec.model["name"], ROOT)
    if not model_record.exists():
        sys.exit(f"{model_record} is missing: run `uv run snakemake --cores 1 {model_record.relative_to(ROOT)}` first")
    workloads = args.workload or spec.workloads
    rows = []
    with tempfile.TemporaryDirectory(prefix="rl-bench-harness-") as tmp:
        for workload in workloads:
            for _ in range(args.repeat):
                plan = paths.plan_file(spec.id, workload, ROOT)
                r = one_run(spec, workload, model_record, plan, Path(tmp))
                rows.append(r)
                print(f"{workload:<18} measured window {r['window_s']:6.2f} s over {r['updates']} updates; "
                      f"harness on the run's threads {r['caller_s'] * 1e3:7.1f} ms "
                      f"({r['caller_s'] / r['updates'] * 1e3:5.2f} ms/update, "
                      f"{r['caller_cpu_s'] / r['updates'] * 1e3:5.2f} ms CPU) = {r['share']:.2%}; "
                      f"background writer {r['background_s'] * 1e3:6.1f} ms wall, "
                      f"{r['background_cpu_s'] * 1e3:6.1f} ms CPU = {r['background_cpu_share']:.2%}",
                      flush=True)
    share = statistics.median(r["share"] for r in rows)
    background = statistics.median(r["background_cpu_share"] for r in rows)
    v = mean_verdict([r["share"] for r in rows], TARGET_SHARE)
    print(f"harness share of the measured window: median {share:.2%}, mean over {len(rows)} run(s) "
          f"{v.text('{:.2%}')}; background writer's CPU time (off the run's threads): {background:.2%}")
    return 1 if v.status == MISSED else 0


if __name__ == "__main__":
    sys.exit(main())

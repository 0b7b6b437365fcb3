"""One evaluation run: (eval suite, policy, run r) -> a fresh evidence directory.

Episodes are independent. They run in a process pool inside this job (not one
Snakemake job each): building a simulator costs seconds (robosuite Lift about 7 s
on a 2-core machine, LIBERO scenes more), so each worker builds one environment
per task and plays a share of that task's episodes in it; the pool is as wide as
the cores the job was given (Snakemake `threads`). An episode that raises is
recorded as failed with its error and counts as unsuccessful; its worker builds a
fresh environment and goes on. A worker process that dies fails the episodes it
had not finished, with the reason, and the run still completes. Each episode's row
also splits its time (simulator build, reset, stepping, rendering inside the steps,
the policy): the evaluation-throughput figures (eval.throughput) come from them.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import numpy as np

from ..records.atomicfile import atomic_write_json
from ..records.private_log import private_log_handler
from ..records.timestamps import utc_now_iso
from ..host.hostinfo import host_info
from ..records.redaction import redact_text
from . import benchmarks, envs, protocol
from .envs.base import package_versions
from .envs.libero_env import PACKAGES as LIBERO_PACKAGES
from .envs.robosuite_env import PACKAGES as ROBOSUITE_PACKAGES
from .episodes import LOG, SCHEMA, new_eval_run_id, write_episodes, write_manifest
from .policies import PolicyRef, check_benchmark, checkpoint_identity, load_policy, resolve_ref

log = logging.getLogger(__name__)

#: Settings an episode worker needs from the config (the rest stays in this process).
WORKER_CONFIG_KEYS = ("libero_assets", "robotwin_assets", "eval_policy_entry_point")
OWN_PACKAGES = ("rl-pipeline-bench", "numpy", "torch")
ENV_PACKAGES = {"robosuite": ROBOSUITE_PACKAGES, "libero": LIBERO_PACKAGES,
                "robotwin": ("rlinf-robotwin-runtime", "sapien")}


def _error_text(exc: BaseException) -> str:
    return redact_text(f"{type(exc).__name__}: {exc}")[:2000]


def _record(ep: protocol.Episode, group: str, steps: int, success: bool, wall: float, error: str | None,
            times: dict[str, float] | None = None) -> dict:
    row = ep.as_dict()
    row.update(group=group, steps=steps, success=bool(success) and error is None, wall_time_s=wall, error=error)
    row.update(times or {})
    return row


def play_episode(env, policy, ep: protocol.Episode, task: protocol.TaskRef,
                 times: dict[str, float] | None = None) -> tuple[int, bool]:
    """Greedy roll-out of one episode until success or its max steps; returns (steps, success).

    `times` (if given) receives reset_s, step_s (inside env.step), render_s (of that, the cameras)
    and policy_s, as far as the episode got.
    """
    times = {} if times is None else times
    clock = time.perf_counter
    t0 = clock()
    obs = env.reset(ep.scenario, ep.scenario_seed, ep.seed)
    times.update(reset_s=clock() - t0, step_s=0.0, render_s=0.0, policy_s=0.0)
    policy.reset(task.task, task.language)
    steps, success = 0, False
    try:
        while steps < ep.max_steps and not success:
            t0 = clock()
            chunk = np.asarray(policy.act(obs), dtype=float)
            times["policy_s"] += clock() - t0
            if chunk.ndim != 2 or chunk.shape[0] < 1 or chunk.shape[1] != env.action_dim:
                raise ValueError(f"policy returned an action chunk of shape {chunk.shape}; "
                                 f"expected (k >= 1, {env.action_dim})")
            for action in chunk:
                t0 = clock()
                obs, success = env.step(action)
                times["step_s"] += clock() - t0
                steps += 1
                if success or steps >= ep.max_steps:
                    break
    finally:
        times["render_s"] = float(env.render_s)
    return steps, success


def run_chunk(spec: dict, config: dict, ref: dict, task: dict, episodes: list[dict]) -> list[dict]:
    """Worker: one environment for one task, several episodes; never raises for an episode."""
    task_ref = protocol.TaskRef(**task)
    eps = [protocol.Episode(**e) for e in episodes]
    group = benchmarks.group_of(spec["benchmark"], task_ref.suite_task)
    policy = env = None
    rows = []
    for ep in eps:
        t0 = time.monotonic()
        steps, success, error = 0, False, None
        times: dict[str, float] = {"env_build_s": 0.0}
        try:
            if policy is None:
                policy = load_policy(PolicyRef(**ref))
            if env is None:
                built = time.perf_counter()
                env = envs.open_env(spec, config, task_ref)
                times["env_build_s"] = time.perf_counter() - built
            steps, success = play_episode(env, policy, ep, task_ref, times)
        except Exception as exc:  # an episode that crashes is evidence, not the end of the run
            error = _error_text(exc)
            traceback.print_exc(file=sys.stderr)
            if env is not None:
                try:
                    env.close()
                except Exception:
                    pass
                env = None
        rows.append(_record(ep, group, steps, success, time.monotonic() - t0, error, times))
    if env is not None:
        env.close()
    return rows


def _current_gpus() -> list[dict] | None:
    from ..leases import current_lease_gpus

    return current_lease_gpus()


def run_evaluation(spec: dict, config: dict, policy_id: str, run: int, evidence_root: Path | str,
                   pointer: Path | str | None = None, workers: int | None = None) -> Path:
    """Check everything before work, then play every episode of run `run`; returns the evidence dir."""
    ref = resolve_ref(policy_id, config)
    check_benchmark(ref, spec["benchmark"])
    identity = checkpoint_identity(ref)           # a missing checkpoint stops here, before any work
    load_policy(ref)                              # so does one that cannot be loaded
    env_facts = envs.preflight(spec, config)      # packages, renderer, assets
    tasks = envs.list_tasks(spec, config)
    episodes = protocol.plan(spec, tasks, run)
    workers = max(1, int(workers or spec["workers"]))
    task_by_key = {(t.suite_task, t.task_index): t for t in tasks}

    run_id = new_eval_run_id(spec["eval_suite"], policy_id, run)
    directory = Path(evidence_root) / run_id
    directory.mkdir(parents=True, exist_ok=False)
    handler = private_log_handler(directory / LOG, "%(asctime)s %(levelname)s %(message)s")  # owner-only, scrubbed
    pkg_log = logging.getLogger("rl_pipeline_bench")
    pkg_log.addHandler(handler)
    previous_level = pkg_log.level
    pkg_log.setLevel(logging.INFO)
    manifest: dict[str, Any] = {
        "schema": SCHEMA, "eval_run_id": run_id, "status": "running",
        "eval_suite": spec["eval_suite"], "spec_hash": spec["hash"], "benchmark": spec["benchmark"],
        "policy": {"policy_id": policy_id, **identity}, "run": run,
        "protocol": {k: spec.get(k) for k in ("protocol", "tasks", "task_indices", "scenarios_per_task", "runs", "seed",
                                              "max_steps", "max_steps_source", "camera_size", "greedy")},
        "spec": spec, "workers": workers, "environment": env_facts,
        "packages": package_versions(*OWN_PACKAGES, *ENV_PACKAGES[spec["benchmark"]]),
        "host": host_info(), "gpus": _current_gpus(), "command": redact_text(" ".join(sys.argv)),
        # Other work on the host slows the episodes: the 1/5/15-minute load averages beside the timings.
        "load_average": {"started": list(os.getloadavg()), "finished": None},
        "started_at": utc_now_iso(), "finished_at": None, "error": None, "counts": None,
    }
    write_manifest(directory, manifest)
    rows: list[dict] = []
    write_episodes(directory, rows)
    log.info("eval run %s: %d episodes (%d tasks x %d scenarios), run %d/%d, policy %s, %d workers; evidence in %s",
             run_id, len(episodes), len(tasks), spec["scenarios_per_task"], run, spec["runs"], policy_id, workers,
             directory)
    worker_config = {k: config.get(k) for k in WORKER_CONFIG_KEYS}
    try:
        chunks = protocol.chunks_of(episodes, workers)
        ctx = multiprocessing.get_context("spawn")  # simulators and GL contexts do not survive fork
        with ProcessPoolExecutor(max_workers=min(workers, len(chunks)), mp_context=ctx) as pool:
            futures = {pool.submit(run_chunk, spec, worker_config, ref.as_dict(),
                                   task_by_key[(c[0].suite_task, c[0].task_index)].__dict__,
                                   [e.as_dict() for e in c]): c for c in chunks}
            for fut in as_completed(futures):
                chunk = futures[fut]
                try:
                    done = fut.result()
                except BrokenProcessPool as exc:
                    group = benchmarks.group_of(spec["benchmark"], chunk[0].suite_task)
                    done = [_record(e, group, 0, False, 0.0, f"evaluation worker process died: {exc}") for e in chunk]
                rows.extend(done)
                rows.sort(key=lambda r: (r["suite_task"], r["task_index"], r["scenario"]))
                write_episodes(directory, rows)
                ok = sum(r["success"] for r in rows)
                log.info("progress: %d/%d episodes, %d successful, %d crashed (last: %s scenarios %d-%d)",
                         len(rows), len(episodes), ok, sum(r["error"] is not None for r in rows),
                         chunk[0].task, chunk[0].scenario, chunk[-1].scenario)
        manifest["status"] = "completed"
    except BaseException as exc:
        manifest["status"] = "failed"
        manifest["error"] = _error_text(exc)
        log.exception("eval run %s failed", run_id)
        raise
    finally:
        manifest["finished_at"] = utc_now_iso()
        manifest["load_average"]["finished"] = list(os.getloadavg())
        manifest["counts"] = {"episodes": len(rows), "planned": len(episodes),
                              "successes": int(sum(r["success"] for r in rows)),
                              "crashed": int(sum(r["error"] is not None for r in rows))}
        write_manifest(directory, manifest)
        pkg_log.removeHandler(handler)
        pkg_log.setLevel(previous_level)
        handler.close()
    if pointer is not None:
        pointer = Path(pointer)
        pointer.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(pointer, {"eval_run_id": run_id, "evidence_dir": str(directory), "eval_suite": spec["eval_suite"],
                                    "spec_hash": spec["hash"], "policy_id": policy_id, "run": run})
    return directory

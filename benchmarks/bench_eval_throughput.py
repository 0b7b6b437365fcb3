"""Evaluation throughput: simulator build, reset, steps/s per worker and the share of a step spent
rendering, measured by playing an eval suite's episodes through the stage's own worker pool, and
from them the projected wall time of the full LIBERO protocol on machines of N cores.

Seed 002 says rollouts are bound by environment rendering; this says by how much on this machine.
It plays run 1 of the suite (default `libero_smoke`: libero_10 task 0, 2 init states, at most 64
steps, 2 workers) into a scratch evidence directory and prints the figures eval.throughput
computes from its episodes (the same ones the report shows). MUJOCO_GL picks the renderer
(default: OSMesa for a suite without GPUs, EGL with them). It is not part of the tests.

    uv run python benchmarks/bench_eval_throughput.py [--suite NAME] [--workers N] [--policy NAME]
        [--cores 2 16 128] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from rl_pipeline_bench.eval import spec as eval_spec, throughput
from rl_pipeline_bench.eval.episodes import read_episodes, read_manifest
from rl_pipeline_bench.eval.runner import run_evaluation
from rl_pipeline_bench.records.timestamps import utc_now_iso
from rl_pipeline_bench.settings.config import load_config


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="libero_smoke", help="eval suite to play (config.yaml eval_suites)")
    ap.add_argument("--workers", type=int, default=None, help="episode workers (default: the suite's)")
    ap.add_argument("--policy", default=None, help="built-in policy (default: the suite's first)")
    ap.add_argument("--cores", type=int, nargs="+", default=None,
                    help="core counts to project the full protocol on (default: benchmarks.yaml's)")
    ap.add_argument("--keep", type=Path, default=None, help="keep the evidence under this directory")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = ap.parse_args()

    config = load_config()
    spec = eval_spec.resolve(config, args.suite)
    policy = args.policy or (spec["policies"] or [None])[0]
    if policy is None:
        sys.exit(f"eval suite '{args.suite}' names no built-in policy; pass --policy")
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-eval-throughput-"))
    started = utc_now_iso()
    wall = time.perf_counter()
    directory = run_evaluation(spec, {}, policy, 1, root, workers=args.workers)
    wall = time.perf_counter() - wall
    manifest, episodes = read_manifest(directory), read_episodes(directory)
    if episodes["error"].notna().any():
        sys.exit(f"episodes crashed (evidence: {directory}):\n" + "\n".join(episodes["error"].dropna()))
    figures = throughput.measured(episodes)

    env, load = manifest["environment"], manifest["load_average"]
    size = spec["camera_size"]
    print(f"command: {shlex.join(['uv', 'run', 'python', *sys.argv])}  (started {started}, {wall:.0f} s)")
    print(f"suite {args.suite}: {len(episodes)} episodes, at most {max(spec['max_steps'].values())} steps; "
          f"policy {policy}; {manifest['workers']} workers; MUJOCO_GL={env['mujoco_gl']}; "
          f"cameras {' + '.join(env.get('cameras') or [])} at {size}x{size}")
    print(f"host {manifest['host']['hostname']} ({manifest['host']['cpu_count']} CPUs); load average (1 min) "
          f"{load['started'][0]:.1f} at the start, {load['finished'][0]:.1f} at the end; evidence {directory}")
    print(f"simulator build        {figures['env_build_s']:8.1f} s   ({figures['env_builds']} builds)")
    print(f"reset to init state    {figures['reset_s']:8.1f} s   per episode")
    print(f"env step               {figures['step_s']:8.3f} s   ({figures['steps']} steps)")
    print(f"steps/s per worker     {figures['steps_per_s_per_worker']:8.2f}")
    print(f"rendering share        {100 * figures['render_share']:8.1f} %   of a step")
    out = {"figures": figures, "manifest_command": manifest["command"], "started": started}
    projection = throughput.protocol_projection(figures, args.cores) if spec["benchmark"] == "libero" else None
    if projection:
        first = projection["rows"][0]
        print(f"projected {projection['suite']} protocol ({projection['tasks']} tasks x "
              f"{projection['scenarios_per_task']} scenarios x {projection['runs']} runs x up to "
              f"{projection['max_steps']} steps = {first['steps']} steps, {first['episode_s']:.0f} s an episode):")
        print(pd.DataFrame(projection["rows"])[["cores", "env_builds", "wall_h"]].to_string(
            index=False, float_format="%.1f"))
        print(f"assumes: {projection['assumes']}")
        out["projection"] = projection
    if args.json:
        print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":  # the worker pool starts processes with `spawn`: they import this file
    sys.exit(main())

"""The NVML telemetry sampler's own cost: the same benchmark run with the sampler on and off.

Runs one (suite, backend, workload) several times, alternating sampler on / off, each
through `bench run` under a GPU lease (as the pipeline does), into a scratch evidence
root. A run's time is its own clock: the last update's `completed_at` (what the contract
measures; process start-up and imports excluded), and the process wall time is printed
too. Prints every run, the medians, the cost (on - off) / off in percent of each on/off
pair against the aim of <= 1 % with a verdict from the pairs' interval (one pair
resolves nothing: benchmarks/verdict.py), and the sampler's self-measured busy
fraction. Needs NVML (a GPU host).

    python benchmarks/bench_telemetry_overhead.py --suite reference_gpu --workload tool_history --repeats 2

Exit codes: 0 figures printed, 2 the sampler could not start (no NVML) or a run failed.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from rl_pipeline_bench.settings.config import load_config  # noqa: E402
from rl_pipeline_bench.records.configfile import get_suite
from rl_pipeline_bench.leases import lease_command  # noqa: E402
from rl_pipeline_bench.probes import reference_data  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from verdict import mean_verdict  # noqa: E402


def _config_with_telemetry(config: dict, enabled: bool, out: Path) -> Path:
    cfg = copy.deepcopy(config)
    cfg["probes"]["telemetry"]["enabled"] = enabled
    out.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return out


def _one_run(args, suite, cfg_path: Path, evidence_root: Path, tag: str) -> dict:
    bench = [sys.executable, "-m", "rl_pipeline_bench.cli"]
    cmd = [*bench, "run", "--configfile", str(cfg_path), "--suite", suite.name, "--backend", args.backend,
           "--workload", args.workload, "--evidence-root", str(evidence_root)]
    if suite["gpus"]:
        cmd = lease_command(suite.get("gpu_sets") or [], suite["gpus"], f"overhead-{tag}",
                            launcher=(*bench, "lease")) + cmd
    before = set(evidence_root.iterdir()) if evidence_root.exists() else set()
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"run {tag} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    (ev,) = set(evidence_root.iterdir()) - before
    updates = pd.read_parquet(ev / "updates.parquet")
    manifest = json.loads((ev / "manifest.json").read_text())
    return {"tag": tag, "evidence": str(ev), "run_s": float(updates["completed_at"].max()), "wall_s": wall,
            "telemetry": manifest.get("telemetry") or {}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="reference_gpu")
    parser.add_argument("--backend", default="reference")
    parser.add_argument("--workload", default="tool_history")
    parser.add_argument("--repeats", type=int, default=2, help="runs per setting (alternating on/off)")
    parser.add_argument("--config", type=Path, default=ROOT / "config.yaml")
    parser.add_argument("--configfile", type=Path, action="append", default=[], metavar="FILE",
                        help="merged over --config, like snakemake --configfile FILE (repeatable)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the scratch evidence here")
    args = parser.parse_args()

    config = load_config(args.config, configfiles=args.configfile)
    suite = get_suite(config, args.suite)
    scratch = args.keep or Path(tempfile.mkdtemp(prefix="rl-bench-overhead-"))
    scratch.mkdir(parents=True, exist_ok=True)
    paths = {on: _config_with_telemetry(config, on, scratch / f"config-telemetry-{'on' if on else 'off'}.yaml")
             for on in (True, False)}
    runs = {True: [], False: []}
    for i in range(args.repeats):
        for on in ((True, False) if i % 2 == 0 else (False, True)):
            tag = f"{'on' if on else 'off'}{i + 1}"
            r = _one_run(args, suite, paths[on], scratch / "evidence", tag)
            status = r["telemetry"].get("status")
            if on and status != "recorded":
                print(f"sampler did not record ({status}): {r['telemetry'].get('reason')}", file=sys.stderr)
                return 2
            busy = r["telemetry"].get("sampler_busy_fraction")
            print(f"{tag:>5}: run {r['run_s']:8.3f} s (last completed_at), process {r['wall_s']:7.2f} s, telemetry "
                  f"{status}" + (f", sampler busy {100 * busy:.3f} %, {r['telemetry']['rows']} rows" if busy is not None
                                 else ""), flush=True)
            runs[on].append(r)
    on_s = statistics.median(r["run_s"] for r in runs[True])
    off_s = statistics.median(r["run_s"] for r in runs[False])
    cost = 100.0 * (on_s - off_s) / off_s
    busy = statistics.median(r["telemetry"]["sampler_busy_fraction"] for r in runs[True])
    print(f"{suite.name}/{args.backend}/{args.workload}, {args.repeats} run(s) each, interval "
          f"{config['probes']['telemetry']['interval_s']} s, NVML buffers {config['probes']['telemetry']['nvml_samples']}")
    aim = reference_data.target("sampler_overhead")
    pair_costs = [100.0 * (a["run_s"] - b["run_s"]) / b["run_s"] for a, b in zip(runs[True], runs[False])]
    v = mean_verdict(pair_costs, float(aim["threshold"]), at_most=aim["comparison"] in ("<=", "<"))
    print(f"median run time: sampler on {on_s:.3f} s, off {off_s:.3f} s; ratio on/off {on_s / off_s:.4f}; "
          f"cost of the medians {cost:+.2f} %; per on/off pair: {v.text('{:+.2f}', ' %')}")
    print(f"sampler's own busy time (manifest telemetry.sampler_busy_fraction): median {100 * busy:.3f} % of the sampled time")
    spread = [r["run_s"] for r in runs[False]]
    if len(spread) > 1:
        print(f"run-to-run spread with the sampler off: {min(spread):.3f}..{max(spread):.3f} s "
              f"({100 * (max(spread) - min(spread)) / off_s:.2f} % of the median): a cost inside it is noise")
    return 0


if __name__ == "__main__":
    sys.exit(main())

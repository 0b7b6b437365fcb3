#!/usr/bin/env bash
# GPU figures of the infrastructure probes (issue 15) on one H200, through the real pipeline.
#
#   OUT=/some/dir bash scripts/device/probes_h200.sh          # GPU machine, .whl/ carried along
#   PROBES_SUITE=smoke OUT=/tmp/x bash scripts/device/probes_h200.sh   # the same steps on CPU (a check)
#
# The GPU machine has PyTorch, transformers, peft, pandas, scipy and nvidia-ml-py but no
# Snakemake: carry the wheels that scripts/device/wheels.sh puts in .whl/; they are
# installed into a private --target folder (nothing system-wide) and a `bench` wrapper goes on PATH.
#
# What it measures, and at which scale. reference_gpu's own scale (0.25, one run 3.5-5 min measured)
# does not fit a 7-minute call, so a --configfile narrows the suite to ONE multi_turn run,
# 1 trial, scale PROBES_SCALE (default 0.1), the full 5+15 update contract; every figure
# below is at that scale and the spec id printed names it:
#   1. host, versions; dense bf16 GEMM 8192^3 (the measured peak for MFU)          ~20 s
#   2. the pipeline (snakemake reports/comparison.html probes): model build, spec, plan,
#      one run under a real NVML lease with the telemetry sampler beside it, its summary
#      and infrastructure summary (utilisation per phase, peak memory, MFU), the probes
#      (NCCL all-reduce 8 B..1 GiB at world size 1: bus bandwidth needs >= 2 GPUs, only
#      algbw means anything; storage 4 GiB write+read O_DIRECT on this disk, fio if
#      installed, else Python; checkpoint save/load of model + LoRA adapter on cuda) and
#      the report with its Infrastructure section                                ~2-3 min
#   3. the report once more with the GEMM record among the probes                 ~15 s
#   4. the sampler's own cost: the same run with the sampler on and off, alternating,
#      2 runs each (benchmarks/bench_telemetry_overhead.py), fewer if the time left
#      (PROBES_BUDGET_S, default 380 s from the start) cannot hold them; none is cut.
# $OUT receives 4 files: probes_h200.log (everything printed), figures.txt (the figures
# and their commands), gemm.json, results.tar.gz (specs, probe records, run records,
# evidence incl. telemetry, reports/, logs/). Exit status non-zero if a step failed.
set -euo pipefail
: "${OUT:?set OUT to the folder the results go to}"
cd "$(dirname "$0")/../.."
SUITE=${PROBES_SUITE:-reference_gpu}
SCALE=${PROBES_SCALE:-0.1}
BUDGET_S=${PROBES_BUDGET_S:-380}
SITE=${RL_BENCH_SITE:-/tmp/rl-bench-site}
T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }
stamp() { printf '\n[%4d s] %s\n' "$(elapsed)" "$*"; }
mkdir -p "$OUT"
FIG="$OUT/figures.txt"
WORK=$(mktemp -d /tmp/probes-h200.XXXXXX)

setup() {
  if ! python3 -c 'import snakemake' 2>/dev/null; then
    if ! ls .whl/*.whl >/dev/null 2>&1; then
      echo "Snakemake is missing and no wheels were carried: run scripts/device/wheels.sh first" >&2
      return 2
    fi
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl
  fi
  mkdir -p "$SITE/bin"
  printf '#!/bin/sh\nexec python3 -m rl_pipeline_bench.cli "$@"\n' > "$SITE/bin/bench"
  chmod +x "$SITE/bin/bench"
  export PYTHONPATH="$SITE:$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PATH="$SITE/bin:$PATH"
}

main() {
  setup
  stamp "host"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=index,uuid,name,driver_version,memory.used,memory.total --format=csv
    DEVICE=cuda
  else
    echo "no nvidia-smi: CPU check run"; DEVICE=cpu
  fi
  bench gpus || true
  python3 -c 'import sys, torch, transformers, peft, snakemake; print("python", sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__, "peft", peft.__version__, "snakemake", snakemake.__version__, "NCCL", torch.cuda.nccl.version() if torch.cuda.is_available() else None)'
  command -v fio >/dev/null && fio --version || echo "fio not installed: the storage probe uses O_DIRECT in Python"
  git log -1 --format='commit %H %s' 2>/dev/null || true

  # The suite narrowed by a --configfile; `bench` takes the same file and merges it as
  # Snakemake does, so both resolve the same spec.
  printf 'suite: %s\nsuites:\n  %s:\n    workloads: [multi_turn]\n    trials: 1\n    scale: %s\n' \
    "$SUITE" "$SUITE" "$SCALE" > "$WORK/override.yaml"
  CFG="$WORK/override.yaml"
  bench plan --configfile "$CFG" --json > "$WORK/plan.json"
  read -r SPEC RUN_JSON GPUS < <(python3 -c "
import json, sys
p = json.load(open(sys.argv[1]))
print(p['spec']['id'], p['runs'][0]['target'], p['spec']['settings']['gpus'])" "$WORK/plan.json")
  RUN_DIR=$(dirname "$RUN_JSON")
  echo "$RUN_JSON" > "$WORK/run_json"  # for pack(), outside this subshell
  PROBES="results/probes/$SPEC"
  bench plan --configfile "$CFG"
  {
    echo "# scripts/device/probes_h200.sh, $(date -u +%FT%TZ), $(git log -1 --format=%h 2>/dev/null || echo '?')"
    echo "suite $SUITE narrowed to multi_turn x 1 trial at scale $SCALE (spec $SPEC; $WORK/override.yaml):"
    sed 's/^/  /' "$WORK/override.yaml"
  } > "$FIG"

  stamp "1. dense GEMM peak"
  if [ "$DEVICE" = cuda ]; then
    bench probe gemm --n 8192 --dtype bfloat16 --device cuda --output "$OUT/gemm.json"
  else
    bench probe gemm --n 512 --dtype float32 --device cpu --warmup 1 --iters 3 --output "$OUT/gemm.json"
  fi
  python3 -c "import json,sys; g=json.load(open(sys.argv[1])); print(f\"gemm {g['n']}^3 {g['dtype']} on {g['device_name']}: {g['tflops']:.1f} TFLOP/s (bench probe gemm --n {g['n']} --dtype {g['dtype']})\")" \
    "$OUT/gemm.json" >> "$FIG"

  stamp "2. pipeline: one run with telemetry, summaries, probes, report (spec $SPEC)"
  # Targets first: --resources and --configfile take every following word as a value.
  python3 -m snakemake reports/comparison.html probes --cores 1 --resources gpu="$GPUS" --configfile "$CFG"
  cat "logs/probes/$SPEC/allreduce.log" "logs/probes/$SPEC/storage.log" "logs/probes/$SPEC/checkpoint.log"
  echo "python3 -m snakemake reports/comparison.html probes --cores 1 --resources gpu=$GPUS --configfile override.yaml" >> "$FIG"
  python3 - "$RUN_DIR" "$PROBES" >> "$FIG" <<'PY'
import json, sys
from pathlib import Path
run, probes = Path(sys.argv[1]), Path(sys.argv[2])
summary = json.loads((run / "summary.json").read_text())
h = summary["e2e"]["headline"]
print(f"run {summary['run_id']}: valid {summary['valid']} {summary['reasons']}; headline "
      f"{h['trajectories_per_s']:.3f} traj/s, {h['assistant_tokens_per_s']:.1f} tok/s over {h.get('window_s')} s")
s = json.loads((run / "infra.json").read_text())
t, e = s["telemetry"], s["trainer_efficiency"]
busy = t.get("sampler_busy_fraction")
print(f"telemetry: {t['status']} {t.get('reason') or ''} rows {t.get('rows')} by source {t.get('rows_by_source')}, "
      f"interval {t.get('interval_s')} s, sampler busy {None if busy is None else round(100 * busy, 4)} %")
for p in t["phases"]:
    print(f"  GPU {p['gpu_index']} {p['phase']:>7}: util mean {p['gpu_util_mean']} p50 {p['gpu_util_p50']} "
          f"p90 {p['gpu_util_p90']} ({p['util_samples']} {p['util_source']} samples), memory-controller mean "
          f"{p.get('mem_util_mean')}, peak memory {p['memory_used_peak_mib']} MiB ({p['memory_used_peak_pct']} %)")
for f in t["findings"]:
    print(f"  target {f['target']} {f['target_text']}: value {f['value']} -> met {f['met']}")
print("trainer efficiency:", {k: e.get(k) for k in ("status", "reason", "tokens", "flops_per_token", "achieved_tflops",
                                                    "mfu_datasheet", "mfu_measured", "trainer_dtype")})
ar = json.loads((probes / "allreduce.json").read_text())
big = ar["largest"]
print(f"all-reduce {ar['backend']} world size {ar['world_size']} (NCCL {ar.get('nccl_version')}): at {big['bytes']} B "
      f"{big['time_us']:.1f} us, algbw {big['algbw_gbps']:.2f} GB/s, busbw {big['busbw_gbps']:.2f} GB/s; "
      f"{ar.get('busbw_note') or ''}")
st = json.loads((probes / "storage.json").read_text())
print(f"storage {st.get('engine')} {st.get('size_bytes')} B in {st.get('directory')}: " + ", ".join(
    f"{d} {st['results'][d]['mb_per_s']:.0f} MB/s" for d in ("write", "read")) + f" (direct {st.get('direct')})")
ck = json.loads((probes / "checkpoint.json").read_text())
print("checkpoint (safetensors, " + str(ck.get("device")) + "): " + ", ".join(
    f"{item} {op} {ck[item][op + '_s']:.3f} s" for item in ("model", "adapter") for op in ("save", "load")
))
PY

  stamp "3. report with the GEMM record"
  python3 - "$WORK/plan.json" > "$WORK/report_args" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
sid = p["spec"]["id"]
runs = [r["target"].rsplit("/", 1)[0] for r in p["runs"]]
print(" ".join(["--spec", f"results/specs/{sid}.json", "--summaries", *[f"{d}/summary.json" for d in runs],
                "--plans", *[f"results/workloads/{sid}/{w}.parquet" for w in p["spec"]["settings"]["workloads"]],
                "--run-infra", *[f"{d}/infra.json" for d in runs],
                "--probes", *p["probes"]]))
PY
  # shellcheck disable=SC2046
  bench report $(cat "$WORK/report_args") "$OUT/gemm.json" --evidence-root results/evidence \
    --attempts-index results/attempts.jsonl --html reports-gemm/comparison.html --tables reports-gemm/tables \
    --figures reports-gemm/figures

  stamp "4. sampler on/off"
  run_s=$(python3 -c "
import json, sys
from datetime import datetime
m = json.load(open(json.load(open(sys.argv[1]))['evidence_dir'] + '/manifest.json'))
print(int((datetime.fromisoformat(m['finished_at']) - datetime.fromisoformat(m['started_at'])).total_seconds()) + 20)" "$RUN_JSON")
  left=$(( BUDGET_S - $(elapsed) - 20 ))
  repeats=$(( left / (2 * run_s) )); [ "$repeats" -gt 2 ] && repeats=2
  echo "one run ~${run_s} s with start-up; ${left} s left of ${BUDGET_S} s: ${repeats} run(s) per setting"
  if [ "$repeats" -ge 1 ]; then
    cmd=(python3 benchmarks/bench_telemetry_overhead.py --configfile "$CFG" --suite "$SUITE" --workload multi_turn
         --repeats "$repeats" --keep "$WORK/overhead")
    rc=0; "${cmd[@]}" | tee "$WORK/overhead.txt" || rc=$?
    { echo "sampler cost: ${cmd[*]/$CFG/override.yaml}"; sed 's/^/  /' "$WORK/overhead.txt"; } >> "$FIG"
    if [ "$rc" -ne 0 ] && [ "$DEVICE" = cuda ]; then return "$rc"; fi
    # An `if`, not `[ ... ] && echo`: as main's last command that list would make a success return 1.
    if [ "$rc" -ne 0 ]; then echo "  (exit $rc: no NVML on a CPU check run)" >> "$FIG"; fi
  else
    echo "sampler cost: not measured (${left} s left, one run takes ~${run_s} s)" >> "$FIG"
  fi
}

pack() {
  stamp "packing results into $OUT/results.tar.gz"
  local ev=() run_json
  run_json=$(cat "$WORK/run_json" 2>/dev/null || true)
  if [ -n "$run_json" ] && [ -f "$run_json" ]; then
    ev+=("$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['evidence_dir'])" "$run_json")")
  fi
  cp -f "$WORK/override.yaml" results/ 2>/dev/null || true
  tar czf "$OUT/results.tar.gz" --ignore-failed-read results/specs results/probes results/runs results/attempts.jsonl \
    results/override.yaml "${ev[@]}" reports reports-gemm logs -C "$WORK" overhead 2>/dev/null || true
  ls -la "$OUT"
  echo; cat "$FIG"
}

set +e
( set -e; main ) 2>&1 | tee "$OUT/probes_h200.log"  # a subshell outside `||`: set -e holds inside main
rc=${PIPESTATUS[0]}
set -e
pack >> "$OUT/probes_h200.log" 2>&1
cat "$FIG"
stamp "done (exit $rc)" | tee -a "$OUT/probes_h200.log"
exit "$rc"

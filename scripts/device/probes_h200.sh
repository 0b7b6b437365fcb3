#!/usr/bin/env bash
# GPU figures of the infrastructure probes (issue 15) on one H200; everything lands under $OUT.
#
#   /work/shared/tools/device-wheels.sh .whl        # on the controller, once: Snakemake's wheels
#   OUT=/some/dir bash scripts/device/probes_h200.sh   # on the GPU machine, .whl/ carried along
#
# The GPU machine has PyTorch, transformers, peft, pandas and nvidia-ml-py but no Snakemake:
# the wheels in .whl/ are installed into a private --target folder (nothing system-wide), and
# a `bench` wrapper goes on PATH for the rules. Steps (about 4-5 minutes of GPU time in all):
#   1. bench gpus, and the dense bf16 GEMM peak (8192^3)                          ~15 s
#   2. one reference_gpu run (multi_turn) with the NVML sampler beside it, under a real
#      lease, plus its summary and infrastructure summary (per-phase utilisation, MFU) ~60 s
#   3. the suite's probes: NCCL all-reduce at world size 1 (one GPU: bus bandwidth needs
#      >= 2 GPUs, so only algbw means anything), storage (4 GiB write+read on this disk;
#      fio if installed, else O_DIRECT in Python) and checkpoint (model + LoRA adapter via
#      safetensors, on cuda)                                                       ~60 s
#   4. the Infrastructure report section from those files                         ~15 s
#   5. the sampler's own cost: tool_history twice with the sampler on, twice off  ~100 s
# Exit status: non-zero if any step failed (the log says which).
set -euo pipefail
: "${OUT:?set OUT to the folder the results go to}"
cd "$(dirname "$0")/../.."
SUITE=reference_gpu
SITE=${RL_BENCH_SITE:-/tmp/rl-bench-site}
T0=$(date +%s)
stamp() { printf '\n[%4d s] %s\n' "$(( $(date +%s) - T0 ))" "$*"; }
mkdir -p "$OUT"

if ! python3 -c 'import snakemake' 2>/dev/null; then
  if ! ls .whl/*.whl >/dev/null 2>&1; then
    echo "Snakemake is missing and no wheels were carried: run /work/shared/tools/device-wheels.sh .whl first" >&2
    exit 2
  fi
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl
fi
mkdir -p "$SITE/bin"
printf '#!/bin/sh\nexec python3 -m rl_pipeline_bench.cli "$@"\n' > "$SITE/bin/bench"
chmod +x "$SITE/bin/bench"
export PYTHONPATH="$SITE:$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PATH="$SITE/bin:$PATH"

# Target paths come from the suite itself (`bench plan --json`), so they follow the layout.
target() { bench plan --suite "$SUITE" --json | python3 -c "
import json, sys
runs = json.load(sys.stdin)['runs']
print(next(r['target'] for r in runs if r['workload'] == sys.argv[1]))" "$1"; }

main() {
  stamp "host"
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  bench gpus
  python3 -c 'import torch, transformers, peft; print("torch", torch.__version__, "transformers", transformers.__version__, "peft", peft.__version__, "NCCL", torch.cuda.nccl.version())'
  command -v fio >/dev/null && fio --version || echo "fio not installed: the storage probe uses O_DIRECT in Python"

  stamp "1. dense GEMM peak (bf16, 8192^3)"
  bench probe gemm --n 8192 --dtype bfloat16 --device cuda --label h200 --output "$OUT/gemm.json"

  stamp "2. one $SUITE run with telemetry (multi_turn), its summary and infrastructure summary"
  run_json=$(target multi_turn)
  run_dir=$(dirname "$run_json")
  python3 -m snakemake --cores 1 --resources gpu=1 "$run_dir/summary.json" "$run_dir/infra.json" --config suite=$SUITE
  python3 - "$run_dir/infra.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
t, e = s["telemetry"], s["trainer_efficiency"]
print("telemetry:", t["status"], t.get("reason") or "", "rows", t.get("rows"), "sampler busy %",
      None if t.get("sampler_busy_fraction") is None else round(100 * t["sampler_busy_fraction"], 4))
for p in t["phases"]:
    print(f"  GPU {p['gpu_index']} {p['phase']:>7}: util mean {p['gpu_util_mean']} p50 {p['gpu_util_p50']} "
          f"p90 {p['gpu_util_p90']} ({p['util_samples']} {p['util_source']} samples), peak memory "
          f"{p['memory_used_peak_mib']} MiB ({p['memory_used_peak_pct']} %)")
for f in t["findings"]:
    print(f"  target {f['target']} {f['target_text']}: value {f['value']} -> met {f['met']}")
print("trainer efficiency:", {k: e.get(k) for k in ("status", "reason", "tokens", "flops_per_token",
                                                    "achieved_tflops", "mfu_datasheet", "mfu_measured", "trainer_dtype")})
EOF

  stamp "3. probes: all-reduce (NCCL, world size 1), storage (4 GiB), checkpoint (cuda)"
  python3 -m snakemake --cores 1 --resources gpu=1 "results/probes/$SUITE/allreduce.json" \
    "results/probes/$SUITE/storage.json" "results/probes/$SUITE/checkpoint.json" --config suite=$SUITE
  cat "logs/probes/$SUITE/allreduce.log" "logs/probes/$SUITE/storage.log" "logs/probes/$SUITE/checkpoint.log"

  stamp "4. Infrastructure report section"
  bench report --suite "$SUITE" --summaries "$run_dir/summary.json" \
    --plans "results/workloads/$SUITE/multi_turn.parquet" --evidence-root results/evidence \
    --html "$OUT/report/comparison.html" --tables "$OUT/report/tables" --figures "$OUT/report/figures" \
    --run-infra "$run_dir/infra.json" \
    --probes "results/probes/$SUITE/allreduce.json" "results/probes/$SUITE/storage.json" \
             "results/probes/$SUITE/checkpoint.json" "$OUT/gemm.json" \
    --set suite=$SUITE

  stamp "5. sampler on/off (tool_history, 2 runs each)"
  python3 benchmarks/bench_telemetry_overhead.py --suite "$SUITE" --workload tool_history --repeats 2 \
    --keep "$OUT/overhead"

  stamp "copying evidence and probe records to $OUT"
  mkdir -p "$OUT/results"
  cp -r "results/probes" "$OUT/results/"
  cp -r "$run_dir" "$OUT/results/run"
  evidence=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['evidence_dir'])" "$run_json")
  cp -r "$evidence" "$OUT/results/evidence"
  cp -r logs "$OUT/logs"
  rm -rf "$OUT/overhead"/config-*.yaml
  stamp "done"
}

main 2>&1 | tee "$OUT/probes_h200.log"

#!/usr/bin/env bash
# Real-NVML check of the GPU lease supervisor, for a GPU host (e.g. one H200).
#
#   scripts/gpu_lease_check.sh [GPU_INDEX]          (default GPU 0)
#
# Prints `bench gpus` (table and --json), runs one leased smoke command
# (CUDA_VISIBLE_DEVICES, the record, nvidia-smi -L, and torch if present), checks that an
# overlapping lease is refused while the first runs, and, when torch can use CUDA, that a
# lease is refused for a compute process NVML sees (started under a second, private lock
# directory so only the NVML check can catch it). Ends with the exit codes and a verdict.
#
# Environment: BENCH (default: `bench`, else `uv run bench`), LEASE (default: "$BENCH lease"),
# GPUS (default: "$BENCH gpus"), PYTHON (for the torch probe, default python3),
# LOCK_DIR (optional --lock-dir; default: the host's normal lock directory),
# THRESHOLD_MIB (memory threshold, default 1024; passed explicitly so no config is needed).
# Without `bench` on PATH, e.g. an un-installed checkout:
#   PYTHONPATH=src BENCH=x LEASE="python3 -m rl_pipeline_bench.commands.lease" \
#     GPUS="python3 -m rl_pipeline_bench.commands.gpus" scripts/gpu_lease_check.sh
set -u

GPU=${1:-0}
if [ -n "${RL_BENCH_GPU_INVENTORY:-}" ]; then
  echo "RL_BENCH_GPU_INVENTORY is set: this check is for real NVML; unset it" >&2
  exit 2
fi
if [ -z "${BENCH:-}" ]; then
  if command -v bench >/dev/null 2>&1; then BENCH=bench; else BENCH="uv run bench"; fi
fi
LEASE=${LEASE:-"$BENCH lease"}
GPUS=${GPUS:-"$BENCH gpus"}
PYTHON=${PYTHON:-python3}
THRESHOLD_MIB=${THRESHOLD_MIB:-1024}
LOCK_ARGS=()
if [ -n "${LOCK_DIR:-}" ]; then LOCK_ARGS=(--lock-dir "$LOCK_DIR"); fi
TAG="gpucheck-$(date -u +%Y%m%dT%H%M%SZ)-$$"
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
lease_run() { $LEASE run "${LOCK_ARGS[@]}" --memory-threshold-mib "$THRESHOLD_MIB" "$@"; }
section() { printf '\n===== %s =====\n' "$*"; }

section "bench gpus"
$GPUS "${LOCK_ARGS[@]}"; rc_gpus=$?
section "bench gpus --json"
$GPUS "${LOCK_ARGS[@]}" --json; rc_gpus_json=$?

section "leased smoke run on GPU $GPU (expect exit 0)"
lease_run --gpus "$GPU" --count 1 --run-id "$TAG-smoke" -- sh -c '
  echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"
  echo "RL_BENCH_LEASE_RECORD=$RL_BENCH_LEASE_RECORD"
  cat "$RL_BENCH_LEASE_RECORD"
  nvidia-smi -L
  '"$PYTHON"' -c "import torch; print(\"torch sees\", torch.cuda.device_count(), \"device(s):\", [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])" 2>/dev/null || echo "(torch probe unavailable)"
'
rc_smoke=$?

section "overlap: second lease of GPU $GPU while the first holds it (expect 75)"
lease_run --gpus "$GPU" --count 1 --run-id "$TAG-holder" -- sleep 6 &
holder=$!
for _ in $(seq 1 50); do
  if $LEASE list "${LOCK_ARGS[@]}" --json 2>/dev/null | grep -q "\"run_id\": \"$TAG-holder\""; then break; fi
  sleep 0.2
done
lease_run --gpus "$GPU" --count 1 --run-id "$TAG-overlap" -- true; rc_overlap=$?
wait "$holder"; rc_holder=$?

rc_nvml=skipped
if "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  section "NVML: a compute process on GPU $GPU under a private lock dir; a normal lease must be refused (expect 75)"
  ready="$SCRATCH/ready"
  $LEASE run --lock-dir "$SCRATCH/private-locks" --memory-threshold-mib "$THRESHOLD_MIB" --gpus "$GPU" --count 1 \
    --run-id "$TAG-occupant" -- "$PYTHON" -c "
import pathlib, time, torch
x = torch.empty(2 * 1024**3, dtype=torch.uint8, device='cuda')
torch.cuda.synchronize()
pathlib.Path('$ready').touch()
time.sleep(8)
" &
  occupant=$!
  for _ in $(seq 1 150); do [ -e "$ready" ] && break; sleep 0.2; done
  lease_run --gpus "$GPU" --count 1 --run-id "$TAG-nvml" -- true; rc_nvml=$?
  wait "$occupant"; rc_occupant=$?
  echo "occupant lease exit code: $rc_occupant"
fi

section "bench lease list (no $TAG record should remain)"
$LEASE list "${LOCK_ARGS[@]}"
left=$($LEASE list "${LOCK_ARGS[@]}" --json | grep -c "\"run_id\": \"$TAG" || true)

section "summary"
echo "bench gpus: $rc_gpus, --json: $rc_gpus_json (expect 0, 0)"
echo "smoke lease: $rc_smoke (expect 0)"
echo "overlap refused: $rc_overlap (expect 75); holder: $rc_holder (expect 0)"
echo "NVML compute-process refusal: $rc_nvml (expect 75 or skipped)"
echo "records left by this check: $left (expect 0)"
ok=1
[ "$rc_gpus" = 0 ] && [ "$rc_gpus_json" = 0 ] && [ "$rc_smoke" = 0 ] && [ "$rc_overlap" = 75 ] && [ "$rc_holder" = 0 ] || ok=0
[ "$rc_nvml" = 75 ] || [ "$rc_nvml" = skipped ] || ok=0
[ "$left" = 0 ] || ok=0
if [ "$ok" = 1 ]; then echo "VERDICT: PASS"; exit 0; else echo "VERDICT: FAIL"; exit 1; fi

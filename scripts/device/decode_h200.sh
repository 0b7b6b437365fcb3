#!/usr/bin/env bash
# The reference decoder's GPU figures on one H200 (issues 22 and 27): decoding checks and speed, then reference_gpu trials.
#
#   OUT=DIR bash scripts/device/decode_h200.sh check bench      # ~5 min: API check, bench_decode x 2 models
#   OUT=DIR bash scripts/device/decode_h200.sh cv WORKLOADS TRIALS [BUDGET_S]   # reference_gpu_cv.sh
#   OUT=DIR DEVICE=cpu bash scripts/device/decode_h200.sh check  # the same check on CPU (static loop)
#
# check: versions, the transformers/torch signatures the decoder relies on (StaticCache,
#   the causal LM's forward, set_experts_implementation, CUDAGraph capture modes), and one
#   batch decoded by every loop on the tiny model (tokens and finish order compared).
# bench: benchmarks/bench_decode.py on the tiny model and on reference_gpu's model
#   (BENCH_ARGS adds options; JSON figures land in $OUT).
# cv: scripts/device/reference_gpu_cv.sh (Snakemake from the wheels of scripts/device/wheels.sh in .whl/).
# Everything printed is also in $OUT/decode_h200.log.
set -uo pipefail
: "${OUT:?set OUT to the folder the results go to}"
cd "$(dirname "$0")/../.."
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
DEVICE=${DEVICE:-cuda}
LOG="$OUT/decode_h200.log"
T0=$(date +%s)
say() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a "$LOG"; }

check() {
  say "check: versions and signatures"
  nvidia-smi --query-gpu=index,name,driver_version,memory.used,memory.total --format=csv 2>&1 | tee -a "$LOG"
  python3 - "$DEVICE" <<'PY' 2>&1 | tee -a "$LOG"
import inspect, subprocess, sys, torch, transformers
from transformers import StaticCache, Qwen3MoeForCausalLM, PreTrainedModel
from transformers import cache_utils
print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)
print("git", subprocess.run(["git", "log", "-1", "--format=%h %s"], capture_output=True, text=True).stdout.strip())
print("StaticCache.__init__", inspect.signature(StaticCache.__init__))
print("Qwen3MoeForCausalLM.forward", inspect.signature(Qwen3MoeForCausalLM.forward))
print("set_experts_implementation", hasattr(PreTrainedModel, "set_experts_implementation"))
print("CUDAGraph capture_error_mode", "capture_error_mode" in inspect.signature(torch.cuda.CUDAGraph.capture_begin).parameters)
from transformers.integrations.moe import ExpertsInterface
print("ExpertsInterface.register", hasattr(ExpertsInterface, "register"))
print("GenerationConfig disable_compile", hasattr(transformers.GenerationConfig(), "disable_compile"))
print(inspect.getsource(cache_utils.StaticLayer.update))
PY
  python3 - "$DEVICE" <<'PY' 2>&1 | tee -a "$LOG"
import sys, tempfile, time, torch
from rl_pipeline_bench.models.reference import build_reference_snapshot
from rl_pipeline_bench.models.lora import apply_lora, plan_lora
from rl_pipeline_bench.backends.reference import policy
from rl_pipeline_bench.backends.reference.rollout import banned_token_mask
from rl_pipeline_bench.backends.reference.decode import Batch, Decoder
dev = torch.device("cuda:0" if sys.argv[1] == "cuda" else "cpu")
rec = build_reference_snapshot("models/tiny_qwen3_moe.yaml", tempfile.mkdtemp())
tok = policy.load_tokenizer(rec["snapshot_path"])
base = policy.load_base_model(rec["snapshot_path"], dev)
m = apply_lora(base, plan_lora(base, 8, 32)).eval()
params = policy.adapter_parameters(m)
merged = policy.MergedAdapter(m, params, dev)
merged.publish(params)
print("merged adapter:", merged.record())
banned = banned_token_mask(tok, m.config.vocab_size, dev)
g = torch.Generator().manual_seed(1)
prompts = [torch.randint(60, 4000, (int(n),), generator=g).tolist() for n in (40, 7, 120, 33, 64)]
lengths = [50, 1, 90, 0, 64]
keys = [11, 12, 13, 14, 2**62 + 15]
res = {}
for loop in (["eager", "static", "graphed"] if dev.type == "cuda" else ["eager", "static"]):
    d = Decoder(m, banned, tok.pad_token_id, loop=loop)
    t = time.perf_counter()
    outs, fin = d.decode(Batch(prompts, lengths, keys), time.perf_counter)
    res[loop] = outs
    order = sorted(range(5), key=lambda i: fin[i])
    print(f"{loop:8s} mode {d.mode} step experts {d.step_experts} failure {d.graph_failure} "
          f"lengths {[len(o) for o in outs]} finish order {order} {time.perf_counter() - t:.3f} s")
    alone = d.decode(Batch(prompts[2:3], lengths[2:3], keys[2:3]))[0][0]
    print(f"{loop:8s} row 2 alone equals batched: {alone == outs[2]}")
    split = Decoder(m, banned, tok.pad_token_id, loop=loop, prefill_tokens=64,
                    kv_budget_bytes=2 * 220 * d.kv_bytes_per_token)
    print(f"{loop:8s} prefill in chunks and KV sub-batches equal: {split.decode(Batch(prompts, lengths, keys))[0] == outs}")
for loop, outs in res.items():
    same = sum(a == b for o, e in zip(outs, res["eager"]) for a, b in zip(o, e))
    print(f"{loop:8s} tokens equal to eager's: {same}/{sum(lengths)}")
PY
}

bench() {
  for cfg in tiny_qwen3_moe reference_gpu_qwen3_moe; do
    say "bench: $cfg"
    python3 benchmarks/bench_decode.py --device "$DEVICE" --build-config "models/$cfg.yaml" \
      --json "$OUT/bench_decode_$cfg.json" ${BENCH_ARGS:-} 2>&1 | grep -v "Writing model shards\|Loading weights" | tee -a "$LOG"
  done
}

case "${1:-}" in
  cv) shift
      OUT="$OUT/cv" bash scripts/device/reference_gpu_cv.sh "$@" 2>&1 | tee -a "$LOG"
      # one archive: the device tool brings back few files
      tar czf "$OUT/cv_$(date +%s).tar.gz" -C "$OUT" cv && rm -rf "$OUT/cv" ;;
  *) for phase in "$@"; do "$phase"; done ;;
esac
say "done"

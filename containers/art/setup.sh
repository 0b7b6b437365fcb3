#!/usr/bin/env bash
# Provision a fresh native prefix for ART at its pinned commit:
#   RL_BENCH_ENV_ROOT=/abs/new/prefix bash containers/art/setup.sh
# Result: PREFIX/art (checkout), PREFIX/art/.venv (ART's own uv.lock, megatron extra,
# + this benchmark), PREFIX/art/megatron_runtime/.venv (ART's Megatron trainer runtime),
# ART's vLLM runtime, and PREFIX/setup_manifests/art.json. Pins: containers/art/pins.env.
# The env phase runs the steps of ART's own src/art/megatron/setup.sh with the pinned
# CUDA extras and arch list (that script probes nvidia-smi, which an image build lacks);
# tests/frameworks/test_real_art.py checks these steps against the installed release's script.
set -euo pipefail
BACKEND=art
. "$(dirname "${BASH_SOURCE[0]}")/../common/setup_lib.sh"
load_pins
check_prefix
require_uv
command -v git >/dev/null 2>&1 || die "git is required"
SRC="$PREFIX/art"
if [ "$PHASE" != bench ]; then
    say "checking out $ART_REPO at $ART_COMMIT into $SRC"
    checkout_pinned "$ART_REPO" "$ART_COMMIT" "$SRC"
    export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
    export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-$ART_TORCH_CUDA_ARCH_LIST}
    export CUDA_ARCH_LIST=$TORCH_CUDA_ARCH_LIST
    [ -x "$CUDA_HOME/bin/nvcc" ] || die "CUDA_HOME must contain bin/nvcc (ART compiles its trainer kernels): $CUDA_HOME"
    (
        cd "$SRC"
        say "ART root project, extra $ART_MEGATRON_ROOT_EXTRA"
        uv sync --extra "$ART_MEGATRON_ROOT_EXTRA" --frozen --inexact --python "$(python_request)"
        say "ART megatron_runtime project, extra $ART_MEGATRON_RUNTIME_EXTRA (arch $TORCH_CUDA_ARCH_LIST)"
        uv sync --project megatron_runtime --extra "$ART_MEGATRON_RUNTIME_EXTRA" --frozen --no-dev \
            --no-install-project --python "$SRC/.venv/bin/python"
        uv pip install --python "$SRC/megatron_runtime/.venv/bin/python" --no-deps --editable "$SRC"
        say "HybridEP (single node)"
        HYBRID_EP_MULTINODE=0 USE_NIXL=0 "$SRC/megatron_runtime/.venv/bin/python" -m art.megatron.hybrid_ep_setup
        say "ART vLLM runtime"
        bash vllm_runtime/setup.sh
    ) || die "installing ART the way src/art/megatron/setup.sh does failed"
fi
if [ "$PHASE" != env ]; then
    install_bench_runtime "$SRC/.venv/bin/python"
    install_bench_and_record "$SRC/.venv/bin/python" "art_commit=$(git -C "$SRC" rev-parse HEAD)"
    say "done: $PREFIX"
fi

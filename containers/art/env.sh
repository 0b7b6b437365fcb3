#!/usr/bin/env bash
# Run a controller command in a native ART prefix (made by containers/art/setup.sh):
#   env RL_BENCH_ENV_ROOT=/abs/prefix CUDA_HOME=/usr/local/cuda-12.8 \
#     bash containers/art/env.sh ./bench run --runtime native --backend art ... --python /abs/prefix/art/.venv/bin/python
# ART compiles kernels at run time, so the CUDA toolkit of its recipe is required.
set -euo pipefail
BACKEND=art
. "$(dirname "${BASH_SOURCE[0]}")/../common/env_lib.sh"
require_command "$@"
[ -n "${CUDA_HOME:-}" ] || die "set CUDA_HOME to the CUDA 12.8 toolkit (the toolchain of containers/art/Dockerfile)"
activate_prefix art/.venv
activate_cuda_home
exec "$@"

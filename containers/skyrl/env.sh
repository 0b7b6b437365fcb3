#!/usr/bin/env bash
# Run a controller command in a native SkyRL prefix (made by containers/skyrl/setup.sh):
#   env RL_BENCH_ENV_ROOT=/abs/prefix bash containers/skyrl/env.sh ./bench run --runtime native --backend skyrl ... \
#     --python /abs/prefix/skyrl/.venv/bin/python --skyrl-source /abs/prefix/skyrl
# SKYRL_USE_CUDA_COMPAT=1 puts SkyRL's packaged NVIDIA compatibility libraries first
# on the library path (qualified older-driver hosts only). CUDA_HOME is optional.
set -euo pipefail
BACKEND=skyrl
. "$(dirname "${BASH_SOURCE[0]}")/../common/env_lib.sh"
require_command "$@"
activate_prefix skyrl/.venv
export RL_BENCH_SKYRL_SOURCE="$RL_BENCH_ENV_ROOT/skyrl"
if [ -n "${CUDA_HOME:-}" ]; then activate_cuda_home; fi
if [ "${SKYRL_USE_CUDA_COMPAT:-0}" = 1 ]; then
    # shellcheck disable=SC1091
    . "$(dirname "${BASH_SOURCE[0]}")/pins.env"
    compat=
    for d in "$VIRTUAL_ENV"/lib/python*/site-packages/"$SKYRL_CUDA_COMPAT_SUBDIR"; do
        [ -d "$d" ] && { compat=$d; break; }
    done
    [ -n "$compat" ] || die "SKYRL_USE_CUDA_COMPAT=1 but $VIRTUAL_ENV has no site-packages/$SKYRL_CUDA_COMPAT_SUBDIR"
    export LD_LIBRARY_PATH="$compat${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export RL_BENCH_SKYRL_CUDA_COMPAT="$compat"
fi
exec "$@"

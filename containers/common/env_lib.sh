# Shared part of containers/{backend}/env.sh (sourced, not run): activate a native
# prefix provisioned by containers/{backend}/setup.sh for the controller command.
# It only reads the prefix; it never installs, repairs or changes anything.

die() { echo "containers/${BACKEND}/env.sh: error: $*" >&2; exit 2; }

activate_prefix() {  # venv path relative to the prefix
    [ "$#" -ge 1 ] || die "internal: activate_prefix needs the venv path"
    [ -n "${RL_BENCH_ENV_ROOT:-}" ] || die "set RL_BENCH_ENV_ROOT to the absolute prefix made by containers/${BACKEND}/setup.sh"
    case "$RL_BENCH_ENV_ROOT" in /*) ;; *) die "RL_BENCH_ENV_ROOT must be absolute (got $RL_BENCH_ENV_ROOT)";; esac
    [ -f "$RL_BENCH_ENV_ROOT/setup_manifests/${BACKEND}.json" ] \
        || die "$RL_BENCH_ENV_ROOT/setup_manifests/${BACKEND}.json is missing: the prefix was not (fully) provisioned by containers/${BACKEND}/setup.sh"
    local venv="$RL_BENCH_ENV_ROOT/$1"
    [ -x "$venv/bin/python" ] || die "no Python at $venv/bin/python"
    export VIRTUAL_ENV="$venv"
    export PATH="$venv/bin:$PATH"
    unset PYTHONHOME
    export RL_BENCH_RUNTIME=native
    export RL_BENCH_BACKEND="$BACKEND"
    export RL_BENCH_SETUP_MANIFEST_DIR="$RL_BENCH_ENV_ROOT/setup_manifests"
    export RL_BENCH_NATIVE_PYTHON="$venv/bin/python"
}

activate_cuda_home() {
    [ -d "$CUDA_HOME" ] || die "CUDA_HOME=$CUDA_HOME is not a directory"
    [ -x "$CUDA_HOME/bin/nvcc" ] || die "CUDA_HOME=$CUDA_HOME has no bin/nvcc (a CUDA toolkit is required, pinned: ${RL_BENCH_CUDA_VERSION:-see containers/${BACKEND}/pins.env})"
    export PATH="$CUDA_HOME/bin:$PATH"
    export LD_LIBRARY_PATH="$CUDA_HOME/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

require_command() {
    [ "$#" -ge 1 ] || die "usage: env RL_BENCH_ENV_ROOT=/abs/prefix bash containers/${BACKEND}/env.sh COMMAND [ARGS...]"
}

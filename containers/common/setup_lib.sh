# Shared steps of containers/{backend}/setup.sh (sourced, not run).
# A setup provisions a FRESH prefix (RL_BENCH_ENV_ROOT) and records what it did in
# PREFIX/setup_manifests/; it never repairs or mutates an existing environment.
# Phases (RL_BENCH_SETUP_PHASE): env = the backend's pinned environment,
# bench = install this benchmark into it and write the setup manifest, all = both.
# Container recipes run the two phases as separate layers.

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PHASE=${RL_BENCH_SETUP_PHASE:-all}

say() { echo "${BACKEND}/setup.sh: $*"; }
die() { echo "${BACKEND}/setup.sh: error: $*" >&2; exit 1; }

load_pins() {
    local pins="$REPO_ROOT/containers/$BACKEND/pins.env"
    [ -f "$pins" ] || die "missing $pins"
    set -a
    # shellcheck disable=SC1090
    . "$pins"
    set +a
}

check_prefix() {
    [ -n "${RL_BENCH_ENV_ROOT:-}" ] || die "set RL_BENCH_ENV_ROOT to an absolute path for a new prefix"
    case "$RL_BENCH_ENV_ROOT" in /*) ;; *) die "RL_BENCH_ENV_ROOT must be absolute (got $RL_BENCH_ENV_ROOT)";; esac
    PREFIX=$RL_BENCH_ENV_ROOT
    case "$PHASE" in
        env|all)
            if [ -e "$PREFIX" ] && [ -n "$(ls -A "$PREFIX" 2>/dev/null)" ]; then
                die "$PREFIX exists and is not empty; setup never modifies an existing environment. Choose a fresh prefix."
            fi
            mkdir -p "$PREFIX/setup_manifests"
            date -u +%Y-%m-%dT%H:%M:%S+00:00 > "$PREFIX/setup_manifests/.started_at"
            ;;
        bench)
            [ -f "$PREFIX/setup_manifests/.started_at" ] || die "$PREFIX was not provisioned by the env phase of this script"
            [ ! -e "$PREFIX/setup_manifests/$BACKEND.json" ] || die "$PREFIX is already complete; setup never modifies an existing environment"
            ;;
        *) die "RL_BENCH_SETUP_PHASE must be env, bench or all (got $PHASE)";;
    esac
}

require_uv() {
    command -v uv >/dev/null 2>&1 || die "uv is required (pinned: $RL_BENCH_UV_VERSION); install it with 'python3 -m pip install uv==$RL_BENCH_UV_VERSION'"
    local have
    have=$(uv --version | awk '{print $2}')
    [ "$have" = "$RL_BENCH_UV_VERSION" ] || say "note: uv $have differs from the pinned $RL_BENCH_UV_VERSION (recorded in the setup manifest)"
}

# The interpreter request for uv: the pinned version, or RL_BENCH_PYTHON (a path to
# an interpreter of that same version, for hosts where uv cannot find one by itself).
python_request() {
    if [ -n "${RL_BENCH_PYTHON:-}" ]; then
        local v
        v=$("$RL_BENCH_PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])') || die "RL_BENCH_PYTHON=$RL_BENCH_PYTHON does not run"
        [ "$v" = "$RL_BENCH_PYTHON_VERSION" ] || die "RL_BENCH_PYTHON is Python $v, the pin is $RL_BENCH_PYTHON_VERSION"
        echo "$RL_BENCH_PYTHON"
    else
        echo "$RL_BENCH_PYTHON_VERSION"
    fi
}

# git checkout of a pinned commit, verified after checkout.
checkout_pinned() {  # repo commit dest
    local repo=$1 commit=$2 dest=$3
    git init -q "$dest"
    git -C "$dest" fetch -q --depth 1 "$repo" "$commit" || die "cannot fetch $commit from $repo"
    git -C "$dest" checkout -q --detach FETCH_HEAD
    local head
    head=$(git -C "$dest" rev-parse HEAD)
    [ "$head" = "$commit" ] || die "$dest is at $head, not the pinned $commit"
}

# What the benchmark package needs inside a framework's own environment (a recipe
# whose environment is not the project's uv.lock calls this before recording).
install_bench_runtime() {  # python
    uv pip install --python "$1" -r "$REPO_ROOT/containers/common/bench-runtime.txt" || die "installing benchmark runtime needs failed"
}

# Install this benchmark (non-editable: the prefix keeps the code it was set up with),
# then write the setup manifest with the prefix's Python.
install_bench_and_record() {  # python [fact ...]
    local py=$1; shift
    uv pip install --python "$py" --no-deps "$REPO_ROOT" || die "installing the benchmark into $py failed"
    local facts=(--fact "uv=$(uv --version)")
    for f in "$@"; do facts+=(--fact "$f"); done
    PYTHONPATH="$REPO_ROOT/src" "$py" -m rl_pipeline_bench.provenance setup-manifest \
        --root "$REPO_ROOT" --backend "$BACKEND" --prefix "$PREFIX" \
        --started-at "$(cat "$PREFIX/setup_manifests/.started_at")" "${facts[@]}" \
        || die "writing the setup manifest failed"
}

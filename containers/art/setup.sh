#!/usr/bin/env bash
# Provision a fresh native prefix for ART at its pinned commit:
#   RL_BENCH_ENV_ROOT=/abs/new/prefix bash containers/art/setup.sh
# Result: PREFIX/art (checkout), PREFIX/art/.venv (ART's own uv.lock + this
# benchmark) and PREFIX/setup_manifests/art.json. Pins: containers/art/pins.env.
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
    # shellcheck disable=SC2086
    (cd "$SRC" && uv sync $ART_UV_SYNC_ARGS --python "$(python_request)") || die "uv sync of ART failed"
fi
if [ "$PHASE" != env ]; then
    install_bench_runtime "$SRC/.venv/bin/python"
    install_bench_and_record "$SRC/.venv/bin/python" "art_commit=$(git -C "$SRC" rev-parse HEAD)"
    say "done: $PREFIX"
fi

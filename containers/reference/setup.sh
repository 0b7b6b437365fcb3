#!/usr/bin/env bash
# Provision a fresh native prefix for the reference backend:
#   RL_BENCH_ENV_ROOT=/abs/new/prefix bash containers/reference/setup.sh
# Result: PREFIX/reference/.venv (the project's uv.lock, this benchmark installed)
# and PREFIX/setup_manifests/reference.json. Pins: containers/reference/pins.env.
set -euo pipefail
BACKEND=reference
. "$(dirname "${BASH_SOURCE[0]}")/../common/setup_lib.sh"
load_pins
check_prefix
require_uv
VENV="$PREFIX/reference/.venv"
if [ "$PHASE" != bench ]; then
    say "creating $VENV (Python $RL_BENCH_PYTHON_VERSION) from $REPO_ROOT/uv.lock"
    # shellcheck disable=SC2086
    (cd "$REPO_ROOT" && UV_PROJECT_ENVIRONMENT="$VENV" uv sync $RL_BENCH_UV_SYNC_ARGS \
        --python "$(python_request)" --no-install-project) || die "uv sync failed"
fi
if [ "$PHASE" != env ]; then
    install_bench_and_record "$VENV/bin/python"
    say "done: $PREFIX"
fi

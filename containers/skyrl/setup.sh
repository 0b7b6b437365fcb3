#!/usr/bin/env bash
# Provision a fresh native prefix for SkyRL at its pinned commit:
#   RL_BENCH_ENV_ROOT=/abs/new/prefix bash containers/skyrl/setup.sh
# Result: PREFIX/skyrl (checkout, pass it as --skyrl-source), PREFIX/skyrl/.venv
# (SkyRL's own uv.lock + this benchmark) and PREFIX/setup_manifests/skyrl.json.
# Pins: containers/skyrl/pins.env.
set -euo pipefail
BACKEND=skyrl
. "$(dirname "${BASH_SOURCE[0]}")/../common/setup_lib.sh"
load_pins
check_prefix
require_uv
command -v git >/dev/null 2>&1 || die "git is required"
SRC="$PREFIX/skyrl"
if [ "$PHASE" != bench ]; then
    say "checking out $SKYRL_REPO at $SKYRL_COMMIT into $SRC"
    checkout_pinned "$SKYRL_REPO" "$SKYRL_COMMIT" "$SRC"
    # Per-expert LoRA needs these config keys (skyrl 0.4.0 has them; main up to 2026-08-21 had none:
    # docs/backends.md, "The SkyRL pin"). Refused here, before the long sync, naming each; the
    # preflight asks the installed SkyRL again before every lease (backends/skyrl/support.py).
    missing=""
    for key in $SKYRL_CONTRACT_KEYS; do
        grep -Eq "^[[:space:]]+$key:" "$SRC/skyrl/train/config/config.py" 2>/dev/null || missing="$missing $key"
    done
    [ -z "$missing" ] || die "SkyRL at $SKYRL_COMMIT cannot express the contract: skyrl/train/config/config.py lacks$missing; set SKYRL_COMMIT in containers/skyrl/pins.env to a commit that defines them (docs/backends.md, 'The SkyRL pin')"
    # shellcheck disable=SC2086
    (cd "$SRC/$SKYRL_PROJECT_SUBDIR" && UV_PROJECT_ENVIRONMENT="$SRC/.venv" uv sync $SKYRL_UV_SYNC_ARGS \
        --python "$(python_request)") || die "uv sync of SkyRL failed"
fi
if [ "$PHASE" != env ]; then
    install_bench_runtime "$SRC/.venv/bin/python"
    install_bench_and_record "$SRC/.venv/bin/python" "skyrl_commit=$(git -C "$SRC" rev-parse HEAD)"
    say "done: $PREFIX"
fi

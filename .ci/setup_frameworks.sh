#!/usr/bin/env bash
# Build the framework test environment: the real openpipe-art and skyrl packages
# (pinned in tests/frameworks/requirements.lock) in their own Python 3.12 venv,
# with this checkout installed without dependencies. tests/frameworks/ runs there
# (tests/test_frameworks_env.py starts it from the main suite). Idempotent.
# Override the location with RL_BENCH_FRAMEWORKS_VENV, the interpreter with
# RL_BENCH_FRAMEWORKS_PYTHON.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${RL_BENCH_FRAMEWORKS_VENV:-.scratch/venv-frameworks}
LOCK=tests/frameworks/requirements.lock
say() { echo "setup_frameworks: $*"; }

find_python() {
    if [ -n "${RL_BENCH_FRAMEWORKS_PYTHON:-}" ]; then echo "$RL_BENCH_FRAMEWORKS_PYTHON"; return; fi
    local p
    p=$(uv python find 3.12 2>/dev/null || true)
    if [ -n "$p" ]; then echo "$p"; return; fi
    for p in "$HOME"/.pyenv/versions/3.12*/bin/python3.12 /usr/bin/python3.12 /usr/local/bin/python3.12; do
        [ -x "$p" ] && { echo "$p"; return; }
    done
}

PY=$(find_python)
if [ -z "$PY" ]; then
    say "no Python 3.12 found (openpipe-art 0.5.23 and skyrl 0.4.0 need >= 3.12); set RL_BENCH_FRAMEWORKS_PYTHON" >&2
    exit 1
fi

start=$(date +%s)
stamp="$VENV/.lock.sha256"
want=$(sha256sum "$LOCK" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$VENV/bin/python" ]; then
    say "$VENV is up to date with $LOCK"
else
    say "creating $VENV with $PY"
    uv venv -q --clear -p "$PY" "$VENV"
    VIRTUAL_ENV="$VENV" uv pip install -q -r "$LOCK"
    echo "$want" > "$stamp"
fi
VIRTUAL_ENV="$VENV" uv pip install -q --no-deps -e .
"$VENV/bin/python" - <<'EOF'
from importlib.metadata import version
print("setup_frameworks: openpipe-art", version("openpipe-art"), "skyrl", version("skyrl"))
EOF
say "done in $(( $(date +%s) - start ))s"

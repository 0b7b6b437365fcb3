#!/usr/bin/env bash
# Build the framework test environment: the real openpipe-art 0.5.23 and skyrl 0.4.0
# (pinned in tests/frameworks/requirements.lock) in their own Python 3.12 venv, with
# this checkout installed without dependencies, plus openpipe-art 0.5.18 and skyrl
# 0.3.0 alone in overlay folders (put first on PYTHONPATH by the tests that show an
# older release is refused, naming each missing setting). tests/frameworks/ runs there (tests/frameworks/test_in_framework_env.py
# starts it from the main suite). Idempotent: a stamp of the lock's sha256 skips the
# install; bytecode is compiled once here, since PYTHONDONTWRITEBYTECODE would make
# every test process recompile torch, ART and SkyRL.
# Override the location with RL_BENCH_FRAMEWORKS_VENV, the interpreter with
# RL_BENCH_FRAMEWORKS_PYTHON.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${RL_BENCH_FRAMEWORKS_VENV:-.scratch/venv-frameworks}
LOCK=tests/frameworks/requirements.lock
OLDER_RELEASES="openpipe-art==0.5.18 skyrl==0.3.0"
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
    VIRTUAL_ENV="$VENV" UV_PYTHON_DOWNLOADS=never uv pip install -q --compile-bytecode -r "$LOCK"
    echo "$want" > "$stamp"
fi
for release in $OLDER_RELEASES; do
    overlay="$VENV/overlays/${release/==/-}"
    [ -f "$overlay/.done" ] && continue
    say "installing $release (no dependencies) into $overlay"
    rm -rf "$overlay"
    UV_PYTHON_DOWNLOADS=never uv pip install -q --no-deps --compile-bytecode --python "$VENV/bin/python" \
        --target "$overlay" "$release"
    touch "$overlay/.done"
done
VIRTUAL_ENV="$VENV" uv pip install -q --no-deps -e .
"$VENV/bin/python" - <<'EOF'
from importlib.metadata import version
print("setup_frameworks: openpipe-art", version("openpipe-art"), "skyrl", version("skyrl"))
EOF
say "done in $(( $(date +%s) - start ))s"

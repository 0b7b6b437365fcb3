#!/usr/bin/env bash
# Headless Chromium for tests/test_browser.py: Debian's own `chromium` package, driven
# by Playwright for Python (dev dependency group) through its executable path; nothing
# is downloaded by Playwright. fonts-dejavu-core gives the page a font to render with.
# Idempotent; run as root.
set -euo pipefail
if ! command -v chromium >/dev/null 2>&1 || ! fc-list 2>/dev/null | grep -qi dejavu; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
fi
chromium --version

"""Run the real-package tests inside the framework venv from the main test suite.

The framework packages (openpipe-art 0.5.23, skyrl 0.4.0) live in their own Python
3.12 venv (.ci/setup_frameworks.sh) because skyrl pins transformers/peft apart from
this project's. This test runs
tests/frameworks/test_real_*.py there with missing packages made an error. In
CI (CI=true) a missing venv fails; elsewhere it skips, naming the setup script.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# Slow tier (tests/conftest.py): runs the framework venv's own tests.
pytestmark = pytest.mark.frameworks

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("RL_BENCH_FRAMEWORKS_VENV", ROOT / ".scratch" / "venv-frameworks"))


@pytest.mark.skipif(os.environ.get("RL_BENCH_REQUIRE_FRAMEWORKS") == "1", reason="already inside the framework venv")
def test_real_framework_tests_pass_in_their_venv():
    python = VENV / "bin" / "python"
    if not python.exists():
        msg = f"framework venv {VENV} is missing; build it with `bash .ci/setup_frameworks.sh`"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "frameworks").glob("test_real_*.py"))
    assert files, "no tests/frameworks/test_real_*.py found"
    # LiteLLM (an ART dependency) would otherwise try to fetch a price list over the network.
    # The venv holds no checkout (one build serves every clone): this checkout's src/ comes first.
    env = {**os.environ, "RL_BENCH_REQUIRE_FRAMEWORKS": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH", "")) if p)}
    env.pop("VIRTUAL_ENV", None)
    proc = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *files],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    sys.stdout.write(out[-3000:])
    assert proc.returncode == 0, f"framework tests failed in {VENV}:\n{out[-6000:]}"
    assert " passed" in out and " skipped" not in out.splitlines()[-1], out[-2000:]

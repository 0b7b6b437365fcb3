"""The real-package tests run only inside the framework venv (RL_BENCH_REQUIRE_FRAMEWORKS=1).

From the main suite they are run there by test_in_framework_env.py, so the main
environment does not collect them (they would only skip).
"""

import os

if os.environ.get("RL_BENCH_REQUIRE_FRAMEWORKS") != "1":
    collect_ignore_glob = ["test_real_*.py"]

"""System tools some tests run (fio, latexmk, ...): installed by .ci/setup_*.sh, not by `uv sync`.

A test that needs one is marked `tool` (the slow tier) and asks for it here: without the
tool it is skipped, naming the script that installs it; in CI (`CI` set) it fails instead,
so a CI machine that lost a tool is noticed.
"""

from __future__ import annotations

import os
import shutil

import pytest


def require_tool(name: str, setup_script: str) -> str:
    """The tool's path, else skip (fail in CI) naming `.ci/<setup_script>`."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed: run `sudo bash .ci/{setup_script}`"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path

"""Fixtures shared across test modules.

`smoke_workdir` is the one real smoke pipeline run of the test session (about 4 minutes
on 2 cores): every test that needs a rendered report or real evidence from the whole
workflow reuses it instead of running the pipeline again.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from planted_secrets import PLANTED_SECRETS
from workflow_copy import copy_repo, snakemake


@pytest.fixture(scope="session")
def smoke_workdir(tmp_path_factory) -> Path:
    """A scratch copy of the repository after `snakemake --cores 1 reports/comparison.html` (smoke suite).

    It runs with a broad set of planted secrets in its environment; the last test of
    test_pipeline.py checks that none of them was written anywhere.
    """
    workdir = copy_repo(tmp_path_factory.mktemp("pipeline") / "repo")
    proc = snakemake(workdir, "reports/comparison.html", extra_env=PLANTED_SECRETS)
    terminal_of(workdir).write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, "smoke pipeline failed"
    return workdir


def terminal_of(workdir: Path) -> Path:
    """Where smoke_workdir keeps what its pipeline run printed (beside the copy, not in it)."""
    return workdir.parent / "terminal.txt"


@pytest.fixture(scope="session")
def smoke_terminal(smoke_workdir) -> str:
    """Everything the smoke pipeline run printed: what a newcomer's terminal showed."""
    return terminal_of(smoke_workdir).read_text()

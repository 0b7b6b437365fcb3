"""Fixtures shared across test modules.

`smoke_workdir` is the one real smoke pipeline run of the test session (about 4 minutes
on 2 cores): every test that needs a rendered report or real evidence from the whole
workflow reuses it instead of running the pipeline again.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from planted_secrets import PLANTED_SECRETS
from workflow_copy import copy_repo, snakemake

from rl_pipeline_bench.settings.config import load_config
from rl_pipeline_bench.paths import CONFIG_PATH

#: Markers of the slow tier (registered in pyproject.toml): real benchmark and pipeline runs,
#: SLURM, container images, the framework venv, a browser, LaTeX, a real MLflow server, any
#: Snakemake start and any system tool. What is left, the everyday tier, is pure Python and
#: passes on a machine with only `uv sync`.
SLOW_MARKERS = ("e2e", "cluster", "podman", "frameworks", "browser", "tex", "server", "workflow", "tool")


def pytest_addoption(parser):
    group = parser.getgroup("tiers")
    group.addoption("--fast", action="store_true",
                    help=f"the everyday tier: leave out tests marked {', '.join(SLOW_MARKERS)}")
    group.addoption("--slow", action="store_true", help="only the tests --fast leaves out")


def pytest_collection_modifyitems(config, items):
    fast, slow = config.getoption("--fast"), config.getoption("--slow")
    if not (fast or slow):
        return
    if fast and slow:
        raise pytest.UsageError("--fast and --slow select complementary tiers: give one (or neither, for all)")
    keep, drop = [], []
    for item in items:
        is_slow = any(item.get_closest_marker(m) for m in SLOW_MARKERS)
        (keep if is_slow == slow else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def fresh_config():
    """Copies of the shipped config.yaml, loaded and validated once per session (for module-scoped
    fixtures and helpers; a test takes `config`)."""
    loaded = load_config()
    return lambda: copy.deepcopy(loaded)


@pytest.fixture()
def config(fresh_config) -> dict:
    """The shipped config.yaml, validated; each test gets its own copy to change."""
    return fresh_config()


@pytest.fixture()
def raw_config() -> dict:
    """The shipped config.yaml as YAML gives it: before validation fills in defaults."""
    return yaml.safe_load(CONFIG_PATH.read_text())


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

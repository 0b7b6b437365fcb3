"""Scratch copies of the repository and Snakemake runs inside them (for pipeline tests)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from rl_pipeline_bench.paths import ROOT

#: What a scratch copy leaves out: environments, VCS data and everything the pipeline generates.
SKIP = shutil.ignore_patterns(".venv", ".git", "results", "reports", "logs", ".snakemake", "__pycache__",
                              ".pytest_cache", ".whl", ".gl", ".scratch", ".venv-*")


def copy_repo(dest: Path) -> Path:
    shutil.copytree(ROOT, dest, ignore=SKIP, symlinks=True)
    return dest


def workflow_env(workdir: Path, *, own_source: bool = False, extra_env: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for commands in a scratch copy; own_source imports the copy's package, not this checkout's."""
    env = dict(os.environ, **(extra_env or {}), RL_BENCH_ROOT=str(workdir), PYTHONUNBUFFERED="1")
    # `bench` must be on PATH for shell rules; it sits next to this interpreter.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    if own_source:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(workdir / "src"), env.get("PYTHONPATH")) if p)
    return env


def snakemake(workdir: Path, *args: str, timeout: int = 1200, own_source: bool = False,
              extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", *args],
                          cwd=workdir, env=workflow_env(workdir, own_source=own_source, extra_env=extra_env),
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        print(proc.stdout[-6000:], proc.stderr[-6000:])
    return proc


def scheduled_jobs(proc: subprocess.CompletedProcess) -> str:
    """The rule names Snakemake scheduled, from its job-stats table."""
    text = proc.stdout + proc.stderr
    return text.split("Job stats:", 1)[1].split("Select jobs", 1)[0] if "Job stats:" in text else ""


def spec_id(workdir: Path, suite: str = "smoke", configfile: Path | None = None) -> str:
    """The run spec id a suite resolves to in a copy (a --configfile merged the way Snakemake merges it)."""
    from rl_pipeline_bench.settings.config import load_config
    from rl_pipeline_bench.settings.spec import build_spec

    config = load_config(workdir / "config.yaml", configfiles=[configfile] if configfile else [])
    return build_spec(config, suite)["id"]

"""SkyRL's recipe refuses a commit that cannot express per-expert LoRA, before its long uv sync (issue 25, finding 9).

Whether the contract's pin has SkyRL's per-expert LoRA keys could not be read here
(docs/backends.md, "The SkyRL pin"). containers/skyrl/setup.sh checks the checkout for
them and names the missing ones; the keys are those the support check owns. The test
points a copy of the recipe at a local git repository (no network) holding a SkyRL
config without the keys, and at one with them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from rl_pipeline_bench.backends.skyrl.support import OWNED
from rl_pipeline_bench.paths import ROOT
from rl_pipeline_bench.provenance.recipes import read_pins

CONFIG = "skyrl/train/config/config.py"


def test_the_recipe_checks_the_keys_the_support_check_owns():
    keys = read_pins("skyrl", ROOT)["SKYRL_CONTRACT_KEYS"].split()
    assert keys == [path.rsplit(".", 1)[1] for path in OWNED["per_expert_lora"]]


def _skyrl_repo(path: Path, config_text: str) -> str:
    """A local git repository with one commit holding a SkyRL config file; its commit id."""
    (path / CONFIG).parent.mkdir(parents=True)
    (path / CONFIG).write_text(config_text)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "config"],
                 ["config", "uploadpack.allowAnySHA1InWant", "true"]):
        subprocess.run(["git", *args], cwd=path, check=True, env=env, capture_output=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, check=True, capture_output=True,
                          text=True).stdout.strip()


def _setup(tmp_path: Path, config_text: str) -> subprocess.CompletedProcess:
    tree = tmp_path / "tree"
    for rel in ("containers/skyrl", "containers/common"):
        shutil.copytree(ROOT / rel, tree / rel)
    commit = _skyrl_repo(tmp_path / "skyrl-src", config_text)
    pins = tree / "containers" / "skyrl" / "pins.env"
    text = pins.read_text()
    text = text.replace(read_pins("skyrl", ROOT)["SKYRL_REPO"], f"file://{tmp_path / 'skyrl-src'}")
    pins.write_text(text.replace(read_pins("skyrl", ROOT)["SKYRL_COMMIT"], commit))
    env = {k: v for k, v in os.environ.items() if k not in ("RL_BENCH_SETUP_PHASE",)}
    env.update(RL_BENCH_ENV_ROOT=str(tmp_path / "prefix"))
    return subprocess.run(["bash", str(tree / "containers" / "skyrl" / "setup.sh")], env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.skipif(shutil.which("git") is None or shutil.which("uv") is None, reason="needs git and uv")
def test_a_commit_without_the_keys_is_refused_naming_each(tmp_path):
    proc = _setup(tmp_path, "class SkyRLLoraConfig:\n    rank: int = 0\n")
    assert proc.returncode != 0
    assert ("cannot express the contract: skyrl/train/config/config.py lacks share_expert_adapters "
            "experts_shared_outer_loras normalize_moe_lora") in proc.stderr, proc.stderr
    assert not (tmp_path / "prefix" / "skyrl" / ".venv").exists()  # refused before the sync


@pytest.mark.skipif(shutil.which("git") is None or shutil.which("uv") is None, reason="needs git and uv")
def test_a_commit_with_the_keys_goes_on_to_the_sync(tmp_path):
    config = ("class SkyRLLoraConfig:\n    share_expert_adapters: bool = True\n"
              "class MegatronLoraConfig:\n    experts_shared_outer_loras: bool = False\n"
              "    normalize_moe_lora: bool = False\n")
    proc = _setup(tmp_path, config)
    assert "cannot express the contract" not in proc.stderr
    assert "uv sync of SkyRL failed" in proc.stderr  # the next step ran (and failed on this checkout: no project)

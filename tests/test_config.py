"""Config validation: bad input names the key and the allowed values, before any job runs."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import yaml

from rl_pipeline_bench.config import ConfigError, check_member, get_suite, load_config, validate_config
from rl_pipeline_bench.paths import CONFIG_PATH, ROOT


@pytest.fixture()
def config():
    return yaml.safe_load(CONFIG_PATH.read_text())


def test_shipped_config_is_valid(config):
    validated = validate_config(copy.deepcopy(config))
    assert get_suite(validated).name == "smoke"
    assert set(get_suite(validated, "comparison")["backends"]) == {"art", "skyrl"}


def test_default_contract_is_five_plus_fifteen(config):
    for name in ("smoke", "comparison"):
        assert config["suites"][name]["contract"] == {"warmup_updates": 5, "measured_updates": 15, "headline_updates": 5}


def test_unknown_suite_lists_known(config):
    with pytest.raises(ConfigError) as exc:
        load_config(overrides={"suite": "nosuch"})
    assert "nosuch" in str(exc.value)
    assert "comparison, reference_gpu, smoke" in str(exc.value)


def test_bad_enum_names_key_and_allowed_values(config):
    config["suites"]["smoke"]["backends"] = ["reference", "trl"]
    with pytest.raises(ConfigError) as exc:
        validate_config(config)
    msg = str(exc.value)
    assert "suites/smoke/backends/1" in msg
    assert "allowed: art, reference, skyrl" in msg


def test_unknown_key_lists_allowed_keys(config):
    config["suites"]["smoke"]["sclae"] = 0.5
    with pytest.raises(ConfigError) as exc:
        validate_config(config)
    assert "sclae" in str(exc.value) and "scale" in str(exc.value)


@pytest.mark.parametrize(
    "mutate, needle",
    [
        (lambda c: c["suites"]["smoke"]["contract"].update(headline_updates=99), "headline_updates"),
        (lambda c: c["suites"]["smoke"].update(gpus=2), "suites/smoke/gpus"),
        (lambda c: c["suites"]["comparison"].update(gpu_sets=["0,1"]), "gpu_sets"),
        (lambda c: c["suites"]["smoke"].update(model="nomodel"), "unknown model 'nomodel'"),
        (lambda c: c["workloads"]["multi_turn"]["completion_tokens"].__setitem__(0, [0.1, 64]), "start at p=0"),
        (lambda c: c["workloads"]["multi_turn"]["completion_tokens"].reverse(), "workloads/multi_turn/completion_tokens"),
        (lambda c: c["models"]["qwen3.5-35b-a3b"].pop("revision"), "must pin a 40-hex revision"),
    ],
)
def test_cross_field_errors_name_the_key(config, mutate, needle):
    mutate(config)
    with pytest.raises(ConfigError) as exc:
        validate_config(config)
    assert needle in str(exc.value)


def test_check_member_lists_known():
    with pytest.raises(ConfigError, match=r"unknown workload 'x' \(known workloads: a, b\)"):
        check_member("workload", "x", ["a", "b"])


def test_snakemake_refuses_unknown_suite_before_any_job(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", "-n", "--config", "suite=nosuch"],
        cwd=ROOT, capture_output=True, text=True,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "unknown suite 'nosuch'" in out and "smoke" in out


def test_bench_cli_unknown_backend_exits_2(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "rl_pipeline_bench.cli", "run", "--backend", "trl", "--workload", "multi_turn"],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert proc.returncode == 2
    assert "unknown backend 'trl' (known backends: art, reference, skyrl)" in proc.stderr

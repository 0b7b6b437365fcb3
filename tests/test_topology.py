"""Contract topology checks: clear errors before the lease, naming the setting."""

from __future__ import annotations

import re

import pytest

from rl_pipeline_bench.configfile import ConfigError, get_suite
from rl_pipeline_bench.backends.art.contract import TOPOLOGY as ART_TOPOLOGY
from rl_pipeline_bench.backends.skyrl.contract import TOPOLOGY as SKYRL_TOPOLOGY
from rl_pipeline_bench.backends.skyrl.contract import skyrl_workers
from rl_pipeline_bench.topology import (
    Topology,
    is_supplemental,
    preflight,
    suite_problems,
    variant_label,
)


def _suite(config, **changes):
    config["suites"]["comparison"].update(changes)
    return get_suite(config, "comparison")


def test_comparison_suite_passes_for_both_frameworks(config):
    suite = get_suite(config, "comparison")
    for backend in ("art", "skyrl"):
        preflight(config, suite, backend)
    assert suite_problems(config, get_suite(config, "smoke"), "reference") == []


def test_contract_layouts():
    assert ART_TOPOLOGY.label() == "TP1 CP2 EP2 DP1" and ART_TOPOLOGY.problems() == []
    assert SKYRL_TOPOLOGY.label() == "TP1 CP1 EP2 DP2" and SKYRL_TOPOLOGY.problems() == []
    assert ART_TOPOLOGY.train_gpus + ART_TOPOLOGY.inference_gpus == 4


@pytest.mark.parametrize("topo, match", [
    (Topology(train_gpus=2, inference_gpus=2, tp=1, cp=2, ep=4), "EP\\*ETP = 4 does not divide"),
    (Topology(train_gpus=3, inference_gpus=1, tp=2, cp=1, ep=1), "not a multiple of TP\\*CP\\*PP = 2"),
    (Topology(train_gpus=2, inference_gpus=2, tp=0, cp=1, ep=1), "tp must be >= 1"),
])
def test_impossible_topologies_are_named(topo, match):
    problems = topo.problems()
    assert problems and any(re.search(match, p) for p in problems), problems


@pytest.mark.parametrize("backend", ["art", "skyrl"])
def test_wrong_gpu_count_names_the_key(config, backend):
    suite = _suite(config, gpus=2, gpu_sets=["0,1"])
    with pytest.raises(ConfigError, match=r"suites/comparison/gpus': .* needs exactly 4 GPUs .*got 2"):
        preflight(config, suite, backend)


def test_missing_gpu_count_and_cpu_device_are_named(config):
    suite = _suite(config, device="cpu")
    del suite.settings["gpus"]
    msg = "\n".join(suite_problems(config, suite, "art"))
    assert "suites/comparison/gpus': missing" in msg
    assert "suites/comparison/device': art runs on cuda only" in msg


def test_unsupported_model_is_named(config):
    config["models"]["other"] = {"source": "hub", "repo_id": "Org/Other-7B", "revision": "a" * 40}
    suite = _suite(config, model="other")
    with pytest.raises(ConfigError, match=r"suites/comparison/model': skyrl does not support model 'other'"):
        preflight(config, suite, "skyrl")
    local = _suite(config, model="reference-tiny-qwen3moe")
    with pytest.raises(ConfigError, match="does not support model 'reference-tiny-qwen3moe'"):
        preflight(config, local, "art")


def test_skyrl_batch_selects_workers_and_bad_batch_is_named(config):
    assert skyrl_workers(get_suite(config, "comparison")) == 12
    b1 = _suite(config, skyrl_batch_size=1)
    assert skyrl_workers(b1) == 3 and variant_label(b1, "skyrl").startswith("B1/workers3")
    bad = _suite(config, skyrl_batch_size=2)
    with pytest.raises(ConfigError, match="skyrl_batch_size': 2 is not a contract batch"):
        preflight(config, bad, "skyrl")


def test_rank_one_is_supplemental(config):
    assert not is_supplemental(get_suite(config, "comparison"))
    r1 = _suite(config, rank=1)
    assert is_supplemental(r1)
    assert variant_label(r1, "art") == "rank 1 (supplemental)"
    preflight(config, r1, "art")  # allowed, but labelled


@pytest.mark.parametrize("backend", ["art", "skyrl"])
def test_backend_run_checks_the_suite_before_importing_the_framework(config, backend):
    from types import SimpleNamespace

    from rl_pipeline_bench.backends import get

    descriptor = get(backend)
    assert list(descriptor.trainer_ranks(get_suite(config, "comparison"))) == [0]
    ctx = SimpleNamespace(config=config, suite=get_suite(config, "smoke"))
    with pytest.raises(ConfigError, match=rf"suites/smoke/gpus': {backend} needs exactly 4 GPUs"):
        descriptor.run(ctx)

"""Contract topology checks: clear errors before the lease, naming the setting."""

from __future__ import annotations

import re

import pytest

from rl_pipeline_bench.records.configfile import ConfigError
from rl_pipeline_bench.backends.art.contract import TOPOLOGY as ART_TOPOLOGY
from rl_pipeline_bench.backends.skyrl.contract import TOPOLOGY as SKYRL_TOPOLOGY
from rl_pipeline_bench.backends.skyrl.contract import skyrl_workers
from rl_pipeline_bench.settings.spec import build_spec, check_spec
from rl_pipeline_bench.backends.suite_checks import preflight, suite_problems, variant_label
from rl_pipeline_bench.backends.topology import Topology, is_supplemental


def _spec(config, name="comparison", **changes):
    """The run spec of a suite of `config` (the conftest's per-test copy) after `changes` (the shape every check reads)."""
    config["suites"][name].update(changes)
    return check_spec(build_spec(config, name))


def test_comparison_suite_passes_for_both_frameworks(config):
    spec = _spec(config)
    for backend in ("art", "skyrl"):
        preflight(spec, backend)
    assert suite_problems(_spec(config, "smoke"), "reference") == []


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
    spec = _spec(config, gpus=2, gpu_sets=["0,1"])
    with pytest.raises(ConfigError, match=r"suites/comparison/gpus': .* needs exactly 4 GPUs .*got 2"):
        preflight(spec, backend)


def test_missing_gpu_count_and_cpu_device_are_named(config):
    spec = _spec(config, device="cpu")
    del spec.settings["gpus"]
    msg = "\n".join(suite_problems(spec, "art"))
    assert "suites/comparison/gpus': missing" in msg
    assert "suites/comparison/device': art runs on cuda only" in msg


def test_unsupported_model_is_named(config):
    config["models"]["other"] = {"source": "hub", "repo_id": "Org/Other-7B", "revision": "a" * 40}
    spec = _spec(config, model="other")
    with pytest.raises(ConfigError, match=r"suites/comparison/model': skyrl does not support model 'other'"):
        preflight(spec, "skyrl")
    local = _spec(config, model="reference-tiny-qwen3moe")
    with pytest.raises(ConfigError, match="does not support model 'reference-tiny-qwen3moe'"):
        preflight(local, "art")


def test_skyrl_batch_selects_workers_and_bad_batch_is_named(config):
    assert skyrl_workers(_spec(config)) == 12
    b1 = _spec(config, skyrl_batch_size=1)
    assert skyrl_workers(b1) == 3 and variant_label(b1, "skyrl").startswith("B1/workers3")
    bad = _spec(config, skyrl_batch_size=2)
    with pytest.raises(ConfigError, match="skyrl_batch_size': 2 is not a contract batch"):
        preflight(bad, "skyrl")


def test_rank_one_is_supplemental(config):
    assert not is_supplemental(_spec(config))
    r1 = _spec(config, rank=1)
    assert is_supplemental(r1)
    assert variant_label(r1, "art") == "rank 1 (supplemental)"
    preflight(r1, "art")  # allowed, but labelled


@pytest.mark.parametrize("backend", ["art", "skyrl"])
def test_backend_run_checks_the_suite_before_importing_the_framework(config, backend):
    from types import SimpleNamespace

    from rl_pipeline_bench.backends import get

    descriptor = get(backend)
    assert list(descriptor.trainer_ranks(_spec(config))) == [0]
    ctx = SimpleNamespace(run_spec=_spec(config, "smoke"))
    with pytest.raises(ConfigError, match=rf"suites/smoke/gpus': {backend} needs exactly 4 GPUs"):
        descriptor.run(ctx)

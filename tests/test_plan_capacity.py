"""A plan too small for a backend's N updates is refused by name before any lease (backends/plan_capacity.py).

For every registered backend and every workload of the comparison suite: the default
extra offered work gives the backend what it wants, and one plan group fewer than it
needs is refused by the backend's own suite checks (the ones `bench preflight`, the
workflow at DAG time and the driver's opening run), naming the backend, the workload
and the config key.
"""

from __future__ import annotations

import math

import pytest

from rl_pipeline_bench import backends
from rl_pipeline_bench.backends import plan_capacity
from rl_pipeline_bench.backends.art.contract import autotuner_batch_bounds
from rl_pipeline_bench.backends.suite_checks import suite_problems
from rl_pipeline_bench.plan.workloads import workload_of
from rl_pipeline_bench.settings.spec import build_spec, check_spec

COMPARISON_WORKLOADS = ["multi_turn", "long_generation", "tool_history", "multi_turn_salted"]
CASES = [(b, w) for b in backends.names() for w in COMPARISON_WORKLOADS]


def _spec(config, backend: str, workload: str, **contract):
    """The comparison suite for one backend and one workload (its own config section, if it has one)."""
    suite = config["suites"]["comparison"]
    suite.update(backends=[backend], workloads=[workload])
    suite.setdefault("contract", {}).update(contract)
    return check_spec(build_spec(config, "comparison"))


def test_the_comparison_suite_lists_the_workloads_tested_here(config):
    assert config["suites"]["comparison"]["workloads"] == COMPARISON_WORKLOADS


@pytest.mark.parametrize("backend, workload", CASES)
def test_the_default_plan_gives_each_backend_what_it_wants(config, backend, workload):
    spec = _spec(config, backend, workload)
    ws = workload_of(spec, workload)
    demand = plan_capacity.demand_of(spec, backend, ws)
    assert spec.offered_updates * ws.groups_per_update >= demand.wanted >= demand.needed > 0
    assert plan_capacity.problems(spec, backend) == []


@pytest.mark.parametrize("backend, workload", CASES)
def test_a_plan_one_group_short_of_what_a_backend_needs_is_refused_by_name(config, backend, workload):
    default = _spec(config, backend, workload)
    ws = workload_of(default, workload)
    needed = plan_capacity.demand_of(default, backend, ws).needed
    # The largest extra offered work whose plan is still below what the backend needs, if any is.
    short = math.ceil(needed / ws.groups_per_update) - 1 - default.trained_updates
    # The check is among the backend's own suite checks whatever it needs.
    assert "plan_capacity" in [c.__name__ for c in backends.get(backend).suite_checks]
    if short < 0:
        # Every plan holds N updates at least: a backend that needs no more is never short of one
        # (the reference; SkyRL while its batch is no larger than the workload's groups per update).
        assert needed <= default.trained_updates * ws.groups_per_update
        return
    spec = _spec(config, backend, workload, extra_offered_updates=short)
    assert spec.offered_updates * ws.groups_per_update < needed
    found = [p for p in suite_problems(spec, backend) if "extra_offered_updates" in p]
    assert len(found) == 1, suite_problems(spec, backend)
    assert (f"config key 'suites/comparison/contract/extra_offered_updates': {backend} on {workload} may take "
            f"{needed} plan groups") in found[0]
    enough = _spec(config, backend, workload, extra_offered_updates=short + 1)
    assert not [p for p in suite_problems(enough, backend) if "extra_offered_updates" in p]


def test_skyrl_with_a_batch_larger_than_the_plans_updates_is_refused(config):
    """SkyRL trains 4 groups a step; a workload of 1 group per update must offer 4 N updates (80 here)."""
    config["workloads"]["tool_history"]["groups_per_update"] = 1
    spec = _spec(config, "skyrl", "tool_history", extra_offered_updates=59)  # 79 groups
    assert plan_capacity.demand_of(spec, "skyrl", workload_of(spec, "tool_history")).needed == 80
    assert any("skyrl on tool_history may take 80 plan groups" in p for p in suite_problems(spec, "skyrl"))
    assert plan_capacity.problems(_spec(config, "skyrl", "tool_history", extra_offered_updates=60), "skyrl") == []


def test_ART_on_tool_history_needs_more_than_the_old_plan_offered(config):
    """Issue 25, finding 1: 24 updates x 4 groups = 96 < the 222 groups 20 ART steps can take."""
    spec = _spec(config, "art", "tool_history", extra_offered_updates=4)
    assert spec.offered_updates * workload_of(spec, "tool_history").groups_per_update == 96
    assert sum(autotuner_batch_bounds(20)) == 222
    assert any("art on tool_history may take 222 plan groups" in p for p in suite_problems(spec, "art"))


def test_the_autotuner_bound_follows_the_decision_windows():
    """Steps 1-7 at the start (3 warmup + a 4-step window), then one raise per 4 steps (+20 %, at least 1)."""
    assert autotuner_batch_bounds(20) == [8] * 7 + [10] * 4 + [12] * 4 + [15] * 4 + [18]
    assert autotuner_batch_bounds(3) == [8, 8, 8]
    assert autotuner_batch_bounds(9, packed_sequences=2)[:8] == [16] * 7 + [20]


def test_a_backend_that_declares_nothing_takes_n_updates_worth(config):
    spec = check_spec(build_spec(config, "smoke"))
    ws = workload_of(spec, spec.workloads[0])
    assert backends.get("reference").plan_demand is not None
    assert plan_capacity.PlanDemand(3, 3, "x").wanted == 3
    with pytest.raises(ValueError, match="needed <= wanted"):
        plan_capacity.PlanDemand(4, 3, "x")
    assert spec.extra_offered_updates == plan_capacity.extra_updates_wanted(spec, ["reference"]) == 4
    assert plan_capacity.demand_of(spec, "reference", ws).needed == spec.trained_updates * ws.groups_per_update

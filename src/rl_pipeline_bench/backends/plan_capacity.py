"""How much of the offered plan a backend's run takes, and the check that the plan holds it.

Every backend of a suite is offered the same plan: N trained updates plus
`extra_offered_updates` more, each of the workload's `groups_per_update` groups
(plan.workloads). A backend whose trainer batches plan groups its own way (ART's
online autotuner, SkyRL's batch and staleness budget) can take more than N updates'
worth before its N-th update. Its descriptor's `plan_demand(spec, workload_spec)`
says how many groups (`PlanDemand`):

- `needed`: the most groups its N updates can take; offered fewer, a run may not
  reach update N (ART's PipelineTrainer ends early, SkyRL trains fewer steps);
- `wanted`: `needed` plus what its rollout may run ahead while the last updates
  train; offered fewer, generation drains before the headline window ends.

A suite's default `extra_offered_updates` is the fewest updates that give every one of
its backends what it wants on every workload (`extra_updates_wanted`, read by
settings.spec); every backend's suite checks refuse a plan below what it needs
(`problems`), at DAG time and before any lease. A backend without `plan_demand` takes
exactly N updates' worth and never runs ahead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable

if TYPE_CHECKING:
    from ..plan.workloads import WorkloadSpec
    from .context import RunSpecView


@dataclass(frozen=True)
class PlanDemand:
    """Plan groups a run of N updates of one workload takes (see the module docstring).

    `rule` says how the numbers come about; a refusal names it.
    """

    needed: int
    wanted: int
    rule: str

    def __post_init__(self) -> None:
        if not 0 <= self.needed <= self.wanted:
            raise ValueError(f"plan demand needs 0 <= needed <= wanted, got {self.needed} / {self.wanted}")


#: run spec, workload spec -> the plan groups a backend's run of that workload takes.
PlanDemandFn = Callable[["RunSpecView", "WorkloadSpec"], PlanDemand]


def demand_of(spec: RunSpecView, backend: str, workload: WorkloadSpec) -> PlanDemand:
    """What `backend` takes of `workload`'s plan under `spec` (N updates' worth when it declares nothing)."""
    from . import get

    fn = get(backend).plan_demand
    if fn is not None:
        return fn(spec, workload)
    n = spec.trained_updates * workload.groups_per_update
    return PlanDemand(n, n, f"N = {spec.trained_updates} updates of {workload.groups_per_update} group(s)")


def extra_updates_wanted(spec: RunSpecView, backends: Iterable[str]) -> int:
    """The fewest updates beyond N that give each of `backends` what it wants of each workload of `spec`."""
    from ..plan.workloads import workload_of

    extra = 0
    for name in spec.workloads:
        workload = workload_of(spec, name)
        for backend in backends:
            wanted = demand_of(spec, backend, workload).wanted
            extra = max(extra, math.ceil(wanted / workload.groups_per_update) - spec.trained_updates)
    return extra


def problems(spec: RunSpecView, backend: str) -> list[str]:
    """Why the plan `spec` offers is too small for `backend`'s N updates, per workload (empty: it is not)."""
    from ..plan.workloads import workload_of

    out = []
    for name in spec.workloads:
        workload = workload_of(spec, name)
        demand = demand_of(spec, backend, workload)
        offered = spec.offered_updates * workload.groups_per_update
        if offered < demand.needed:
            updates = math.ceil(demand.needed / workload.groups_per_update) - spec.trained_updates
            out.append(
                f"config key 'suites/{spec.suite_name}/contract/extra_offered_updates': {backend} on {name} may take "
                f"{demand.needed} plan groups for N = {spec.trained_updates} updates ({demand.rule}), the plan "
                f"offers {offered} ({spec.offered_updates} updates of {workload.groups_per_update} group(s)); "
                f"offer at least {updates} extra updates, or leave the key out for the default "
                f"({extra_updates_wanted(spec, [backend])} for {backend})")
    return out


def suite_check(backend: str) -> Callable[[RunSpecView], list[str]]:
    """A descriptor suite check refusing a plan too small for `backend` (see `problems`)."""

    def plan_capacity(spec: RunSpecView) -> list[str]:
        return problems(spec, backend)

    return plan_capacity

"""What a backend is handed: the run spec it reads and the context of one run.

The run spec is `settings.spec.RunSpec`, a layer above `backends`; a backend sees it
through `RunSpecView`, the members it may read (tests/test_framework_kit.py checks that
RunSpec has them all). `RunContext` is built by the runner (`runs/runner.py`) and handed
to the backend's `run(ctx)`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import pandas as pd

    from ..evidence.store import EvidenceWriter
    from ..plan.workloads import WorkloadSpec


class ContractView(Protocol):
    """The contract settings a backend reads (`contract.settings.ContractSettings`)."""

    total_updates: int


@runtime_checkable
class RunSpecView(Protocol):
    """What a backend reads of the resolved run spec (`settings.spec.RunSpec`), the one shape every job reads."""

    suite_name: str
    device: str
    model: dict[str, Any]
    contract: ContractView
    workloads: list[str]
    seed: int
    settings: dict[str, Any]
    trained_updates: int
    extra_offered_updates: int
    offered_updates: int

    def get(self, key: str, default: Any = None) -> Any: ...
    def backend_settings(self, backend: str) -> dict[str, Any]: ...


@dataclass
class RunContext:
    """Everything a backend needs; backends write evidence only through `writer`.

    `run_spec` is the resolved run spec (its typed views: contract, model, the
    backend's own settings, suite keys); `workload_spec` is the workload spec of this run's
    workload; `contract` is what the manifest records (the settings plus the trainer
    ranks and offered plan shape). `plan` holds the trained updates 1..trained_updates plus the extra offered ones
    after them: a backend offers all of it to its rollout, trains only the first
    `trained_updates`, and records calls of later updates with accepted=False
    (rl_pipeline_bench.backends.framework.rollout.accepted_for_update).
    """

    run_spec: RunSpecView
    backend: str
    workload: str
    workload_spec: WorkloadSpec
    trial: int
    plan: pd.DataFrame
    model: dict[str, Any]
    writer: EvidenceWriter
    contract: dict[str, Any] = field(default_factory=dict)

    @property
    def log(self) -> logging.Logger:
        return self.writer.logger

    @property
    def device(self) -> str:
        return self.run_spec.device

    @property
    def trained_updates(self) -> int:
        """N: the updates this run trains and records in updates.parquet."""
        return self.run_spec.trained_updates

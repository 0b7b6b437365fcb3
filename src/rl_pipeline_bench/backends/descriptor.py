"""What a backend says about itself: the one object each `backends/<name>/` package exports.

Everything the pipeline needs to know about a backend (which suites it can run, how
many GPUs, which models, which trainer ranks its evidence carries, which extra
checks its suites and its evidence must pass, which packages its manifest records,
its config keys) lives here, so adding a backend touches only its own package and
its recipe folder `containers/<name>/`. A framework backend builds its descriptor with
the framework kit (`backends/framework/backend.py`).

The callables take what a backend is handed (`backends/context.py`): the resolved run
spec, seen through `RunSpecView`, and a run's `RunContext`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from .context import RunContext, RunSpecView

if TYPE_CHECKING:
    from .topology import Topology


#: A check of one run spec for this backend -> problems, each naming its config key.
SuiteCheck = Callable[[RunSpecView], list[str]]
#: A check of one run's evidence manifest -> summary reasons, each "code: detail".
EvidenceCheck = Callable[[Mapping[str, Any]], list[str]]


def _single_rank(spec: RunSpecView) -> list[int]:
    return [0]


@dataclass(frozen=True)
class HostHook:
    """A change to a run's environment that only some hosts need, applied when asked for by name
    (e.g. `scripts/qualify_kubernetes.py --host-hook NAME`); never applied by default.

    summary: one line for `--help` and errors.
    apply: (env, the backend's pins from its pins.env) -> the new env (a new dict); raises
        RuntimeError when this host cannot have it.
    """

    summary: str
    apply: Callable[[dict[str, str], Mapping[str, str]], dict[str, str]]


@dataclass(frozen=True)
class Backend:
    """A backend's self-description; `run(ctx)` is its only entry point.

    name: the package name under `rl_pipeline_bench.backends` (and of `containers/<name>/`).
    run: runs one benchmark (its RunContext, backends/context.py); raises on failure.
    framework: the distribution of the framework it drives (None: it is its own pipeline); its
        manifests and support checks name it, and it is the first of its `packages`.
    devices: suite `device` values it runs on.
    gpus: the exact GPU count a run needs (None: whatever the suite leases).
    topology: its contract parallel layout (rl_pipeline_bench.backends.topology.Topology), if fixed.
    models: the model repo ids it supports (None: any model of the config).
    model_sources: the model `source` kinds it accepts (a framework needs a pinned hub snapshot).
    Every callable below that takes a suite's settings takes the resolved run spec
    (a RunSpecView: `spec.contract`, `spec.model`, `spec.backend_settings(name)`, `spec.get(suite_key)`).

    trainer_ranks: spec -> the ranks its trainer_intervals.parquet must carry.
    staleness_limit: spec -> how many policy versions its rollout may run ahead of
        training; the default extra offered work (docs/run-spec.md). None: it never runs
        ahead (no extra work is offered unless a suite sets `extra_offered_updates`).
    suite_checks: its own checks of a run spec, run at DAG time and before every lease.
    evidence_checks: its own validity checks on a run's manifest, run by the contract.
    trains_plan_updates: whether its update u trains exactly the accepted calls of plan update u
        (the contract then reconciles calls with updates per update; otherwise over the run).
    reason_codes: {code: meaning} of the reasons its evidence checks produce.
    packages: distributions whose versions its run manifests record (beside the common ones).
    package_homes: () -> {distribution: Python interpreter of the environment it lives in}
        for those of its `packages` that do not live in the run's own environment (ART's vLLM
        and Megatron-Core runtimes); called in the run's process, None where not found.
    env_prefixes: prefixes of the environment variables that shape its runs (its framework's own
        knobs); manifests record them beside the common ones (rl_pipeline_bench.records.redaction).
    run_variables: {name: why} variables under its prefixes whose VALUES its manifests record
        (any other allowed variable is recorded by name only; rl_pipeline_bench.records.redaction).
    host_hooks: {name: HostHook} environment changes some hosts need for its runs (opt-in by name).
    suite_schema: JSON-schema properties it adds to every suite (its own suite keys).
    config_schema: JSON schema of its top-level config section `<name>:` (required when given).
    variant: spec -> extra label parts a report shows (e.g. a batch variant).
    preload: imports its heavy dependencies before the run's clock starts.
    native_support: spec -> the native settings that its package's `support` module
        (`python -m rl_pipeline_bench.backends.<name>.support`) hands to the installed framework
        in the framework's own environment; `bench preflight` refuses gaps before the lease.
    container_network: network mode of its container runs ("none": loopback only).
    container_host_config: further docker-py `create_host_config` options its container
        runs need (e.g. `ipc_mode` for multi-process frameworks); never mounts.
    """

    name: str
    summary: str
    run: Callable[[RunContext], None]
    framework: str | None = None
    devices: tuple[str, ...] = ("cpu", "cuda")
    gpus: int | None = None
    topology: Topology | None = None
    models: tuple[str, ...] | None = None
    model_sources: tuple[str, ...] = ("local", "hub")
    trainer_ranks: Callable[[RunSpecView], Sequence[int]] = _single_rank
    staleness_limit: Callable[[RunSpecView], int] | None = None
    suite_checks: tuple[SuiteCheck, ...] = ()
    evidence_checks: tuple[EvidenceCheck, ...] = ()
    trains_plan_updates: bool = True
    reason_codes: Mapping[str, str] = field(default_factory=dict)
    packages: tuple[str, ...] = ()
    package_homes: Callable[[], Mapping[str, str | None]] | None = None
    env_prefixes: tuple[str, ...] = ()
    run_variables: Mapping[str, str] = field(default_factory=dict)
    host_hooks: Mapping[str, HostHook] = field(default_factory=dict)
    suite_schema: Mapping[str, Any] = field(default_factory=dict)
    config_schema: Mapping[str, Any] | None = None
    variant: Callable[[RunSpecView], list[str]] | None = None
    preload: Callable[[], None] | None = None
    native_support: Callable[[RunSpecView], dict[str, Any]] | None = None
    container_network: str = "none"
    container_host_config: Mapping[str, Any] = field(default_factory=dict)


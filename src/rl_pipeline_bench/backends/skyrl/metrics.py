"""Read SkyRL's own records (skyrl 0.4.0) into evidence v1 rows.

SkyRL's fully asynchronous trainer times each step's macro-phases with
`TrainingPhaseGauge.timed_phase(name, timings)` (convert_to_training_input,
run_training, sync_weights, eval, save_checkpoints, save_hf_model), then logs the
step through its `Tracking` object twice: the step's metrics (`commit=False`,
after the weight sync and eval), then the `timing/*` payload (`commit=True`),
which is assembled after the profiler step, the GPU monitor flush and the vLLM
metric scrape. The commit is therefore late; the evidence takes its times from
the phases themselves, recorded on the run's clock by `PhaseClock` around SkyRL's
own `timed_phase`:

- trainer interval: the step's `run_training` phase;
- update completion: the later of the step's metrics record (its train log, after
  `sync_weights` published the weights) and the end of any eval/save phase of
  that step.

The trained batch is what the framework itself reports: `generate/batch_num_seq`
(sequences in the training batch) and `generate/avg_assistant_tokens` (mean
loss-mask tokens over that batch, from SkyRL's `get_rollout_metrics`);
`async/staleness_mean` is the batch's mean policy age. A missing or NaN metric,
or a missing phase, is an error, never a default.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from ..framework.native_metrics import MetricRecordError, metric_value
from ..topology import CONTROLLER_INTERVAL

#: What evidence trainer_intervals.parquet holds for SkyRL (manifest `trainer_timing`).
TRAINER_TIMING = {
    "source": CONTROLLER_INTERVAL,
    "why": ("skyrl 0.4.0 keeps no per-rank trainer timing: the Megatron policy workers' forward_backward and "
            "optim_step return metrics without times (skyrl/backends/skyrl_train/workers/megatron/"
            "megatron_worker.py:1063,1272), and the only step timers run on the controller "
            "(fully_async_trainer.py:590 timed_phase('run_training'), :883 Timer('train_critic_and_policy')); "
            "the run_training phase is recorded as rank 0"),
}

KEYS = {
    "step": "trainer/global_step",
    "trajectories": "generate/batch_num_seq",
    "avg_tokens": "generate/avg_assistant_tokens",
    "policy_age": "async/staleness_mean",
    "step_time": "timing/step",
}
TRAINING_PHASE = "run_training"
#: The phase after which vLLM serves the step's weights (pause, sync, resume).
PUBLICATION_PHASE = "sync_weights"
#: Phases of a step that end before its update counts as complete (publication, eval, saves).
COMPLETION_PHASES = ("sync_weights", "eval", "save_checkpoints", "save_hf_model")


def _num(data: dict[str, Any], key: str, step: Any) -> float:
    return metric_value(data, key, f"SkyRL step {step} record")


@dataclass
class StepRecord:
    """One step as SkyRL produced it: phase boundaries, the metrics record and when it was logged."""

    phases: list[tuple[str, float, float]] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    logged_at: float | None = None

    def phase(self, name: str) -> tuple[float, float]:
        found = [(s, e) for n, s, e in self.phases if n == name]
        if not found:
            step = self.metrics.get(KEYS["step"])
            raise MetricRecordError(f"SkyRL step {step} has no timed '{name}' phase "
                                    f"(timed: {', '.join(n for n, _, _ in self.phases) or 'none'})")
        return found[-1]


def update_from_step(rec: StepRecord, update: int) -> dict[str, Any]:
    """EvidenceWriter.add_update kwargs from one committed step."""
    data = rec.metrics
    step = data.get(KEYS["step"])
    if rec.logged_at is None:
        raise MetricRecordError(f"SkyRL step {step} was committed without its metrics record")
    n = int(_num(data, KEYS["trajectories"], step))
    tokens = _num(data, KEYS["avg_tokens"], step) * n
    ends = [rec.logged_at] + [e for name, _, e in rec.phases if name in COMPLETION_PHASES]
    return {
        "update": int(update),
        "completed_at": max(ends),
        "accepted_trajectories": n,
        "assistant_tokens": int(round(tokens)),
        "policy_version": int(_num(data, KEYS["step"], step)),
        "mean_policy_age": _num(data, KEYS["policy_age"], step),
    }


def interval_from_step(rec: StepRecord, update: int) -> dict[str, Any]:
    """The step's native training phase, rank 0."""
    start, end = rec.phase(TRAINING_PHASE)
    return {"rank": 0, "update": int(update), "start": start, "end": end}


@dataclass
class StepCollector:
    """Collects each step's phases and tracker records; on the step's commit, emits evidence.

    on_update(update_kwargs, interval_kwargs) is called once per committed step,
    with updates numbered 1.. in commit order.
    """

    clock: Callable[[], float]
    on_update: Callable[[dict[str, Any], dict[str, Any]], None]
    current: StepRecord = field(default_factory=StepRecord)
    committed: list[StepRecord] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def phase(self, name: str, start: float, end: float) -> None:
        with self._lock:
            self.current.phases.append((name, start, end))

    def record(self, data: dict[str, Any], step: int, commit: bool) -> None:
        now = self.clock()
        with self._lock:
            if not commit:
                self.current.metrics.update(data)
                if KEYS["step"] in data:
                    self.current.logged_at = now
                return
            if KEYS["step_time"] not in data:
                return  # an eval-only commit outside the step loop
            rec, self.current = self.current, StepRecord()
            self.committed.append(rec)
            update = len(self.committed)
        self.on_update(update_from_step(rec, update), interval_from_step(rec, update))


class PhaseClock:
    """Wraps SkyRL's TrainingPhaseGauge: each `timed_phase` also reports its boundaries on `clock`."""

    def __init__(self, gauge: Any, clock: Callable[[], float], sink: Callable[[str, float, float], None]):
        self._gauge, self._clock, self._sink = gauge, clock, sink

    @contextlib.contextmanager
    def timed_phase(self, name: str, timings: dict[str, float]):
        start = self._clock()
        with self._gauge.timed_phase(name, timings):
            yield
        self._sink(name, start, self._clock())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._gauge, name)

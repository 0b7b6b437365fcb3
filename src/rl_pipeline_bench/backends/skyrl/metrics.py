"""Read SkyRL's own tracker records into evidence v1 rows.

SkyRL's fully asynchronous trainer logs each step through its `Tracking` object
twice: the step's metrics (`commit=False`), after training and the weight sync
to the inference engines, then the `timing/*` payload (`commit=True`) as the
step's last act. The commit is the update's completion. The trained batch is
what the framework itself reports: `generate/batch_num_seq` (sequences in the
training batch) and `generate/avg_assistant_tokens` (mean loss-mask tokens over
that batch, from SkyRL's `get_rollout_metrics`); `async/staleness_mean` is the
batch's mean policy age; `timing/run_training` the native training interval.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

KEYS = {
    "step": "trainer/global_step",
    "trajectories": "generate/batch_num_seq",
    "avg_tokens": "generate/avg_assistant_tokens",
    "policy_age": "async/staleness_mean",
    "run_training": "timing/run_training",
    "step_time": "timing/step",
}
#: Timed phases that run after training and before the commit, in the trainer loop's order.
AFTER_TRAINING = ("timing/sync_weights", "timing/eval", "timing/save_checkpoints", "timing/save_hf_model")


class MetricRecordError(ValueError):
    """A native metric record lacks what evidence v1 needs."""


def _num(data: dict[str, Any], key: str, step: Any) -> float:
    if key not in data:
        raise MetricRecordError(f"SkyRL step {step} record lacks '{key}'")
    value = float(data[key])
    if math.isnan(value):
        raise MetricRecordError(f"SkyRL step {step} record has NaN '{key}'")
    return value


def update_from_step(data: dict[str, Any], update: int, committed_at: float) -> dict[str, Any]:
    """EvidenceWriter.add_update kwargs from one committed step's merged records."""
    step = data.get(KEYS["step"])
    n = int(_num(data, KEYS["trajectories"], step))
    tokens = _num(data, KEYS["avg_tokens"], step) * n
    return {
        "update": int(update),
        "completed_at": float(committed_at),
        "accepted_trajectories": n,
        "assistant_tokens": int(round(tokens)),
        "policy_version": int(step) if step is not None else int(update),
        "mean_policy_age": float(data.get(KEYS["policy_age"], 0.0)),
    }


def interval_from_step(data: dict[str, Any], update: int, committed_at: float) -> dict[str, Any]:
    """The native training phase, placed by the durations SkyRL timed after it."""
    step = data.get(KEYS["step"])
    end = float(committed_at) - sum(float(data[k]) for k in AFTER_TRAINING if k in data)
    return {"rank": 0, "update": int(update), "start": end - _num(data, KEYS["run_training"], step), "end": end}


@dataclass
class StepCollector:
    """Merges a step's tracker records; on the timing commit, emits evidence.

    on_update(update_kwargs, interval_kwargs) is called once per committed step,
    with updates numbered 1.. in commit order.
    """

    clock: Callable[[], float]
    on_update: Callable[[dict[str, Any], dict[str, Any]], None]
    pending: dict[str, Any] = field(default_factory=dict)
    committed: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, data: dict[str, Any], step: int, commit: bool) -> None:
        now = self.clock()
        with self._lock:
            self.pending.update(data)
            if not commit or KEYS["step_time"] not in data:
                return
            merged, self.pending = self.pending, {}
            self.committed.append(merged)
            update = len(self.committed)
        self.on_update(update_from_step(merged, update, now), interval_from_step(merged, update, now))

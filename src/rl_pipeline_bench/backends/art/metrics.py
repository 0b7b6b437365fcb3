"""Read ART's own train log (`history.jsonl`) into evidence v1 rows.

ART's `Model.log` appends one JSON row per (split, step) after the backend's
train call returned (checkpoint published to vLLM) and the train metrics were
computed; the row carries `training_step`, `recorded_at` (local wall clock,
ISO 8601), `data/step_num_trajectories` (trajectories in the trained batch),
`data/step_trainer_tokens` (assistant-mask tokens actually packed and trained),
`time/step_trainer_s` (the native train call) and `train/steps_off_policy`
(the batch's mean policy age). Rows of other splits are ignored.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

TRAIN_KEYS = {
    "step": "training_step",
    "recorded_at": "recorded_at",
    "trajectories": "data/step_num_trajectories",
    "tokens": "data/step_trainer_tokens",
    "trainer_s": "time/step_trainer_s",
    "policy_age": "train/steps_off_policy",
}


class MetricRecordError(ValueError):
    """A native metric record lacks what evidence v1 needs."""


@dataclass(frozen=True)
class ClockMap:
    """Maps wall-clock epoch seconds onto the run's monotonic clock."""

    wall0: float
    run0: float

    def __call__(self, wall: float) -> float:
        return self.run0 + (wall - self.wall0)


def iter_history(path: Path | str, start: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (byte offset after the line, row) for complete lines from `start`."""
    path = Path(path)
    if not path.exists():
        return
    with path.open("rb") as fh:
        fh.seek(start)
        offset = start
        for raw in fh:
            if not raw.endswith(b"\n"):
                break  # a line still being written
            offset += len(raw)
            text = raw.decode("utf-8").strip()
            if text:
                yield offset, json.loads(text)


def is_train_row(row: dict[str, Any]) -> bool:
    """A train-split row: ART prefixes unsectioned keys with the split (`train/reward`).

    `data/*` and `time/*` keys carry no split, so they cannot tell train from val rows.
    """
    return any(k.startswith("train/") for k in row)


def _num(row: dict[str, Any], key: str) -> float:
    if key not in row:
        raise MetricRecordError(f"ART history row for step {row.get('training_step')} lacks '{key}'")
    value = float(row[key])
    if math.isnan(value):
        raise MetricRecordError(f"ART history row for step {row.get('training_step')} has NaN '{key}'")
    return value


def recorded_wall(row: dict[str, Any]) -> float:
    """`recorded_at` (naive local ISO time, as ART writes it) as epoch seconds."""
    if "recorded_at" not in row:
        raise MetricRecordError(f"ART history row for step {row.get('training_step')} lacks 'recorded_at'")
    return datetime.fromisoformat(str(row["recorded_at"])).timestamp()


def update_row(row: dict[str, Any], clock: ClockMap) -> dict[str, Any]:
    """Keyword arguments for EvidenceWriter.add_update from one train row."""
    step = int(_num(row, TRAIN_KEYS["step"]))
    return {
        "update": step,
        "completed_at": clock(recorded_wall(row)),
        "accepted_trajectories": int(_num(row, TRAIN_KEYS["trajectories"])),
        "assistant_tokens": int(_num(row, TRAIN_KEYS["tokens"])),
        "policy_version": step,
        "mean_policy_age": float(row.get(TRAIN_KEYS["policy_age"], 0.0)),
    }


def trainer_interval(row: dict[str, Any], clock: ClockMap) -> dict[str, Any]:
    """The native train call as one interval ending at the row's log time.

    ART records the call's duration, not its endpoints; anchoring at `recorded_at`
    keeps the length exact and shifts it later by the post-train bookkeeping.
    """
    end = clock(recorded_wall(row))
    return {"rank": 0, "update": int(_num(row, TRAIN_KEYS["step"])),
            "start": end - _num(row, TRAIN_KEYS["trainer_s"]), "end": end}


def autotuner_health(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Autotuner metrics found in the train rows (keys containing 'autotun').

    Recorded in the manifest for validation; `available` is False when the
    installed ART logs none, which the contract treats as unhealthy.
    """
    found: dict[str, Any] = {}
    for row in rows:
        for key, value in row.items():
            if "autotun" in key.lower():
                found.setdefault(key, []).append(value)
    return {"available": bool(found), "metrics": found}

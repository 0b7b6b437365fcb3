"""Read ART's own records (openpipe-art 0.5.23) into evidence v1 rows.

Sources, all written by ART itself:
- `history.jsonl`: `Model.log` appends one JSON row per (split, step). PipelineTrainer
  writes a step's train row from an asynchronous post-train task that first waits for
  the next step's train dispatch, so the row's `recorded_at` (naive local ISO time)
  is when the train log completed, not when training ended. The row carries
  `training_step`, `data/step_num_trajectories` (trajectories in the trained batch),
  `data/step_trainable_assistant_tokens` (assistant tokens packed and trained),
  `time/step_backend_train_s` (the backend train call), the batch's
  `offpolicy/token_weighted_policy_age_steps` and, with autotuning on, the
  `pipeline_settings/*` the autotuner chose.
- the backend train call and the policy's publication, timed on the run's clock by
  the driver around ART's own `MegatronBackend.train` and the Megatron service's
  `wait_for_serving` (`TrainCallTimes`).
- `pipeline_tuner/<output_name>.json` under the model's output directory: the
  online autotuner's profile (`PipelineAutotunerProfile`).

An update's completion is the later of its publication and its train-log row (the
contract counts both); its trainer interval is the backend train call. A missing
or NaN metric is an error, never a default.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

from ...records.jsonfile import JsonFileError, read_json
from ..framework.native_metrics import MetricRecordError, metric_value
from ..topology import CONTROLLER_INTERVAL

TRAIN_KEYS = {
    "step": "training_step",
    "recorded_at": "recorded_at",
    "trajectories": "data/step_num_trajectories",
    "tokens": "data/step_trainable_assistant_tokens",
    "train_call_s": "time/step_backend_train_s",
    "policy_age": "offpolicy/token_weighted_policy_age_steps",
}
#: The 0.5.20+ names of the step metrics the evidence needs (0.5.18 had data/step_trainer_tokens,
#: time/step_trainer_s and train/steps_off_policy).
RENAMED_IN_0_5_20 = (TRAIN_KEYS["tokens"], TRAIN_KEYS["train_call_s"], TRAIN_KEYS["policy_age"])
#: What PipelineTrainer logs on every train row while the autotuner owns the pipeline.
PIPELINE_SETTINGS_KEYS = (
    "pipeline_settings/num_rollout_workers",
    "pipeline_settings/min_batch_size",
    "pipeline_settings/max_batch_size",
    "pipeline_settings/target_groups_per_step",
    "pipeline_settings/queue_maxsize",
)


@dataclass(frozen=True)
class ClockMap:
    """Maps wall-clock epoch seconds onto the run's monotonic clock."""

    wall0: float
    run0: float

    def __call__(self, wall: float) -> float:
        return self.run0 + (wall - self.wall0)


@dataclass
class TrainCallTimes:
    """Run-clock times of each step's backend train call and of its publication to vLLM."""

    calls: dict[int, tuple[float, float]] = field(default_factory=dict)
    published: dict[int, float] = field(default_factory=dict)

    def interval(self, step: int) -> dict[str, Any]:
        """EvidenceWriter.add_trainer_interval kwargs: the native train call of `step`, rank 0."""
        if step not in self.calls:
            raise MetricRecordError(f"no backend train call was timed for ART step {step}")
        start, end = self.calls[step]
        return {"rank": 0, "update": int(step), "start": start, "end": end}


#: What evidence trainer_intervals.parquet holds for ART (manifest `trainer_timing`).
TRAINER_TIMING = {
    "source": CONTROLLER_INTERVAL,
    "why": ("openpipe-art 0.5.23 keeps no per-rank trainer interval on a shared clock: each Megatron rank "
            "times its step as a local perf_counter duration (art/megatron/train.py:728-751) and only rank 0 "
            "reports progress (train.py:781-785); the controller sees one backend train call per step, "
            "recorded as rank 0"),
}


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
    return metric_value(row, key, f"ART history row for step {row.get(TRAIN_KEYS['step'])}")


def recorded_wall(row: dict[str, Any]) -> float:
    """`recorded_at` (naive local ISO time, as ART writes it) as epoch seconds."""
    if "recorded_at" not in row:
        raise MetricRecordError(f"ART history row for step {row.get(TRAIN_KEYS['step'])} lacks 'recorded_at'")
    return datetime.fromisoformat(str(row["recorded_at"])).timestamp()


def update_row(row: dict[str, Any], clock: ClockMap, times: TrainCallTimes) -> dict[str, Any]:
    """Keyword arguments for EvidenceWriter.add_update from one train row."""
    step = int(_num(row, TRAIN_KEYS["step"]))
    if step not in times.published:
        raise MetricRecordError(f"ART step {step} was logged but its publication to vLLM was not observed")
    return {
        "update": step,
        "completed_at": max(clock(recorded_wall(row)), times.published[step]),
        "accepted_trajectories": int(_num(row, TRAIN_KEYS["trajectories"])),
        "assistant_tokens": int(_num(row, TRAIN_KEYS["tokens"])),
        "policy_version": step,
        "mean_policy_age": _num(row, TRAIN_KEYS["policy_age"]),
    }


def autotuner_health(rows: list[dict[str, Any]], profile_path: Path | str, expected_steps: int) -> dict[str, Any]:
    """Online-autotuner health for the manifest (`art_autotuner`), from ART's own records.

    Healthy when every train row 1..expected_steps carries all `pipeline_settings/*`
    keys (PipelineTrainer logs them only while an autotuner owns the pipeline) and
    the tuner's profile JSON exists, parses, and says mode "online".
    """
    problems: list[str] = []
    by_step = {int(r.get(TRAIN_KEYS["step"], -1)): r for r in rows}
    settings = {}
    for step in range(1, expected_steps + 1):
        row = by_step.get(step)
        missing = [k for k in PIPELINE_SETTINGS_KEYS if row is None or k not in row]
        if missing:
            problems.append(f"train row {step} lacks {', '.join(missing)}" if row is not None
                            else f"no train row for step {step}")
        elif step == expected_steps:
            settings = {k: row[k] for k in PIPELINE_SETTINGS_KEYS}
    profile_path = Path(profile_path)
    profile: dict[str, Any] = {}
    if not profile_path.is_file():
        problems.append(f"autotuner profile {profile_path} was not written")
    else:
        try:
            profile = read_json(profile_path, "autotuner profile")
        except JsonFileError as exc:
            problems.append(str(exc))
        mode = (profile.get("config") or {}).get("mode")
        if profile and mode != "online":
            problems.append(f"autotuner profile {profile_path} has mode {mode!r}, not 'online'")
    return {
        "healthy": not problems,
        "problems": problems,
        "final_settings": settings,
        "profile_path": str(profile_path),
        "decisions": len(profile.get("decisions") or []),
        "profile_settings": profile.get("settings"),
    }

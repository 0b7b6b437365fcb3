"""Evaluation evidence (`results/eval_evidence/{eval_run_id}/`): manifest, episodes, log.

Like benchmark evidence, a directory is created fresh by every evaluation run and
never reused, deleted or overwritten; files are replaced atomically as the run
goes, so a crash leaves the episodes finished so far.
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from ..records.atomicfile import PRIVATE_MODE, atomic_write_table
from ..records.formats import schema_of
from ..records.jsonfile import read_record, write_record

SCHEMA = schema_of("eval-evidence")
MANIFEST = "manifest.json"
EPISODES = "episodes.parquet"
LOG = "eval.log"

EPISODES_SCHEMA = pa.schema([
    ("suite_task", pa.string()),     # LIBERO suite / RoboTwin or robosuite task as named in the eval suite
    ("group", pa.string()),          # reporting group: LIBERO suite label, RoboTwin horizon, robosuite task
    ("task_index", pa.int64()),
    ("task", pa.string()),
    ("scenario", pa.int64()),        # init-state index (LIBERO) or scene number
    ("run", pa.int64()),
    ("scenario_seed", pa.int64()),
    ("seed", pa.int64()),
    ("steps", pa.int64()),
    ("max_steps", pa.int64()),
    ("success", pa.bool_()),
    ("wall_time_s", pa.float64()),
    ("error", pa.string()),          # null unless the episode crashed (then success is false)
    # Where the episode's time went (seconds; null where it never got there). Evidence written
    # before these columns existed lacks them; they are read as null.
    ("env_build_s", pa.float64()),   # building the simulator this episode was played in (0: reused)
    ("reset_s", pa.float64()),       # reset to its init state, first observation included
    ("step_s", pa.float64()),        # inside env.step, over all its steps
    ("render_s", pa.float64()),      # of step_s, rendering the camera observations
    ("policy_s", pa.float64()),      # inside policy.act
])
COLUMNS = tuple(EPISODES_SCHEMA.names)
TIMING_COLUMNS = ("env_build_s", "reset_s", "step_s", "render_s", "policy_s")
REQUIRED_COLUMNS = tuple(c for c in COLUMNS if c not in TIMING_COLUMNS)

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def new_eval_run_id(eval_suite: str, policy_id: str, run: int) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    parts = [stamp, "eval", eval_suite, policy_id, f"run{run}", uuid.uuid4().hex[:8]]
    return "-".join(_SAFE.sub("_", p).strip("._") or "x" for p in parts)


def episodes_table(rows: list[dict[str, Any]]) -> pa.Table:
    cols = {name: [r.get(name) for r in rows] for name in COLUMNS}
    return pa.Table.from_pydict(cols, schema=EPISODES_SCHEMA)


def write_episodes(directory: Path, rows: list[dict[str, Any]]) -> None:
    atomic_write_table(Path(directory) / EPISODES, episodes_table(rows))


def write_manifest(directory: Path, manifest: dict[str, Any]) -> None:
    """Owner-only: the manifest holds the command line (scrubbed) and host facts."""
    write_record(Path(directory) / MANIFEST, "eval-evidence", manifest, mode=PRIVATE_MODE)


def read_episodes(directory: Path | str) -> pd.DataFrame:
    df = pd.read_parquet(Path(directory) / EPISODES)
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{directory}/{EPISODES}: missing column(s) {missing}")
    for c in TIMING_COLUMNS:
        if c not in df.columns:
            df[c] = float("nan")
    return df


def read_manifest(directory: Path | str) -> dict[str, Any]:
    return read_record(Path(directory) / MANIFEST, "eval-evidence", "eval manifest")

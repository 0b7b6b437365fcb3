"""Wall-clock stamps: the manifest's UTC time format and run ids that sort by creation time."""

from __future__ import annotations

import re
import uuid
from datetime import datetime, timezone

#: Characters a run id may not hold: it names the run's evidence directory.
UNSAFE_RUN_ID_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


def utc_now_iso() -> str:
    """UTC ISO 8601 with milliseconds, the manifest's wall-clock format."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def new_run_id(suite: str, backend: str, workload: str, trial: int | str) -> str:
    """A unique, filesystem-safe run id that sorts by creation time (UTC prefix)."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    parts = [stamp, str(suite), str(backend), str(workload), f"trial{trial}", uuid.uuid4().hex[:8]]
    return "-".join(UNSAFE_RUN_ID_CHARS.sub("_", p).strip("._") or "x" for p in parts)

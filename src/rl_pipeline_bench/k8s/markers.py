"""Log lines the pod writes for the controller: `RL-BENCH-POD {"event": ..., ...}`.

The pod's log is the one channel both sides can read without a shared filesystem
or extra permissions, so the pod reports each step there as one JSON object per
line; the controller takes the last line of each event.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

PREFIX = "RL-BENCH-POD "

#: In order: baked hashes checked; benchmark released; one run finished; all done, holding for collection.
EVENTS = ("identity", "released", "run", "completed")


def emit(event: str, out: TextIO | None = None, **fields: Any) -> dict[str, Any]:
    record = {"event": event, **fields}
    print(PREFIX + json.dumps(record, sort_keys=True), file=out or sys.stdout, flush=True)
    return record


def records(log_text: str) -> list[dict[str, Any]]:
    """Every marker record of a pod log, in order; other lines are ignored."""
    out = []
    for line in (log_text or "").splitlines():
        _, sep, payload = line.partition(PREFIX)
        if not sep:
            continue
        try:
            record = json.loads(payload)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("event"), str):
            out.append(record)
    return out


def parse(log_text: str) -> dict[str, dict[str, Any]]:
    """{event: the last record of that event}."""
    return {r["event"]: r for r in records(log_text)}


def runs(log_text: str) -> list[dict[str, Any]]:
    """Every `run` record, in order (one per workload that was attempted)."""
    return [r for r in records(log_text) if r["event"] == "run"]

"""Interval arithmetic over trainer and call intervals (seconds from the run's start)."""

from __future__ import annotations

from typing import Iterable


def interval_union_length(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length covered by the intervals; overlaps count once."""
    total = 0.0
    cur_start = cur_end = None
    for start, end in sorted((float(s), float(e)) for s, e in intervals):
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None:
        total += cur_end - cur_start
    return total

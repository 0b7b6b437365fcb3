"""Reading a framework's own metric records: a missing or NaN value is an error, never a default."""

from __future__ import annotations

import math
from typing import Any, Mapping


class MetricRecordError(ValueError):
    """A framework's own metric record lacks what evidence v1 needs."""


def metric_value(record: Mapping[str, Any], key: str, where: str) -> float:
    """`record[key]` as a float; raise MetricRecordError naming `where` (the record) when it is missing or NaN."""
    if key not in record:
        raise MetricRecordError(f"{where} lacks '{key}'")
    value = float(record[key])
    if math.isnan(value):
        raise MetricRecordError(f"{where} has NaN '{key}'")
    return value

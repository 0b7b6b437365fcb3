"""A model call's identity within an offered plan, and the one way messages name it.

Plans, evidence and summaries key a call by (update, group, trajectory, call); every
reason or error that points at one call names it with `call_label`, so a reader can grep
one form.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

CALL_KEYS = ("update", "group", "trajectory", "call")


def call_label(update: Any, group: Any, trajectory: Any, call: Any) -> str:
    """'update 2 group 0 trajectory 1 call 3'; an update that is unknown (None, NaN) is left out."""
    known = update is not None and not (isinstance(update, float) and math.isnan(update))
    head = f"update {int(update)} " if known else ""
    return f"{head}group {int(group)} trajectory {int(trajectory)} call {int(call)}"


def row_label(row: Mapping[str, Any]) -> str:
    """call_label of a calls-table row (a pandas Series or a dict)."""
    return call_label(*(row.get(k) for k in CALL_KEYS))

"""The one way settings are hashed into an id: short sha256 of their canonical JSON.

Run specs (rl_pipeline_bench.settings.spec) and evaluation specs (rl_pipeline_bench.eval.spec)
both key their files by it, so "same settings, same hash" means one thing everywhere.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

#: Hex digits of sha256 kept; 48 bits make a collision between the handful of specs one
#: results/ tree holds practically impossible.
HASH_LENGTH = 12


def settings_hash(settings: Any) -> str:
    """Short sha256 of the settings' canonical JSON (sorted keys, no whitespace, no NaN)."""
    text = json.dumps(settings, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:HASH_LENGTH]

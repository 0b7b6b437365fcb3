"""Atomic writes for report outputs, readable like any file the user creates.

evidence.atomic_write_bytes makes a private (0600) temp file; a report is meant to
be shared, so the final file gets the permissions the process umask allows.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..evidence import atomic_write_bytes


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_output(path: Path | str, data: bytes) -> None:
    atomic_write_bytes(path, data)
    os.chmod(path, 0o666 & ~_umask())

"""Atomic writes for report outputs, readable like any file the user creates.

atomicfile.atomic_write_bytes makes a private (0600) temp file; a report is meant to
be shared, so the final file gets the permissions the process umask allows.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

from ..records.atomicfile import atomic_write_bytes


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_output(path: Path | str, data: bytes) -> None:
    atomic_write_bytes(path, data)
    os.chmod(path, 0o666 & ~_umask())


def data_uri(png: bytes) -> str:
    """A PNG as a data: URI, so the report is one self-contained file."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")

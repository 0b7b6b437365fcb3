"""Artifact transfer without a shared filesystem: a tar.gz, base64 on stdout of an exec.

`ARCHIVE_SCRIPT` runs inside the pod (standard library only, any image with Python)
and prints the archive of one directory as base64 lines followed by one trailer
line `RL-BENCH-ARCHIVE sha256 BYTES`; `unpack` checks that trailer and extracts with
tarfile's "data" filter (no absolute paths, links out of the tree or devices).
"""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
from pathlib import Path

TRAILER = "RL-BENCH-ARCHIVE"

ARCHIVE_SCRIPT = r"""
import base64, hashlib, io, sys, tarfile
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w:gz") as tar:
    tar.add(sys.argv[1], arcname=".")
data = buf.getvalue()
enc = base64.b64encode(data).decode()
for i in range(0, len(enc), 76):
    sys.stdout.write(enc[i:i + 76] + "\n")
sys.stdout.write("%s %s %d\n" % ("RL-BENCH-ARCHIVE", hashlib.sha256(data).hexdigest(), len(data)))
sys.stdout.flush()
"""


class CollectError(RuntimeError):
    """The archive is incomplete or corrupt; nothing was extracted."""


def archive_command(directory: str) -> list[str]:
    return ["python", "-c", ARCHIVE_SCRIPT, directory]


def unpack(stdout: str, dest: Path) -> dict[str, object]:
    """Verify and extract the archive printed by ARCHIVE_SCRIPT into `dest` (created)."""
    lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    if not lines or not lines[-1].startswith(TRAILER + " "):
        raise CollectError("archive output has no trailer line: the transfer was cut short")
    _, digest, size = lines[-1].split()
    try:
        data = base64.b64decode("".join(lines[:-1]), validate=True)
    except ValueError as exc:
        raise CollectError(f"archive output is not valid base64: {exc}") from None
    if len(data) != int(size) or hashlib.sha256(data).hexdigest() != digest:
        raise CollectError(f"archive corrupt: got {len(data)} bytes sha256 {hashlib.sha256(data).hexdigest()}, "
                           f"the pod sent {size} bytes sha256 {digest}")
    dest.mkdir(parents=True, exist_ok=False)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(dest, filter="data")
        members = [m.name for m in tar.getmembers() if m.isfile()]
    return {"sha256": digest, "bytes": len(data), "files": len(members), "path": str(dest)}

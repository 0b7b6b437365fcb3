"""fio as the storage probe's engine: the command line and the parse of its JSON output.

One sequential job per direction, 1 MiB blocks with O_DIRECT and synchronous I/O,
the fio equivalent of the seed's `dd bs=1M oflag=direct` / `iflag=direct`; the write
job fsyncs at its end. The figure is fio's own bandwidth (`bw_bytes`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

DIRECTIONS = ("write", "read")


class FioError(RuntimeError):
    """fio failed or its output is not the JSON this parser knows; names the job."""


def fio_path() -> str | None:
    return shutil.which("fio")


def fio_command(fio: str, path: Path | str, direction: str, size_bytes: int, block_bytes: int,
                direct: bool) -> list[str]:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    cmd = [fio, f"--name=seq{direction}", f"--filename={path}", f"--rw={direction}", f"--bs={block_bytes}",
           f"--size={size_bytes}", f"--direct={int(direct)}", "--ioengine=psync", "--numjobs=1",
           "--unlink=0", "--output-format=json"]
    if direction == "write":
        cmd.append("--end_fsync=1")
    else:
        cmd.append("--invalidate=1")  # drop the file's cached pages first (matters without O_DIRECT)
    return cmd


def parse_fio_json(text: str, direction: str) -> dict[str, Any]:
    """The one job's figures: bytes moved, fio runtime (ms), bandwidth, fio version and options."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FioError(f"fio {direction}: output is not JSON ({exc}); first bytes: {text[:200]!r}") from None
    jobs = data.get("jobs") if isinstance(data, dict) else None
    if not jobs or not isinstance(jobs, list):
        raise FioError(f"fio {direction}: JSON output has no 'jobs' list")
    job = jobs[0]
    if job.get("error"):
        raise FioError(f"fio {direction}: job {job.get('jobname')!r} reported error {job['error']}")
    stats = job.get(direction)
    if not isinstance(stats, dict) or "bw_bytes" not in stats or "io_bytes" not in stats:
        raise FioError(f"fio {direction}: job {job.get('jobname')!r} has no '{direction}' bandwidth")
    if not stats["io_bytes"]:
        raise FioError(f"fio {direction}: job {job.get('jobname')!r} moved no data")
    return {
        "engine": "fio", "fio_version": data.get("fio version"), "direction": direction,
        "bytes": int(stats["io_bytes"]), "runtime_ms": int(stats.get("runtime", 0)),
        "bandwidth_bytes_per_s": float(stats["bw_bytes"]), "ios": int(stats.get("total_ios", 0)),
        "options": dict(job.get("job options") or {}),
    }


def run_fio(fio: str, path: Path | str, direction: str, size_bytes: int, block_bytes: int, direct: bool,
            timeout_s: float) -> dict[str, Any]:
    cmd = fio_command(fio, path, direction, size_bytes, block_bytes, direct)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise FioError(f"fio {direction} did not finish within {timeout_s:g} s: {' '.join(cmd)}") from None
    if proc.returncode != 0:
        raise FioError(f"fio {direction} exited {proc.returncode}: {proc.stderr.strip()[-500:] or proc.stdout[-500:]}")
    result = parse_fio_json(proc.stdout, direction)
    result["command"] = cmd
    return result

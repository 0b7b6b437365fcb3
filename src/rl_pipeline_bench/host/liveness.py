"""Whether the process that runs a benchmark is still alive, from what its manifest records.

A manifest whose status is still `running` may belong to a run that goes on or to one
whose process died. The runner records its own process (`supervisor`: host, pid, the
kernel's start time of that pid and the boot id), so a reader on the same host can
tell the two apart without trusting a reused pid: the pid must exist, in the same
boot, with the same start time. On another host, or from another pid namespace,
nothing can be checked.

A run inside a backend image (rl_pipeline_bench.runs.image_runs) would record a pid of the
container's namespace, which means nothing on the host; the host's `bench run`, which
starts the container and waits for it, hands its own identity in through
`RL_BENCH_SUPERVISOR`, and that is what the manifest records.
"""

from __future__ import annotations

import json
import os
import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

ALIVE, ENDED, UNKNOWN = "alive", "ended", "unknown"
#: The supervising process's identity (JSON), set by the host for a run it starts in a container.
SUPERVISOR_ENV = "RL_BENCH_SUPERVISOR"


def _pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat: the process's start time in clock ticks after boot."""
    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_text()
    except (OSError, ValueError):
        return None
    try:  # the command name (field 2) may hold spaces and parentheses: split after its last ')'
        return int(stat[stat.rindex(")") + 2:].split()[19])
    except (ValueError, IndexError):
        return None


def process_identity() -> dict[str, Any]:
    """The process that supervises this run, as a manifest records it (`supervisor`): this one,
    or the host process named by RL_BENCH_SUPERVISOR."""
    handed = os.environ.get(SUPERVISOR_ENV)
    if handed:
        try:
            identity = json.loads(handed)
        except ValueError:
            identity = None
        if isinstance(identity, dict):
            return identity
    return {"host": socket.gethostname(), "pid": os.getpid(), "start_ticks": _start_ticks(os.getpid()),
            "boot_id": _boot_id(), "pid_ns": _pid_namespace(),
            "started_at": datetime.now(timezone.utc).isoformat(timespec="milliseconds")}


def process_state(identity: Mapping[str, Any] | None) -> str:
    """ALIVE / ENDED for a process of this host (and boot), UNKNOWN when that cannot be told here."""
    if not isinstance(identity, Mapping) or identity.get("host") != socket.gethostname():
        return UNKNOWN
    pid, ticks, boot = identity.get("pid"), identity.get("start_ticks"), identity.get("boot_id")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return UNKNOWN
    ns = identity.get("pid_ns")
    if ns is not None and _pid_namespace() is not None and ns != _pid_namespace():
        return UNKNOWN  # a pid of another namespace (a container's) names no process here
    if boot is not None and _boot_id() is not None and boot != _boot_id():
        return ENDED  # the host rebooted since
    now = _start_ticks(pid)
    if now is None:
        return ENDED if Path("/proc/self/stat").exists() else UNKNOWN
    return ALIVE if ticks is None or now == ticks else ENDED  # another process reused the pid


def describe(identity: Mapping[str, Any] | None) -> str:
    """A short phrase for a `running` status: still running, ended, or not checkable here."""
    state = process_state(identity)
    who = (f"pid {identity.get('pid')} on {identity.get('host')}, started {identity.get('started_at')}"
           if isinstance(identity, Mapping) else "no supervisor recorded")
    if state == ALIVE:
        return f"still running: {who}"
    if state == ENDED:
        return f"the process ended before finishing the run: {who}"
    return f"cannot tell from this host whether it still runs: {who}"

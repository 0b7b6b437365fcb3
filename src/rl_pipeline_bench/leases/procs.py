"""Process identity and ownership: which recorded or owned processes are still alive.

A PID alone can be reused, so every recorded process carries its start time and is
"alive" only while a process with that PID and start time exists and is not a zombie.
The supervisor makes itself a child subreaper, so descendants that detach (double
fork, setsid) are re-parented to it instead of init and stay visible as its own.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import Any

import psutil

from ..records.redaction import redact_text

_PR_SET_CHILD_SUBREAPER = 36


def identity(pid: int) -> dict[str, Any] | None:
    """{pid, create_time} of a running process, or None if it is gone."""
    try:
        return {"pid": pid, "create_time": psutil.Process(pid).create_time()}
    except psutil.Error:
        return None


def describe(proc: psutil.Process) -> dict[str, Any]:
    """Identity plus a short command line (secrets scrubbed), for messages and records."""
    out: dict[str, Any] = {"pid": proc.pid}
    try:
        with proc.oneshot():
            out["create_time"] = proc.create_time()
            out["cmdline"] = redact_text(" ".join(proc.cmdline()))[:300] or proc.name()
    except psutil.Error:
        pass
    return out


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def is_alive(ident: dict[str, Any] | None) -> bool:
    """True while the recorded process (same PID and start time) runs and is not a zombie."""
    if not ident or not isinstance(ident.get("pid"), int):
        return False
    try:
        proc = psutil.Process(ident["pid"])
        created = proc.create_time()
    except psutil.Error:
        return False
    want = ident.get("create_time")
    if isinstance(want, (int, float)) and abs(created - want) > 1.0:
        return False  # the PID now belongs to someone else
    return _running(proc)


def group_members(pgid: int | None, exclude: set[int] = frozenset()) -> list[psutil.Process]:
    """Running (non-zombie) processes whose process group is `pgid`."""
    if not isinstance(pgid, int) or pgid <= 0:
        return []
    out = []
    for proc in psutil.process_iter():
        if proc.pid in exclude:
            continue
        try:
            if os.getpgid(proc.pid) == pgid and _running(proc):
                out.append(proc)
        except (OSError, psutil.Error):
            continue
    return out


def running_descendants(pid: int) -> list[psutil.Process]:
    """Non-zombie descendants of `pid` (for a subreaper: including re-parented orphans)."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    return [c for c in children if _running(c)]


def reap_zombie_children(keep: int) -> None:
    """Reap exited children other than `keep` (orphans a subreaper inherited)."""
    try:
        children = psutil.Process().children()
    except psutil.Error:
        return
    for c in children:
        if c.pid == keep:
            continue
        try:
            if c.status() == psutil.STATUS_ZOMBIE:
                os.waitpid(c.pid, os.WNOHANG)
        except (OSError, psutil.Error):
            continue


def become_subreaper() -> bool:
    """Ask Linux to re-parent orphaned descendants to this process (prctl PR_SET_CHILD_SUBREAPER)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False

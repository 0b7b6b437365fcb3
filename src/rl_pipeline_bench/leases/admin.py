"""Reading and clearing reservation records by hand (`bench lease list|clear`).

Clearing is the only way a record goes away other than a clean release: there is
deliberately no automatic stale override. `clear` removes one record only when the
run id matches, the record was written on this host and none of its recorded
processes (supervisor, command, process group, recorded survivors) is alive.
"""

from __future__ import annotations

import contextlib
import os
import socket
from typing import Any

from . import procs
from .store import (
    LockDir,
    LockDirError,
    RecordEntry,
    RegistryBusy,
    probe_held,
    try_flock,
)


class ClearRefused(Exception):
    """The record was not removed; the message says why and what is still alive."""


def _alive_processes(d: dict[str, Any]) -> list[dict[str, Any]]:
    alive: list[dict[str, Any]] = []
    seen: set[int] = set()
    for role in ("supervisor", "child"):
        ident = d.get(role)
        if procs.is_alive(ident):
            alive.append({"role": role, "pid": ident["pid"]})
            seen.add(ident["pid"])
    for p in procs.group_members(d.get("process_group")):
        if p.pid not in seen:
            alive.append({"role": "process group member", **procs.describe(p)})
            seen.add(p.pid)
    for s in d.get("survivors") or []:
        if isinstance(s, dict) and s.get("pid") not in seen and procs.is_alive(s):
            alive.append({"role": "recorded survivor", "pid": s["pid"], "cmdline": s.get("cmdline")})
    return alive


def describe_record(ld: LockDir, entry: RecordEntry) -> dict[str, Any]:
    """One record as `bench lease list` shows it: state live/stale, what is alive, which locks are held."""
    if entry.data is None:
        return {"record": str(entry.path), "state": "unreadable", "error": entry.error,
                "note": "blocks every lease until a person inspects and removes this file"}
    d = entry.data
    here = d.get("host") == socket.gethostname()
    alive = _alive_processes(d) if here else []
    sup_alive = any(a["role"] == "supervisor" for a in alive)
    state = "live" if sup_alive else ("stale" if here else "other-host")
    return {
        "record": str(entry.path),
        "run_id": d.get("run_id"),
        "state": state,
        "status": d.get("status"),
        "host": d.get("host"),
        "started_at": d.get("started_at"),
        "gpu_spec": d.get("gpu_spec"),
        "gpu_set_index": d.get("gpu_set_index"),
        "devices": [{k: dev.get(k) for k in ("index", "uuid", "name")} for dev in d.get("devices", [])],
        "supervisor_pid": (d.get("supervisor") or {}).get("pid"),
        "process_group": d.get("process_group"),
        "alive_processes": alive,
        "locks_held": {dev.get("uuid"): probe_held(ld.gpu_lock_path(dev.get("uuid", ""))) for dev in d.get("devices", [])},
        "command": d.get("command"),
        "inventory_source": d.get("inventory_source"),
    }


def list_leases(ld: LockDir) -> list[dict[str, Any]]:
    """All records in the lock directory, plus any temp file a killed writer left.

    Raises LockDirError when the directory could be changed by another account: its
    records then prove nothing.
    """
    if not os.path.lexists(ld.path):
        return []
    ld.verify()
    out = [describe_record(ld, e) for e in ld.records()]
    for tmp in ld.leftover_temp_files():
        out.append({"record": str(tmp), "state": "partial-temp-file",
                    "note": "never a reservation (records appear only by atomic rename); safe to delete when no lease is being taken"})
    return out


def clear_lease(ld: LockDir, gpu: str, run_id: str) -> dict[str, Any]:
    """Remove the record of `run_id` holding `gpu` if nothing of it is alive; returns what was removed."""
    if not ld.path.is_dir():
        raise ClearRefused(f"lock directory {ld.path} does not exist; there is nothing to clear")
    try:
        ld.verify()
        with ld.registry(30.0):
            return _clear_locked(ld, gpu, run_id)
    except (LockDirError, RegistryBusy) as exc:
        raise ClearRefused(str(exc)) from None


def _clear_locked(ld: LockDir, gpu: str, run_id: str) -> dict[str, Any]:
    records = ld.records()
    entries = [e for e in records if e.data is not None and e.data.get("run_id") == run_id]
    if not entries:
        known = sorted(str(e.data.get("run_id")) for e in records if e.data is not None)
        raise ClearRefused(f"no record with run id {run_id!r} in {ld.path} (run ids there: {', '.join(known) or 'none'})")
    entry = entries[0]
    d = entry.data
    if gpu not in entry.uuids:
        raise ClearRefused(f"record {entry.path} (run {run_id}) does not hold GPU {gpu}; it holds {', '.join(entry.uuids)}")
    if d.get("host") != socket.gethostname():
        raise ClearRefused(f"record {entry.path} was written on host {d.get('host')}; its processes can only be checked there")
    alive = _alive_processes(d)
    if alive:
        listed = "; ".join(f"{a['role']} pid {a['pid']}" + (f" ({a['cmdline']})" if a.get("cmdline") else "") for a in alive)
        raise ClearRefused(f"record {entry.path} (run {run_id}) not removed: recorded processes still alive: {listed}")
    held: dict[str, int] = {}
    removed_locks: list[str] = []
    try:
        for uuid in entry.uuids:
            path = ld.gpu_lock_path(uuid)
            try:
                fd = try_flock(path, create=False)
            except FileNotFoundError:
                continue
            if fd is None:
                raise ClearRefused(f"record {entry.path} not removed: device lock {path} is held by a live process")
            held[uuid] = fd
        os.unlink(entry.path)
        for uuid in held:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(ld.gpu_lock_path(uuid))
                removed_locks.append(str(ld.gpu_lock_path(uuid)))
    finally:
        for fd in held.values():
            os.close(fd)
    return {
        "removed_record": str(entry.path),
        "run_id": run_id,
        "status": d.get("status"),
        "gpus": [{k: dev.get(k) for k in ("index", "uuid", "name")} for dev in d.get("devices", [])],
        "removed_lock_files": removed_locks,
    }

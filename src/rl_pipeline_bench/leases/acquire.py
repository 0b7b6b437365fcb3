"""Taking a lease: resolve SPECs, check records, NVML and device locks, then write the record.

Everything happens under the registry lock, so of several processes asking for
overlapping sets at once exactly one gets each device. On any refusal nothing is
left behind: device locks taken for the attempt are released and unlinked, and the
record is either fully written (atomic link) or absent.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..host.gpus import Gpu, InventoryError, query_inventory
from ..records.redaction import redact_text
from . import procs
from .gpu_set import GpuSetError, resolve_gpu_set
from .store import (
    RECORD_SCHEMA,
    LockDir,
    LockDirError,
    RecordEntry,
    RegistryBusy,
    check_run_id,
    resolve_lock_dir,
    try_flock,
)

DEFAULT_MEMORY_THRESHOLD_MIB = 1024


@dataclass(frozen=True)
class Refusal:
    """Why one GPU (or SPEC) cannot be leased, and which record is involved."""

    gpu: str
    reason: str
    record: str

    def __str__(self) -> str:
        return f"{self.gpu}: {self.reason} [record: {self.record}]"


class LeaseRefused(Exception):
    """No lease was taken; every problem names the GPU, the reason and the record path."""

    def __init__(self, problems: list[Refusal]):
        self.problems = problems
        super().__init__("lease refused:\n  " + "\n  ".join(str(p) for p in problems))


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def memory_threshold_from_config() -> int:
    from ..settings.config import load_config

    return int((load_config().get("lease") or {}).get("memory_threshold_mib", DEFAULT_MEMORY_THRESHOLD_MIB))


def _blocking_record_reason(entry: RecordEntry) -> str:
    d = entry.data or {}
    sup = d.get("supervisor") or {}
    alive = procs.is_alive(sup) if d.get("host") == socket.gethostname() else None
    state = {True: "live", False: "stale: its supervisor is gone", None: f"from host {d.get('host')}"}[alive]
    hint = "" if alive else "; inspect it, then `bench lease clear --gpu UUID --run-id ID` if nothing of it runs"
    return f"reserved by run {d.get('run_id')!r} (status {d.get('status')}, supervisor pid {sup.get('pid')}, {state}){hint}"


def _device_problems(gpu: Gpu, threshold_mib: int, record: str) -> list[Refusal]:
    out = []
    if gpu.processes:
        pids = ", ".join(str(p.pid) for p in gpu.processes)
        out.append(Refusal(gpu.describe(), (
            f"{len(gpu.processes)} compute process(es) on the device per NVML (PIDs as NVML reports them, "
            f"possibly in another PID namespace: {pids}); not ours to stop"), record))
    if gpu.memory_used_mib > threshold_mib:
        out.append(Refusal(gpu.describe(), (
            f"{gpu.memory_used_mib} MiB of memory in use (of {gpu.memory_total_mib} MiB), "
            f"above the {threshold_mib} MiB threshold"), record))
    return out


@dataclass
class Lease:
    """A held lease: device flocks open, record written. Release only after the job is gone."""

    lock_dir: LockDir
    record_path: Path
    data: dict[str, Any]
    devices: list[Gpu]
    _fds: dict[str, int] = field(default_factory=dict, repr=False)

    @property
    def run_id(self) -> str:
        return self.data["run_id"]

    @property
    def cuda_visible_devices(self) -> str:
        return ",".join(g.uuid for g in self.devices)

    def update(self, **fields: Any) -> None:
        """Rewrite the record atomically with new fields (old version stays on failure)."""
        new = {**self.data, **fields}
        self.lock_dir.write_record(self.record_path, new)
        self.data = new

    def release(self, registry_timeout_s: float = 120.0, should_abort: Callable[[], bool] = lambda: False) -> list[str]:
        """Remove the record, then release and unlink the device locks; returns what was removed.

        Raises RegistryBusy, with nothing removed, when the registry lock stays busy or
        `should_abort` says so while waiting for it.
        """
        removed = []
        with self.lock_dir.registry(registry_timeout_s, should_abort):
            os.unlink(self.record_path)
            removed.append(str(self.record_path))
            for uuid, fd in list(self._fds.items()):
                path = self.lock_dir.gpu_lock_path(uuid)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                    removed.append(str(path))
                os.close(self._fds.pop(uuid))
        return removed

    def drop_locks(self) -> None:
        """Close device flocks but keep record and lock files (the record keeps blocking)."""
        for uuid in list(self._fds):
            os.close(self._fds.pop(uuid))


def _take_locks(lock_dir: LockDir, devices: list[Gpu], record: str) -> tuple[dict[str, int], list[Refusal]]:
    fds: dict[str, int] = {}
    for gpu in devices:
        path = lock_dir.gpu_lock_path(gpu.uuid)
        try:
            fd = try_flock(path, create=True)
        except OSError as exc:
            _drop(lock_dir, fds)
            return {}, [Refusal(gpu.describe(), f"cannot create device lock {path}: {exc.strerror or exc}", record)]
        if fd is None:
            _drop(lock_dir, fds)
            return {}, [Refusal(gpu.describe(), f"device lock {path} is held by a live process without a record", record)]
        fds[gpu.uuid] = fd
    return fds, []


def _drop(lock_dir: LockDir, fds: dict[str, int]) -> None:
    """Undo _take_locks (registry lock held, so unlinking is safe)."""
    for uuid, fd in fds.items():
        with contextlib.suppress(OSError):
            os.unlink(lock_dir.gpu_lock_path(uuid))
        os.close(fd)
    fds.clear()


def choose_gpu_set(
    specs: str | Sequence[str],
    count: int,
    *,
    run_id: str,
    command: Sequence[str] = (),
    lock_dir: str | os.PathLike | LockDir | None = None,
    memory_threshold_mib: int | None = None,
    registry_timeout_s: float = 60.0,
    should_abort: Callable[[], bool] = lambda: False,
) -> Lease:
    """Lease the first free set among `specs` (each a SPEC of exactly `count` devices).

    A set is free when no record names any of its devices, no live lock holds them,
    and NVML shows no compute process and memory use at most the threshold. Raises
    LeaseRefused (with every set's problems) when none is free; the record of a
    granted lease says which set was taken (gpu_set_index, gpu_spec).
    """
    specs = [specs] if isinstance(specs, str) else list(specs)
    label = "SPEC " + " | ".join(repr(s) for s in specs) if specs else "SPEC (none)"
    if not specs:
        raise LeaseRefused([Refusal(label, "no GPU SPEC given", "not written")])
    try:
        check_run_id(run_id)
    except ValueError as exc:
        raise LeaseRefused([Refusal(label, str(exc), "not written")]) from None
    try:
        ld = lock_dir if isinstance(lock_dir, LockDir) else LockDir(resolve_lock_dir(lock_dir))
    except ValueError as exc:  # ConfigError while reading lease.lock_dir
        raise LeaseRefused([Refusal(label, f"cannot determine the lock directory: {exc}", "not written")]) from None
    record_path = ld.record_path(run_id)
    unwritten = f"{record_path} (not written)"
    if memory_threshold_mib is None:
        try:
            memory_threshold_mib = memory_threshold_from_config()
        except ValueError as exc:  # ConfigError: the threshold cannot be known
            raise LeaseRefused([Refusal(label, f"cannot read lease.memory_threshold_mib: {exc}", unwritten)]) from None
    try:
        ld.ensure()
        with ld.registry(registry_timeout_s, should_abort):
            return _choose_locked(ld, specs, count, run_id, list(command), memory_threshold_mib, record_path, label)
    except (LockDirError, RegistryBusy) as exc:
        raise LeaseRefused([Refusal(label, str(exc), unwritten)]) from None


def _choose_locked(ld, specs, count, run_id, command, threshold, record_path, label) -> Lease:
    unwritten = f"{record_path} (not written)"
    try:
        inv = query_inventory()  # inside the registry lock: one consistent snapshot per decision
    except InventoryError as exc:
        raise LeaseRefused([Refusal(label, f"{exc}; GPU leases are refused without NVML", unwritten)]) from None
    resolved = []
    for spec in specs:
        try:
            resolved.append((spec, resolve_gpu_set(spec, count, inv)))
        except GpuSetError as exc:
            raise LeaseRefused([Refusal(exc.gpu, exc.reason, unwritten)]) from None
    if record_path.exists():
        raise LeaseRefused([Refusal(label, f"a record for run id {run_id!r} already exists", str(record_path))])
    records = ld.records()
    unreadable = [r for r in records if r.data is None]
    if unreadable:
        raise LeaseRefused([
            Refusal("every GPU", f"unreadable reservation record ({r.error}); it blocks all leases until a person inspects and removes it", str(r.path))
            for r in unreadable
        ])
    problems: list[Refusal] = []
    skipped: list[dict[str, Any]] = []
    for set_index, (spec, devices) in enumerate(resolved):
        set_problems: list[Refusal] = []
        for gpu in devices:
            for entry in records:
                if gpu.uuid in entry.uuids:
                    set_problems.append(Refusal(gpu.describe(), _blocking_record_reason(entry), str(entry.path)))
        if not set_problems:
            for gpu in devices:
                set_problems += _device_problems(gpu, threshold, unwritten)
        fds: dict[str, int] = {}
        if not set_problems:
            fds, set_problems = _take_locks(ld, devices, unwritten)
        if set_problems:
            if len(resolved) > 1:
                set_problems = [Refusal(p.gpu, f"{p.reason} (set {set_index + 1} of {len(resolved)}: {spec!r})", p.record) for p in set_problems]
            problems += set_problems
            skipped.append({"gpu_spec": spec, "problems": [str(p) for p in set_problems]})
            continue
        data = _record(run_id, record_path, ld, command, specs, set_index, spec, count, devices, inv, threshold, skipped)
        try:
            ld.write_record(record_path, data, must_not_exist=True)
        except OSError as exc:
            _drop(ld, fds)
            raise LeaseRefused([Refusal(", ".join(g.describe() for g in devices), f"cannot write the reservation record: {exc.strerror or exc}; nothing was reserved", unwritten)]) from None
        return Lease(ld, record_path, data, devices, fds)
    raise LeaseRefused(problems)


def _record(run_id, record_path, ld, command, specs, set_index, spec, count, devices, inv, threshold, skipped) -> dict[str, Any]:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry in some containers
        user = None
    return {
        "schema": RECORD_SCHEMA,
        "run_id": run_id,
        "status": "starting",
        "host": socket.gethostname(),
        "user": user,
        "uid": os.getuid(),
        "lock_dir": str(ld.path),
        "record": str(record_path),
        "started_at": utc_now(),
        "command": [redact_text(str(a)) for a in command],
        "cwd": os.getcwd(),
        "supervisor": procs.identity(os.getpid()),
        "child": None,
        "process_group": None,
        "count": count,
        "gpu_specs": list(specs),
        "gpu_set_index": set_index,
        "gpu_spec": spec,
        "skipped_sets": skipped,
        "cuda_visible_devices": ",".join(g.uuid for g in devices),
        "devices": [
            {
                "index": g.index,
                "uuid": g.uuid,
                "name": g.name,
                "driver": g.driver,
                "memory_total_mib": g.memory_total_mib,
                "memory_used_mib_at_lease": g.memory_used_mib,
            }
            for g in devices
        ],
        "inventory_source": inv.source,
        "memory_threshold_mib": threshold,
    }

"""GPU leases: UUID-keyed host locks, NVML checks and persistent reservation records.

Public API (the Snakemake rules and the runner use these):
  lease_command(spec, count, run_id, lock_dir=None) -> argv prefix for `bench lease run ... --`
  current_lease_gpus() -> leased devices (inside a leased command) or None
  current_lease() -> the whole reservation record (inside a leased command) or None
  choose_gpu_set(specs, count, *, run_id, ...) -> Lease (first free set, atomically taken)
See docs/leases.md for the design, the record format and the exit codes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from .acquire import (
    DEFAULT_MEMORY_THRESHOLD_MIB,
    Lease,
    LeaseRefused,
    Refusal,
    choose_gpu_set,
)
from .admin import ClearRefused, clear_lease, list_leases
from .gpu_set import GpuSetError, parse_gpu_set, resolve_gpu_set
from .store import (
    LOCK_DIR_ENV,
    RECORD_SCHEMA,
    LockDir,
    LockDirError,
    default_lock_dir,
    resolve_lock_dir,
)
from .trust import read_regular
from .supervisor import (
    EXIT_CLEANUP_UNCONFIRMED,
    EXIT_GATE_ABORTED,
    EXIT_REFUSED,
    RECORD_ENV,
    supervise,
)

__all__ = [
    "ClearRefused", "DEFAULT_MEMORY_THRESHOLD_MIB", "EXIT_CLEANUP_UNCONFIRMED", "EXIT_GATE_ABORTED", "EXIT_REFUSED",
    "LOCK_DIR_ENV", "Lease", "LeaseRecordError", "LeaseRefused", "LockDir", "LockDirError", "RECORD_ENV",
    "GpuSetError", "RECORD_SCHEMA", "Refusal", "choose_gpu_set", "clear_lease", "current_lease", "current_lease_gpus",
    "default_lock_dir", "lease_command", "list_leases", "parse_gpu_set", "resolve_lock_dir", "resolve_gpu_set", "supervise",
]


class LeaseRecordError(RuntimeError):
    """RL_BENCH_LEASE_RECORD is set but the record cannot be read: a manifest must not guess its GPUs."""


def lease_command(
    spec: str | Sequence[str],
    count: int,
    run_id: str,
    lock_dir: str | os.PathLike | None = None,
    *,
    memory_threshold_mib: int | None = None,
    cleanup_timeout_s: float | None = None,
    launcher: Sequence[str] = ("bench", "lease"),
) -> list[str]:
    """argv prefix that runs a command under a lease; append the command after it.

    `spec` is one SPEC ("0,1,2,3") or several explicit sets tried in order (the first
    free one is taken; the record says which).
    """
    specs = [spec] if isinstance(spec, str) else list(spec)
    if not specs:
        raise ValueError("lease_command: at least one GPU SPEC is required")
    argv = [*launcher, "run"]
    for s in specs:
        parse_gpu_set(s)  # fail early, in the caller, on an empty or malformed SPEC
        argv += ["--gpus", s]
    argv += ["--count", str(int(count)), "--run-id", str(run_id)]
    if lock_dir is not None:
        argv += ["--lock-dir", str(lock_dir)]
    if memory_threshold_mib is not None:
        argv += ["--memory-threshold-mib", str(int(memory_threshold_mib))]
    if cleanup_timeout_s is not None:
        argv += ["--cleanup-timeout", f"{float(cleanup_timeout_s):g}"]
    return argv + ["--"]


def current_lease(env: dict[str, str] | None = None) -> dict[str, Any] | None:
    """The reservation record of the lease this process runs under, or None outside a lease."""
    env = os.environ if env is None else env
    path = env.get(RECORD_ENV)
    if not path:
        return None
    try:
        data = json.loads(read_regular(path))
    except (OSError, ValueError) as exc:
        raise LeaseRecordError(f"{RECORD_ENV}={path}: cannot read the lease record: {exc}") from None
    if not isinstance(data, dict) or data.get("schema") != RECORD_SCHEMA or not isinstance(data.get("devices"), list):
        raise LeaseRecordError(f"{RECORD_ENV}={path}: not a {RECORD_SCHEMA} record")
    return data


def current_lease_gpus(env: dict[str, str] | None = None) -> list[dict[str, Any]] | None:
    """Leased devices [{index, uuid, name, driver}] for the run manifest, or None outside a lease."""
    data = current_lease(env)
    if data is None:
        return None
    return [{k: d.get(k) for k in ("index", "uuid", "name", "driver")} for d in data["devices"]]

"""Helpers for the lease tests: inventory files (the only NVML stand-in), supervisor launch, bounded waits.

Run as a script (`python tests/lease_helpers.py fs-scenario ...`) it executes one
filesystem scenario inside a private mount namespace (see test_leases.py), so the
tmpfs it mounts disappears with the process even if the test is interrupted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from rl_pipeline_bench.leases import lease_command

LAUNCHER = (sys.executable, "-m", "rl_pipeline_bench.commands.lease")


def gpu(index: int, *, used_mib: int = 0, procs: tuple = (), uuid: str | None = None) -> dict:
    """One inventory entry in the RL_BENCH_GPU_INVENTORY format (a fixture, not a real device)."""
    return {
        "index": index,
        "uuid": uuid or f"GPU-fixture-{index:04d}-0000-0000-000000000000",
        "name": "Fixture H200 (test inventory)",
        "memory_total_mib": 143771,
        "memory_used_mib": used_mib,
        "processes": [{"pid": p, "used_memory_mib": 512} for p in procs],
        "driver": "570.fixture",
    }


def uuid_of(index: int) -> str:
    return gpu(index)["uuid"]


def write_inventory(path: Path, gpus: list[dict]) -> Path:
    path.write_text(json.dumps(gpus))
    return path


def lease_env(inventory: Path, lock_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["RL_BENCH_GPU_INVENTORY"] = str(inventory)
    env["RL_BENCH_LOCK_DIR"] = str(lock_dir)
    env.pop("RL_BENCH_LEASE_RECORD", None)
    return env


def lease_argv(spec, count: int, run_id: str, command: list[str], **kw) -> list[str]:
    kw.setdefault("memory_threshold_mib", 1024)
    return lease_command(spec, count, run_id, launcher=LAUNCHER, **kw) + command


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def wait_for(predicate, timeout: float = 20.0, interval: float = 0.05, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def records(lock_dir: Path) -> list[Path]:
    return sorted(lock_dir.glob("lease-*.json")) if lock_dir.exists() else []


def leftovers(lock_dir: Path) -> list[str]:
    """Everything in the lock dir except the registry lock file (which is permanent by design)."""
    if not lock_dir.exists():
        return []
    return sorted(p.name for p in lock_dir.iterdir() if p.name != "registry.lock")


def record_with_status(lock_dir: Path, status: str):
    for p in records(lock_dir):
        try:
            data = json.loads(p.read_text())
        except ValueError:
            continue
        if data.get("status") == status:
            return data
    return None


# ------------------------------------------------------------ mount-namespace scenarios


def _fs_scenario(mode: str, base: Path, inventory: Path) -> dict:
    """Mount a small tmpfs at base, make it read-only or full, try one lease, report what is left."""
    base.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(base)], check=True)
    lock_dir = base / "locks"
    marker = Path(str(base) + ".command-ran")
    filler_error = None
    if mode == "readonly-existing":
        lock_dir.mkdir()
        (lock_dir / "registry.lock").touch()
        subprocess.run(["mount", "-o", "remount,ro", str(base)], check=True)
    elif mode == "readonly-missing":
        subprocess.run(["mount", "-o", "remount,ro", str(base)], check=True)
    elif mode == "full":
        lock_dir.mkdir()
        fd = os.open(base / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError as exc:
            filler_error = exc.strerror
        finally:
            os.close(fd)
    argv = lease_argv("0", 1, "fs-scenario", ["touch", str(marker)])
    proc = subprocess.run(argv, env=lease_env(inventory, lock_dir), capture_output=True, text=True, timeout=60)
    return {
        "rc": proc.returncode,
        "stderr": proc.stderr,
        "filler_error": filler_error,
        "command_ran": marker.exists(),
        "lock_dir_exists": lock_dir.exists(),
        "left": sorted(os.listdir(lock_dir)) if lock_dir.exists() else [],
    }


if __name__ == "__main__":
    if len(sys.argv) != 5 or sys.argv[1] != "fs-scenario":
        sys.exit("usage: lease_helpers.py fs-scenario MODE BASE INVENTORY")
    print(json.dumps(_fs_scenario(sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]))))

"""Lease lock directory trust and record file types on a shared host.

Another local user must not be able to delete, replace or move aside a live lease's
files. So the lock directory and every directory above it are checked the way sshd
and sudo check their files: owned by root or this account, not writable by group or
others (a parent with the sticky bit, like /tmp, is allowed: others cannot rename or
delete what they do not own in it). Records and lock files are opened without
following links and without blocking, and only regular files are accepted; a
supervisor stops on SIGTERM while it waits for the registry lock.

NVML is replaced by the RL_BENCH_GPU_INVENTORY file only; directories, modes, owners,
FIFOs, symlinks, flock and signals are real.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from lease_helpers import (
    LAUNCHER,
    gpu,
    lease_argv,
    lease_env,
    leftovers,
    py,
    record_with_status,
    records,
    uuid_of,
    wait_for,
    write_inventory,
)

from rl_pipeline_bench.leases import (
    EXIT_CLEANUP_UNCONFIRMED,
    EXIT_REFUSED,
    ClearRefused,
    LeaseRefused,
    LockDir,
    LockDirError,
    choose_gpu_set,
    clear_lease,
    default_lock_dir,
)
from rl_pipeline_bench.leases import procs as lease_procs

WAIT_FOR_FILE = "import pathlib,sys,time\np=pathlib.Path(sys.argv[1]); d=time.time()+60\nwhile not p.exists() and time.time()<d: time.sleep(0.05)"
OTHER_UID = 65534  # nobody: a different account (chown needs root)


@pytest.fixture
def host(tmp_path, monkeypatch):
    inv = write_inventory(tmp_path / "inventory.json", [gpu(i) for i in range(4)])
    monkeypatch.setenv("RL_BENCH_GPU_INVENTORY", str(inv))
    monkeypatch.delenv("RL_BENCH_LEASE_RECORD", raising=False)
    monkeypatch.delenv("RL_BENCH_LOCK_DIR", raising=False)
    return type("Host", (), {"inv": inv, "tmp": tmp_path})


def needs_root(why: str) -> None:
    if os.geteuid() != 0:
        pytest.skip(f"needs root to chown a directory to another account ({why}); CI runs as root")


def refusal(lock_dir, spec="0", run_id="r1") -> str:
    with pytest.raises(LeaseRefused) as exc:
        lease = choose_gpu_set(spec, 1, run_id=run_id, lock_dir=lock_dir, memory_threshold_mib=1024)
        lease.release()  # only reached when the directory was wrongly trusted
    return str(exc.value)


def private_dir(path: Path, mode: int = 0o700) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(mode)
    return path


# ------------------------------------------------------------------ the lock directory itself


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o770, 0o702], ids=oct)
def test_group_or_world_writable_lock_dir_refused(host, mode):
    lock_dir = private_dir(host.tmp / "locks", mode)
    text = refusal(lock_dir)
    assert str(lock_dir) in text and "writable by group or others" in text and oct(mode)[2:] in text
    assert "(not written)" in text
    assert sorted(os.listdir(lock_dir)) == []  # nothing was created in it, not even registry.lock


def test_tmp_itself_is_refused_even_as_root(host):
    # /tmp is root-owned and 1777: the owner check alone let root use it as a lock directory.
    with pytest.raises(LockDirError, match="writable by group or others"):
        LockDir("/tmp").verify()
    proc = subprocess.run([*LAUNCHER, "list", "--lock-dir", "/tmp"], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "/tmp" in proc.stderr and "writable by group or others" in proc.stderr


def test_tmp_style_dir_refused_as_lock_dir(host):
    shared = private_dir(host.tmp / "shared", 0o1777)
    text = refusal(shared)
    assert str(shared) in text and "writable by group or others" in text


def test_lock_dir_owned_by_another_account_refused(host):
    needs_root("lock directory of another uid")
    lock_dir = private_dir(host.tmp / "theirs")
    os.chown(lock_dir, OTHER_UID, OTHER_UID)
    text = refusal(lock_dir)
    assert str(lock_dir) in text and f"uid {OTHER_UID}" in text


# ------------------------------------------------------------------ every directory above it


def test_world_writable_parent_without_sticky_bit_refused(host):
    parent = private_dir(host.tmp / "open", 0o777)
    lock_dir = private_dir(parent / "locks")
    text = refusal(lock_dir)
    assert str(parent) in text and "writable by group or others" in text and "sticky" in text
    assert os.listdir(lock_dir) == []


def test_group_writable_grandparent_refused(host):
    top = private_dir(host.tmp / "team", 0o775)
    lock_dir = private_dir(top / "a" / "b" / "locks")
    text = refusal(lock_dir)
    assert str(top) in text and "writable by group or others" in text


def test_parent_owned_by_another_account_refused(host):
    needs_root("parent directory of another uid")
    parent = private_dir(host.tmp / "their-home", 0o755)
    lock_dir = private_dir(parent / "locks")
    os.chown(parent, OTHER_UID, OTHER_UID)
    text = refusal(lock_dir)
    assert str(parent) in text and f"uid {OTHER_UID}" in text


def test_sticky_world_writable_parent_is_allowed(host):
    # The default /tmp/rl-bench-locks-$USER has exactly this shape.
    parent = private_dir(host.tmp / "tmp-like", 0o1777)
    lock_dir = parent / "rl-bench-locks-me"
    lease = choose_gpu_set("0", 1, run_id="ok", lock_dir=lock_dir, memory_threshold_mib=1024)
    lease.release()
    assert (os.stat(lock_dir).st_mode & 0o777) == 0o700 and leftovers(lock_dir) == []


def test_symlink_parent_checked_where_it_lives_and_where_it_points(host):
    safe = private_dir(host.tmp / "real")
    private_dir(safe / "locks")
    home = private_dir(host.tmp / "home", 0o755)
    (home / "link").symlink_to(safe)
    lease = choose_gpu_set("0", 1, run_id="via-link", lock_dir=home / "link" / "locks", memory_threshold_mib=1024)
    lease.release()

    open_dir = private_dir(host.tmp / "open", 0o777)  # anyone could replace this link
    (open_dir / "link").symlink_to(safe)
    text = refusal(open_dir / "link" / "locks")
    assert str(open_dir) in text and "writable by group or others" in text

    unsafe_target = private_dir(host.tmp / "target-open", 0o777)
    private_dir(unsafe_target / "locks")
    (home / "bad-link").symlink_to(unsafe_target)
    text = refusal(home / "bad-link" / "locks")
    assert str(unsafe_target) in text and "writable by group or others" in text


def test_created_dirs_are_private_whatever_the_umask(host):
    lock_dir = host.tmp / "new" / "deeper" / "locks"
    old = os.umask(0)
    try:
        lease = choose_gpu_set("0", 1, run_id="fresh", lock_dir=lock_dir, memory_threshold_mib=1024)
        lease.release()
    finally:
        os.umask(old)
    assert (os.stat(lock_dir).st_mode & 0o777) == 0o700
    for d in (host.tmp / "new", host.tmp / "new" / "deeper"):
        assert os.stat(d).st_mode & 0o022 == 0, oct(os.stat(d).st_mode)


def test_default_dir_named_from_the_uid_not_the_environment(monkeypatch):
    import pwd

    own = pwd.getpwuid(os.geteuid()).pw_name
    for var in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.setenv(var, "victim")  # what `sudo -E` or a careless wrapper leaves behind
    assert default_lock_dir() == Path("/tmp") / f"rl-bench-locks-{own}"


def test_planted_default_dir_of_another_account_refused(host):
    needs_root("a pre-created lock directory owned by another uid")
    shared = private_dir(host.tmp / "tmp", 0o1777)
    planted = private_dir(shared / "rl-bench-locks-victim", 0o777)
    os.chown(planted, OTHER_UID, OTHER_UID)
    text = refusal(planted)
    assert f"uid {OTHER_UID}" in text


def test_list_and_clear_check_the_directory_too(host):
    lock_dir = private_dir(host.tmp / "locks", 0o777)
    with pytest.raises(LockDirError, match="writable by group or others"):
        LockDir(lock_dir).verify()
    with pytest.raises(ClearRefused, match="writable by group or others"):
        clear_lease(LockDir(lock_dir), uuid_of(0), "x")
    env = lease_env(host.inv, lock_dir)
    for argv in (["list"], ["clear", "--gpu", uuid_of(0), "--run-id", "x"]):
        proc = subprocess.run([*LAUNCHER, *argv], env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode != 0 and "writable by group or others" in proc.stderr, (argv, proc.stderr)


# ------------------------------------------------------------------ record and lock file types


def _run_cli(host, lock_dir, spec, run_id, command, timeout=30):
    return subprocess.run(lease_argv(spec, 1, run_id, command), env=lease_env(host.inv, lock_dir),
                          capture_output=True, text=True, timeout=timeout)


def test_fifo_record_refuses_instead_of_hanging(host):
    lock_dir = private_dir(host.tmp / "locks")
    fifo = lock_dir / "lease-evil.json"
    os.mkfifo(fifo, 0o600)
    proc = _run_cli(host, lock_dir, "0", "victim", ["true"])  # a hang fails here with TimeoutExpired
    assert proc.returncode == EXIT_REFUSED
    assert str(fifo) in proc.stderr and "not a regular file" in proc.stderr and "unreadable reservation record" in proc.stderr


def test_symlinked_record_is_not_followed(host):
    lock_dir = private_dir(host.tmp / "locks")
    elsewhere = host.tmp / "fake-record.json"
    elsewhere.write_text(json.dumps({"run_id": "fake", "devices": [{"uuid": uuid_of(3)}]}))
    (lock_dir / "lease-fake.json").symlink_to(elsewhere)
    proc = _run_cli(host, lock_dir, "0", "victim", ["true"])
    assert proc.returncode == EXIT_REFUSED and "unreadable reservation record" in proc.stderr
    assert "lease-fake.json" in proc.stderr and "symbolic link" in proc.stderr


def test_fifo_device_lock_does_not_hang_list(host):
    lock_dir = private_dir(host.tmp / "locks")
    LockDir(lock_dir).write_record(lock_dir / "lease-old.json", {
        "schema": "rl-bench/lease/v1", "run_id": "old", "host": "elsewhere", "devices": [{"index": 0, "uuid": uuid_of(0)}]})
    os.mkfifo(LockDir(lock_dir).gpu_lock_path(uuid_of(0)), 0o600)
    proc = subprocess.run([*LAUNCHER, "list", "--json"], env=lease_env(host.inv, lock_dir),
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)["leases"]
    assert row["run_id"] == "old" and row["locks_held"] == {uuid_of(0): None}


def test_fifo_device_lock_is_refused_not_used(host):
    lock_dir = private_dir(host.tmp / "locks")
    os.mkfifo(LockDir(lock_dir).gpu_lock_path(uuid_of(1)), 0o600)
    proc = _run_cli(host, lock_dir, "1", "victim", ["true"])
    assert proc.returncode == EXIT_REFUSED and "not a regular file" in proc.stderr and "GPU 1" in proc.stderr


def test_fifo_as_lease_record_env_raises(host):
    fifo = host.tmp / "record.fifo"
    os.mkfifo(fifo, 0o600)
    code = ("from rl_pipeline_bench.leases import LeaseRecordError, current_lease\n"
            "try:\n current_lease()\nexcept LeaseRecordError as e:\n print('ERR', e)")
    proc = subprocess.run(py(code), env={**os.environ, "RL_BENCH_LEASE_RECORD": str(fifo)},
                          capture_output=True, text=True, timeout=30)
    assert proc.stdout.startswith("ERR") and "not a regular file" in proc.stdout, proc.stderr


# ------------------------------------------------------------------ SIGTERM at every wait


def _hold_registry(lock_dir: Path) -> int:
    fd = os.open(lock_dir / "registry.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def test_sigterm_while_waiting_to_acquire(host):
    lock_dir = private_dir(host.tmp / "locks")
    fd = _hold_registry(lock_dir)
    try:
        sup = subprocess.Popen(lease_argv("0", 1, "waiting", ["true"]), env=lease_env(host.inv, lock_dir),
                               stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)  # it is now polling the registry lock
        assert sup.poll() is None
        sup.send_signal(signal.SIGTERM)
        assert sup.wait(timeout=10) == 128 + signal.SIGTERM
        assert records(lock_dir) == []
    finally:
        os.close(fd)


def test_sigterm_while_waiting_to_release(host):
    """A finished command's supervisor stuck behind a held registry lock must stop on SIGTERM, keeping its record."""
    lock_dir = private_dir(host.tmp / "locks")
    release = host.tmp / "release"
    sup = subprocess.Popen(lease_argv("2", 1, "ending", py(WAIT_FOR_FILE) + [str(release)]),
                           env=lease_env(host.inv, lock_dir), stderr=subprocess.PIPE, text=True)
    fd = None
    try:
        data = wait_for(lambda: record_with_status(lock_dir, "running"), what="running record")
        fd = _hold_registry(lock_dir)
        release.touch()
        wait_for(lambda: not lease_procs.is_alive(data["child"]), what="the command to exit")
        time.sleep(0.5)  # the supervisor now waits for the registry lock to release the lease
        assert sup.poll() is None
        sup.send_signal(signal.SIGTERM)
        assert sup.wait(timeout=10) == EXIT_CLEANUP_UNCONFIRMED
        err = sup.stderr.read()
        kept = json.loads((lock_dir / "lease-ending.json").read_text())
        assert kept["status"] == "cleanup_unconfirmed" and "signal" in kept["cleanup_error"]
        assert "lease-ending.json" in err and "signal" in err
    finally:
        if fd is not None:
            os.close(fd)
        release.touch()
        if sup.poll() is None:
            sup.wait(timeout=150)
    clear_lease(LockDir(lock_dir), uuid_of(2), "ending")
    assert leftovers(lock_dir) == []


"""The lease lock directory: a registry lock, UUID-keyed device locks and reservation records.

Layout of one lock directory (shared by every user of one host account):
  registry.lock           flock held briefly by whoever acquires, releases or clears
  gpu-<UUID>.lock         flock held by a live supervisor for the whole lease
  lease-<RUN_ID>.json     the persistent reservation record (written atomically)

flock locks vanish with their holder, so they say "live"; records survive a killed
supervisor, so they say "reserved until a person clears it". Device lock files are
created and unlinked only while the registry lock is held, which makes unlinking
safe (no second holder can be waiting on an orphaned inode).

`fcntl.flock` is used directly rather than through `filelock`: the lease needs
exact inode semantics (non-blocking probes, unlink under a registry lock, no soft
fallback), which differ between filelock releases.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import pwd
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .trust import UntrustedDirectory, check_trusted_dir, make_private_dirs, open_regular, read_regular
from ..records.formats import schema_of

#: Environment variable that overrides the lock directory (after --lock-dir).
LOCK_DIR_ENV = "RL_BENCH_LOCK_DIR"
RECORD_SCHEMA = schema_of("lease")
_RECORD_RE = re.compile(r"^lease-(?P<run_id>.+)\.json$")
_RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+=@-]{0,199}$")


class LockDirError(OSError):
    """The lock directory cannot be used (missing permissions, read-only, full, foreign owner)."""


class RegistryBusy(TimeoutError):
    """Another process held the registry lock for longer than the timeout."""


def default_lock_dir() -> Path:
    """/tmp/rl-bench-locks-<user>: host-local (never on a shared home), one per host account.

    The name comes from the effective uid's passwd entry, never from $USER/$LOGNAME,
    so `sudo -E` cannot point root at another user's directory.
    """
    try:
        user = pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:  # no passwd entry in some containers
        user = str(os.geteuid())
    return Path("/tmp") / f"rl-bench-locks-{user}"


def _config_lock_dir() -> str | None:
    from ..settings.config import load_config

    return (load_config().get("lease") or {}).get("lock_dir")


def resolve_lock_dir(explicit: str | os.PathLike | None = None, env: dict[str, str] | None = None) -> Path:
    """--lock-dir, then RL_BENCH_LOCK_DIR, then config lease.lock_dir, then the default."""
    env = os.environ if env is None else env
    if explicit:
        return Path(explicit).expanduser().absolute()
    if env.get(LOCK_DIR_ENV):
        return Path(env[LOCK_DIR_ENV]).expanduser().absolute()
    configured = _config_lock_dir()
    if configured:
        return Path(configured).expanduser().absolute()
    return default_lock_dir()


def check_run_id(run_id: str) -> str:
    if not isinstance(run_id, str) or not _RUN_ID_RE.match(run_id):
        raise ValueError(
            f"run id {run_id!r} is not usable in a record file name "
            "(letters, digits and . _ + = @ -, starting with a letter or digit, at most 200 characters)"
        )
    return run_id


def _safe_name(uuid: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", uuid)


def try_flock(path: Path, create: bool) -> int | None:
    """Open `path` and take a non-blocking exclusive flock: fd when locked, None when held elsewhere."""
    fd = open_regular(path, os.O_RDWR | (os.O_CREAT if create else 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return None
        raise
    return fd


def probe_held(path: Path) -> bool | None:
    """Whether some process holds the flock on `path` (None: no such file or cannot tell)."""
    try:
        fd = open_regular(path)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        return True if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES) else None
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


@dataclass
class RecordEntry:
    path: Path
    data: dict[str, Any] | None
    error: str | None = None

    @property
    def uuids(self) -> list[str]:
        return [d.get("uuid") for d in (self.data or {}).get("devices", []) if isinstance(d, dict)]


class LockDir:
    """One lock directory; all paths and atomic operations on it."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(os.path.abspath(path))  # checked and used as the same string

    # paths -----------------------------------------------------------------
    @property
    def registry_path(self) -> Path:
        return self.path / "registry.lock"

    def gpu_lock_path(self, uuid: str) -> Path:
        return self.path / f"gpu-{_safe_name(uuid)}.lock"

    def record_path(self, run_id: str) -> Path:
        return self.path / f"lease-{check_run_id(run_id)}.json"

    # setup -----------------------------------------------------------------
    def ensure(self) -> None:
        """Create the directory (0700, parents 0755) if needed, then `verify` it."""
        try:
            make_private_dirs(self.path)
        except UntrustedDirectory as exc:
            raise LockDirError(f"lock directory {self.path} refused: {exc}") from None
        except OSError as exc:
            raise LockDirError(f"lock directory {self.path} cannot be created: {exc.strerror or exc}") from None
        self.verify()

    def verify(self) -> None:
        """Refuse a directory another account could change: see `trust` for the rules."""
        try:
            check_trusted_dir(self.path)
        except UntrustedDirectory as exc:
            raise LockDirError(f"lock directory {self.path} refused: {exc}") from None

    @contextlib.contextmanager
    def registry(self, timeout_s: float = 60.0, should_abort=lambda: False) -> Iterator[None]:
        """Hold the registry flock (waiting up to timeout_s): serializes acquire, release and clear."""
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                fd = try_flock(self.registry_path, create=True)
                if fd is not None:
                    break
                if should_abort():
                    raise RegistryBusy(f"stopped waiting for registry lock {self.registry_path}: signal received")
                if time.monotonic() > deadline:
                    raise RegistryBusy(f"registry lock {self.registry_path} stayed busy for {timeout_s:.0f} s")
                time.sleep(0.05)
        except OSError as exc:
            if isinstance(exc, RegistryBusy):
                raise
            raise LockDirError(f"lock directory {self.path} is not writable: cannot open {self.registry_path.name}: {exc.strerror or exc}") from None
        try:
            yield
        finally:
            os.close(fd)

    # records ---------------------------------------------------------------
    def records(self) -> list[RecordEntry]:
        """Every reservation record, readable or not (an unreadable one must still block)."""
        out = []
        try:
            names = sorted(os.listdir(self.path))
        except FileNotFoundError:
            return []
        for name in names:
            if not _RECORD_RE.match(name):
                continue
            path = self.path / name
            try:
                data = json.loads(read_regular(path))
                if not isinstance(data, dict) or not isinstance(data.get("devices"), list):
                    raise ValueError("not a lease record (no 'devices' list)")
                out.append(RecordEntry(path, data))
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as exc:
                out.append(RecordEntry(path, None, f"{type(exc).__name__}: {exc}"))
        return out

    def leftover_temp_files(self) -> list[Path]:
        try:
            return sorted(p for p in self.path.iterdir() if p.name.startswith(".lease-") and p.name.endswith(".tmp"))
        except FileNotFoundError:
            return []

    def write_record(self, path: Path, data: dict[str, Any], must_not_exist: bool = False) -> None:
        """Write JSON atomically (temp file, fsync, rename): readers see all of it or none of it."""
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        payload = (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            try:
                view = memoryview(payload)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            if must_not_exist:
                os.link(tmp, path)  # fails with EEXIST instead of replacing
                os.unlink(tmp)
            else:
                os.replace(tmp, path)
            self._fsync_dir()
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def _fsync_dir(self) -> None:
        with contextlib.suppress(OSError):
            dfd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)

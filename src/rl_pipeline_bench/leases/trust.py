"""Whether a lock directory can be trusted on a shared host, and opening its files safely.

Anyone who can write the lock directory, or any directory above it, can delete a
live lease's record and lock files (or move the directory aside) and so get the
same GPUs leased twice. The rules, the ones sshd and sudo apply to their files:
- the lock directory is a real directory (not a symlink), owned by this account and
  not writable by group or others;
- every directory above it, including each directory a symlink on the way lives in
  and points into, is owned by root or this account and not writable by group or
  others, unless it has the sticky bit (like /tmp: others cannot rename or delete
  entries they do not own there).
Being root changes nothing: /tmp itself is refused as a lock directory.

Files in it are opened without following symlinks and without blocking (a FIFO
planted as a record must not hang every supervisor), and only regular files count.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

_GROUP_OTHER_WRITE = stat.S_IWGRP | stat.S_IWOTH
_MAX_SYMLINKS = 40
#: Largest record or lock file read (records are a few KiB).
MAX_FILE_BYTES = 1 << 20


class UntrustedDirectory(OSError):
    """The directory, or one above it, can be changed by another account."""


def _mode(st: os.stat_result) -> str:
    return oct(stat.S_IMODE(st.st_mode))[2:].rjust(4, "0")


def _check_ancestor(path: str, st: os.stat_result, uid: int) -> None:
    if not stat.S_ISDIR(st.st_mode):
        raise UntrustedDirectory(f"{path} is not a directory")
    if st.st_uid not in (0, uid):
        raise UntrustedDirectory(f"{path} belongs to uid {st.st_uid}, neither root nor this account (uid {uid})")
    if st.st_mode & _GROUP_OTHER_WRITE and not st.st_mode & stat.S_ISVTX:
        raise UntrustedDirectory(f"{path} is writable by group or others (mode {_mode(st)}) and has no sticky bit")


def _walk(path: str, uid: int, links: list[int]) -> str:
    """Check every directory on the way to `path` (inclusive); returns its real path."""
    cur = "/"
    _check_ancestor(cur, os.lstat(cur), uid)
    for name in Path(path).parts[1:]:
        if name == ".":
            continue
        if name == "..":
            cur = os.path.dirname(cur)  # cur is real, so its parent is too
            continue
        nxt = os.path.join(cur, name)
        st = os.lstat(nxt)
        if stat.S_ISLNK(st.st_mode):
            links[0] += 1
            if links[0] > _MAX_SYMLINKS:
                raise UntrustedDirectory(f"{path}: too many levels of symbolic links")
            target = os.readlink(nxt)  # the link is as safe as `cur`, which holds it
            cur = _walk(target if os.path.isabs(target) else os.path.join(cur, target), uid, links)
            continue
        _check_ancestor(nxt, st, uid)
        cur = nxt
    return cur


def check_parents(path: str | os.PathLike) -> None:
    """Refuse `path` when a directory above it can be changed by another account."""
    p = Path(os.path.abspath(path))
    try:
        _walk(str(p.parent), os.geteuid(), [0])
    except UntrustedDirectory:
        raise
    except OSError as exc:  # a component vanished or cannot be read: not provably safe
        raise UntrustedDirectory(f"cannot check the directories above {p}: {exc.strerror or exc}") from None


def check_own_dir(path: str | os.PathLike) -> None:
    """Refuse `path` unless it is a real directory of this account that only it can write."""
    uid = os.geteuid()
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise UntrustedDirectory(f"{path}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise UntrustedDirectory(f"{path} is not a plain directory")
    if st.st_uid != uid:
        raise UntrustedDirectory(f"{path} belongs to uid {st.st_uid}, not to this account (uid {uid})")
    if st.st_mode & _GROUP_OTHER_WRITE:
        raise UntrustedDirectory(f"{path} is writable by group or others (mode {_mode(st)}); it must be this account's alone")


def check_trusted_dir(path: str | os.PathLike) -> None:
    """Both checks: the directory itself and every directory above it."""
    check_parents(path)
    check_own_dir(path)


def make_private_dirs(path: str | os.PathLike) -> None:
    """Create `path` (0700) and missing parents (0755), checking each existing parent before going on."""
    p = Path(os.path.abspath(path))
    missing = []
    while not os.path.lexists(p):
        missing.append(p)
        p = p.parent
    check_parents(missing[-1] if missing else p)
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700 if d == missing[0] else 0o755)
        except FileExistsError:
            pass  # someone else made it meanwhile: the checks below judge it


def open_regular(path: str | os.PathLike, flags: int = os.O_RDONLY, mode: int = 0o600) -> int:
    """Open without following a symlink and without blocking; refuse anything but a regular file."""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a directory" if stat.S_ISDIR(st.st_mode) else "a special file"
            raise OSError(f"{path} is not a regular file ({kind})")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str | os.PathLike) -> str:
    """The text of a regular file, opened as `open_regular` does; symlinks give a named error."""
    try:
        fd = open_regular(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP and os.path.islink(path):  # O_NOFOLLOW met a link
            raise OSError(exc.errno, f"{path} is a symbolic link (records are never followed)") from None
        raise
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise OSError(f"{path} is larger than {MAX_FILE_BYTES} bytes; not a lease record")
    return data.decode()

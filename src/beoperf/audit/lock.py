"""One ``beoperf tune`` at a time per network namespace: a lock only root can take.

``tune --apply/--procedure/--rollback`` read the settings, write a snapshot and change
them; two at once would record each other's temporary values as "previous".  So each takes
an exclusive ``flock`` on ``/run/beoperf/tune.net<inode>.lock`` (one file per network
namespace, named after the inode of /proc/self/ns/net) before it reads anything.

The lock is hardened because root takes it on shared nodes:

* the directory is created 0700 if absent and must be a real directory (not a symlink),
  owned by whoever runs beoperf and writable by no one else, so no other user can plant
  a file, a symlink or a lock of their own in it;
* the file is opened ``O_NOFOLLOW|O_CLOEXEC`` and must be a regular file of ours with one
  link; it is never truncated: the holder record (pid, user, command line) is written in
  place, padded to a fixed size, after the flock is taken;
* a refused caller is told who holds the lock (pid, user, command).

The kernel drops a flock when its holder exits, even on kill -9, so a lock is never stale.
The holder removes the file when it is done (so namespaces that come and go leave nothing
behind); whoever takes a lock checks afterwards that the file it locked is still the one
at the path, and starts again if it was removed meanwhile.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import pwd
import shlex
import stat

from beoperf import errors

LOCK_DIR = "/run/beoperf"
RECORD_SIZE = 1024  # bytes: the holder record, padded with blanks (the file never truncated)
COMMAND_CHARS = 300  # of the holder's command line kept in the record


class LockBusy(errors.Busy):
    """Another tune holds this network namespace's lock, or the lock cannot be taken."""

    category = "tune busy"


def netns_id() -> int | None:
    """The inode of this process's network namespace (what tells two namespaces apart)."""
    try:
        return os.stat("/proc/self/ns/net").st_ino
    except OSError:
        return None


def _printable(text: str, limit: int) -> str:
    clean = "".join(c if c.isprintable() else "?" for c in text)
    return clean if len(clean) <= limit else clean[:limit - 3] + "..."


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _command_line() -> str:
    try:
        with open("/proc/self/cmdline", "rb") as f:
            argv = f.read(64 * 1024).rstrip(b"\0").split(b"\0")
        text = shlex.join(a.decode("utf-8", "replace") for a in argv)
    except OSError:
        text = "?"
    return _printable(text, COMMAND_CHARS)


def holder_record() -> bytes:
    """This process as a lock holder: JSON padded with blanks to RECORD_SIZE bytes."""
    record = json.dumps({"pid": os.getpid(), "uid": os.geteuid(), "user": _user(os.geteuid()),
                         "command": _command_line()}).encode()
    return record[:RECORD_SIZE - 1].ljust(RECORD_SIZE - 1) + b"\n"


def describe_holder(raw: bytes) -> str:
    """'pid 123, user root, command ...' from a holder record (or why it says nothing)."""
    try:
        record = json.loads(raw.decode("utf-8", "replace").strip() or "null")
    except ValueError:
        record = None
    if not isinstance(record, dict) or not isinstance(record.get("pid"), int):
        return "pid unknown: it has only just taken the lock"
    user = _printable(str(record.get("user", "?")), 64)
    command = _printable(str(record.get("command", "?")), COMMAND_CHARS)
    return f"pid {record['pid']}, user {user}, command {command}"


def _check_private_dir(where: str, st: os.stat_result, what: str,
                       error: type[errors.BeoperfError]) -> None:
    """``error`` unless ``where`` is a real directory, ours, writable by no one else."""
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise error(f"{what} {where} is not a directory (a symlink?); refusing it: remove it")
    if st.st_uid != os.geteuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise error(f"{what} {where} is owned by uid {st.st_uid} with mode "
                    f"{stat.S_IMODE(st.st_mode):04o}; it must be owned by uid "
                    f"{os.geteuid()} and writable by no one else: remove it")


def private_run_dir(where: str, what: str = "the directory",
                    error: type[errors.BeoperfError] = LockBusy, hint: str = "run it as root",
                    ) -> int:
    """``where`` created 0700 if absent (its parent must exist), checked to be a real
    directory of ours writable by no one else, and opened (O_DIRECTORY|O_NOFOLLOW); its
    descriptor, for every later step relative to it.  ``error`` (naming it as ``what``)
    when it cannot be made, is not private, or changed while it was opened.  The tune lock's
    directory is one; a study's directory under /run/beoperf/study is another."""
    try:
        os.mkdir(where, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise error(f"cannot create {what} {where}: {exc.strerror} ({hint})") from None
    try:
        st = os.lstat(where)
        _check_private_dir(where, st, what, error)
        fd = os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise error(f"cannot open {what} {where}: {exc.strerror}") from None
    opened = os.fstat(fd)
    if (opened.st_ino, opened.st_dev) != (st.st_ino, st.st_dev):
        os.close(fd)
        raise error(f"{what} {where} changed while it was opened")
    return fd


class TuneLock:
    """An exclusive lock per network namespace, held while a tune reads and changes.

    ``directory`` defaults to /run/beoperf (tests give a temporary one).  Entering raises
    LockBusy naming the holder, or saying why the lock cannot be taken."""

    def __init__(self, directory: str | None = None) -> None:
        self.directory = directory or LOCK_DIR
        self.fd: int | None = None
        self.dir_fd: int | None = None

    def name(self) -> str:
        return f"tune.net{netns_id() or 0}.lock"

    def path(self) -> str:
        return os.path.join(self.directory, self.name())

    def _open_dir(self) -> int:
        """The lock directory (created 0700), checked to be ours and private, opened."""
        return private_run_dir(self.directory, "the lock directory", LockBusy,
                               "beoperf tune changes settings: run it as root")

    def _open_file(self, dir_fd: int) -> int:
        """The lock file, created 0600 or opened, never through a link."""
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY
        try:
            fd = os.open(self.name(), flags, 0o600, dir_fd=dir_fd)
        except OSError as exc:
            what = "it is a symlink; refusing it" if exc.errno == errno.ELOOP else exc.strerror
            raise LockBusy(f"cannot open the lock file {self.path()}: {what}") from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_nlink != 1:
            os.close(fd)
            raise LockBusy(f"the lock file {self.path()} is not a regular file of uid "
                           f"{os.geteuid()} with one link; refusing it: remove it")
        return fd

    def _still_there(self, fd: int, dir_fd: int) -> bool:
        """Whether the locked file is still the one at the path (not removed by a holder
        that was finishing while we opened it)."""
        try:
            now = os.stat(self.name(), dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        held = os.fstat(fd)
        return (now.st_ino, now.st_dev) == (held.st_ino, held.st_dev)

    def _take(self, dir_fd: int) -> int:
        """The locked file's descriptor; LockBusy naming the holder if it is taken."""
        for _ in range(10):
            fd = self._open_file(dir_fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = describe_holder(os.pread(fd, RECORD_SIZE, 0))
                os.close(fd)
                raise LockBusy(f"another beoperf tune ({holder}) is changing this node "
                               f"(lock {self.path()}); wait for it to finish") from None
            except OSError as exc:
                os.close(fd)
                raise LockBusy(f"cannot lock {self.path()}: {exc.strerror}") from None
            if self._still_there(fd, dir_fd):
                return fd
            os.close(fd)
        raise LockBusy(f"cannot lock {self.path()}: it keeps being removed")

    def __enter__(self) -> TuneLock:
        dir_fd = self._open_dir()
        try:
            fd = self._take(dir_fd)
        except BaseException:
            os.close(dir_fd)
            raise
        os.pwrite(fd, holder_record(), 0)
        self.fd, self.dir_fd = fd, dir_fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is None or self.dir_fd is None:
            return
        try:
            os.unlink(self.name(), dir_fd=self.dir_fd)  # while still holding it
        except FileNotFoundError:
            pass
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        os.close(self.dir_fd)
        self.fd = self.dir_fd = None

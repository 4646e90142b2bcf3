"""The one kind of process beoperf lets outlive it: a command detached from its caller.

A study's dead-man agent must survive what ends the command that started it: the remote
command's session and process group (which coreutils' ``timeout -s KILL``,
:func:`beoperf.launch.clush.end_session` and :mod:`beoperf.launch.guard` kill), the
parent-death signal that command carries, and ssh hanging up.  :func:`detach` starts it
by a double fork: the middle child calls ``setsid()`` (a session and process group of
its own, no controlling terminal), forks the command and exits at once, so the command
is reparented to init (or the nearest subreaper), is not a session leader (it can never
gain a terminal), and does not inherit PDEATHSIG (the kernel clears it on fork).  Its
standard streams are /dev/null, every other descriptor is closed but two pipes: one it
reads its input from (``BEOPERF_DATA_FD``), one it writes a single ready line on
(``BEOPERF_READY_FD``: ``armed {...}`` or ``failed <reason>``).  The caller gets that
line and the pid, and can end: what it prints is all its own command prints, as
:mod:`beoperf.launch.remote` expects of a process meant to outlive its command.

What bounds the detached process is its own business (the agent's lease and lifetime);
this module only starts it.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Mapping, Sequence

READY_FD_ENV = "BEOPERF_READY_FD"
DATA_FD_ENV = "BEOPERF_DATA_FD"
LINE_LIMIT = 256 * 1024  # bytes of the ready line read (an agent's snapshot fits)


def detach(argv: Sequence[str], env: Mapping[str, str], ready_timeout: float,
           data: bytes = b"") -> tuple[int, str]:
    """Start ``argv`` (an absolute program path first) detached, give it ``data`` on its
    data pipe, and wait at most ``ready_timeout`` seconds for its ready line: (its pid,
    the line without the newline).  A command that ends or stays silent gives
    ``failed <why>`` (a silent one is sent SIGTERM: it has changed nothing before it is
    ready).  OSError only when this host cannot fork."""
    ready_r, ready_w = os.pipe()
    data_r, data_w = os.pipe()
    middle = os.fork()
    if middle == 0:  # pragma: no cover - the child's path ends in exec or _exit
        _middle(argv, env, ready_w, data_r, (ready_r, data_w))
    os.close(ready_w)
    os.close(data_r)
    os.waitpid(middle, 0)  # it exits as soon as it has forked the command
    _send(data_w, data)
    try:
        return _ready(ready_r, ready_timeout)
    finally:
        os.close(ready_r)


def _middle(argv: Sequence[str], env: Mapping[str, str], ready_w: int, data_r: int,
            parents: tuple[int, int]) -> None:
    """In the middle child: a session of its own, fork the command, tell its pid, exit."""
    try:
        for fd in parents:
            os.close(fd)
        os.setsid()
        pid = os.fork()
        if pid == 0:
            _exec(argv, env, ready_w, data_r)
        os.write(ready_w, f"{pid}\n".encode())
    finally:
        os._exit(0)


def _exec(argv: Sequence[str], env: Mapping[str, str], ready_w: int, data_r: int) -> None:
    """In the command's process: /dev/null as 0-2, every other descriptor but the two
    pipes closed, default signal dispositions, then exec."""
    try:
        os.chdir("/")
        os.umask(0o077)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        keep = sorted({ready_w, data_r})
        os.closerange(3, keep[0])
        os.closerange(keep[0] + 1, keep[1])
        os.closerange(keep[1] + 1, os.sysconf("SC_OPEN_MAX"))
        for fd in keep:
            os.set_inheritable(fd, True)
        for sig in (signal.SIGPIPE, signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)  # Python ignores SIGPIPE; exec keeps ignores
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        full = {**env, READY_FD_ENV: str(ready_w), DATA_FD_ENV: str(data_r)}
        os.execve(argv[0], list(argv), full)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.write(ready_w, f"failed cannot start {argv[0]}: {exc.strerror}\n".encode())
    finally:
        os._exit(127)


def _send(fd: int, data: bytes) -> None:
    """``data`` to the command's data pipe, then its end (a command that is gone already
    has told, or will tell, why on the ready pipe)."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except BrokenPipeError:
        pass
    finally:
        os.close(fd)


def _ready(fd: int, timeout: float) -> tuple[int, str]:
    """(pid, ready line) from the ready pipe: the middle child's pid line, then the
    command's line."""
    deadline = time.monotonic() + timeout
    buffer = b""
    while buffer.count(b"\n") < 2 and len(buffer) < LINE_LIMIT:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buffer += chunk
    lines = buffer.decode(errors="replace").split("\n")
    pid = int(lines[0]) if lines[0].isdigit() else 0
    line = lines[1].strip() if len(lines) > 1 else ""
    if line:
        return pid, line
    if pid and _alive(pid):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
        return pid, f"failed not ready within {timeout:g} s (sent SIGTERM)"
    return pid, "failed it ended before it was ready"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

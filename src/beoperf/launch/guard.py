"""The guard between beoperf and every child it launches: the child's whole process tree
ends when beoperf does, however beoperf ends (SIGKILL included).

:class:`beoperf.launch.job.Job` starts ``python -I -S guard.py LIFELINE STATUS GRACE ON_STOP
-- ARGV...`` (this file alone, standard library only: about 30 ms), in a session of its
own.  The guard

* makes itself a *child subreaper* (``PR_SET_CHILD_SUBREAPER``), so every process the
  child starts stays its descendant even when the one in between dies: mpirun's ranks
  (Open MPI puts each in a process group of its own, MPICH's hydra each in a session of
  its own, so neither a process group nor a session holds them all), hydra's proxies;
* starts ARGV (its standard streams are the guard's, so its output goes straight to
  beoperf), with ``PR_SET_PDEATHSIG`` set to SIGTERM should the guard itself be killed;
* tells beoperf on the STATUS descriptor when it started (``started NS``, CLOCK_MONOTONIC,
  the clock of ``time.monotonic`` in every process) or why it could not (``failed
  ERRNO``), and when and how it ended (``ended NS STATUS``, a wait status);
* watches LIFELINE, the read end of a pipe only beoperf holds open: when it closes
  (beoperf ended, or asks the job to stop) or the guard is sent SIGTERM, SIGINT or
  SIGHUP, every descendant gets SIGTERM (mpirun and hydra end their remote ranks on it),
  and those left after GRACE seconds SIGKILL;
* when it stops the job so, also runs ON_STOP (a JSON list of words, ``[]`` for none;
  ``{pid}`` in a word is the child's PID), spared from those signals and ended after
  ON_STOP_TIMEOUT_S: what ends the child's work where the tree does not reach (the Slurm
  step srun created, cancelled with scancel: :mod:`beoperf.launch.slurm_step`);
* passes SIGUSR1 on to the child (what beoperf sends mpirun on Ctrl-C: rank 0 stops
  after its current trial);
* once the child has ended, ends in the same way what it left behind (ranks orphaned by
  a launcher that died), and exits.

A process is found among the descendants by walking ``/proc/PID/stat``'s parent links
down from the guard, and signalled through a pidfd once its parent is seen again, so
nothing that the guard did not start is ever signalled (not even a process that took
the PID of one that ended meanwhile).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
TICK_S = 0.05  # how often a stop checks that the descendants are gone
ON_STOP_TIMEOUT_S = 10.0  # ON_STOP is ended this long after the stop began


class Stop(Exception):
    """The guard was told to stop the job (a signal)."""


def _prctl() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    try:
        fn = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                   ctypes.c_ulong]
    return fn


PRCTL = _prctl()


def _die_with_guard() -> None:
    """In the child before exec: SIGTERM when the guard dies."""
    if PRCTL is not None:
        PRCTL(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def parents() -> dict[int, int]:
    """Every live process's parent (from /proc; those that vanish meanwhile are left out)."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read(4096).rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields and fields[0] not in (b"Z", b"X"):
            found[int(name)] = int(fields[1])
    return found


def descendants(root: int, spared: int = 0) -> list[tuple[int, int]]:
    """The live descendants of ``root`` and their parents, parents before children; not
    ``spared`` (a child of the guard's own) nor what it started."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parents().items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [(pid, root) for pid in children.get(root, []) if pid != spared]
    while todo:
        pid, ppid = todo.pop(0)
        out.append((pid, ppid))
        todo.extend((child, pid) for child in children.get(pid, []))
    return out


def parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read(4096).rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def kill(pid: int, parents_seen: tuple[int, int], sig: int) -> None:
    """Signal ``pid`` if its parent is still the one the scan saw, or the guard (which
    adopts it when that parent ends): through a pidfd opened first, so that a PID freed
    and taken by another process meanwhile is never signalled."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):  # no pidfd (Linux before 5.3): the PID itself
        if parent_of(pid) in parents_seen:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        return
    try:
        if parent_of(pid) in parents_seen:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(fd, sig)
    finally:
        os.close(fd)


def reap(child: subprocess.Popen, spared: int = 0) -> None:
    """Collect the adopted orphans that ended (the guard is their parent now), leaving
    the child's own status (and ``spared``'s) to Popen."""
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None or info.si_pid in (child.pid, spared):
            return
        with contextlib.suppress(ChildProcessError):
            os.waitpid(info.si_pid, 0)


def signal_tree(sig: int, spared: int = 0) -> bool:
    """Send ``sig`` to every descendant but ``spared``'s tree; whether there was any."""
    me = os.getpid()
    found = descendants(me, spared)
    for pid, ppid in found:
        kill(pid, (ppid, me), sig)
    return bool(found)


def end_tree(child: subprocess.Popen, grace: float, spared: int = 0) -> None:
    """SIGTERM to every descendant (but ``spared``'s tree); SIGKILL, again each tick, to
    those left (and those started meanwhile) after ``grace`` seconds, for at most 5 s
    more."""
    signal_tree(signal.SIGTERM, spared)
    for wait, sig in ((grace, None), (5.0, signal.SIGKILL)):
        until = time.monotonic() + wait
        while True:
            child.poll()
            reap(child, spared)
            left = signal_tree(sig, spared) if sig is not None else \
                bool(descendants(os.getpid(), spared))
            if not left or time.monotonic() > until:
                break
            time.sleep(TICK_S)


def start_on_stop(words: list[str], child: subprocess.Popen) -> subprocess.Popen | None:
    """ON_STOP started (``{pid}``: the child's PID), None when there is none or it cannot
    start.  Its output is dropped (beoperf may be gone, and with it the pipes' reader)."""
    if not words:
        return None
    try:
        return subprocess.Popen([w.replace("{pid}", str(child.pid)) for w in words],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, close_fds=True)
    except OSError:
        return None


def finish_on_stop(proc: subprocess.Popen | None, started: float) -> None:
    """Wait for ON_STOP until ON_STOP_TIMEOUT_S after ``started``; killed then."""
    if proc is None:
        return
    try:
        proc.wait(max(0.0, started + ON_STOP_TIMEOUT_S - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def report(fd: int, text: str) -> None:
    with contextlib.suppress(OSError):
        os.write(fd, (text + "\n").encode())


def lifeline_closed(fd: int) -> bool:
    """Whether beoperf closed its end of the lifeline or wrote on it (either: stop)."""
    try:
        os.read(fd, 64)
    except BlockingIOError:
        return False
    return True


def watch(child: subprocess.Popen, lifeline: int) -> bool:
    """Wait for the child to end (True) or the lifeline to close (False)."""
    poller = select.poll()
    poller.register(lifeline, select.POLLIN | select.POLLHUP)
    try:
        pidfd = os.pidfd_open(child.pid)
    except (AttributeError, OSError):
        pidfd = -1
    else:
        poller.register(pidfd, select.POLLIN)
    try:
        while True:
            for fd, _ in poller.poll(-1 if pidfd >= 0 else 100):
                if fd == lifeline and lifeline_closed(lifeline):
                    return False
            if child.poll() is not None:
                return True
    finally:
        if pidfd >= 0:
            os.close(pidfd)


def wait_status(returncode: int) -> int:
    """Popen's returncode as a wait status (what ``ended`` reports)."""
    return (-returncode) & 0x7F if returncode < 0 else (returncode & 0xFF) << 8


def main(argv: list[str]) -> int:
    lifeline, status, grace = int(argv[0]), int(argv[1]), float(argv[2])
    on_stop, cmd = [str(w) for w in json.loads(argv[3])], argv[5:]
    os.set_blocking(lifeline, False)
    if PRCTL is not None:
        PRCTL(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

    def stop(_signum: int, _frame: object) -> None:
        raise Stop

    if lifeline_closed(lifeline):  # beoperf is gone already: start nothing
        return 1
    try:
        child = subprocess.Popen(cmd, preexec_fn=_die_with_guard, close_fds=True)
    except OSError as exc:
        report(status, f"failed {exc.errno or 0}")
        return 1
    report(status, f"started {time.monotonic_ns()}")
    signal.signal(signal.SIGUSR1, lambda _s, _f: child.send_signal(signal.SIGUSR1))
    for sig in STOP_SIGNALS:
        signal.signal(sig, stop)
    try:
        ended = watch(child, lifeline)
    except Stop:
        ended = False
    ended_ns = time.monotonic_ns() if ended else None
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    stopping = time.monotonic()
    helper = None if ended else start_on_stop(on_stop, child)
    end_tree(child, 1.0 if ended else grace, helper.pid if helper is not None else 0)
    returncode = child.wait()
    finish_on_stop(helper, stopping)
    report(status, f"ended {ended_ns or time.monotonic_ns()} {wait_status(returncode)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

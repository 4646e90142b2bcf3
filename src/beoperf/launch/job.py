"""The one way beoperf runs a child process: the embedded server, MPI jobs (ping-pong,
replay, the cluster's MPI tests), HPCC runs, the node suite's DGEMM children.

A :class:`Job` runs its argv under the guard (:mod:`beoperf.launch.guard`), in a session
of its own (Ctrl-C at the terminal reaches beoperf only, which decides), so that

* the child and every process it starts end when beoperf ends, by any signal, SIGKILL
  included: the guard holds a pipe beoperf alone writes to and ends the whole tree when
  it closes;
* :meth:`Job.stop` escalates: SIGTERM to the tree (mpirun and hydra end their ranks on
  other hosts), SIGKILL to what is left after the grace;
* what the tree does not hold is ended too when the job is stopped or beoperf dies: the
  guard runs ``on_stop`` (by default, for srun, the cancelling of the Slurm steps it
  created: :func:`beoperf.launch.srun.step_canceller`);
* output is captured bounded: the first and last ``keep`` bytes of each stream, and each
  line of standard output handed to ``on_line`` as it comes (the result channel,
  :mod:`beoperf.launch.channel`, reads its marked lines there);
* the time is the child's own, from its start to its end as the guard saw them (not
  the guard's start-up).

Waiting wakes the moment the job ends (:mod:`beoperf.procwait`).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from beoperf import procwait
from beoperf.launch import srun

GUARD = str(Path(__file__).with_name("guard.py"))
STOP_GRACE_S = 5.0  # after SIGTERM, the time the tree has to end before SIGKILL
KEEP_BYTES = 64 * 1024  # of each stream: the first and the last this many bytes
LINE_BYTES = 64 * 1024 * 1024  # a longer line of output is cut in pieces
START_TIMEOUT_S = 60.0  # the guard says whether the child started within this


class Capture:
    """The first and last ``keep`` bytes of a stream, read in a thread (bounded memory);
    each line handed to ``on_line`` (decoded, without its newline) as it comes."""

    def __init__(self, stream: IO[bytes], keep: int,
                 on_line: Callable[[str], None] | None = None) -> None:
        self.keep, self.on_line = keep, on_line
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream: IO[bytes]) -> None:
        with stream:
            for chunk in iter(lambda: stream.readline(LINE_BYTES), b""):
                self.total += len(chunk)
                room = self.keep - len(self.head)
                self.head.extend(chunk[:max(0, room)])
                self.tail.extend(chunk[max(0, room):])
                del self.tail[:-self.keep]
                if self.on_line is not None:
                    self.on_line(chunk.decode(errors="replace").rstrip("\n"))

    def text(self, join_s: float = 5.0) -> str:
        """What was kept, with the number of bytes left out between head and tail."""
        self.thread.join(join_s)
        middle = "" if self.total <= len(self.head) + len(self.tail) else \
            f"\n[... {self.total - len(self.head) - len(self.tail):,} bytes left out ...]\n"
        return (bytes(self.head).decode(errors="replace") + middle
                + bytes(self.tail).decode(errors="replace"))


class Job:
    """One child process (and all it starts), guarded; see the module's docstring.

    ``env``: the whole environment (None: this process's); ``stdin``: a pipe the child
    may watch (:attr:`stdin`; else /dev/null); ``on_line``: each line of standard output;
    ``keep``: bytes kept of each stream's start and end; ``grace``: SIGTERM to SIGKILL;
    ``on_stop``: a command the guard runs when it stops the job (``{pid}``: the child's
    PID; None: the default for the command, :func:`beoperf.launch.srun.step_canceller`).
    """

    def __init__(self, argv: list[str] | tuple[str, ...], *,
                 env: Mapping[str, str] | None = None, cwd: str | None = None,
                 stdin: bool = False, on_line: Callable[[str], None] | None = None,
                 keep: int = KEEP_BYTES, grace: float = STOP_GRACE_S,
                 on_stop: Sequence[str] | None = None) -> None:
        self.argv, self.env, self.cwd = list(argv), env, cwd
        self.on_stop = list(srun.step_canceller(self.argv) if on_stop is None else on_stop)
        self.stdin_mode = subprocess.PIPE if stdin else subprocess.DEVNULL
        self.on_line, self.keep, self.grace = on_line, keep, grace
        self.proc: subprocess.Popen | None = None
        self.returncode: int | None = None
        self.stopped = False  # stop() ended it (rather than the child itself)
        self.started_ns = self.ended_ns = 0
        self._lifeline = self._status = -1
        self._early = b""  # the guard's lines read with its first one
        self.out: Capture | None = None
        self.err: Capture | None = None

    # ------------------------------------------------------------------ starting

    def start(self) -> Job:
        """Start the child; OSError (as Popen raises it) when it cannot start."""
        life_r, life_w = os.pipe()
        status_r, status_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", GUARD, str(life_r), str(status_w),
                 repr(self.grace), json.dumps(self.on_stop), "--", *self.argv],
                env=None if self.env is None else dict(self.env), cwd=self.cwd,
                stdin=self.stdin_mode, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                pass_fds=(life_r, status_w), start_new_session=True)
        except BaseException:
            for fd in (life_r, life_w, status_r, status_w):
                os.close(fd)
            raise
        os.close(life_r)
        os.close(status_w)
        self._lifeline, self._status = life_w, status_r
        try:
            self._started()
        except BaseException:
            self.stop()
            raise
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.out = Capture(self.proc.stdout, self.keep, self.on_line)
        self.err = Capture(self.proc.stderr, self.keep)
        return self

    def _started(self) -> None:
        """Wait for the guard's first word: the child started, or why not."""
        line = self._status_line(START_TIMEOUT_S)
        word, _, value = line.partition(" ")
        if word == "started":
            self.started_ns = int(value)
            return
        if word == "failed":
            errno = int(value or 0)
            raise OSError(errno, os.strerror(errno) if errno else "cannot start", self.argv[0])
        raise OSError(0, "the guard of the child process did not start it", self.argv[0])

    def _status_line(self, timeout: float) -> str:
        """The guard's first line; what came after it (the end of a child that ended at
        once) is kept for :meth:`_status_lines`."""
        data = b""
        until = time.monotonic() + timeout
        while b"\n" not in data:
            ready, _, _ = select.select([self._status], [], [],
                                        max(0.0, until - time.monotonic()))
            if not ready:
                break
            chunk = os.read(self._status, 256)
            if not chunk:
                break
            data += chunk
        line, _, self._early = data.partition(b"\n")
        return line.decode(errors="replace").strip()

    # ------------------------------------------------------------------ running

    @property
    def pid(self) -> int:
        """The guard's PID (what :meth:`signal` reaches; the child is its child)."""
        assert self.proc is not None
        return self.proc.pid

    @property
    def stdin(self) -> IO[bytes] | None:
        return self.proc.stdin if self.proc is not None else None

    def wait(self, timeout: float | None) -> int | None:
        """The child's exit status (as Popen's returncode: -N for signal N), or None while
        it runs after ``timeout`` seconds (None: as long as it takes)."""
        assert self.proc is not None
        if procwait.wait(self.proc, timeout) is None:
            return None
        return self._ended()

    def poll(self) -> int | None:
        return self.wait(0)

    def _ended(self) -> int | None:
        if self.returncode is None and self._status >= 0:
            for line in self._status_lines():
                word, *values = line.split()
                if word == "ended" and len(values) == 2:
                    self.ended_ns = int(values[0])
                    self.returncode = returncode_of(int(values[1]))
            os.close(self._status)
            self._status = -1
            if self.returncode is None:  # the guard itself was killed
                self.returncode = self.proc.returncode if self.proc is not None else None
                self.ended_ns = time.monotonic_ns()
        return self.returncode

    def _status_lines(self) -> list[str]:
        data, self._early = self._early, b""
        with contextlib.suppress(OSError):
            while chunk := os.read(self._status, 4096):
                data += chunk
        return data.decode(errors="replace").splitlines()

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the guard (SIGUSR1 is passed on to the child)."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.send_signal(sig)

    def stop(self) -> None:
        """End the child and everything it started: SIGTERM, SIGKILL after the grace."""
        if self.proc is None:
            return
        self.stopped = self.stopped or self.proc.poll() is None
        self._close_lifeline()
        if procwait.wait(self.proc, self.grace + 10.0) is None:  # the guard is stuck
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self._ended()

    def _close_lifeline(self) -> None:
        if self._lifeline >= 0:
            os.close(self._lifeline)
            self._lifeline = -1

    @property
    def elapsed_s(self) -> float:
        """From the child's start to its end (or to now while it runs)."""
        end = self.ended_ns or time.monotonic_ns()
        return (end - self.started_ns) / 1e9

    def stdout_text(self) -> str:
        return self.out.text() if self.out is not None else ""

    def stderr_text(self) -> str:
        return self.err.text() if self.err is not None else ""

    def close(self) -> None:
        """Stop the child if it still runs; release the pipes."""
        if self.proc is not None and self.proc.poll() is None:
            self.stop()
        self._close_lifeline()
        if self.proc is not None and self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        if self._status >= 0:
            os.close(self._status)
            self._status = -1

    def __enter__(self) -> Job:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def returncode_of(status: int) -> int:
    """A wait status as Popen's returncode: the exit code, or -N when signal N ended it."""
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def run(argv: list[str] | tuple[str, ...], timeout: float | None, **kwargs: Any) -> Job:
    """Run ``argv`` to its end (stopped after ``timeout`` seconds); the ended Job.
    KeyboardInterrupt (Ctrl-C, SIGTERM) stops the child before it is raised again."""
    job = Job(argv, **kwargs).start()
    try:
        if job.wait(timeout) is None:
            job.stop()
    except BaseException:
        job.stop()
        raise
    finally:
        job.close()
    return job


def probe(argv: list[str] | tuple[str, ...], timeout: float,
          env: Mapping[str, str] | None = None, keep: int = KEEP_BYTES) -> tuple[str, str] | None:
    """A short command's standard output and error, as text (the first and last ``keep``
    bytes of each), run under the guard like any other child; None when it could not start
    or did not end within ``timeout`` seconds (it is then ended, what it started too)."""
    try:
        done = run(argv, timeout, env=env, keep=keep)
    except OSError:
        return None
    if done.stopped:
        return None
    return done.stdout_text(), done.stderr_text()



RULE_CHARS = 10  # a line of at least this many dashes alone frames an Open MPI message


def said(text: str, limit: int = 300) -> str:
    """The one line of a failed command's error output that says why, for a one-line
    error: the last line outside Open MPI's framed messages (a rank's own error, such
    as a traceback's last line), else the first line of the last framed message (its
    headline, not the advice below it, nor the rule of dashes that closes it); '' when
    nothing is said (blank lines, rules).  Cut to ``limit`` characters."""
    outside: list[str] = []
    headlines: list[str] = []
    framed = fresh = False
    for raw in text.splitlines():
        line = raw.strip()
        if len(line) >= RULE_CHARS and set(line) == {"-"}:
            framed, fresh = not framed, not framed
        elif not any(c.isalnum() for c in line):
            continue  # blank, or a short rule: says nothing
        elif framed and fresh:
            headlines.append(line)
            fresh = False
        elif not framed:
            outside.append(line)
    found = outside[-1] if outside else headlines[-1] if headlines else ""
    return found[:limit]

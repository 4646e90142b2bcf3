"""The MPI job that `beoperf pingpong --transport mpi` launched, seen from the launching
process: run with a deadline in a process group of its own, its output read as it comes,
rank 0's document (and error) read back from their marked lines.

Rank 0 prints its document on one line starting with MARKER, and why it stopped on one
starting with ERROR_MARKER, before MPI_Finalize.  Once the document has arrived a job
that does not end (a rank hung in MPI_Finalize, as MPICH over TCP was seen to) is ended
FINALIZE_GRACE_S later, ranks and all, instead of at the deadline; the result is kept
with a warning that says so.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

from beoperf import errors, procwait, safeio
from beoperf.analysis.pingpong import document
from beoperf.model.document import Document, from_json
from beoperf.model.pingpong import RunResult
from beoperf.suites.pingpong import Measured

MARKER = "BEOPERF-MPI-RESULT "  # rank 0's line with the document
ERROR_MARKER = "BEOPERF-MPI-ERROR "  # rank 0's line with why it stopped
PROGRESS_MARKER = "BEOPERF-MPI-PROGRESS "  # rank 0's lines of progress, passed on as they come
FINALIZE_GRACE_S = 8.0  # the launching process ends a job this long after the result
OUTPUT_LINES = 10000  # lines of the job's output kept (each stream)
STOP_GRACE_S = 15.0  # after Ctrl-C: how long rank 0 has to send what it measured
ERROR_CLASSES = {c.__name__: c for c in (errors.BadSpec, errors.ConnectError, errors.PeerError,
                                         errors.IntegrityError, errors.Failed,
                                         errors.BeoperfError)}


class Job:
    """The launcher's process (and its process group), run with a deadline; its output
    read as it comes, so that once rank 0 has sent its result a job that does not end
    (a rank hung in MPI_Finalize) is ended after FINALIZE_GRACE_S instead of at the
    deadline."""

    def __init__(self, argv: list[str], env: dict[str, str], deadline: float | None,
                 progress: Callable[[str], None] | None = None) -> None:
        self.argv, self.env, self.deadline, self.progress = argv, env, deadline, progress
        self.lines: list[str] = []
        self.errors: list[str] = []
        self.result_at: float | None = None  # when rank 0's result arrived
        self.returncode: int | None = None
        self.timed_out = self.hung_after_result = False
        self.interrupt: KeyboardInterrupt | None = None

    @property
    def out(self) -> str:
        return "\n".join(self.lines)

    @property
    def err(self) -> str:
        return "\n".join(self.errors)

    def _read(self, stream: Any, into: list[str], watch: bool) -> None:
        for line in stream:
            if len(into) < OUTPUT_LINES:
                into.append(line.rstrip("\n"))
            if watch and line.startswith(MARKER):
                self.result_at = time.monotonic()
            elif watch and self.progress and line.startswith(PROGRESS_MARKER):
                self.progress(line[len(PROGRESS_MARKER):].rstrip())

    def run(self) -> None:
        try:
            proc = subprocess.Popen(self.argv, env=self.env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    errors="replace", start_new_session=True)
        except OSError as exc:
            raise errors.Failed(f"cannot start {self.argv[0]}: {exc.strerror}") from None
        readers = [threading.Thread(target=self._read, args=(proc.stdout, self.lines, True),
                                    daemon=True),
                   threading.Thread(target=self._read, args=(proc.stderr, self.errors, False),
                                    daemon=True)]
        for reader in readers:
            reader.start()
        try:
            self._watch(proc)
        except KeyboardInterrupt as exc:  # rank 0 stops after its trial and reports
            self.interrupt = exc
            with contextlib.suppress(OSError):
                proc.send_signal(signal.SIGUSR1)
            self._watch(proc, time.monotonic() + STOP_GRACE_S)
        for reader in readers:
            reader.join(5)
        self.returncode = proc.returncode

    def _watch(self, proc: subprocess.Popen, until: float | None = None) -> None:
        """Wait for the job; end it at the deadline (or ``until``), or FINALIZE_GRACE_S
        after rank 0's result."""
        started = time.monotonic()
        limit = until if until is not None else (
            started + self.deadline if self.deadline is not None else None)
        while proc.poll() is None:
            now = time.monotonic()
            if self.result_at is not None and now - self.result_at > FINALIZE_GRACE_S:
                self.hung_after_result = True
                self._end(proc)
            elif limit is not None and now > limit:
                self.timed_out = until is None
                self._end(proc)
            else:
                procwait.wait(proc, 0.1)

    def _end(self, proc: subprocess.Popen) -> None:
        """End the launcher and every process of its group (the ranks it started here):
        the group is the one start_new_session made for it."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            if procwait.wait(proc, 5) is not None:
                return

    def last_error(self) -> str:
        lines = [ln.strip() for ln in self.err.splitlines() if ln.strip()
                 and not set(ln.strip()) <= {"-"}]
        return " / ".join(lines[-3:])[-600:] if lines else "no message"

    def result(self, name: str) -> tuple[Document, errors.BeoperfError | None, list[str]]:
        """Rank 0's document (any kind) and error, and what went wrong around them (how
        the job ended after the result); the error of the job when it sent no document."""
        doc, error = self._result()
        if doc is None:
            raise self._no_result(name)
        warnings = []
        if self.hung_after_result or self.timed_out:
            warnings.append(f"the MPI job did not end within {FINALIZE_GRACE_S:g} s of rank 0 "
                            "sending its result (a rank hung, e.g. in MPI_Finalize): it was "
                            "ended")
        elif self.returncode not in (0, None) and self.interrupt is None:
            warnings.append(f"{name} exited with status {self.returncode} after rank 0 sent "
                            f"its result: {self.last_error()}")
        return doc, error, warnings

    def measured(self, name: str) -> Measured:
        """Rank 0's ping-pong document and error (if it sent them), with what went wrong
        around."""
        doc, error, warnings = self.result(name)
        run = RunResult.from_document(doc)
        run.warnings += warnings
        doc = document(run) if run.warnings != doc.body.get("warnings") else doc
        return Measured(doc, run, error, self.interrupt)

    def _result(self) -> tuple[Document | None, errors.BeoperfError | None]:
        doc = error = None
        for line in self.out.splitlines():
            if line.startswith(MARKER):
                doc = from_json(safeio.parse_json(line[len(MARKER):], "rank 0's result"),
                                "rank 0's result")
            elif line.startswith(ERROR_MARKER):
                error = error_of(json.loads(line[len(ERROR_MARKER):]))
        return doc, error

    def _no_result(self, name: str) -> errors.BeoperfError:
        if self.interrupt is not None:
            return errors.Failed("interrupted before rank 0 sent any result")
        if self.timed_out:
            return errors.Failed(f"the MPI job did not finish within {self.deadline:g} s and "
                                 f"sent no result: {self.last_error()}",
                                 "is every host reachable by the launcher? (--mpi-agent, "
                                 "--mpi-interface)")
        own = next((line for line in self.out.splitlines()
                    if line.startswith(ERROR_MARKER)), None)
        if own is not None:
            return error_of(json.loads(own[len(ERROR_MARKER):]))
        return errors.Failed(f"{name} exited with status {self.returncode} and no result: "
                             f"{self.last_error()}")


def error_text(exc: errors.BeoperfError) -> str:
    """An error as rank 0 sends it to the launching process."""
    return json.dumps({"class": type(exc).__name__, "message": str(exc), "hint": exc.hint,
                       "category": exc.category})


def error_of(data: dict[str, Any]) -> errors.BeoperfError:
    cls = ERROR_CLASSES.get(str(data.get("class")), errors.Failed)
    if not issubclass(cls, errors.BeoperfError):
        cls = errors.Failed
    return cls(str(data.get("message", "")), str(data.get("hint", "")),
               category=str(data.get("category", cls.category)))

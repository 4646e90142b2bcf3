"""The result channel between a child beoperf launched and beoperf: marked lines of the
child's standard output.

The child (``python -m beoperf.cli.rank KIND PLAN``: an MPI rank, a DGEMM child) sends
its result as one line starting with MARKER (JSON: a document, or a kind's own object),
why it stopped on one starting with ERROR_MARKER, and lines of progress starting with
PROGRESS_MARKER, which beoperf passes on as they come.  An MPI rank sends its result
*before* MPI_Finalize, so that a library that hangs in MPI_Finalize cannot take the
result with it.  :class:`Reader` is the launching side (a :class:`beoperf.launch.job.Job`'s
``on_line``); :func:`as_rank` the child side of an MPI rank.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, TypedDict, TypeVar

from beoperf import errors, interrupts, safeio
from beoperf.launch import ranks
from beoperf.model.document import Document, JsonObject, JsonValue

MARKER = "BEOPERF-MPI-RESULT "  # the line with the result
ERROR_MARKER = "BEOPERF-MPI-ERROR "  # the line with why the child stopped
PROGRESS_MARKER = "BEOPERF-MPI-PROGRESS "  # lines of progress, passed on as they come
LAUNCHED_VAR = "BEOPERF_MPI_LAUNCH"  # set by beoperf's own launches (what was launched)
ERROR_CLASSES = {c.__name__: c for c in (errors.BadSpec, errors.ConnectError, errors.PeerError,
                                         errors.IntegrityError, errors.Failed,
                                         errors.BeoperfError)}




# What the ERROR_MARKER line holds: the error's class name (one of ERROR_CLASSES), its
# message, hint and category ("class" is a keyword: the functional form).
ErrorLine = TypedDict("ErrorLine", {"class": str, "message": str, "hint": str,
                                    "category": str})


# --------------------------------------------------------------------------- the child


def _line(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def send(result: JsonObject) -> None:
    """The result, on its marked line."""
    _line(MARKER + safeio.dump_json(result, indent=None).rstrip())


def send_error(exc: errors.BeoperfError) -> None:
    """Why the child stopped, on its marked line."""
    _line(ERROR_MARKER + error_text(exc))


def progress(text: str) -> None:
    """A line of progress: to the process that launched this one (a marked line, which it
    passes on), or to standard error under the user's own launcher."""
    if os.environ.get(LAUNCHED_VAR):
        _line(PROGRESS_MARKER + text)
    else:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


def error_text(exc: errors.BeoperfError) -> str:
    """An error as the child sends it to the launching process."""
    line: ErrorLine = {"class": type(exc).__name__, "message": str(exc), "hint": exc.hint,
                       "category": exc.category}
    return json.dumps(line)


def error_of(data: JsonValue) -> errors.BeoperfError:
    """The error an ERROR_MARKER line's JSON names (errors.Failed for a class it does not
    name; AttributeError when it is not an object)."""
    if not isinstance(data, dict):
        raise AttributeError("the error line is not an object")
    cls = ERROR_CLASSES.get(str(data.get("class")), errors.Failed)
    if not issubclass(cls, errors.BeoperfError):
        cls = errors.Failed
    return cls(str(data.get("message", "")), str(data.get("hint", "")),
               category=str(data.get("category", cls.category)))


def _stop(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


RankWork = Callable[[ranks.RankInfo], "tuple[JsonObject, errors.BeoperfError | None] | None"]


def as_rank(work: RankWork, usage: str) -> int:
    """Run ``work`` as a rank of an MPI job beoperf launched: rank 0 sends its result and
    error (what ``work`` returns; None on other ranks); SIGUSR1 (which mpirun and hydra
    forward to the ranks) stops rank 0 after its current trial, as Ctrl-C does, and other
    ranks ignore it.  The exit status: 2 when this process is no rank (``usage`` said on
    standard error), 1 when ``work`` raised, else 0."""
    info = ranks.rank_of()
    if info is None:
        sys.stderr.write(usage + "\n")
        return 2
    signal.signal(signal.SIGUSR1, _stop if info.rank == 0 else signal.SIG_IGN)
    with interrupts.handling():
        try:
            done = work(info)
        except errors.BeoperfError as exc:
            if info.rank == 0:
                send_error(exc)
            else:
                sys.stderr.write(f"beoperf rank {info.rank}: {exc}\n")
            return 1
    if done is not None:
        result, error = done
        send(result)
        if error is not None:
            send_error(error)
    return 0


class Done(Protocol):
    """What a suite's rank returns on rank 0: its document, and why it stopped early."""

    @property
    def document(self) -> Document: ...

    @property
    def error(self) -> errors.BeoperfError | None: ...


SpecT = TypeVar("SpecT")


def as_rank_of_plan(plan: JsonObject, spec_of: Callable[[JsonObject], SpecT],
                    run: Callable[[SpecT, ranks.RankInfo], Done | None], usage: str) -> int:
    """:func:`as_rank` for a suite's rank: ``spec_of(plan)`` (BadSpec if the plan is not
    one), then ``run(spec, info)``, whose answer (None on ranks but 0) has a ``document``
    and an ``error``."""
    try:
        spec = spec_of(plan)
    except (TypeError, KeyError, ValueError, AttributeError) as exc:
        raise errors.BadSpec(f"not a plan: {exc}") from None

    def work(info: ranks.RankInfo) -> tuple[JsonObject, errors.BeoperfError | None] | None:
        done = run(spec, info)
        return None if done is None else (done.document.to_json(), done.error)

    return as_rank(work, usage)


# --------------------------------------------------------------------------- the launcher


class Reader:
    """The launching side: a Job's ``on_line``.  Keeps the (last) result and error lines
    and when the result came; passes progress lines to ``progress``."""

    def __init__(self, progress: Callable[[str], None] | None = None) -> None:
        self.progress = progress
        self.result_line: str | None = None
        self.error_line: str | None = None
        self.result_at: float | None = None  # time.monotonic() when the result arrived
        self._lock = threading.Lock()

    def __call__(self, line: str) -> None:
        if line.startswith(MARKER):
            with self._lock:
                self.result_line, self.result_at = line[len(MARKER):], time.monotonic()
        elif line.startswith(ERROR_MARKER):
            self.error_line = line[len(ERROR_MARKER):]
        elif self.progress is not None and line.startswith(PROGRESS_MARKER):
            self.progress(line[len(PROGRESS_MARKER):].rstrip())

    def result(self, what: str) -> Any:
        """The result's JSON (None if none came); ValueError if it is not JSON."""
        if self.result_line is None:
            return None
        return safeio.parse_json(self.result_line, what)

    def error(self) -> errors.BeoperfError | None:
        if self.error_line is None:
            return None
        try:
            return error_of(json.loads(self.error_line))
        except (ValueError, AttributeError):
            return errors.Failed(f"the child's error could not be read: "
                                 f"{self.error_line[:200]!r}")

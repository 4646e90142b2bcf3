"""The one table that turns an exception into one line and an exit status.

The same condition gives the same status in every command (as ClusterShell's
``GENERIC_ERRORS`` does for its tools): a suite raises by *what* went wrong
(``beoperf.errors``), libraries raise their own classes (a bad document, a file that is
not a regular file, a busy lock ...), and this table says what each means to a user.
"""

from __future__ import annotations

from enum import IntEnum

from beoperf import errors, interrupts, safeio
from beoperf.model.document import DocumentError


class ExitStatus(IntEnum):
    OK = 0
    ERROR = 1
    USAGE = 2
    CONNECTION = 3  # could not reach the peer, or lost it
    PEER = 4  # the peer refused (busy, version, limits) or failed
    INTEGRITY = 5  # messages arrived corrupted
    PARTIAL = 6  # a fleet command: some nodes did not answer (or run another version)
    NO_ANSWER = 7  # a fleet command: no node answered
    INTERRUPTED = 130  # Ctrl-C; SIGTERM is 143, SIGHUP 129 (128 + the signal)


class CliError(Exception):
    """An error the CLI itself finds, with its category, exit status and a hint."""

    def __init__(self, status: ExitStatus, category: str, message: str, hint: str = "") -> None:
        self.status, self.category, self.hint = status, category, hint
        super().__init__(message)


class UsageError(CliError):
    def __init__(self, message: str, hint: str = "see 'beoperf COMMAND --help'") -> None:
        super().__init__(ExitStatus.USAGE, "usage error", message, hint)


# (exception class, exit status, category or None for the exception's own), first match wins
TABLE: list[tuple[type[BaseException], ExitStatus, str | None]] = [
    (errors.BadSpec, ExitStatus.USAGE, None),
    (errors.ConnectError, ExitStatus.CONNECTION, None),
    (errors.PeerError, ExitStatus.PEER, None),
    (errors.IntegrityError, ExitStatus.INTEGRITY, None),
    (errors.PartialAnswer, ExitStatus.PARTIAL, None),
    (errors.NoAnswer, ExitStatus.NO_ANSWER, None),
    (errors.BeoperfError, ExitStatus.ERROR, None),
    (DocumentError, ExitStatus.ERROR, "input error"),
    (safeio.FileInputError, ExitStatus.ERROR, "input error"),
]


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def describe(exc: BaseException) -> tuple[int, str]:
    """(exit status, the line for stderr) of an exception; KeyError if it is not a known
    one (a bug: the caller lets it show as a traceback)."""
    if isinstance(exc, KeyboardInterrupt):
        what = str(exc) if isinstance(exc, interrupts.Terminated) else "interrupted"
        return interrupts.exit_status(exc), f"beoperf: {what}"
    if isinstance(exc, CliError):
        return int(exc.status), _line(exc.category, exc, exc.hint)
    for cls, status, category in TABLE:
        if isinstance(exc, cls):
            own = getattr(exc, "category", "error")
            return int(status), _line(category or own, exc, getattr(exc, "hint", ""))
    raise KeyError(type(exc).__name__)


def _line(category: str, exc: BaseException, hint: str) -> str:
    return one_line(f"beoperf: {category}: {exc}" + (f"; {hint}" if hint else ""))

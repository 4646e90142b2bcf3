"""Stopping a long command: SIGTERM and SIGHUP end it the way Ctrl-C does.

A batch scheduler's time limit, `timeout`, `kill` and a closed terminal send SIGTERM or
SIGHUP, not SIGINT.  With :func:`handling` in place they raise :class:`Terminated`, a
KeyboardInterrupt, in the main thread, so everything that already cleans up after Ctrl-C
(the sweep keeps its completed sizes, tune undoes what it applied) does the same for them,
and the exit status is the shell's convention, 128 + the signal number.

Only the first SIGTERM/SIGHUP raises; later ones are ignored, so that the cleanup they
started is not itself cut short.  Inside :func:`deferred` (writing results) a signal is
held and raised when the block ends, so a result file is never lost half-way.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
INTERRUPTED = 130  # 128 + SIGINT


class Terminated(KeyboardInterrupt):
    """The process was asked to stop by a signal other than SIGINT."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"terminated by {signal.Signals(signum).name}")


BY_THE_USER = "interrupted by the user"  # SIGINT: Ctrl-C


def reason(exc: BaseException) -> str:
    """Why a command stopped, for a result's status_reason: "terminated by SIGTERM" (a
    scheduler's time limit, kill, timeout) apart from the user's Ctrl-C."""
    return str(exc) if isinstance(exc, Terminated) else BY_THE_USER


def relayed(child_reason: str | None, stop: BaseException | None) -> str | None:
    """A launched child's reason for stopping as this process tells it: the child (an MPI
    rank) is asked to stop by SIGUSR1 whatever stopped this process, so it says
    BY_THE_USER; when SIGTERM or SIGHUP stopped this process, that is the reason."""
    if isinstance(stop, Terminated) and child_reason == BY_THE_USER:
        return str(stop)
    return child_reason


def exit_status(exc: BaseException | None) -> int:
    """128 + the signal number: 143 for SIGTERM, 129 for SIGHUP, 130 for Ctrl-C."""
    return 128 + exc.signum if isinstance(exc, Terminated) else INTERRUPTED


class _State:
    def __init__(self) -> None:
        self.raised = False  # a Terminated was raised already
        self.depth = 0  # nesting of deferred()
        self.pending: int | None = None  # a signal held by deferred()
        self.signum: int | None = None  # the stop signal raised, until check() re-raised it


_state = _State()


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    if signum == signal.SIGINT:
        if _state.depth:
            _state.pending = _state.pending or signum
            return
        raise KeyboardInterrupt
    if _state.raised:
        return
    if _state.depth:
        _state.pending = signum
        return
    _state.raised, _state.signum = True, signum
    raise Terminated(signum)


def check() -> None:
    """Raise the stop signal's Terminated again if it may have been lost: Python ignores
    an exception raised inside an at-fork handler or a finaliser, and a SIGTERM that
    arrives while a child is being forked runs its handler there (seen as "Exception
    ignored in: <function _releaseLock>"), after which later ones are ignored as
    repeats.  A long loop of steps that start children calls this between steps; it
    raises at most once per signal."""
    signum, _state.signum = _state.signum, None
    if signum is not None and _state.depth == 0:
        raise Terminated(signum)


def _raise_pending() -> None:
    signum, _state.pending = _state.pending, None
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    if signum is not None and not _state.raised:
        _state.raised, _state.signum = True, signum
        raise Terminated(signum)


@contextlib.contextmanager
def handling() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP raise in the main thread while the block runs; the
    previous handlers come back afterwards (tests run commands in-process)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = (signal.SIGINT, *STOP_SIGNALS)
    previous = {sig: signal.signal(sig, _on_signal) for sig in signals}
    _state.raised, _state.depth, _state.pending, _state.signum = False, 0, None, None
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold any stop signal until the block ends (then raise it): for writing results."""
    _state.depth += 1
    try:
        yield
    finally:
        _state.depth -= 1
    if _state.depth == 0 and _state.pending is not None:  # the block ended normally
        _raise_pending()

"""Printing that never costs a result: a closed or broken stdout or stderr.

``beoperf pingpong ... 2>&1 | tee log`` stopped with Ctrl-C sends SIGINT to the whole
process group: tee ends at once, and every later line beoperf prints meets a closed pipe
(EPIPE: Python ignores SIGPIPE and raises BrokenPipeError instead).  ``| head -1`` closes
the pipe after one line, a closed terminal gives EIO.  Raised from a print, that error
would end the command before its results were written, or in the middle of writing them.

So while a command runs, :func:`guarded` puts stdout and stderr behind :class:`Guarded`:
a write or flush that fails that way marks the stream lost, points its descriptor at
/dev/null (so that whatever is still buffered, the interpreter's flush at exit and any
later print go nowhere, silently) and returns as if it had written.  The command goes
on: it measures, writes its files, and only what it would have printed is lost.

Exit status: the command's own when it is not 0 (130 after Ctrl-C, 5 for corruption,
...); a command that succeeded but could not print everything exits with
:data:`LOST_OUTPUT`, 141 (128 + SIGPIPE, what a shell reports for a program that a
closed pipe stopped), so that a script with ``set -o pipefail`` knows the output it read
is not whole, while every file the command writes is.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO

LOST_OUTPUT = 141  # 128 + SIGPIPE
GONE = (errno.EPIPE, errno.EIO, errno.ECONNRESET)  # the reader is gone; nothing to retry


class Guarded:
    """A text stream whose write and flush never raise for a reader that went away."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.lost = False

    def write(self, text: str) -> int:
        if not self.lost:
            with self._catching():
                return self._stream.write(text)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if not self.lost:
            with self._catching():
                self._stream.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding ...: the stream's
        return getattr(self._stream, name)

    @contextlib.contextmanager
    def _catching(self) -> Iterator[None]:
        try:
            yield
        except OSError as exc:
            if exc.errno not in GONE:
                raise
            self._lose()
        except ValueError:  # the stream was closed under us ("I/O operation on closed file")
            self._lose()

    def _lose(self) -> None:
        """From now on this stream writes to /dev/null: what its buffer still holds
        included, so that no later flush (at exit too) fails again."""
        self.lost = True
        with contextlib.suppress(OSError, ValueError, AttributeError):
            null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.dup2(null, self._stream.fileno())
            finally:
                os.close(null)


class Outputs:
    """The guarded stdout and stderr of one command."""

    def __init__(self, out: Guarded, err: Guarded) -> None:
        self.out, self.err = out, err

    @property
    def lost(self) -> bool:
        return self.out.lost or self.err.lost

    def status(self, status: int) -> int:
        """The exit status: the command's own, or LOST_OUTPUT if it succeeded but could
        not print everything."""
        return LOST_OUTPUT if status == 0 and self.lost else status


@contextlib.contextmanager
def guarded() -> Iterator[Outputs]:
    """stdout and stderr guarded while the block runs (flushed at its end), the originals
    back afterwards (tests run commands in-process)."""
    saved = sys.stdout, sys.stderr
    out = saved[0] if isinstance(saved[0], Guarded) else Guarded(saved[0])
    err = saved[1] if isinstance(saved[1], Guarded) else Guarded(saved[1])
    sys.stdout, sys.stderr = out, err
    try:
        yield Outputs(out, err)
    finally:
        out.flush()
        err.flush()
        sys.stdout, sys.stderr = saved

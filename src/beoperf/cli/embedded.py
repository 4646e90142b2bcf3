"""The embedded default peer: `beoperf serve` on loopback in a child process.

A separate process, not a thread, so that both ends are scheduled as they
would be on two hosts (and as NetPIPE and sockperf run on one).
"""

from __future__ import annotations

import contextlib
import selectors
import subprocess
import sys
import tempfile
from collections.abc import Iterator

from beoperf.cli import CliError, ExitStatus


@contextlib.contextmanager
def embedded_server(bind: str, max_memory: int, timeout: float = 15.0) -> Iterator[int]:
    """Start a server on a free loopback port; yield the port; stop it by its PID."""
    with tempfile.TemporaryFile(mode="w+") as errors:
        proc = subprocess.Popen(
            [sys.executable, "-m", "beoperf", "serve", "--bind", bind, "--port", "0",
             "--max-memory", str(max_memory)],
            stdout=subprocess.PIPE, stderr=errors, stdin=subprocess.DEVNULL, text=True,
            start_new_session=True)  # Ctrl-C reaches the client only; it stops the server
        try:
            yield _read_port(proc, errors, timeout)
        finally:
            proc.terminate()
            try:
                proc.wait(3)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout:
                proc.stdout.close()


def _read_port(proc: subprocess.Popen, errors, timeout: float) -> int:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        line = proc.stdout.readline() if sel.select(timeout) else ""
    if " port " not in line:
        proc.wait(1) if proc.poll() is None else None
        errors.seek(0)
        detail = errors.read().strip().splitlines()
        raise CliError(ExitStatus.ERROR, "embedded server error",
                       f"the loopback server did not start: {detail[-1] if detail else line!r}")
    return int(line.rsplit(" port ", 1)[1].split()[0])

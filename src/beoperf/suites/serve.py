"""The peer of every network test (`beoperf serve`), and the embedded one on loopback.

:func:`start` builds a listening server from a spec and returns it; the caller decides how
it is stopped (signals, a pipe) and runs it.  :func:`embedded` starts `beoperf serve` on
loopback in a child process for `beoperf pingpong` without a host: a separate process, not
a thread, so that both ends are scheduled as they would be on two hosts (and as NetPIPE and
sockperf run on one).  The child watches a pipe from this process and stops when it closes,
so it never outlives its parent, not even one killed with SIGKILL.
"""

from __future__ import annotations

import contextlib
import math
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

from beoperf import errors
from beoperf.engines import protocol, udp
from beoperf.engines.tcp_server import MiB, Server, ServerConfig
from beoperf.launch import job

DEFAULT_PORT = protocol.DEFAULT_PORT
MAX_MEMORY = 64 * 1024 * MiB
MAX_SECONDS = 2**31 / 1000.0  # what a millisecond timeout in a C int can hold
# what `beoperf serve --help` says of its caps on a UDP trial (engines/udp.py)
UDP_CAPS = (f"A UDP trial ('pingpong --udp') may ask for at most {udp.MAX_RATE_BPS / 1e9:g} "
            f"Gbit/s, {udp.MAX_DURATION_S:g} s and {udp.MAX_PACKETS} datagrams (more is "
            "refused); its datagrams are taken only from the session's own client address, "
            "and the server never sends UDP for it.")


@dataclass(frozen=True)
class Spec:
    bind: str = "::"
    port: int = DEFAULT_PORT
    max_memory: int = 64 * MiB
    idle_timeout: float = 30.0
    handshake_timeout: float = 5.0
    inject_corrupt: int = -1  # test hook
    max_load_s: float = 600.0  # --max-load-time: a ping-pong's bulk load, drained at most


def check_seconds(name: str, value: float) -> None:
    """A duration: finite, from 1 ms to about 24 days (BadSpec otherwise)."""
    if not (math.isfinite(value) and 0.001 <= value <= MAX_SECONDS):
        raise errors.BadSpec(f"{name} {value}: give seconds between 0.001 and "
                             f"{MAX_SECONDS:.0f}", "see 'beoperf COMMAND --help'")


def validate(spec: Spec) -> None:
    if not 1 <= spec.max_memory <= MAX_MEMORY:
        raise errors.BadSpec("--max-memory must be between 1 byte and 64G",
                             "see 'beoperf COMMAND --help'")
    if not 0 <= spec.port <= 65535:
        raise errors.BadSpec(f"--port {spec.port} is not a TCP port (0-65535)",
                             "see 'beoperf COMMAND --help'")
    check_seconds("--idle-timeout", spec.idle_timeout)
    check_seconds("--handshake-timeout", spec.handshake_timeout)
    check_seconds("--max-load-time", spec.max_load_s)


def start(spec: Spec) -> Server:
    """A server listening as the spec says (call serve_forever(), stop with shutdown())."""
    validate(spec)
    cfg = ServerConfig(bind=spec.bind, port=spec.port, max_memory=spec.max_memory,
                       idle_timeout=spec.idle_timeout, handshake_timeout=spec.handshake_timeout,
                       inject_corrupt=spec.inject_corrupt, max_load_s=spec.max_load_s)
    try:
        return Server(cfg)
    except OSError as exc:
        raise errors.Failed(f"cannot listen on {cfg.bind} port {cfg.port}: {exc.strerror}",
                            "is another server running there? try --port or --bind",
                            category="server error") from None


def stop_at_eof(server: Server, stream: IO[bytes]) -> threading.Thread:
    """Stop ``server`` once ``stream`` ends (its parent closed the pipe, or died)."""

    def watch() -> None:
        with contextlib.suppress(OSError, ValueError):
            while stream.read1(4096):  # type: ignore[attr-defined]
                pass
        server.shutdown()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@contextlib.contextmanager
def embedded(bind: str, max_memory: int, timeout: float = 15.0) -> Iterator[int]:
    """Start `beoperf serve` on a free loopback port (a guarded job: launch/job.py); yield
    the port; stop it (its pipe closed, then the job ended)."""
    port: list[int] = []
    said = threading.Event()

    def on_line(line: str) -> None:
        if " port " in line and not said.is_set():
            with contextlib.suppress(ValueError, IndexError):
                port.append(int(line.rsplit(" port ", 1)[1].split()[0]))
            said.set()

    server = job.Job([sys.executable, "-m", "beoperf", "serve", "--bind", bind, "--port", "0",
                      "--max-memory", str(max_memory), "--exit-with-stdin"],
                     stdin=True, on_line=on_line, grace=3.0)
    with server:  # Ctrl-C reaches the client only (the job has a session of its own)
        if not (said.wait(timeout) and port):
            server.stop()
            detail = server.stderr_text().strip().splitlines()
            raise errors.Failed("the loopback server did not start: "
                                f"{detail[-1] if detail else 'no message'}",
                                category="embedded server error")
        try:
            yield port[0]
        finally:
            if server.stdin is not None:
                with contextlib.suppress(OSError):
                    server.stdin.close()
            if server.wait(3.0) is None:
                server.stop()

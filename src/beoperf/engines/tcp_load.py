"""The bulk load of a ping-pong under load (``beoperf pingpong --under-load``), as
sockperf's under-load mode: while the ping-pong runs on its data connection, the
client sends bulk data on one or more load connections of the same session, to the
same server over the same link, and the server drains them.

Both ends are here: :class:`LoadSink` (server: one thread per load connection, reading
into one buffer, counting bytes and the times of the first and last) and
:class:`LoadSource` (client: one thread per load connection, sending one buffer over
and over).  The threads block in the kernel with the GIL released, so the ping-pong's
C loop runs beside them.  The server bounds what a load may cost: it ends when the
client says "unload", when the session ends, when a connection falls silent for the
idle timeout, or after ``max_seconds`` (the server's cap): in each case the server shuts
its load sockets down, which ends the client's sends too.  The throughput is the
receiver's: bytes delivered over the window from the first byte to the last.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from dataclasses import dataclass, field

READ_CHUNK = 256 * 1024  # bytes per recv_into of the sink
DEFAULT_WRITE = 128 * 1024  # bytes per send of the source (iperf3's default TCP length)
POLL_S = 0.25  # how often a sink looks at its cap and the idle time


@dataclass
class SinkStream:
    """What one load connection delivered to the sink."""

    bytes: int = 0
    first_ns: int | None = None
    last_ns: int | None = None


@dataclass
class LoadSink:
    """The server's end: drain every load connection until stopped, capped or silent."""

    socks: list[socket.socket]
    max_seconds: float
    idle_timeout: float
    streams: list[SinkStream] = field(default_factory=list)
    capped: bool = False

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._deadline = time.monotonic() + self.max_seconds

    def start(self) -> None:
        for sock in self.socks:
            sock.settimeout(POLL_S)
            one = SinkStream()
            self.streams.append(one)
            thread = threading.Thread(target=self._drain, args=(sock, one), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _drain(self, sock: socket.socket, one: SinkStream) -> None:
        """Read until EOF, an error, the stop, the cap or idle_timeout of silence."""
        buf = bytearray(READ_CHUNK)
        view = memoryview(buf)
        quiet_since = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= self._deadline:
                self.capped = True
                break
            try:
                got = sock.recv_into(view)
            except TimeoutError:
                if now - quiet_since > self.idle_timeout:
                    break
                continue
            except OSError:
                break
            if not got:
                break
            stamp = time.monotonic_ns()
            if one.first_ns is None:
                one.first_ns = stamp
            one.last_ns, one.bytes = stamp, one.bytes + got
            quiet_since = time.monotonic()
        _shut(sock)

    def stop(self, wait: float = 5.0) -> None:
        """End the drain (its sockets shut down, which ends the client's sends) and wait
        up to ``wait`` seconds for the threads; the sockets are closed."""
        self._stop.set()
        for sock in self.socks:
            _shut(sock)
        until = time.monotonic() + wait
        for thread in self._threads:
            thread.join(max(0.0, until - time.monotonic()))
        for sock in self.socks:
            sock.close()

    def window_ns(self) -> int:
        """From the first byte of any connection to the last of any (0: none came)."""
        firsts = [s.first_ns for s in self.streams if s.first_ns is not None]
        lasts = [s.last_ns for s in self.streams if s.last_ns is not None]
        return max(lasts) - min(firsts) if firsts and lasts else 0


@dataclass
class LoadSource:
    """The client's end: send ``write_size`` bytes at a time on every load connection
    until stopped (or the server ends the load)."""

    socks: list[socket.socket]
    write_size: int = DEFAULT_WRITE
    timeout: float = 10.0
    errors: list[str] = field(default_factory=list)
    sent: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        payload = bytes(range(256)) * (self.write_size // 256) + bytes(self.write_size % 256)
        self.sent = [0] * len(self.socks)
        for i, sock in enumerate(self.socks):
            sock.settimeout(self.timeout)
            thread = threading.Thread(target=self._send, args=(i, sock, payload), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _send(self, i: int, sock: socket.socket, payload: bytes) -> None:
        try:
            while not self._stop.is_set():
                sock.sendall(payload)
                self.sent[i] += len(payload)
        except OSError as exc:
            if not self._stop.is_set():  # the server ended the load (its cap) or it broke
                self.errors.append(f"load connection {i}: {exc.strerror or exc}")

    def halt(self) -> None:
        """Stop sending at the next write (a send the server's shutdown breaks from now
        on is no error)."""
        self._stop.set()

    def alive(self) -> bool:
        return any(thread.is_alive() for thread in self._threads)

    def stop(self, wait: float = 5.0) -> None:
        """Stop sending, wait up to ``wait`` seconds for the threads, close the sockets
        (a thread still blocked in a send ends with its socket)."""
        self._stop.set()
        until = time.monotonic() + wait
        for thread in self._threads:
            thread.join(max(0.0, until - time.monotonic()))
        for sock in self.socks:
            _shut(sock)
            sock.close()


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)

"""The echo service of `beoperf serve` for `beoperf monitor`: its wire format and both ends.

The server (``engines/tcp_server.py``) answers with these functions and the monitor's
probers (``monitor/probes.py``) build and check their probes with the same ones, so the
format exists once:

* UDP, on the server's port: a probe is a datagram that starts with ``MAGIC``; its answer
  is the same datagram with ``REPLY`` in MAGIC's place (``udp_answer``).  A reply is never
  answered, so two servers cannot echo each other forever.  The server answers within a
  byte rate in all and per source (``UdpEcho``).
* TCP: a connection whose hello asks for the "echo" role is answered ``{"op": "echo",
  "max_message": MAX_MESSAGE}``; then every message, a 4-byte big-endian length (``LEN``)
  and that many bytes (``tcp_message``), comes back as it is (``TcpEcho``).
"""

from __future__ import annotations

import contextlib
import errno
import secrets
import socket
import struct
import time

from beoperf import __version__
from beoperf.engines import protocol
from beoperf.model.document import JsonObject

MAGIC = b"BEOU"  # first bytes of a UDP echo probe
REPLY = b"BEOR"  # ... and of its answer (never answered itself: no echo loops)
LEN = struct.Struct(">I")  # length prefix of a TCP echo message
SEQ = struct.Struct("!I")  # a UDP probe's sequence number, after MAGIC
MAX_MESSAGE = 1024 * 1024  # largest TCP echo message the server takes


# --------------------------------------------------------------------------- UDP


def udp_probe(seq: int, size: int) -> bytes:
    """A UDP probe of `size` bytes (at least 8): MAGIC, the sequence number, up to 8
    random bytes (a late reply to an earlier probe never matches), zeros."""
    return MAGIC + SEQ.pack(seq) + secrets.token_bytes(min(8, size - 8)) + bytes(
        max(0, size - 16))


def udp_answer(datagram: bytes) -> bytes | None:
    """The server's answer to a datagram (None: not a probe, never answered); the
    prober compares what comes back with the answer to its own probe."""
    if not datagram.startswith(MAGIC):
        return None
    return REPLY + datagram[len(MAGIC):]


class Bucket:
    """A token bucket of ``rate`` bytes per second (one second's burst)."""

    def __init__(self, rate: float) -> None:
        self.rate, self.tokens, self.last = rate, rate, time.monotonic()

    def has(self, n: int, now: float) -> bool:
        """Refill for the time since last asked; whether ``n`` bytes are there."""
        self.tokens = min(self.rate, self.tokens + (now - self.last) * self.rate)
        self.last = now
        return n <= self.tokens


class UdpEcho:
    """Answers UDP echo probes within a byte rate in all and per source address (an
    eighth of it), never to ports below 1024 or to the echo port itself (another
    server's), so the server cannot be used to reflect floods."""

    SOURCES = 1024  # buckets kept (least recently seen dropped)

    def __init__(self, rate: float, port: int) -> None:
        self.all = Bucket(rate)
        self.per_source = rate / 8
        self.port = port
        self.sources: dict[str, Bucket] = {}

    def answer(self, sock: socket.socket) -> None:
        """Answer the datagrams waiting on a non-blocking socket (a burst at most)."""
        for _ in range(64):  # a burst, then back to the event loop
            try:
                data, addr = sock.recvfrom(65535)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # e.g. an ICMP error queued by an earlier reply
                continue
            reply = udp_answer(data)
            if reply is None or addr[1] < 1024 or addr[1] == self.port:
                continue
            if self._spend(addr[0], len(data)):
                with contextlib.suppress(OSError):
                    sock.sendto(reply, addr)

    def _spend(self, source: str, n: int) -> bool:
        now = time.monotonic()
        bucket = self.sources.pop(source, None) or Bucket(self.per_source)
        self.sources[source] = bucket  # most recently seen last
        if len(self.sources) > self.SOURCES:
            del self.sources[next(iter(self.sources))]
        if not (bucket.has(n, now) and self.all.has(n, now)):
            return False  # neither is charged for a datagram not answered
        bucket.tokens -= n
        self.all.tokens -= n
        return True


# --------------------------------------------------------------------------- TCP


def tcp_hello() -> bytes:
    """The frame a prober opens its echo connection with."""
    return protocol.encode({"op": "hello", "role": "echo", "beoperf": __version__})


def tcp_accepted(reply: JsonObject) -> None:
    """Check the server's answer to the hello: OSError(EPROTO) saying why if refused."""
    if reply.get("op") != "echo":
        raise OSError(errno.EPROTO, f"server refused the echo: {reply.get('reason', reply)}")


def tcp_message(payload: bytes) -> bytes:
    """One echo message on the wire, as sent and as it comes back."""
    return LEN.pack(len(payload)) + payload


class TcpEcho:
    """The server's end of one echo connection; ``count`` is the messages echoed so far
    (kept whatever ends the connection, for the server's log line)."""

    def __init__(self, conn: socket.socket, idle_timeout: float) -> None:
        self.conn, self.idle_timeout = conn, idle_timeout
        self.count = 0

    def serve(self) -> None:
        """Accept the connection, then send every message back until the peer closes or
        a message does not arrive whole within the idle timeout.  protocol.Refusal for a
        message over MAX_MESSAGE (the caller tells the peer)."""
        conn = self.conn
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        protocol.send_message(conn, {"op": "echo", "max_message": MAX_MESSAGE})
        try:
            while True:  # until the client closes (PeerGone) or a message takes too long
                deadline = time.monotonic() + self.idle_timeout  # for the whole message
                head = protocol.recv_exact(conn, LEN.size, deadline)
                (length,) = LEN.unpack(head)
                if length > MAX_MESSAGE:
                    raise protocol.Refusal("limit", f"echo message of {length} bytes "
                                                    f"exceeds {MAX_MESSAGE}")
                body = protocol.recv_exact(conn, length, deadline)
                conn.settimeout(self.idle_timeout)
                conn.sendall(head + body)
                self.count += 1
        except (TimeoutError, ConnectionError):
            return

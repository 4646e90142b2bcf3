"""The control protocol of the TCP transport (`beoperf pingpong` and `beoperf serve`).

Every control message is one frame: a fixed 10-byte header, frozen for all
versions so that peers of different versions can always tell each other so,

    magic  b"BEOP"   4 bytes
    version          2 bytes, big endian (PROTOCOL_VERSION)
    length           4 bytes, big endian, <= MAX_PAYLOAD

followed by `length` bytes of UTF-8 JSON: an object with an "op" string.
Timed data never travels on the control connection; it has its own socket.  The
monitor's echo service shares the frames and the port (``engines/echo.py``).
"""

from __future__ import annotations

import json
import socket
import struct
import time
from typing import Literal, NotRequired, TypeAlias, TypedDict

from beoperf.engines.base import SessionParams, TransportError
from beoperf.model.document import JsonObject
from beoperf.pools import PoolFacts

MAGIC = b"BEOP"
PROTOCOL_VERSION = 1
HEADER = struct.Struct(">4sHI")
MAX_PAYLOAD = 64 * 1024
DEFAULT_PORT = 5202


# The frames this beoperf sends, one TypedDict per op (a received frame is a JsonObject:
# the peer's, read value by value).
class Hello(TypedDict):
    """The first frame of every connection: a control connection ("control", with the
    session's parameters), a data connection ("data", with the session's token) or a
    monitor's echo connection ("echo")."""

    op: Literal["hello"]
    role: Literal["control", "data", "echo"]
    beoperf: NotRequired[str]
    params: NotRequired[SessionParams]
    token: NotRequired[str]


class Welcome(TypedDict):
    """The server took the session: its token for the data connection, its facts."""

    op: Literal["welcome"]
    token: str
    server: JsonObject
    limits: dict[str, int]


class DataReady(TypedDict):
    """The server has the data connection: its socket's facts, what it refused or
    changed, the CPUs its loop may run on and its buffer pool."""

    op: Literal["data"]
    socket: JsonObject
    warnings: list[str]
    cpus: list[int]
    pool: PoolFacts


class RunOrder(TypedDict):
    """Run one trial: reps messages of size bytes, sequence numbers from seq0."""

    op: Literal["run"]
    size: int
    reps: int
    seq0: int


class Done(TypedDict):
    """A trial is over: the server's elapsed time and the corrupt messages it found; with
    parallel streams (or reverse) the common window and each stream's own loop time."""

    op: Literal["done"]
    elapsed_ns: int
    corrupt: int
    streams_ns: NotRequired[list[int]]


class Refuse(TypedDict):
    """A request declined ("refuse") or a session ended by an error ("error")."""

    op: Literal["refuse", "error"]
    code: str
    reason: str


class Bare(TypedDict):
    """A frame with nothing but its op: reset the data path, or end the session."""

    op: Literal["reset", "bye"]


class Goodbye(TypedDict):
    """The server's last frame of a session that ended well: the segments its data
    sockets retransmitted (TCP_INFO), when the kernel said (losses on the way back to
    the client are retransmitted by the server, which the client cannot see)."""

    op: Literal["bye"]
    retransmissions: NotRequired[int]


class EchoReady(TypedDict):
    """An echo connection is taken (engines/echo.py): messages up to max_message."""

    op: Literal["echo"]
    max_message: int


class LoadOrder(TypedDict):
    """Latency under load (engines/tcp_load.py): the session's load connections are open
    (each announced by a "data" hello), start draining them ("load"); or stop the load,
    report and close them ("unload")."""

    op: Literal["load", "unload"]


class LoadReady(TypedDict):
    """The server drains the load connections now, for at most max_seconds."""

    op: Literal["loading"]
    streams: int
    max_seconds: float


class LoadDone(TypedDict):
    """The load is over: the bytes each load connection delivered, the window from the
    first byte to the last (ns), and whether the server's cap on its duration ended it."""

    op: Literal["unloaded"]
    bytes: list[int]
    window_ns: int
    capped: bool


class UdpRequest(TypedDict):
    """A UDP trial (engines/udp.py): datagrams of size bytes at rate_bps for duration_s,
    from the client's UDP port at the control connection's address (no frame names an
    address: each end sends to the control connection's peer only)."""

    op: Literal["udp"]
    size: int
    rate_bps: float
    duration_s: float
    port: int


class UdpReady(TypedDict):
    """The server's UDP socket for the trial: its port, and the tag every datagram bears."""

    op: Literal["udp-ready"]
    port: int
    tag: int


class UdpEnd(TypedDict):
    """The client has sent its datagrams: how many."""

    op: Literal["udp-end"]
    sent: int


class UdpDone(TypedDict):
    """What the server counted: datagrams (distinct, duplicates, reordered, not the
    trial's), their bytes, the window from the first to the last arrival, the jitter."""

    op: Literal["udp-done"]
    sent: int
    received: int
    distinct: int
    lost: int
    duplicates: int
    reordered: int
    bytes: int
    jitter_ns: float
    window_ns: int
    foreign: int
    receiver_drops: NotRequired[int]  # dropped at the server's full socket buffer


Frame: TypeAlias = (Hello | Welcome | DataReady | RunOrder | Done | Refuse | Bare | Goodbye
                    | EchoReady | LoadOrder | LoadReady | LoadDone | UdpRequest | UdpReady
                    | UdpEnd | UdpDone)


class ProtocolError(TransportError):
    """The peer sent something that is not a valid frame."""


class VersionMismatch(ProtocolError):
    """The peer speaks another protocol version."""

    def __init__(self, version: int, message: JsonObject | None = None) -> None:
        self.version = version
        self.message = message or {}
        super().__init__(f"peer speaks protocol version {version}, this beoperf speaks "
                         f"{PROTOCOL_VERSION}")


class PeerGone(ConnectionError):
    """The peer closed the control connection."""


def encode(message: Frame, version: int = PROTOCOL_VERSION) -> bytes:
    payload = json.dumps(message, separators=(",", ":")).encode()
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"control message of {len(payload)} bytes exceeds {MAX_PAYLOAD}")
    return HEADER.pack(MAGIC, version, len(payload)) + payload


def decode_header(header: bytes) -> tuple[int, int]:
    """(version, payload length) of a frame header, or ProtocolError."""
    if len(header) != HEADER.size:
        raise ProtocolError(f"truncated header ({len(header)} of {HEADER.size} bytes)")
    magic, version, length = HEADER.unpack(header)
    if magic != MAGIC:
        raise ProtocolError(f"bad magic {magic!r}: not a beoperf peer")
    if length > MAX_PAYLOAD:
        raise ProtocolError(f"frame of {length} bytes exceeds the {MAX_PAYLOAD}-byte limit")
    return version, length


def decode_payload(payload: bytes) -> JsonObject:
    """The JSON object of a frame, or ProtocolError."""
    try:
        message = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ProtocolError(f"payload is not JSON: {exc}") from None
    if not isinstance(message, dict) or not isinstance(message.get("op"), str):
        raise ProtocolError("payload is not an object with an 'op' string")
    return message


def decode(frame: bytes) -> JsonObject:
    """Parse one whole frame (header and payload) held in memory."""
    version, length = decode_header(frame[: HEADER.size])
    payload = frame[HEADER.size :]
    if len(payload) != length:
        raise ProtocolError(f"payload is {len(payload)} bytes, header says {length}")
    message = decode_payload(payload)
    if version != PROTOCOL_VERSION:
        raise VersionMismatch(version, message)
    return message


def recv_exact(sock: socket.socket, n: int, deadline: float | None = None) -> bytes:
    """Exactly n bytes; PeerGone on close.

    Without a deadline the socket's timeout applies to every read, so a peer that
    trickles a byte now and then is never timed out; with one (a time.monotonic()
    value) the whole read must be done by then, else TimeoutError.
    """
    chunks = []
    while n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the whole message did not arrive in time")
            sock.settimeout(left)
        chunk = sock.recv(n)
        if not chunk:
            raise PeerGone("peer closed the control connection")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def recv_message(sock: socket.socket, deadline: float | None = None) -> JsonObject:
    """Read one frame from a socket: all of it by `deadline` (time.monotonic()) if
    given, else with the socket's timeout applying to every read."""
    header = recv_exact(sock, HEADER.size, deadline)
    _, length = decode_header(header)
    return decode(header + recv_exact(sock, length, deadline))


def send_message(sock: socket.socket, message: Frame) -> None:
    sock.sendall(encode(message))


def expect(message: JsonObject, op: str) -> JsonObject:
    """The message if its op is `op`; a refusal or error becomes PeerRefused."""
    if message["op"] == op:
        return message
    if message["op"] in ("refuse", "error"):
        raise PeerRefused(str(message.get("reason", "no reason given")),
                          str(message.get("code", message["op"])))
    raise ProtocolError(f"expected {op!r} from the peer, got {message['op']!r}")


class PeerRefused(TransportError):
    """The peer answered with a refusal or an error."""

    def __init__(self, reason: str, code: str = "refuse") -> None:
        self.reason = reason
        self.code = code
        super().__init__(reason)


class Refusal(Exception):
    """A request this end declines, sent to the peer as a "refuse" (or "error") message;
    code is machine-readable (bad-request, limit, busy, version, protocol)."""

    def __init__(self, code: str, reason: str) -> None:
        self.code = code
        super().__init__(reason)

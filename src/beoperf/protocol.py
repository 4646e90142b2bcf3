"""The control protocol between `beoperf pingpong` and `beoperf serve`.

Every control message is one frame: a fixed 10-byte header, frozen for all
versions so that peers of different versions can always tell each other so,

    magic  b"BEOP"   4 bytes
    version          2 bytes, big endian (PROTOCOL_VERSION)
    length           4 bytes, big endian, <= MAX_PAYLOAD

followed by `length` bytes of UTF-8 JSON: an object with an "op" string.
Timed data never travels on the control connection; it has its own socket.
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

MAGIC = b"BEOP"
PROTOCOL_VERSION = 1
HEADER = struct.Struct(">4sHI")
MAX_PAYLOAD = 64 * 1024
DEFAULT_PORT = 5202

# The echo service for `beoperf monitor` (same port): UDP datagrams starting with
# ECHO_MAGIC come back with ECHO_REPLY in its place; a TCP connection whose hello asks
# for the "echo" role carries messages of ECHO_LEN (a length) then that many bytes.
ECHO_MAGIC = b"BEOU"  # first bytes of a UDP echo probe
ECHO_REPLY = b"BEOR"  # ... and of its answer (never answered itself: no echo loops)
ECHO_LEN = struct.Struct(">I")  # length prefix of a TCP echo message


class ProtocolError(Exception):
    """The peer sent something that is not a valid frame."""


class VersionMismatch(ProtocolError):
    """The peer speaks another protocol version."""

    def __init__(self, version: int, message: dict[str, Any] | None = None) -> None:
        self.version = version
        self.message = message or {}
        super().__init__(f"peer speaks protocol version {version}, this beoperf speaks "
                         f"{PROTOCOL_VERSION}")


class PeerGone(ConnectionError):
    """The peer closed the control connection."""


def encode(message: dict[str, Any], version: int = PROTOCOL_VERSION) -> bytes:
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


def decode_payload(payload: bytes) -> dict[str, Any]:
    """The JSON object of a frame, or ProtocolError."""
    try:
        message = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ProtocolError(f"payload is not JSON: {exc}") from None
    if not isinstance(message, dict) or not isinstance(message.get("op"), str):
        raise ProtocolError("payload is not an object with an 'op' string")
    return message


def decode(frame: bytes) -> dict[str, Any]:
    """Parse one whole frame (header and payload) held in memory."""
    version, length = decode_header(frame[: HEADER.size])
    payload = frame[HEADER.size :]
    if len(payload) != length:
        raise ProtocolError(f"payload is {len(payload)} bytes, header says {length}")
    message = decode_payload(payload)
    if version != PROTOCOL_VERSION:
        raise VersionMismatch(version, message)
    return message


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly n bytes (the socket's timeout applies to every read); PeerGone on close."""
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise PeerGone("peer closed the control connection")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def recv_message(sock: socket.socket) -> dict[str, Any]:
    """Read one frame from a socket (its timeout applies to every read)."""
    header = recv_exact(sock, HEADER.size)
    _, length = decode_header(header)
    return decode(header + recv_exact(sock, length))


def send_message(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(encode(message))


def expect(message: dict[str, Any], op: str) -> dict[str, Any]:
    """The message if its op is `op`; a refusal or error becomes PeerRefused."""
    if message["op"] == op:
        return message
    if message["op"] in ("refuse", "error"):
        raise PeerRefused(str(message.get("reason", "no reason given")),
                          str(message.get("code", message["op"])))
    raise ProtocolError(f"expected {op!r} from the peer, got {message['op']!r}")


class PeerRefused(Exception):
    """The peer answered with a refusal or an error."""

    def __init__(self, reason: str, code: str = "refuse") -> None:
        self.reason = reason
        self.code = code
        super().__init__(reason)

"""The TCP transport's data connection as both ends set it up (client: ``tcp.py``, server:
``tcp_server.py``): the socket options each end applies identically, the I/O timeout the
C loops rely on, what each end records about it, and which C loop each end runs."""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from typing import Any

from beoperf import sysinfo

SO_BUSY_POLL = getattr(socket, "SO_BUSY_POLL", 46)

CLIENT_ROLE = {"pingpong": "pingpong-client", "stream": "stream-send", "bidir": "bidir"}
SERVER_ROLE = {"pingpong": "pingpong-server", "stream": "stream-recv", "bidir": "bidir"}


@dataclass
class DataOptions:
    """Socket options of the data connection, applied identically at both ends."""

    sndbuf: int | None = None
    rcvbuf: int | None = None
    nodelay: bool = True
    busy_poll: int | None = None  # microseconds

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> DataOptions:
        return cls(params.get("sndbuf"), params.get("rcvbuf"), bool(params.get("nodelay", True)),
                   params.get("busy_poll"))


def apply_options(sock: socket.socket, opts: DataOptions) -> list[str]:
    """Set the options; return warnings for those the kernel refused."""
    warnings = []
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, int(opts.nodelay))
    for level, value in ((socket.SO_SNDBUF, opts.sndbuf), (socket.SO_RCVBUF, opts.rcvbuf)):
        if value:
            sock.setsockopt(socket.SOL_SOCKET, level, value)
    if opts.busy_poll:
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_BUSY_POLL, opts.busy_poll)
        except OSError as exc:
            warnings.append(f"SO_BUSY_POLL={opts.busy_poll} refused: {exc.strerror}")
    return warnings


def busy_poll_granted(sock: socket.socket) -> int | None:
    try:
        return sock.getsockopt(socket.SOL_SOCKET, SO_BUSY_POLL)
    except OSError:
        return None


def set_io_timeout(sock: socket.socket, seconds: float) -> None:
    """Blocking socket whose every send/recv gives up after `seconds` without progress.

    The C loops rely on this (SO_RCVTIMEO/SO_SNDTIMEO) rather than poll() so
    that a message costs exactly one send and one recv system call.
    """
    sock.setblocking(True)
    tv = struct.pack("ll", int(seconds), int((seconds % 1) * 1e6))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)


def data_socket_facts(sock: socket.socket) -> dict[str, Any]:
    facts = sysinfo.endpoint_facts(sock)
    facts["socket"]["busy_poll_us"] = busy_poll_granted(sock)
    return facts

"""The TCP transport's data connection as both ends set it up (client: ``tcp.py``, server:
``tcp_server.py``): the socket options each end applies identically, the I/O timeout the
C loops rely on, what each end records about it, and which C loop each end runs."""

from __future__ import annotations

import re
import socket
import struct
import threading
from dataclasses import dataclass

from beoperf import _core, sysinfo
from beoperf.engines.base import SessionParams
from beoperf.model.document import JsonObject

SO_BUSY_POLL = getattr(socket, "SO_BUSY_POLL", 46)
TCP_CONGESTION = getattr(socket, "TCP_CONGESTION", 13)
CONGESTION_NAME = re.compile(r"[a-z][a-z0-9_]{0,14}")  # the kernel's names: 15 bytes at most
ALWAYS_THERE = "reno"  # built into every Linux kernel, allowed to every user

CLIENT_ROLE = {"pingpong": "pingpong-client", "stream": "stream-send", "bidir": "bidir"}
# --reverse (stream mode only): the server sends, the client receives and times
REVERSE_ROLE = {"client": "stream-recv", "server": "stream-send"}
SERVER_ROLE = {"pingpong": "pingpong-server", "stream": "stream-recv", "bidir": "bidir"}
# TCP carries bytes, not messages: a send of 0 bytes puts nothing on the wire and the
# other end would wait for ever.  An empty message (size 0, NetPIPE's, IMB's and OSU's
# first row) is therefore one byte of data each way, the smallest segment that makes the
# round trip real, as an MPI library's 0-byte message is its header alone.
EMPTY_MESSAGE_WIRE_BYTES = 1


def wire_size(size: int) -> int:
    """The bytes one message of ``size`` puts in the data stream (EMPTY_MESSAGE_WIRE_BYTES
    for an empty one)."""
    return size if size > 0 else EMPTY_MESSAGE_WIRE_BYTES


@dataclass
class DataOptions:
    """Socket options of the data connection, applied identically at both ends."""

    sndbuf: int | None = None
    rcvbuf: int | None = None
    nodelay: bool = True
    busy_poll: int | None = None  # microseconds
    congestion: str | None = None  # TCP_CONGESTION; None: the system's default

    @classmethod
    def from_params(cls, params: SessionParams) -> DataOptions:
        return cls(params.get("sndbuf"), params.get("rcvbuf"), bool(params.get("nodelay", True)),
                   params.get("busy_poll"), params.get("congestion"))


def congestion_problem(name: object) -> str | None:
    """Why ``name`` cannot be a data connection's congestion control here, or None.

    Only a control the kernel has already loaded (or Reno, always built in) is taken: as
    root, TCP_CONGESTION with another name would make the kernel load a module, which a
    client's request must never make a server do."""
    if not isinstance(name, str) or not CONGESTION_NAME.fullmatch(name):
        return f"bad congestion control name {name!r}"
    available = sysinfo.congestion_controls()
    if name != ALWAYS_THERE and name not in available:
        return (f"congestion control {name!r} is not loaded here (loaded: "
                f"{', '.join(available) or 'unknown'})")
    return None


def apply_options(sock: socket.socket, opts: DataOptions) -> list[str]:
    """Set the options; return warnings for those the kernel refused."""
    warnings = []
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, int(opts.nodelay))
    for level, value in ((socket.SO_SNDBUF, opts.sndbuf), (socket.SO_RCVBUF, opts.rcvbuf)):
        if value:
            sock.setsockopt(socket.SOL_SOCKET, level, value)
    if opts.congestion:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, opts.congestion.encode())
        except OSError as exc:
            warnings.append(f"TCP_CONGESTION={opts.congestion} refused: {exc.strerror}")
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
    that a message costs one send and as many recv calls as it takes to arrive
    (each takes what has come), with no poll() between them.
    """
    sock.setblocking(True)
    tv = struct.pack("ll", int(seconds), int((seconds % 1) * 1e6))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)


def data_socket_facts(sock: socket.socket) -> JsonObject:
    facts = sysinfo.endpoint_facts(sock)
    facts["socket"]["busy_poll_us"] = busy_poll_granted(sock)
    return facts


MAX_STREAMS = 128  # a server's cap on a session's parallel stream connections (--streams)


@dataclass
class Parallel:
    """What the timing end of a parallel stream trial saw: the common window (from the
    first stream's start to the last one's end), each stream's own loop time, and the
    corrupt messages of all of them."""

    window_ns: int
    elapsed_ns: list[int]
    corrupt: int


def run_parallel(role: str, socks: list[socket.socket], pools: list[_core.Pool], reps: int,
                 *, size: int, seq0: int, integrity: bool, timeout_ms: int,
                 inject_corrupt: int = -1) -> Parallel:
    """Run the C loop ``role`` on every socket at once, one thread per stream (the loop
    releases the GIL), each from its own pool; the threads start together at a barrier
    (the common start) and the window is timed from the first start to the last end.
    The first failure of any stream is raised once all have ended."""
    n = len(socks)
    barrier = threading.Barrier(n)
    starts, ends, elapsed, corrupt = [0] * n, [0] * n, [0] * n, [0] * n
    failures: list[BaseException] = []

    def one(i: int) -> None:
        try:
            barrier.wait()
            starts[i] = _core.now_ns()
            _, elapsed[i], corrupt[i] = _core.run(
                role, socks[i].fileno(), pools[i], reps, integrity=integrity, seq0=seq0,
                timeout_ms=timeout_ms, inject_corrupt=inject_corrupt, timed=False, size=size)
            ends[i] = _core.now_ns()
        except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
            failures.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(1, n)]
    for thread in threads:
        thread.start()
    one(0)
    for thread in threads:
        thread.join()
    if failures:
        real = [f for f in failures if not isinstance(f, threading.BrokenBarrierError)]
        raise (real or failures)[0]
    return Parallel(max(ends) - min(starts), elapsed, sum(corrupt))

"""TCP transport: a control connection for the protocol, a data connection for timing."""

from __future__ import annotations

import contextlib
import os
import socket
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from beoperf import __version__, _core, protocol, sysinfo
from beoperf.engines.base import Transport, Trial, register

SO_BUSY_POLL = getattr(socket, "SO_BUSY_POLL", 46)

CLIENT_ROLE = {"pingpong": "pingpong-client", "stream": "stream-send", "bidir": "bidir"}
SERVER_ROLE = {"pingpong": "pingpong-server", "stream": "stream-recv", "bidir": "bidir"}


class ConnectError(ConnectionError):
    """Could not reach the peer (unknown host, refused, unreachable, timed out)."""


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


def resolve(host: str, port: int, family: int) -> tuple[int, tuple[Any, ...]]:
    """(family, sockaddr) of the first TCP address of host."""
    try:
        infos = socket.getaddrinfo(host, port, family, socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ConnectError(f"cannot resolve host {host!r}: {exc.strerror}") from None
    return infos[0][0], infos[0][4]


def connect(host: str, port: int, family: int, timeout: float,
            opts: DataOptions | None = None) -> socket.socket:
    """Connected TCP socket; options that must precede connect() are set first."""
    fam, addr = resolve(host, port, family)
    sock = socket.socket(fam, socket.SOCK_STREAM)
    try:
        if opts:
            apply_options(sock, opts)
        sock.settimeout(timeout)
        sock.connect(addr)
    except OSError as exc:
        sock.close()
        reason = "timed out" if isinstance(exc, TimeoutError) else exc.strerror or str(exc)
        raise ConnectError(f"cannot connect to {host} port {port}: {reason}") from None
    return sock


def count_corrupt(mode: str, here: int, there: int) -> int:
    """Corrupted messages, each counted once.

    pingpong: the server echoes what it received, so every damaged message,
    on either leg, reaches the client: the client's count is the total.
    stream: only the server receives. bidir: each end receives its own.
    """
    if mode == "pingpong":
        return here
    if mode == "stream":
        return there
    return here + there


@register("tcp")
class TcpClient(Transport):
    """The client end: drives the session, runs its half of each trial in C."""

    def __init__(self, host: str, port: int, params: dict[str, Any], *,
                 family: int = socket.AF_UNSPEC, timeout: float = 10.0) -> None:
        self.host, self.port, self.family, self.timeout = host, port, family, timeout
        self.params = params
        self.opts = DataOptions.from_params(params)
        self.ctrl: socket.socket | None = None
        self.data: socket.socket | None = None
        self.token = ""
        self.remote: dict[str, Any] = {}
        self.remote_socket: dict[str, Any] = {}
        self.warnings: list[str] = []

    def _request(self, message: dict[str, Any], op: str, timeout: float | None = None):
        assert self.ctrl is not None
        self.ctrl.settimeout(timeout or self.timeout)
        protocol.send_message(self.ctrl, message)
        return protocol.expect(protocol.recv_message(self.ctrl), op)

    def setup(self) -> dict[str, Any]:
        self.ctrl = connect(self.host, self.port, self.family, self.timeout)
        self.ctrl.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        hello = {"op": "hello", "role": "control", "beoperf": __version__,
                 "params": self.params}
        welcome = self._request(hello, "welcome")
        self.token = str(welcome.get("token", ""))
        self.remote = welcome.get("server", {})
        return self.remote

    def open_data(self) -> None:
        fam = self.ctrl.family if self.ctrl else self.family
        self.data = connect(self.host, self.port, fam, self.timeout, self.opts)
        self.warnings += [w for w in apply_options(self.data, self.opts) if w not in self.warnings]
        self.data.settimeout(self.timeout)
        protocol.send_message(self.data, {"op": "hello", "role": "data", "token": self.token})
        assert self.ctrl is not None
        self.ctrl.settimeout(self.timeout)
        reply = protocol.expect(protocol.recv_message(self.ctrl), "data")
        self.remote_socket = {"socket": reply.get("socket", {}).get("socket"),
                              "interface": reply.get("socket", {}).get("interface"),
                              "cpus": reply.get("cpus")}
        for warning in reply.get("warnings", []):
            if f"server: {warning}" not in self.warnings:
                self.warnings.append(f"server: {warning}")
        set_io_timeout(self.data, self.timeout)

    def trial(self, size: int, reps: int, pool: _core.Pool, seq0: int) -> Trial:
        mode = self.params["mode"]
        assert self.ctrl is not None and self.data is not None
        protocol.send_message(self.ctrl, {"op": "run", "size": size, "reps": reps, "seq0": seq0})
        try:
            samples, elapsed, corrupt = _core.run(
                CLIENT_ROLE[mode], self.data.fileno(), pool, reps,
                integrity=bool(self.params.get("integrity")), seq0=seq0,
                timeout_ms=int(self.timeout * 1000), timed=mode != "stream")
        except (ConnectionError, TimeoutError):
            self._raise_peer_reason()
            raise
        self.ctrl.settimeout(self.timeout + size / 1e5)
        done = protocol.expect(protocol.recv_message(self.ctrl), "done")
        corrupt = count_corrupt(mode, corrupt, int(done.get("corrupt", 0)))
        if mode == "stream":
            elapsed = int(done["elapsed_ns"])
        arr = np.frombuffer(samples, dtype=np.uint64) if samples is not None else None
        return Trial(arr, elapsed, corrupt)

    def _raise_peer_reason(self) -> None:
        """The data path broke: if the server said why on the control path, raise that."""
        assert self.ctrl is not None
        try:
            self.ctrl.settimeout(1.0)
            message = protocol.recv_message(self.ctrl)
        except (OSError, protocol.ProtocolError):
            return
        protocol.expect(message, "done")  # raises PeerRefused for an error or refusal

    def reset(self) -> None:
        if self.data:
            self.data.close()
            self.data = None
        assert self.ctrl is not None
        protocol.send_message(self.ctrl, {"op": "reset"})
        self.open_data()

    def facts(self) -> tuple[dict[str, Any], dict[str, Any]]:
        local = data_socket_facts(self.data) if self.data else {}
        local["cpus"] = sorted(os.sched_getaffinity(0))  # where this end's loop may run
        remote = dict(self.remote)
        remote["socket"] = self.remote_socket.get("socket")
        remote["interface"] = self.remote_socket.get("interface")
        remote["cpus"] = self.remote_socket.get("cpus")
        return local, remote

    def close(self, abort: bool = False) -> None:
        if self.ctrl and not abort:
            with contextlib.suppress(OSError, protocol.ProtocolError):
                self.ctrl.settimeout(2.0)
                protocol.send_message(self.ctrl, {"op": "bye"})
                protocol.recv_message(self.ctrl)  # the server's bye: its session is over
        for sock in (self.data, self.ctrl):
            if sock:
                sock.close()
        self.data = self.ctrl = None

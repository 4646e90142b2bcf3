"""TCP transport, client end: a control connection for the protocol (``protocol.py``),
a data connection for timing (``tcp_data.py``); the server end is ``tcp_server.py``."""

from __future__ import annotations

import contextlib
import os
import socket
from typing import Any

import numpy as np

from beoperf import __version__, _core, errors, pools, sysinfo
from beoperf.engines import protocol, register, tcp_load
from beoperf.engines.base import Peer, SessionParams, Transport, TransportError, Trial
from beoperf.engines.tcp_data import (
    CLIENT_ROLE,
    REVERSE_ROLE,
    DataOptions,
    apply_options,
    data_socket_facts,
    run_parallel,
    set_io_timeout,
    wire_size,
)
from beoperf.model import jsonvalue
from beoperf.model.document import JsonObject
from beoperf.sysinfo import counters

CONNECT_HINT = "is 'beoperf serve' running there, and the port open?"


def resolve(host: str, port: int, family: int) -> tuple[int, tuple[Any, ...]]:
    """(family, sockaddr) of the first TCP address of host."""
    try:
        infos = socket.getaddrinfo(host, port, family, socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise errors.ConnectError(f"cannot resolve host {host!r}: {exc.strerror}") from None
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
        raise errors.ConnectError(f"cannot connect to {host} port {port}: {reason}") from None
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


def count(message: JsonObject, key: str, default: int | None = None) -> int:
    """The count (bytes, nanoseconds, messages) at ``key`` of the peer's frame; its
    absence (without a default) or another type is a ProtocolError."""
    value = message.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise protocol.ProtocolError(f"{message.get('op')!r} frame: {key} is {value!r}, "
                                     "not an integer")
    return value


@register("tcp")
class TcpClient(Transport):
    """The client end: drives the session, runs its half of each trial in C."""

    def __init__(self, peer: Peer, params: SessionParams, *, timeout: float = 10.0) -> None:
        super().__init__(peer, params, timeout=timeout)
        self.opts = DataOptions.from_params(params)
        self.ctrl: socket.socket | None = None
        self.data: socket.socket | None = None
        self.more_data: list[socket.socket] = []  # --streams: the data connections after the first
        self.more_pools: list[_core.Pool] = []
        self.streams = int(params.get("streams") or 1)
        self.token = ""
        self.remote: JsonObject = {}
        self.limits: JsonObject = {}  # the server's, from its welcome
        self.remote_socket: JsonObject = {}
        self.retransmitted = 0  # by the data sockets closed so far (reset)
        self.peer_retransmitted: int | None = None  # the server's, in its last frame
        self.load: tcp_load.LoadSource | None = None  # --under-load: the bulk load sent

    def connect(self) -> JsonObject:
        """setup() then open_data(); a failure closes what was opened and says what it
        means (the original exception is its __cause__)."""
        try:
            self.setup()
            self.open_data()
        except errors.ConnectError as exc:
            self.close(abort=True)
            raise errors.ConnectError(str(exc), CONNECT_HINT) from exc
        except (TransportError, OSError) as exc:
            self.close(abort=True)
            raise self.failure(exc, self.peer.host) from exc
        return self.remote

    @classmethod
    def failure(cls, exc: BaseException, host: str) -> errors.BeoperfError:
        """The protocol's own failures (a refusal, another version, not beoperf at all);
        the rest as every transport says them (Transport.failure)."""
        if isinstance(exc, protocol.PeerRefused):
            return errors.PeerError(f"{host} refused: {exc.reason}")
        if isinstance(exc, protocol.VersionMismatch):
            return errors.PeerError(f"{host}: {exc}", "use the same beoperf version at both ends")
        if isinstance(exc, protocol.ProtocolError):
            return errors.PeerError(f"{host} is not a beoperf server: {exc}", "check --port")
        return super().failure(exc, host)

    def _request(self, message: protocol.Frame, op: str,
                 timeout: float | None = None) -> JsonObject:
        assert self.ctrl is not None
        self.ctrl.settimeout(timeout or self.timeout)
        protocol.send_message(self.ctrl, message)
        return protocol.expect(protocol.recv_message(self.ctrl), op)

    def setup(self) -> JsonObject:
        """Open the control connection and agree on the session; the server's facts."""
        self.ctrl = connect(self.peer.host, self.peer.port, self.peer.family, self.timeout)
        self.ctrl.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        hello: protocol.Hello = {"op": "hello", "role": "control", "beoperf": __version__,
                                 "params": self.params}
        try:
            welcome = self._request(hello, "welcome")
        except TimeoutError:  # it took the connection: something listens there, not beoperf
            raise protocol.ProtocolError(
                f"it accepted the connection but did not answer the handshake within "
                f"{self.timeout:g} s") from None
        self.token = str(welcome.get("token", ""))
        self.remote = jsonvalue.section(welcome, "server")
        self.limits = jsonvalue.section(welcome, "limits")
        self._check_parallel(welcome)
        return self.remote

    def _check_parallel(self, welcome: JsonObject) -> None:
        """A server older than --streams and --reverse takes the session but would run one
        forward stream: refuse it here, in one line."""
        if self.streams == 1 and not self.params.get("reverse"):
            return
        limits = welcome.get("limits")
        if not isinstance(limits, dict) or "max_streams" not in limits:
            raise protocol.PeerRefused("this 'beoperf serve' is older than --streams and "
                                       "--reverse; upgrade it, or leave them out", "version")

    def open_data(self) -> None:
        """Open (or reopen) the data connection with the requested options."""
        fam = self.ctrl.family if self.ctrl else self.peer.family
        self.data = connect(self.peer.host, self.peer.port, fam, self.timeout, self.opts)
        self.warnings += [w for w in apply_options(self.data, self.opts) if w not in self.warnings]
        self.data.settimeout(self.timeout)
        protocol.send_message(self.data, {"op": "hello", "role": "data", "token": self.token})
        for _ in range(self.streams - 1):  # the parallel streams, each its own connection
            more = connect(self.peer.host, self.peer.port, fam, self.timeout, self.opts)
            self.more_data.append(more)
            apply_options(more, self.opts)
            more.settimeout(self.timeout)
            protocol.send_message(more, {"op": "hello", "role": "data", "token": self.token})
        assert self.ctrl is not None
        self.ctrl.settimeout(self.timeout)
        reply = protocol.expect(protocol.recv_message(self.ctrl), "data")
        sock = jsonvalue.section(reply, "socket")
        self.remote_socket = {"socket": sock.get("socket"), "interface": sock.get("interface"),
                              "cpus": reply.get("cpus"), "pool": reply.get("pool")}
        for warning in jsonvalue.texts(reply, "warnings"):
            if f"server: {warning}" not in self.warnings:
                self.warnings.append(f"server: {warning}")
        set_io_timeout(self.data, self.timeout)
        for more in self.more_data:
            set_io_timeout(more, self.timeout)

    def trial(self, size: int, reps: int, pool: _core.Pool, seq0: int) -> Trial:
        mode = self.params["mode"]
        assert self.ctrl is not None and self.data is not None
        protocol.send_message(self.ctrl, {"op": "run", "size": size, "reps": reps, "seq0": seq0})
        if self.streams > 1 or self.params.get("reverse"):
            return self._parallel_trial(size, reps, pool, seq0)
        try:
            samples, elapsed, corrupt = _core.run(
                CLIENT_ROLE[mode], self.data.fileno(), pool, reps,
                integrity=bool(self.params.get("integrity")), seq0=seq0,
                timeout_ms=int(self.timeout * 1000), timed=mode != "stream", size=wire_size(size))
        except (ConnectionError, TimeoutError):
            self._raise_peer_reason(size)
            raise
        self.ctrl.settimeout(self.timeout + size / 1e5)
        done = _done(protocol.recv_message(self.ctrl), size)
        corrupt = count_corrupt(mode, corrupt, count(done, "corrupt", 0))
        if mode == "stream":
            elapsed = count(done, "elapsed_ns")
        arr = np.frombuffer(samples, dtype=np.uint64) if samples is not None else None
        return Trial(arr, elapsed, corrupt)

    def _parallel_trial(self, size: int, reps: int, pool: _core.Pool, seq0: int) -> Trial:
        """A stream trial on every data connection at once (run_parallel), timed by the
        receiver: the server's window and streams, or with --reverse this end's own."""
        assert self.ctrl is not None and self.data is not None
        reverse = bool(self.params.get("reverse"))
        while len(self.more_pools) < self.streams - 1:  # each stream its own buffers
            self.more_pools.append(_core.Pool(max(self.params["max_size"], 1)))
        try:
            got = run_parallel(REVERSE_ROLE["client"] if reverse else CLIENT_ROLE["stream"],
                               [self.data, *self.more_data], [pool, *self.more_pools], reps,
                               size=wire_size(size), seq0=seq0,
                               integrity=bool(self.params.get("integrity")),
                               timeout_ms=int(self.timeout * 1000))
        except (ConnectionError, TimeoutError):
            self._raise_peer_reason(size)
            raise
        self.ctrl.settimeout(self.timeout + size / 1e5)
        done = _done(protocol.recv_message(self.ctrl), size)
        if reverse:
            return Trial(None, got.window_ns, got.corrupt, got.elapsed_ns)
        said = done.get("streams_ns")
        listed = said if isinstance(said, list) else []
        per = [v for v in listed if isinstance(v, int) and not isinstance(v, bool) and v > 0]
        if len(per) != self.streams or len(listed) != self.streams:
            raise protocol.ProtocolError(f"'done' frame: streams_ns is {said!r}, not "
                                         f"{self.streams} positive integers")
        return Trial(None, count(done, "elapsed_ns"), count(done, "corrupt", 0), per)

    def start_load(self, write_size: int = tcp_load.DEFAULT_WRITE) -> JsonObject:
        """--under-load: open the session's load connections (params "load_streams"), have
        the server drain them, and send on them until stop_load(); the server's "loading"
        frame (its cap on the load's duration)."""
        n = int(self.params.get("load_streams") or 0)
        assert self.ctrl is not None and n > 0 and self.load is None
        socks: list[socket.socket] = []
        try:
            for _ in range(n):
                sock = connect(self.peer.host, self.peer.port, self.ctrl.family, self.timeout)
                socks.append(sock)
                protocol.send_message(sock, {"op": "hello", "role": "data",
                                             "token": self.token})
            ready = self._request({"op": "load"}, "loading")
        except BaseException:
            for sock in socks:
                sock.close()
            raise
        self.load = tcp_load.LoadSource(socks, write_size, self.timeout)
        self.load.start()
        return ready

    def stop_load(self) -> JsonObject:
        """End the load started by start_load: the server stops draining and says what the
        load connections delivered ("unloaded"); this end's sockets are closed, whatever
        happens."""
        load, self.load = self.load, None
        assert load is not None
        load.halt()
        try:
            return self._request({"op": "unload"}, "unloaded")
        finally:
            load.stop(wait=self.timeout)

    def load_errors(self) -> list[str]:
        return list(self.load.errors) if self.load else []

    def _raise_peer_reason(self, size: int) -> None:
        """The data path broke: if the server said why on the control path, raise that."""
        assert self.ctrl is not None
        try:
            self.ctrl.settimeout(1.0)
            message = protocol.recv_message(self.ctrl)
        except (OSError, protocol.ProtocolError):
            return
        _done(message, size)

    def reset(self) -> None:
        for sock in self.more_data:
            self.retransmitted += counters.socket_retransmissions(sock) or 0
            sock.close()
        self.more_data = []
        if self.data:
            self.retransmitted += counters.socket_retransmissions(self.data) or 0
            self.data.close()
            self.data = None
        assert self.ctrl is not None
        protocol.send_message(self.ctrl, {"op": "reset"})
        self.open_data()

    def facts(self) -> tuple[JsonObject, JsonObject]:
        local: JsonObject = data_socket_facts(self.data) if self.data else {}
        # where this end's loop may run
        local["cpus"] = jsonvalue.as_json(sorted(os.sched_getaffinity(0)))
        local["pool"] = jsonvalue.as_object(pools.pool_facts(
            self.params["max_size"], bool(self.params.get("nocache")),
            sysinfo.llc_bytes()))  # as the sweep's make_pool
        remote = dict(self.remote)
        for key in ("socket", "interface", "cpus", "pool"):
            remote[key] = self.remote_socket.get(key)
        return local, remote

    def retransmissions(self) -> int | None:
        """This end's data sockets' retransmitted segments (TCP_INFO), the open one's
        and those that reset() closed; None when the kernel does not say."""
        now = counters.socket_retransmissions(self.data) if self.data else 0
        for sock in self.more_data:
            more = counters.socket_retransmissions(sock)
            now = None if now is None or more is None else now + more
        return None if now is None else self.retransmitted + now

    def peer_retransmissions(self) -> int | None:
        return self.peer_retransmitted

    def close(self, abort: bool = False) -> None:
        if self.load is not None:  # never left sending: closing ends the server's drain too
            self.load.stop(wait=1.0)
            self.load = None
        if self.ctrl and not abort:
            with contextlib.suppress(OSError, protocol.ProtocolError):
                self.ctrl.settimeout(2.0)
                protocol.send_message(self.ctrl, {"op": "bye"})
                # the server's bye: its session is over
                said = count(protocol.recv_message(self.ctrl), "retransmissions", -1)
                # -1: an older server, or a count the kernel did not give
                self.peer_retransmitted = said if 0 <= said < 2 ** 32 else None
        for sock in (*self.more_data, self.data, self.ctrl):
            if sock:
                sock.close()
        self.more_data = []
        self.data = self.ctrl = None


def _done(message: JsonObject, size: int) -> JsonObject:
    """The server's "done" for a trial; its refusal as PeerRefused, which for an empty
    message says that a server older than empty messages refuses them all."""
    try:
        return protocol.expect(message, "done")
    except protocol.PeerRefused as exc:
        if size == 0 and exc.code == "limit":
            raise protocol.PeerRefused(
                f"{exc.reason}: a 'beoperf serve' older than empty messages (size 0) refuses "
                "them; upgrade it, or leave 0 out of --sizes", exc.code) from None
        raise

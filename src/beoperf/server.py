"""`beoperf serve`: the peer of every network test.

One session at a time; every other client is told the server is busy.  The
server bounds what a client may ask (message size, memory), times out silent
or half-open peers, and survives anything a client sends: each connection is
handled in its own thread and every failure ends only that connection.

It also answers the link monitor's probes, which are not sessions: a TCP
connection whose hello has role "echo" gets every length-prefixed message back
(at most ``max_echo`` such connections at once), and UDP datagrams to the same
port that start with ``ECHO_MAGIC`` are sent back with ``ECHO_REPLY`` in its place,
within a byte rate per source address and in all (``udp_echo_rate``), and never to a
privileged or to this same port, so the server cannot be used to reflect floods or be
made to echo another echo server forever.
"""

from __future__ import annotations

import contextlib
import os
import queue
import secrets
import selectors
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from beoperf import __version__, _core, protocol, sysinfo
from beoperf.engines.base import MODES
from beoperf.engines.tcp import (
    SERVER_ROLE,
    DataOptions,
    apply_options,
    data_socket_facts,
    set_io_timeout,
)
from beoperf.protocol import ECHO_LEN, ECHO_MAGIC, ECHO_REPLY

MiB = 1024 * 1024
MAX_REPS = 1 << 27
MAX_ECHO_MESSAGE = 1 * MiB


@dataclass
class ServerConfig:
    bind: str = "::"
    port: int = protocol.DEFAULT_PORT
    max_memory: int = 64 * MiB  # per session: message size and buffer pool
    idle_timeout: float = 30.0  # silent peer on an open session
    handshake_timeout: float = 5.0  # connection that does not say hello
    max_pending: int = 512  # connections still in their handshake (oldest dropped)
    inject_corrupt: int = -1  # test hook: corrupt echoed message with this index
    max_echo: int = 16  # monitor TCP echo connections at once
    udp_echo: bool = True  # answer UDP echo probes on the same port
    udp_echo_rate: float = 1 * MiB  # bytes per second echoed over UDP, at most (1/8 per source)
    log: Callable[[str], None] = field(default=lambda line: print(line, file=sys.stderr,
                                                                  flush=True))


class Refusal(Exception):
    """A request the server declines; code is machine-readable."""

    def __init__(self, code: str, reason: str) -> None:
        self.code = code
        super().__init__(reason)


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def nocache_span(size: int, llc: int | None) -> int:
    """Bytes a no-cache pool spans: comfortably more than the last-level cache."""
    return max(2 * size, int(1.5 * (llc or 32 * MiB)) + size)


def pool_bytes(size: int, nocache: bool) -> int:
    """What a pool for `size`-byte messages allocates: two 64-byte-aligned buffers,
    or the no-cache span."""
    two = (size + 63) // 64 * 64 + size
    return max(two, nocache_span(size, sysinfo.llc_bytes())) if nocache else two


def check_params(params: Any, cfg: ServerConfig) -> dict[str, Any]:
    """Validate a client's session parameters against this server's limits."""
    if not isinstance(params, dict):
        raise Refusal("bad-request", "session parameters must be an object")
    if params.get("mode") not in MODES:
        raise Refusal("bad-request", f"unknown mode {params.get('mode')!r}")
    max_size = params.get("max_size")
    too_big = isinstance(max_size, int) and pool_bytes(max_size, False) > cfg.max_memory
    if not isinstance(max_size, int) or max_size < 1 or too_big:
        raise Refusal("limit", f"largest message {max_size!r} bytes needs more than this "
                               f"server's {cfg.max_memory} byte limit (serve --max-memory)")
    for key in ("sndbuf", "rcvbuf", "busy_poll", "server_cpu"):
        value = params.get(key)
        if value is not None and (not isinstance(value, int) or not 0 <= value <= cfg.max_memory):
            raise Refusal("bad-request", f"bad value for {key}: {value!r}")
    if params.get("server_cpu") is not None and params["server_cpu"] not in os.sched_getaffinity(0):
        raise Refusal("bad-request", f"cpu {params['server_cpu']} is not available on the server")
    if params.get("nocache") and pool_bytes(max_size, True) > cfg.max_memory:
        raise Refusal("limit", f"no-cache buffers for {max_size}-byte messages exceed this "
                               f"server's {cfg.max_memory} byte limit (serve --max-memory)")
    return params


class Handshake:
    """A connection whose first frame is still arriving (non-blocking)."""

    def __init__(self, sock: socket.socket, peer: str, deadline: float) -> None:
        self.sock, self.peer, self.deadline = sock, peer, deadline
        self.buf = bytearray()
        self.need = protocol.HEADER.size

    def feed(self) -> dict[str, Any] | None:
        """Read what is there; the hello once complete, else None."""
        try:
            chunk = self.sock.recv(self.need - len(self.buf))
        except (BlockingIOError, InterruptedError):
            return None
        if not chunk:
            raise protocol.PeerGone("peer closed before its handshake")
        self.buf += chunk
        if len(self.buf) == protocol.HEADER.size:
            _, length = protocol.decode_header(bytes(self.buf))
            self.need += length
        if len(self.buf) < self.need:
            return None
        return protocol.decode(bytes(self.buf))


class Session:
    """One client's session: control loop, data connection, trials."""

    def __init__(self, server: Server, ctrl: socket.socket, peer: str,
                 params: dict[str, Any]) -> None:
        self.server, self.ctrl, self.peer, self.params = server, ctrl, peer, params
        self.cfg = server.cfg
        self.token = secrets.token_hex(16)
        self.data_queue: queue.Queue[socket.socket] = queue.Queue()
        self.data: socket.socket | None = None
        self.pool: _core.Pool | None = None
        self.runs = 0
        self.bytes = 0
        self.sizes: set[int] = set()

    def run(self) -> None:
        protocol.send_message(self.ctrl, {
            "op": "welcome", "token": self.token, "server": self.server.facts(),
            "limits": {"max_memory": self.cfg.max_memory}})
        self._attach_data()
        while True:
            self.ctrl.settimeout(self.cfg.idle_timeout)
            message = protocol.recv_message(self.ctrl)
            if message["op"] == "bye":
                return
            if message["op"] == "reset":
                self._close_data()
                self._attach_data()
            elif message["op"] == "run":
                self._trial(message)
            else:
                raise Refusal("bad-request", f"unexpected op {message['op']!r}")

    def _attach_data(self) -> None:
        try:
            self.data = self.data_queue.get(timeout=self.cfg.handshake_timeout)
        except queue.Empty:
            raise TimeoutError("client did not open its data connection") from None
        warnings = apply_options(self.data, DataOptions.from_params(self.params))
        set_io_timeout(self.data, self.cfg.idle_timeout)
        protocol.send_message(self.ctrl, {"op": "data", "socket": data_socket_facts(self.data),
                                          "warnings": warnings,
                                          "cpus": sorted(os.sched_getaffinity(0))})

    def _pool(self, size: int) -> _core.Pool:
        if self.pool is None or self.pool.size != size:
            self.pool = None  # free the old one before allocating
            nocache = bool(self.params.get("nocache"))
            span = nocache_span(size, sysinfo.llc_bytes()) if nocache else 0
            if pool_bytes(size, nocache) > self.cfg.max_memory:
                raise Refusal("limit", f"{size}-byte buffers exceed the server's memory limit")
            self.pool = _core.Pool(size, span)
        return self.pool

    def _trial(self, message: dict[str, Any]) -> None:
        size, reps, seq0 = message.get("size"), message.get("reps"), message.get("seq0", 0)
        if not all(isinstance(v, int) for v in (size, reps, seq0)):
            raise Refusal("bad-request", "run needs integer size, reps and seq0")
        if not (1 <= size <= self.params["max_size"] and 1 <= reps <= MAX_REPS and seq0 >= 0):
            raise Refusal("limit", f"run of {reps} x {size} bytes is outside the session limits")
        assert self.data is not None
        _, elapsed, corrupt = _core.run(
            SERVER_ROLE[self.params["mode"]], self.data.fileno(), self._pool(size), reps,
            integrity=bool(self.params.get("integrity")), seq0=seq0,
            timeout_ms=int(self.cfg.idle_timeout * 1000), inject_corrupt=self.cfg.inject_corrupt,
            timed=False)
        protocol.send_message(self.ctrl, {"op": "done", "elapsed_ns": elapsed, "corrupt": corrupt})
        self.runs += 1
        self.bytes += size * reps
        self.sizes.add(size)

    def _close_data(self) -> None:
        if self.data:
            self.data.close()
            self.data = None

    def close(self) -> None:
        self._close_data()
        while not self.data_queue.empty():
            self.data_queue.get_nowait().close()
        self.pool = None

    def describe(self) -> str:
        sizes = f"{min(self.sizes)}..{max(self.sizes)}" if self.sizes else "-"
        return (f"mode={self.params['mode']} runs={self.runs} sizes={len(self.sizes)} "
                f"({sizes} B) bytes={self.bytes}")


class Server:
    """Listening socket, accept loop and the single active session."""

    def __init__(self, cfg: ServerConfig) -> None:
        self.cfg = cfg
        self.listener = self._listen(cfg.bind, cfg.port)
        self.port = self.listener.getsockname()[1]
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._session: Session | None = None
        self._pending: set[Handshake] = set()
        self._facts: dict[str, Any] | None = None
        self._echoes = 0
        self.udp = self._udp_socket(cfg.bind, self.port) if cfg.udp_echo else None

    @staticmethod
    def _listen(bind: str, port: int) -> socket.socket:
        sock = bound_socket(bind, port, socket.SOCK_STREAM)
        sock.listen(64)
        sock.settimeout(0.25)
        return sock

    @staticmethod
    def _udp_socket(bind: str, port: int) -> socket.socket | None:
        """The UDP echo socket on the TCP port's number (None if that port is taken)."""
        try:
            sock = bound_socket(bind, port, socket.SOCK_DGRAM)
        except OSError:
            return None
        sock.setblocking(False)
        return sock

    def facts(self) -> dict[str, Any]:
        if self._facts is None:
            self._facts = {"beoperf": __version__, "protocol": protocol.PROTOCOL_VERSION,
                           "host": sysinfo.host_facts(), "clock": sysinfo.clock_facts()}
            self._facts["clock"]["overhead_ns"] = _core.clock_overhead_ns(1000)
        return self._facts

    def serve_forever(self) -> None:
        """Accept and read handshakes in one event loop, so that any number of
        silent or slow peers cost nothing but a file descriptor until their
        deadline; each session then runs in a thread of its own."""
        self.facts()
        self.listener.setblocking(False)
        with selectors.DefaultSelector() as sel:
            sel.register(self.listener, selectors.EVENT_READ, None)
            if self.udp is not None:
                sel.register(self.udp, selectors.EVENT_READ, "udp")
            udp = UdpEcho(self.cfg.udp_echo_rate, self.port)
            while not self._stop.is_set():
                for key, _ in sel.select(timeout=0.25):
                    if key.data is None:
                        self._accept(sel)
                    elif key.data == "udp":
                        udp.answer(key.fileobj)  # type: ignore[arg-type]
                    else:
                        self._read_handshake(sel, key.data)
                self._expire(sel, time.monotonic())
            for key in list(sel.get_map().values()):
                if isinstance(key.data, Handshake):
                    key.data.sock.close()
        self.listener.close()
        if self.udp is not None:
            self.udp.close()

    def shutdown(self) -> None:
        self._stop.set()

    def _accept(self, sel: selectors.BaseSelector) -> None:
        while True:
            try:
                conn, addr = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # e.g. EMFILE: keep serving what is open
                self.cfg.log(f"{utc_now()} accept failed: {exc.strerror}")
                return
            conn.setblocking(False)
            if len(self._pending) >= self.cfg.max_pending:
                oldest = min(self._pending, key=lambda h: h.deadline)
                self._drop(sel, oldest, "dropped: too many connections in handshake")
            pending = Handshake(conn, fmt_addr(addr),
                                time.monotonic() + self.cfg.handshake_timeout)
            self._pending.add(pending)
            sel.register(conn, selectors.EVENT_READ, pending)

    def _drop(self, sel: selectors.BaseSelector, hs: Handshake, why: str) -> None:
        self.cfg.log(f"{utc_now()} {hs.peer} {why}")
        self._forget(sel, hs)
        hs.sock.close()

    def _forget(self, sel: selectors.BaseSelector, hs: Handshake) -> None:
        sel.unregister(hs.sock)
        self._pending.discard(hs)

    def _expire(self, sel: selectors.BaseSelector, now: float) -> None:
        for hs in [h for h in self._pending if h.deadline <= now]:
            self._drop(sel, hs, "dropped: no handshake in time (half-open or silent peer)")

    def _read_handshake(self, sel: selectors.BaseSelector, hs: Handshake) -> None:
        try:
            message = hs.feed()
        except (protocol.ProtocolError, OSError) as exc:
            self._forget(sel, hs)
            self._reject(hs.sock, hs.peer, exc)
            hs.sock.close()
            return
        if message is None:
            return
        self._forget(sel, hs)
        hs.sock.setblocking(True)
        threading.Thread(target=self._handle, args=(hs.sock, hs.peer, message),
                         daemon=True).start()

    def _handle(self, conn: socket.socket, peer: str, hello: dict[str, Any]) -> None:
        try:
            if hello["op"] != "hello":
                raise Refusal("bad-request", f"expected hello, got {hello['op']!r}")
            if hello.get("role") == "data":
                self._route_data(conn, hello, peer)
                return
            if hello.get("role") == "echo":
                self._echo(conn, peer)
                return
            self._control(conn, hello, peer)
        except Exception as exc:  # noqa: BLE001 - the server must survive any client
            self._reject(conn, peer, exc)
        conn.close()

    def _reject(self, conn: socket.socket | None, peer: str, exc: Exception) -> None:
        code = exc.code if isinstance(exc, Refusal) else "protocol"
        if isinstance(exc, protocol.VersionMismatch):
            code = "version"
            exc = Refusal(code, f"protocol version {exc.version} is not supported: this server "
                                f"is beoperf {__version__} speaking protocol version "
                                f"{protocol.PROTOCOL_VERSION}; use matching beoperf versions")
        self.cfg.log(f"{utc_now()} {peer} rejected ({code}): {describe_error(exc)}")
        if conn is not None and not isinstance(exc, OSError):
            with contextlib.suppress(OSError):
                conn.settimeout(1.0)
                protocol.send_message(conn, {"op": "refuse", "code": code, "reason": str(exc)})

    def _echo(self, conn: socket.socket, peer: str) -> None:
        """A monitor's TCP echo connection: each length-prefixed message back, until the
        peer closes or is silent for the idle timeout."""
        with self._lock:
            if self._echoes >= self.cfg.max_echo:
                raise Refusal("busy", f"{self._echoes} echo connections already open")
            self._echoes += 1
        count = 0
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            protocol.send_message(conn, {"op": "echo", "max_message": MAX_ECHO_MESSAGE})
            conn.settimeout(self.cfg.idle_timeout)
            while True:  # until the client closes (PeerGone) or goes quiet
                head = protocol.recv_exact(conn, ECHO_LEN.size)
                (length,) = ECHO_LEN.unpack(head)
                if length > MAX_ECHO_MESSAGE:
                    raise Refusal("limit", f"echo message of {length} bytes exceeds "
                                           f"{MAX_ECHO_MESSAGE}")
                conn.sendall(head + protocol.recv_exact(conn, length))
                count += 1
        except (TimeoutError, ConnectionError):
            pass
        finally:
            with self._lock:
                self._echoes -= 1
            self.cfg.log(f"{utc_now()} {peer} echo connection: {count} message(s)")
        conn.close()

    def _route_data(self, conn: socket.socket, hello: dict[str, Any], peer: str) -> None:
        with self._lock:
            session = self._session
        if session is None or not secrets.compare_digest(str(hello.get("token", "")),
                                                         session.token):
            raise Refusal("bad-request", "data connection for no active session")
        session.data_queue.put(conn)

    def _control(self, conn: socket.socket, hello: dict[str, Any], peer: str) -> None:
        params = check_params(hello.get("params"), self.cfg)
        with self._lock:
            if self._session is not None:
                raise Refusal("busy", f"server is busy with a session from "
                                      f"{self._session.peer}; try again later")
            session = self._session = Session(self, conn, peer, params)
        started, outcome = time.monotonic(), "ok"
        old_mask = os.sched_getaffinity(0)
        try:
            if params.get("server_cpu") is not None:
                os.sched_setaffinity(0, {params["server_cpu"]})
            session.run()
        except Exception as exc:  # noqa: BLE001 - log it, end this session, keep serving
            outcome = f"error: {describe_error(exc)}"
            if isinstance(exc, Refusal):
                with contextlib.suppress(OSError):
                    protocol.send_message(conn, {"op": "error", "code": exc.code,
                                                 "reason": str(exc)})
        finally:
            os.sched_setaffinity(0, old_mask)
            session.close()
            with self._lock:
                self._session = None
        if outcome == "ok":  # said only now, so a client that reconnects is not "busy"
            with contextlib.suppress(OSError):
                protocol.send_message(conn, {"op": "bye"})
        self.cfg.log(f"{utc_now()} {peer} session {session.describe()} "
                     f"{time.monotonic() - started:.1f}s {outcome}")


def bound_socket(bind: str, port: int, kind: int) -> socket.socket:
    """A socket bound to (bind, port); an IPv6 one also takes IPv4 (OSError if taken)."""
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    sock = socket.socket(family, kind)
    if kind == socket.SOCK_STREAM:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    try:
        sock.bind((bind, port))
    except OSError:
        sock.close()
        raise
    return sock


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
    """Answers UDP echo probes (datagrams starting with ECHO_MAGIC) within a byte rate
    in all and per source address (an eighth of it), never to ports below 1024 or to
    the echo port itself (another server's)."""

    SOURCES = 1024  # buckets kept (least recently seen dropped)

    def __init__(self, rate: float, port: int) -> None:
        self.all = Bucket(rate)
        self.per_source = rate / 8
        self.port = port
        self.sources: dict[str, Bucket] = {}

    def answer(self, sock: socket.socket) -> None:
        for _ in range(64):  # a burst, then back to the event loop
            try:
                data, addr = sock.recvfrom(65535)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # e.g. an ICMP error queued by an earlier reply
                continue
            if not data.startswith(ECHO_MAGIC) or addr[1] < 1024 or addr[1] == self.port:
                continue
            if not self._spend(addr[0], len(data)):
                continue
            with contextlib.suppress(OSError):
                sock.sendto(ECHO_REPLY + data[len(ECHO_MAGIC):], addr)

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


def fmt_addr(addr: Any) -> str:
    host, port = addr[0], addr[1]
    if host.startswith("::ffff:"):
        host = host[7:]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def describe_error(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return f"peer went silent ({exc or 'timed out'})"
    if isinstance(exc, protocol.PeerGone | _core.PeerClosedError | ConnectionResetError):
        return f"peer disconnected ({exc})"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__

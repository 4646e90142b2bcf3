"""The server end of the TCP transport (`beoperf serve`): the peer of every network test.

One session at a time; every other client is told the server is busy.  Turns go
by address (:class:`Turns`): when a session ends and a client at another address was
told the server was busy meanwhile (or in the WAITING_S before), the next session is
kept for the waiting addresses for TURN_HOLD_S, so that one client reconnecting at once
after every session (or sending a valid hello every few seconds) cannot keep another
out; a client alone is never refused, however many sessions it runs back to back
(but during one hold kept for an address that then let its turn lapse).  A
session is never cut short for a turn: a sweep is bounded by its own budget.  The
server bounds what a client may ask (message size, memory), times out silent,
half-open and trickling peers (a message must arrive whole within the idle
timeout), and survives anything a client sends: each connection is handled in
its own thread and every failure ends only that connection.  Floods cost it
little: handshakes are capped below its descriptor limit, accept backs off when
descriptors run out (AcceptGate), a session may queue only MAX_DATA_QUEUE data
connections, and repeated log lines are throttled (LogThrottle); sessions still
get one log line each.  A ping-pong under load (``--under-load``) adds the load
connections its hello asked for (at most MAX_STREAMS, their drain buffers counted in the
memory limit), drained only between its "load" and "unload" frames, for max_load_s at
most, and never past the session's end (``engines/tcp_load.py``).

It also answers the link monitor's probes, which are not sessions (``engines/echo.py``,
the one home of the echo format, which the probes use too): a TCP connection whose hello
has role "echo" gets every length-prefixed message back (at most ``max_echo`` such
connections at once), and UDP echo probes to the same port are answered within a byte
rate per source address and in all (``udp_echo_rate``), never to a privileged or to this
same port, so the server cannot be used to reflect floods or be made to echo another echo
server forever.
"""

from __future__ import annotations

import contextlib
import errno
import os
import queue
import resource
import secrets
import select
import selectors
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from beoperf import __version__, _core, pools, sysinfo
from beoperf.engines import echo, protocol, tcp_load
from beoperf.engines.base import MODES, SessionParams
from beoperf.engines.protocol import Refusal
from beoperf.engines.tcp_data import (
    MAX_STREAMS,
    REVERSE_ROLE,
    SERVER_ROLE,
    DataOptions,
    apply_options,
    congestion_problem,
    data_socket_facts,
    run_parallel,
    set_io_timeout,
    wire_size,
)
from beoperf.engines.udp import MAX_RATE_BPS as UDP_MAX_RATE_BPS
from beoperf.engines.udp import serve_trial as serve_udp_trial
from beoperf.model.document import JsonObject, JsonValue
from beoperf.sysinfo import counters

MiB = 1024 * 1024
MAX_REPS = 1 << 27
MAX_DATA_QUEUE = 2  # data connections a session may have waiting (a client opens one at a time)
RESERVED_FDS = 32  # descriptors kept for the session, stdio, sysfs reads: never for handshakes
OUT_OF_FDS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
WAITING_S = 30.0  # an address told "busy" this recently is waiting for a turn
TURN_HOLD_S = 5.0  # how long the next session is kept for the waiting addresses
MAX_WAITING = 1024  # addresses remembered as waiting, at most (the oldest are forgotten)


@dataclass
class ServerConfig:
    bind: str = "::"
    port: int = protocol.DEFAULT_PORT
    max_memory: int = 64 * MiB  # per session: message size and buffer pool
    idle_timeout: float = 30.0  # a whole message of an open session (or echo) within this
    handshake_timeout: float = 5.0  # connection that does not say hello
    max_pending: int = 512  # connections still in their handshake (oldest dropped)
    inject_corrupt: int = -1  # test hook: corrupt echoed message with this index
    max_echo: int = 16  # monitor TCP echo connections at once
    udp_echo: bool = True  # answer UDP echo probes on the same port
    udp_echo_rate: float = 1 * MiB  # bytes per second echoed over UDP, at most (1/8 per source)
    log_interval: float = 10.0  # repeated log lines of one kind: at most one per interval
    max_load_s: float = 600.0  # a ping-pong's bulk load (--under-load): drained this long at most
    log: Callable[[str], None] = field(default=lambda line: print(line, file=sys.stderr,
                                                                  flush=True))


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def check_params(params: JsonValue | None, cfg: ServerConfig) -> SessionParams:
    """Validate a client's session parameters against this server's limits; the ones the
    server uses, each of the type it needs."""
    if not isinstance(params, dict):
        raise Refusal("bad-request", "session parameters must be an object")
    mode = params.get("mode")
    if not isinstance(mode, str) or mode not in MODES:
        raise Refusal("bad-request", f"unknown mode {mode!r}")
    max_size = params.get("max_size")
    if not isinstance(max_size, int) or max_size < 1:
        raise Refusal("bad-request", f"bad largest message size {max_size!r}")
    streams, reverse = check_streams(params, mode)
    need = pools.two_buffers(max_size) * streams + \
        tcp_load.READ_CHUNK * check_load(params, mode)  # the load's drain buffers
    if need > cfg.max_memory:
        raise Refusal("limit", f"largest message {max_size} bytes needs {need} bytes of buffers, "
                               f"more than this server's {pools.mib(cfg.max_memory)} limit; "
                               f"start it with 'beoperf serve --max-memory "
                               f"{pools.mib_option(need)}'")
    sndbuf, rcvbuf, busy_poll, server_cpu = (_bounded(params, key, cfg) for key in
                                             ("sndbuf", "rcvbuf", "busy_poll", "server_cpu"))
    congestion = params.get("congestion")
    if congestion is not None:
        problem = congestion_problem(congestion)
        if problem:
            raise Refusal("bad-request", problem)
    if server_cpu is not None and server_cpu not in os.sched_getaffinity(0):
        raise Refusal("bad-request", f"cpu {server_cpu} is not available on the server")
    return {"mode": mode, "max_size": max_size, "integrity": bool(params.get("integrity")),
            "nocache": bool(params.get("nocache")), "nodelay": bool(params.get("nodelay", True)),
            "sndbuf": sndbuf, "rcvbuf": rcvbuf, "busy_poll": busy_poll,
            "congestion": congestion if isinstance(congestion, str) else None,
            "server_cpu": server_cpu, "streams": streams, "reverse": reverse,
            "load_streams": check_load(params, mode)}


def check_load(params: JsonObject, mode: str) -> int:
    """The load connections a ping-pong under load asks for (0: none; at most
    MAX_STREAMS), ping-pong mode only; else a refusal."""
    load = params.get("load_streams", 0)
    if not isinstance(load, int) or isinstance(load, bool) or load < 0:
        raise Refusal("bad-request", f"bad number of load streams {load!r}")
    if load > MAX_STREAMS:
        raise Refusal("limit", f"--load-streams {load} is above this server's cap of "
                               f"{MAX_STREAMS} streams per session")
    if load and mode != "pingpong":
        raise Refusal("bad-request", "--under-load is for ping-pong mode only")
    return load


def check_streams(params: JsonObject, mode: str) -> tuple[int, bool]:
    """The parallel streams (1 to MAX_STREAMS) and the direction a session asks for:
    both in stream mode only; else a refusal."""
    streams, reverse = params.get("streams", 1), params.get("reverse", False)
    if not isinstance(streams, int) or isinstance(streams, bool) or streams < 1:
        raise Refusal("bad-request", f"bad number of streams {streams!r}")
    if streams > MAX_STREAMS:
        raise Refusal("limit", f"--streams {streams} is above this server's cap of "
                               f"{MAX_STREAMS} streams per session")
    if not isinstance(reverse, bool):
        raise Refusal("bad-request", f"bad reverse flag {reverse!r}")
    if (streams > 1 or reverse) and mode != "stream":
        raise Refusal("bad-request", "--streams and --reverse are for stream mode only")
    return streams, reverse


def _bounded(params: JsonObject, key: str, cfg: ServerConfig) -> int | None:
    """An optional count of the parameters (bytes, microseconds, a CPU): None, or an
    integer from 0 to the server's memory limit; else a refusal."""
    value = params.get(key)
    if value is not None and (not isinstance(value, int) or not 0 <= value <= cfg.max_memory):
        raise Refusal("bad-request", f"bad value for {key}: {value!r}")
    return value


class Handshake:
    """A connection whose first frame is still arriving (non-blocking)."""

    def __init__(self, sock: socket.socket, peer: str, deadline: float) -> None:
        self.sock, self.peer, self.deadline = sock, peer, deadline
        self.buf = bytearray()
        self.need = protocol.HEADER.size

    def feed(self) -> JsonObject | None:
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
    """One client's session: control loop, data connection, trials.

    Every wait is bounded as a whole: a control message must arrive complete within the
    idle timeout (recv_message's deadline), not merely some byte of it; the data
    connection must come within the handshake timeout, and if the client closes its
    control connection meanwhile the session ends at once, so the next client is not
    told the server is busy.
    """

    def __init__(self, server: Server, ctrl: socket.socket, peer: str,
                 params: SessionParams) -> None:
        self.server, self.ctrl, self.peer, self.params = server, ctrl, peer, params
        self.cfg = server.cfg
        self.token = secrets.token_hex(16)
        self.streams = int(params.get("streams") or 1)
        self.load_streams = int(params.get("load_streams") or 0)
        self.data_queue: queue.Queue[socket.socket] = queue.Queue(
            MAX_DATA_QUEUE + self.streams - 1 + self.load_streams)
        self.load: tcp_load.LoadSink | None = None  # --under-load: the bulk load drained
        self.loads = 0  # load periods run
        self.extra_data = 0  # data connections refused because the queue was full
        self._wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)  # "one is queued"
        self._qlock = threading.Lock()  # offer() against close(): never write a closed fd
        self._closed = False
        self.data: socket.socket | None = None
        self.more_data: list[socket.socket] = []  # the parallel streams after the first
        self.more_pools: list[_core.Pool] = []
        self.retransmitted: int | None = 0  # by the data sockets closed (None: not known)
        self.pool: _core.Pool | None = None
        self.pool_facts = pools.pool_facts(params["max_size"], bool(params.get("nocache")),
                                           sysinfo.llc_bytes(), self.cfg.max_memory)
        self.runs = 0
        self.bytes = 0
        self.sizes: set[int] = set()

    def run(self) -> None:
        protocol.send_message(self.ctrl, {
            "op": "welcome", "token": self.token, "server": self.server.facts(),
            "limits": {"max_memory": self.cfg.max_memory, "max_streams": MAX_STREAMS,
                       "max_udp_rate_bps": UDP_MAX_RATE_BPS}})
        self._attach_data()
        while True:
            message = protocol.recv_message(self.ctrl, time.monotonic() + self.cfg.idle_timeout)
            self.ctrl.settimeout(self.cfg.idle_timeout)  # for the replies
            if message["op"] == "bye":
                return
            if message["op"] == "reset":
                self._close_data()
                self._attach_data()
            elif message["op"] == "run":
                self._trial(message)
            elif message["op"] in ("load", "unload"):
                self._load(message["op"])
            elif message["op"] == "udp":
                self._udp_trial(message)
            else:
                raise Refusal("bad-request", f"unexpected op {message['op']!r}")

    def offer(self, conn: socket.socket) -> bool:
        """Queue a data connection for this session (from another thread); False when
        the session is over or already has MAX_DATA_QUEUE waiting: the caller closes it."""
        with self._qlock:
            if self._closed:
                return False
            try:
                self.data_queue.put_nowait(conn)
            except queue.Full:
                self.extra_data += 1
                return False
            os.eventfd_write(self._wake, 1)
            return True

    def _attach_data(self) -> None:
        deadline = time.monotonic() + self.cfg.handshake_timeout
        self.data = self._wait_data(deadline)
        warnings = apply_options(self.data, DataOptions.from_params(self.params))
        for _ in range(self.streams - 1):  # the parallel streams: all within the deadline
            self.more_data.append(self._wait_data(deadline))
            apply_options(self.more_data[-1], DataOptions.from_params(self.params))
            set_io_timeout(self.more_data[-1], self.cfg.idle_timeout)
        span = pools.span_warning(self.pool_facts, self.params["max_size"], "server")
        set_io_timeout(self.data, self.cfg.idle_timeout)
        protocol.send_message(self.ctrl, {"op": "data", "socket": data_socket_facts(self.data),
                                          "warnings": warnings + ([span] if span else []),
                                          "cpus": sorted(os.sched_getaffinity(0)),
                                          "pool": self.pool_facts})

    def _wait_data(self, deadline: float) -> socket.socket:
        """The data connection the client opens next, watching the control connection
        meanwhile: a client that closes it (or says anything) ends the session now."""
        poller = select.poll()
        poller.register(self.ctrl, select.POLLIN)
        poller.register(self._wake, select.POLLIN)
        while True:
            with contextlib.suppress(queue.Empty):
                return self.data_queue.get_nowait()
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("client did not open its data connection")
            ready = {fd for fd, _ in poller.poll(left * 1000)}
            if self.ctrl.fileno() in ready:
                self.ctrl.settimeout(self.cfg.idle_timeout)
                op = protocol.recv_message(self.ctrl, deadline)["op"]  # PeerGone if closed
                if op == "bye":
                    raise protocol.PeerGone("client said bye before opening its data connection")
                raise Refusal("bad-request", f"{op!r} before the data connection")
            if self._wake in ready:
                with contextlib.suppress(BlockingIOError):
                    os.eventfd_read(self._wake)

    def _load(self, op: str) -> None:
        """--under-load: "load" takes the session's load connections (each opened with a
        data hello just before) and drains them (tcp_load.LoadSink, at most max_load_s);
        "unload" stops that and reports what they delivered.  One load at a time."""
        if op == "load":
            if not self.load_streams or self.load is not None:
                raise Refusal("bad-request", "no load connections asked for, or a load "
                                             "already runs")
            deadline = time.monotonic() + self.cfg.handshake_timeout
            socks: list[socket.socket] = []
            try:
                for _ in range(self.load_streams):
                    socks.append(self._wait_data(deadline))
            except BaseException:
                for sock in socks:
                    sock.close()
                raise
            self.load = tcp_load.LoadSink(socks, self.cfg.max_load_s, self.cfg.idle_timeout)
            self.load.start()
            self.loads += 1
            protocol.send_message(self.ctrl, {"op": "loading", "streams": len(socks),
                                              "max_seconds": self.cfg.max_load_s})
            return
        if self.load is None:
            raise Refusal("bad-request", "unload without a load")
        sink, self.load = self.load, None
        sink.stop()
        self.bytes += sum(s.bytes for s in sink.streams)
        protocol.send_message(self.ctrl, {"op": "unloaded",
                                          "bytes": [s.bytes for s in sink.streams],
                                          "window_ns": sink.window_ns(), "capped": sink.capped})

    def _pool(self) -> _core.Pool:
        """One pool for the session, for its largest message: every trial runs its own
        size from it, so no trial waits for an allocation (a client shuffling sizes
        would otherwise make the server allocate before every trial)."""
        if self.pool is None:
            size = self.params["max_size"]
            span = self.pool_facts.get("span_bytes", 0)
            if max(span, pools.two_buffers(size)) > self.cfg.max_memory:
                raise Refusal("limit", f"{size}-byte buffers exceed the server's memory limit")
            self.pool = _core.Pool(size, span)
        return self.pool

    def _trial(self, message: JsonObject) -> None:
        size, reps, seq0 = message.get("size"), message.get("reps"), message.get("seq0", 0)
        if not (isinstance(size, int) and isinstance(reps, int) and isinstance(seq0, int)):
            raise Refusal("bad-request", "run needs integer size, reps and seq0")
        if not (0 <= size <= self.params["max_size"] and 1 <= reps <= MAX_REPS and seq0 >= 0):
            raise Refusal("limit", f"run of {reps} x {size} bytes is outside the session limits")
        assert self.data is not None
        if self.streams > 1 or self.params.get("reverse"):
            self._parallel_trial(size, reps, seq0)
            return
        _, elapsed, corrupt = _core.run(
            SERVER_ROLE[self.params["mode"]], self.data.fileno(), self._pool(), reps,
            integrity=bool(self.params.get("integrity")), seq0=seq0,
            timeout_ms=int(self.cfg.idle_timeout * 1000), inject_corrupt=self.cfg.inject_corrupt,
            timed=False, size=wire_size(size))
        protocol.send_message(self.ctrl, {"op": "done", "elapsed_ns": elapsed, "corrupt": corrupt})
        self.runs += 1
        self.bytes += size * reps
        self.sizes.add(size)

    def _udp_trial(self, message: JsonObject) -> None:
        """A UDP trial at a rate (engines/udp.py): received from the control connection's
        peer only, within the server's caps on rate and duration."""
        done = serve_udp_trial(self.ctrl, message, self.params["max_size"],
                               self.cfg.idle_timeout)
        self.runs += 1
        self.bytes += done["bytes"]
        size = message.get("size")
        if isinstance(size, int):  # it is: serve_udp_trial checked it
            self.sizes.add(size)

    def _parallel_trial(self, size: int, reps: int, seq0: int) -> None:
        """A trial on every stream at once (run_parallel): as the receiver (forward) the
        server times the window and each stream; as the sender (reverse) the client does."""
        assert self.data is not None
        while len(self.more_pools) < self.streams - 1:  # each stream its own buffers
            self.more_pools.append(_core.Pool(self.params["max_size"]))
        role = REVERSE_ROLE["server"] if self.params.get("reverse") else SERVER_ROLE["stream"]
        got = run_parallel(role, [self.data, *self.more_data], [self._pool(), *self.more_pools],
                           reps, size=wire_size(size), seq0=seq0,
                           integrity=bool(self.params.get("integrity")),
                           timeout_ms=int(self.cfg.idle_timeout * 1000),
                           inject_corrupt=self.cfg.inject_corrupt)
        protocol.send_message(self.ctrl, {"op": "done", "elapsed_ns": got.window_ns,
                                          "corrupt": got.corrupt, "streams_ns": got.elapsed_ns})
        self.runs += 1
        self.bytes += size * reps * self.streams
        self.sizes.add(size)

    def _close_data(self) -> None:
        for sock in self.more_data:
            count = counters.socket_retransmissions(sock)
            self.retransmitted = None if count is None or self.retransmitted is None else \
                self.retransmitted + count
            sock.close()
        self.more_data = []
        if self.data:
            count = counters.socket_retransmissions(self.data)
            self.retransmitted = None if count is None or self.retransmitted is None else \
                self.retransmitted + count
            self.data.close()
            self.data = None

    def goodbye(self) -> protocol.Goodbye:
        """The last frame, with the data sockets' retransmissions when known."""
        frame: protocol.Goodbye = {"op": "bye"}
        if self.retransmitted is not None:
            frame["retransmissions"] = self.retransmitted
        return frame

    def close(self) -> None:
        if self.load is not None:  # the session ended under load: the load ends with it
            self.load.stop(wait=1.0)
            self.load = None
        self._close_data()
        with self._qlock:
            self._closed = True
            os.close(self._wake)
        while not self.data_queue.empty():
            self.data_queue.get_nowait().close()
        self.pool = None

    def describe(self) -> str:
        sizes = f"{min(self.sizes)}..{max(self.sizes)}" if self.sizes else "-"
        extra = f" extra_data_refused={self.extra_data}" if self.extra_data else ""
        streams = f" streams={self.streams}" if self.streams > 1 else ""
        reverse = " reverse" if self.params.get("reverse") else ""
        if self.load_streams:
            reverse += f" load_streams={self.load_streams} loads={self.loads}"
        return (f"mode={self.params['mode']}{streams}{reverse} runs={self.runs} "
                f"sizes={len(self.sizes)} ({sizes} B) bytes={self.bytes}{extra}")


class Turns:
    """Sessions in turns by client address (host, not port): an address that was told
    the server is busy waits for a turn; when a session ends, the addresses waiting
    other than its own have the next one for TURN_HOLD_S (any of them may take it, then
    the others wait on); meanwhile other addresses are told the server is busy, and
    an address that lets its turn lapse waits no more.  With nobody else waiting,
    nothing is ever refused.  Not thread-safe: the server calls it
    under its lock."""

    def __init__(self, hold: float = TURN_HOLD_S, remember: float = WAITING_S,
                 most: int = MAX_WAITING) -> None:
        self.hold, self.remember, self.most = hold, remember, most
        self.waiting: dict[str, float] = {}  # address -> when it was last told busy
        self.kept_for: set[str] = set()  # the addresses the next session is kept for
        self.kept_until = 0.0

    def refused(self, host: str, now: float) -> None:
        """``host`` was told the server is busy: it waits for a turn."""
        self.waiting.pop(host, None)
        self.waiting[host] = now  # newest last
        while len(self.waiting) > self.most:
            del self.waiting[next(iter(self.waiting))]

    def holder(self, host: str, now: float) -> int:
        """0 if ``host`` may start a session now; else how many other addresses the next
        session is kept for.  Addresses that let their turn lapse wait no more (a client
        that gave up costs the others one TURN_HOLD_S)."""
        if self.kept_for and now >= self.kept_until:
            for gone in self.kept_for:
                self.waiting.pop(gone, None)
            self.kept_for = set()
        if not self.kept_for or host in self.kept_for:
            return 0
        return len(self.kept_for)

    def started(self, host: str) -> None:
        self.waiting.pop(host, None)
        self.kept_for, self.kept_until = set(), 0.0

    def ended(self, host: str, now: float) -> None:
        """``host``'s session is over: the next one is kept for the addresses waiting."""
        self.waiting = {h: t for h, t in self.waiting.items() if now - t <= self.remember}
        self.kept_for = set(self.waiting) - {host}
        self.kept_until = now + self.hold if self.kept_for else 0.0


class LogThrottle:
    """Log lines of one kind (a flood of bad peers, a failing accept), at most one per
    interval: the first is written at once, the next ones only counted, and the count
    is written with the next line let through or, once the interval is over, by flush();
    so a flood costs the log a few lines a minute, not one per connection."""

    def __init__(self, log: Callable[[str], None], interval: float) -> None:
        self.log, self.interval = log, interval
        self._lock = threading.Lock()
        self._kinds: dict[str, list[float]] = {}  # kind -> [when last written, suppressed]

    def __call__(self, kind: str, line: str) -> None:
        now = time.monotonic()
        with self._lock:
            state = self._kinds.setdefault(kind, [-self.interval, 0])
            if now - state[0] < self.interval:
                state[1] += 1
                return
            suppressed, state[:] = int(state[1]), [now, 0]
        more = f" (and {suppressed} more like it not logged)" if suppressed else ""
        self.log(f"{line}{more}")

    def flush(self) -> None:
        """Write the count of each kind whose interval is over."""
        now = time.monotonic()
        with self._lock:
            due = [(kind, int(st[1]), now - st[0]) for kind, st in self._kinds.items()
                   if st[1] and now - st[0] >= self.interval]
            for kind, _, _ in due:
                self._kinds[kind] = [now, 0]
        for kind, count, span in due:
            self.log(f"{utc_now()} {count} more '{kind}' event(s) in the last {span:.0f} s "
                     f"(logged once per {self.interval:g} s)")


def handshake_cap(configured: int, max_echo: int) -> int:
    """How many connections may be in their handshake at once: as configured, but never
    so many that they and the echo connections leave fewer than RESERVED_FDS descriptors
    (RLIMIT_NOFILE): a flood of half-open connections then costs its own oldest members
    their place (dropped), not the descriptors a real client's session needs."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return configured
    return max(1, min(configured, soft - RESERVED_FDS - max_echo))


class AcceptGate:
    """When accept() fails for want of descriptors (EMFILE, ENFILE), the connections
    still queued keep the listening socket readable: polling it again would spin (this
    is how the server once burnt a CPU and wrote a million log lines in 10 s).  So the
    listener leaves the selector until a descriptor is freed (a handshake that ends) or
    a backoff passes (sessions and echo connections end in other threads), doubling
    from BACKOFF up to MAX_BACKOFF while accept keeps failing.

    Not used: keeping a spare descriptor to accept and at once close the queued
    connections (libev's trick).  It sheds clients that could be served a moment later,
    and with handshakes capped (handshake_cap) descriptors run out only briefly.
    """

    BACKOFF, MAX_BACKOFF = 0.05, 1.0

    def __init__(self, sel: selectors.BaseSelector, listener: socket.socket) -> None:
        self.sel, self.listener = sel, listener
        self.backoff = self.BACKOFF
        self.resume_at: float | None = None  # paused until then (None: listening)
        self.freed = False  # a descriptor was closed since the pause
        sel.register(listener, selectors.EVENT_READ, None)

    def pause(self, now: float) -> None:
        if self.resume_at is None:
            self.sel.unregister(self.listener)
        self.resume_at, self.freed = now + self.backoff, False
        self.backoff = min(2 * self.backoff, self.MAX_BACKOFF)

    def accepted(self) -> None:
        self.backoff = self.BACKOFF

    def wait(self, now: float, longest: float) -> float:
        """Resume listening if it is time; how long the event loop may sleep."""
        if self.resume_at is None:
            return longest
        if self.freed or now >= self.resume_at:
            self.sel.register(self.listener, selectors.EVENT_READ, None)
            self.resume_at = None
            return longest
        return max(0.0, min(longest, self.resume_at - now))


class Server:
    """Listening socket, accept loop and the single active session."""

    def __init__(self, cfg: ServerConfig) -> None:
        self.cfg = cfg
        self.listener = self._listen(cfg.bind, cfg.port)
        self.port = self.listener.getsockname()[1]
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._session: Session | None = None
        self.turns = Turns()
        self._pending: set[Handshake] = set()
        self._max_pending = handshake_cap(cfg.max_pending, cfg.max_echo)
        self._gate: AcceptGate | None = None
        self._facts: JsonObject | None = None
        self._echoes = 0
        self.throttled = LogThrottle(cfg.log, cfg.log_interval)
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

    def facts(self) -> JsonObject:
        if self._facts is None:
            clock = dict(sysinfo.clock_facts(), overhead_ns=_core.clock_overhead_ns(1000))
            self._facts = {"beoperf": __version__, "protocol": protocol.PROTOCOL_VERSION,
                           "host": sysinfo.host_facts(), "clock": clock}
        return self._facts

    def serve_forever(self) -> None:
        """Accept and read handshakes in one event loop, so that any number of
        silent or slow peers cost nothing but a file descriptor until their
        deadline; each session then runs in a thread of its own."""
        self.facts()
        self.listener.setblocking(False)
        with selectors.DefaultSelector() as sel:
            self._gate = gate = AcceptGate(sel, self.listener)
            if self.udp is not None:
                sel.register(self.udp, selectors.EVENT_READ, "udp")
            udp = echo.UdpEcho(self.cfg.udp_echo_rate, self.port)
            while not self._stop.is_set():
                for key, _ in sel.select(timeout=gate.wait(time.monotonic(), 0.25)):
                    self._dispatch(sel, key, udp)
                self._expire(sel, time.monotonic())
                self.throttled.flush()
            for key in list(sel.get_map().values()):
                if isinstance(key.data, Handshake):
                    key.data.sock.close()
        self.listener.close()
        if self.udp is not None:
            self.udp.close()

    def shutdown(self) -> None:
        self._stop.set()

    def _dispatch(self, sel: selectors.BaseSelector, key: selectors.SelectorKey,
                  udp: echo.UdpEcho) -> None:
        """One ready socket.  Whatever goes wrong is logged and ends at most that
        connection: the event loop itself must never die."""
        try:
            if key.data is None:
                self._accept(sel)
            elif key.data == "udp":
                udp.answer(key.fileobj)  # type: ignore[arg-type]
            elif key.data in self._pending:  # not dropped earlier in this same batch
                self._read_handshake(sel, key.data)
        except Exception as exc:  # noqa: BLE001 - log it, keep serving
            self.throttled("internal", f"{utc_now()} internal error (still serving): "
                                       f"{type(exc).__name__}: {exc}")
            if isinstance(key.data, Handshake) and key.data in self._pending:
                with contextlib.suppress(Exception):
                    self._forget(sel, key.data)
                key.data.sock.close()
                self._freed()

    def _accept(self, sel: selectors.BaseSelector) -> None:
        for _ in range(64):  # a burst, then back to the event loop (handshakes, UDP)
            try:
                conn, addr = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self._accept_failed(exc)
                if exc.errno in OUT_OF_FDS:
                    assert self._gate is not None
                    self._gate.pause(time.monotonic())
                    return
                continue  # this connection's own failure (e.g. reset before accepted)
            assert self._gate is not None
            self._gate.accepted()
            conn.setblocking(False)
            if len(self._pending) >= self._max_pending:
                oldest = min(self._pending, key=lambda h: h.deadline)
                self._drop(sel, oldest, "overflow",
                           f"dropped: over {self._max_pending} connections in handshake")
            pending = Handshake(conn, fmt_addr(addr),
                                time.monotonic() + self.cfg.handshake_timeout)
            self._pending.add(pending)
            sel.register(conn, selectors.EVENT_READ, pending)

    def _accept_failed(self, exc: OSError) -> None:
        what = exc.strerror or type(exc).__name__
        pausing = " (not accepting for a moment)" if exc.errno in OUT_OF_FDS else ""
        self.throttled(f"accept-{exc.errno}", f"{utc_now()} accept failed: {what}{pausing}")

    def _drop(self, sel: selectors.BaseSelector, hs: Handshake, kind: str, why: str) -> None:
        self.throttled(kind, f"{utc_now()} {hs.peer} {why}")
        self._forget(sel, hs)
        hs.sock.close()
        self._freed()

    def _forget(self, sel: selectors.BaseSelector, hs: Handshake) -> None:
        self._pending.discard(hs)
        sel.unregister(hs.sock)

    def _freed(self) -> None:
        """A descriptor was closed: a paused accept may resume (from any thread)."""
        if self._gate is not None:
            self._gate.freed = True

    def _expire(self, sel: selectors.BaseSelector, now: float) -> None:
        for hs in [h for h in self._pending if h.deadline <= now]:
            self._drop(sel, hs, "expired",
                       "dropped: no handshake in time (half-open or silent peer)")

    def _read_handshake(self, sel: selectors.BaseSelector, hs: Handshake) -> None:
        try:
            message = hs.feed()
        except (protocol.ProtocolError, OSError) as exc:
            self._forget(sel, hs)
            self._reject(hs.sock, hs.peer, exc)
            hs.sock.close()
            self._freed()
            return
        if message is None:
            return
        self._forget(sel, hs)
        hs.sock.setblocking(True)
        try:
            threading.Thread(target=self._handle, args=(hs.sock, hs.peer, message),
                             daemon=True).start()
        except RuntimeError:  # no thread to be had (a limit on tasks): refuse, keep serving
            self._reject(hs.sock, hs.peer, Refusal("busy", "server cannot start a thread now"))
            hs.sock.close()
            self._freed()

    def _handle(self, conn: socket.socket, peer: str, hello: JsonObject) -> None:
        try:
            if hello["op"] != "hello":
                raise Refusal("bad-request", f"expected hello, got {hello['op']!r}")
            if hello.get("role") == "data":
                self._route_data(conn, hello, peer)
                return
            if hello.get("role") == "echo":
                self._echo(conn, peer)
            else:
                self._control(conn, hello, peer)
        except Exception as exc:  # noqa: BLE001 - the server must survive any client
            self._reject(conn, peer, exc)
        conn.close()
        self._freed()

    def _reject(self, conn: socket.socket | None, peer: str, exc: Exception) -> None:
        code = exc.code if isinstance(exc, Refusal) else "protocol"
        if isinstance(exc, protocol.VersionMismatch):
            code = "version"
            exc = Refusal(code, f"protocol version {exc.version} is not supported: this server "
                                f"is beoperf {__version__} speaking protocol version "
                                f"{protocol.PROTOCOL_VERSION}; use matching beoperf versions")
        self.throttled(f"rejected-{code}", f"{utc_now()} {peer} rejected ({code}): "
                                           f"{describe_error(exc)}")
        if conn is not None and not isinstance(exc, OSError):
            with contextlib.suppress(OSError):
                conn.settimeout(1.0)
                protocol.send_message(conn, {"op": "refuse", "code": code, "reason": str(exc)})

    def _echo(self, conn: socket.socket, peer: str) -> None:
        """A monitor's TCP echo connection (echo.TcpEcho), at most max_echo at once."""
        with self._lock:
            if self._echoes >= self.cfg.max_echo:
                raise Refusal("busy", f"{self._echoes} echo connections already open")
            self._echoes += 1
        served = echo.TcpEcho(conn, self.cfg.idle_timeout)
        try:
            served.serve()
        finally:
            with self._lock:
                self._echoes -= 1
            self.throttled("echo", f"{utc_now()} {peer} echo connection: "
                                   f"{served.count} message(s)")
        conn.close()

    def _route_data(self, conn: socket.socket, hello: JsonObject, peer: str) -> None:
        with self._lock:
            session = self._session
        if session is None or not secrets.compare_digest(str(hello.get("token", "")),
                                                         session.token):
            raise Refusal("bad-request", "data connection for no active session")
        if session.offer(conn):
            return
        if session.extra_data == 1:  # once per session; the session line gives the count
            self.cfg.log(f"{utc_now()} {peer} data connection refused: the session already "
                         f"has {MAX_DATA_QUEUE} waiting (more are closed at once)")
        with contextlib.suppress(OSError):
            conn.setblocking(False)
            protocol.send_message(conn, {"op": "refuse", "code": "limit",
                                         "reason": "too many data connections"})
        conn.close()
        self._freed()

    def _control(self, conn: socket.socket, hello: JsonObject, peer: str) -> None:
        params = check_params(hello.get("params"), self.cfg)
        host = address_of(peer)
        with self._lock:
            self._take_turn(host)
            try:
                session = self._session = Session(self, conn, peer, params)
            except OSError as exc:  # e.g. EMFILE for its eventfd
                raise Refusal("busy", f"server is short of resources ({exc.strerror}); "
                                      f"try again later") from None
            self.turns.started(host)
        started, outcome = time.monotonic(), "ok"
        old_mask = os.sched_getaffinity(0)
        try:
            cpu = params.get("server_cpu")
            if cpu is not None:
                os.sched_setaffinity(0, {cpu})
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
                self.turns.ended(host, time.monotonic())
        if outcome == "ok":  # said only now, so a client that reconnects is not "busy"
            with contextlib.suppress(OSError):
                protocol.send_message(conn, session.goodbye())
        self.cfg.log(f"{utc_now()} {peer} session {session.describe()} "
                     f"{time.monotonic() - started:.1f}s {outcome}")


    def _take_turn(self, host: str) -> None:
        """Refuse ("busy") a session while another runs, or while the next one is kept
        for other addresses that waited (Turns); the lock is held."""
        now = time.monotonic()
        if self._session is not None:
            if address_of(self._session.peer) != host:
                self.turns.refused(host, now)
            raise Refusal("busy", f"server is busy with a session from "
                                  f"{self._session.peer}; try again later")
        others = self.turns.holder(host, now)
        if others:
            self.turns.refused(host, now)
            raise Refusal("busy", f"server is busy: its next session is kept for {others} "
                                  f"other address(es) that waited for it; try again in "
                                  f"{max(1.0, self.turns.kept_until - now):.0f} s")


def address_of(peer: str) -> str:
    """The host part of a peer as fmt_addr writes it ("[::1]:5", "10.0.0.1:5")."""
    host = peer.rpartition(":")[0]
    return host[1:-1] if host.startswith("[") else host


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

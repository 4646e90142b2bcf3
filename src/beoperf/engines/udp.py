"""UDP at a set rate (``beoperf pingpong --mode stream --udp --rate R``): both ends.

The session is an ordinary TCP one (``tcp.py``/``tcp_server.py``); each size is one UDP
trial negotiated on its control connection, as iperf3 does:

1. the client asks ``{"op": "udp", "size", "rate_bps", "duration_s", "port"}`` (``port``:
   its own UDP socket's port; no frame ever names an address);
2. the server checks the request against its caps (MAX_RATE_BPS, MAX_DURATION_S,
   MAX_PACKETS: constants, a refusal names the cap), opens a UDP socket on the control
   connection's local address, *connected* to the control connection's peer address and
   the client's port, so that the kernel hands it datagrams from that one source only,
   and answers ``{"op": "udp-ready", "port", "tag"}``;
3. the client sends datagrams of ``size`` bytes, paced at the rate, for the duration, to
   the control connection's peer address (never to one a frame names) and the port the
   server gave, then ``{"op": "udp-end", "sent"}``;
4. the server, which never sends UDP, drains until the datagrams stop and answers
   ``{"op": "udp-done", ...}``: what arrived, duplicates, reordering and the jitter.

Every datagram starts with :data:`HEADER`: the trial's tag (from the server, so stray
datagrams are not counted), its sequence number and the sender's send time (ns,
CLOCK_MONOTONIC).  Loss is ``sent - distinct sequence numbers received``; a datagram
whose number is below the highest seen so far is reordered; one seen before is a
duplicate.  Jitter is RFC 3550's estimator (section 6.4.1, as iperf3 computes it): for
consecutive arrivals the difference D of their transit times (arrival minus send time;
the two clocks' offset cancels), J += (|D| - J) / 16.

The sender and the receiver are in C (``_udp.c``, the GIL released).  The sender paces
on CLOCK_MONOTONIC, sleeping until the next send is due (never spinning, which on a
machine of two CPUs took one from the receiver and doubled the jitter it read); a
sleep that overshoots leaves it behind schedule, and behind schedule it sends at once
until it is back on it, so the average rate holds as long as one send costs less than
the interval (as iperf3's: on a busy machine a sender woken milliseconds late sends
its backlog in a burst; forgetting a backlog of more than 2 ms instead cost 40% of
20 Mbit/s there); the datagram's time is read just before its send, so the sleep's
imprecision is not jitter.  The client records the rate it achieved beside the one
asked for.  The receiver counts a slice at a time (SLICE_S), between which the
server looks for the client's end frame.
"""

from __future__ import annotations

import array
import contextlib
import math
import secrets
import select
import socket
import struct
import time
from dataclasses import dataclass
from typing import Any, TypeGuard

from beoperf import _udp
from beoperf.engines import protocol
from beoperf.engines.protocol import Refusal
from beoperf.model.document import JsonObject

HEADER = struct.Struct(">IIQQ")  # tag, reserved (0), sequence number, send time (ns)
MIN_SIZE = HEADER.size  # a datagram carries its header at least
MAX_SIZE = 65507  # the largest UDP payload over IPv4
MAX_RATE_BPS = 10_000_000_000  # a server's cap on the rate of a UDP trial (bit/s)
MAX_DURATION_S = 30.0  # ... and on its duration
MAX_PACKETS = 1 << 26  # ... and on its datagrams (the duplicate map: 8 MiB)
DRAIN_S = 0.25  # after the client's end, datagrams stop for this long: the trial is over
SO_MEMINFO = getattr(socket, "SO_MEMINFO", 55)
SK_MEMINFO_DROPS = 8  # the socket's own drops (a full receive buffer), Linux 4.0+
SLICE_S = 0.1  # the C receiver returns this often to let the server read its control frames
RCVBUF = 4 * 1024 * 1024  # asked for at the receiver (the kernel may give less): room for
# the datagrams that arrive while the server's loop is descheduled


# the receiver's state between calls of _udp.receive (the order of _udp.c's enum)
STATE = ("received", "distinct", "duplicates", "reordered", "bytes", "first_ns", "last_ns",
         "highest", "last_transit", "have_transit", "foreign")


class Receiver:
    """One trial's counts, kept between the C receiver's calls (``_udp.receive``): every
    datagram with the trial's tag and a sequence number below ``limit``; distinct ones
    in a bitmap (duplicates), reordered ones (below the highest seen), the RFC 3550
    jitter over consecutive arrivals; ``foreign`` the others."""

    def __init__(self, tag: int, limit: int) -> None:
        self.tag, self.limit = tag, limit
        self.seen = bytearray((limit + 7) // 8)
        self.state = array.array("q", [0] * _udp.N_STATE)
        self.state[STATE.index("highest")] = -1
        self.jitter = array.array("d", [0.0])

    def take(self, sock: socket.socket, wait_s: float, slice_s: float) -> int:
        """Count what arrives until none came for ``wait_s`` or ``slice_s`` passed."""
        return _udp.receive(sock.fileno(), self.tag, self.limit, self.seen, self.state,
                            self.jitter, max(1, int(wait_s * 1000)), max(1, int(slice_s * 1000)))

    def count(self, name: str) -> int:
        return self.state[STATE.index(name)]

    @property
    def jitter_ns(self) -> float:
        return self.jitter[0]


# ----------------------------------------------------------------------- the server


def check_request(message: JsonObject, max_size: int) -> tuple[int, float, float, int]:
    """(size, rate_bps, duration_s, client port) of a "udp" frame within this server's
    caps; else a Refusal naming the cap."""
    size, rate, duration, port = (message.get(k) for k in ("size", "rate_bps", "duration_s",
                                                           "port"))
    if not (_int(size) and _number(rate) and _number(duration) and _int(port)):
        raise Refusal("bad-request", "udp needs integer size and port, numbers rate_bps and "
                                     "duration_s")
    if not MIN_SIZE <= size <= min(MAX_SIZE, max(max_size, MIN_SIZE)):
        raise Refusal("limit", f"UDP datagrams of {size} bytes: this server takes "
                               f"{MIN_SIZE} to {min(MAX_SIZE, max_size)}")
    if not 1024 <= port <= 65535:
        raise Refusal("bad-request", f"UDP port {port} is not an unprivileged port")
    if not 0 < rate <= MAX_RATE_BPS:
        raise Refusal("limit", f"--rate {rate / 1e6:g} Mbit/s is above this server's UDP cap "
                               f"of {MAX_RATE_BPS / 1e6:g} Mbit/s")
    if not 0 < duration <= MAX_DURATION_S:
        raise Refusal("limit", f"a UDP trial of {duration:g} s is above this server's cap of "
                               f"{MAX_DURATION_S:g} s per size")
    if packets_of(size, rate, duration) > MAX_PACKETS:
        raise Refusal("limit", f"{packets_of(size, rate, duration)} datagrams of {size} bytes "
                               f"is above this server's cap of {MAX_PACKETS} per trial")
    return size, float(rate), float(duration), port


def packets_of(size: int, rate_bps: float, duration_s: float) -> int:
    """The datagrams a trial at the rate may send, with room for a sender's catch-up."""
    return math.ceil(rate_bps * duration_s / (8 * size) * 1.05) + 16


def _int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> TypeGuard[float]:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value))


def server_socket(ctrl: socket.socket, client_port: int) -> socket.socket:
    """The trial's socket: on the control connection's local address, connected to its
    peer's address (never one a frame names) at the client's port, so that only that
    source's datagrams reach it."""
    local, peer = ctrl.getsockname(), ctrl.getpeername()
    sock = socket.socket(ctrl.family, socket.SOCK_DGRAM)
    try:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
        sock.bind((local[0], 0, *local[2:]))
        sock.connect((peer[0], client_port, *peer[2:]))
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def serve_trial(ctrl: socket.socket, message: JsonObject, max_size: int,
                idle_timeout: float) -> protocol.UdpDone:
    """One UDP trial at the server (the session's thread): the reply to the "udp" frame,
    the datagrams, the "udp-end" frame; returns the "udp-done" frame, sent."""
    size, rate, duration, port = check_request(message, max_size)
    tag = secrets.randbits(32)
    limit = packets_of(size, rate, duration)
    with server_socket(ctrl, port) as sock:
        protocol.send_message(ctrl, {"op": "udp-ready", "port": sock.getsockname()[1],
                                     "tag": tag})
        rx = Receiver(tag, limit)
        sent = receive(sock, ctrl, rx, time.monotonic() + duration + idle_timeout)
        drops = socket_drops(sock)
    distinct = rx.count("distinct")
    done: protocol.UdpDone = {
        "op": "udp-done", "sent": sent, "received": rx.count("received"), "distinct": distinct,
        "lost": max(0, sent - distinct), "duplicates": rx.count("duplicates"),
        "reordered": rx.count("reordered"), "bytes": rx.count("bytes"),
        "jitter_ns": round(rx.jitter_ns, 1),
        "window_ns": rx.count("last_ns") - rx.count("first_ns"), "foreign": rx.count("foreign")}
    if drops is not None:
        done["receiver_drops"] = drops
    protocol.send_message(ctrl, done)
    return done


def socket_drops(sock: socket.socket) -> int | None:
    """The datagrams the kernel dropped at this socket because its receive buffer was
    full (the receiver fell behind: loss of the receiving host, not of the network), or
    None when the kernel does not say (SO_MEMINFO)."""
    try:
        info = sock.getsockopt(socket.SOL_SOCKET, SO_MEMINFO, 4 * (SK_MEMINFO_DROPS + 1))
    except OSError:
        return None
    if len(info) < 4 * (SK_MEMINFO_DROPS + 1):
        return None
    return int(struct.unpack_from("I", info, 4 * SK_MEMINFO_DROPS)[0])


def receive(sock: socket.socket, ctrl: socket.socket, rx: Receiver, deadline: float) -> int:
    """Count datagrams (in C, a slice at a time) until the client's "udp-end" has come and
    none arrived for DRAIN_S; the client's sent count.  TimeoutError past ``deadline``."""
    sent: int | None = None
    quiet_since = time.monotonic()
    while True:
        got = rx.take(sock, DRAIN_S / 5, SLICE_S)
        now = time.monotonic()
        if got:
            quiet_since = now
        elif sent is not None and now - quiet_since >= DRAIN_S:
            return sent
        if now > deadline:
            raise TimeoutError("the UDP trial did not end in time")
        if sent is None and select.select([ctrl], [], [], 0)[0]:
            sent = _end_of(protocol.recv_message(ctrl, now + 5.0), rx.limit)
            quiet_since = time.monotonic()


def _end_of(message: JsonObject, limit: int) -> int:
    """The client's sent count from its "udp-end" frame; else a Refusal."""
    sent = message.get("sent")
    if message.get("op") != "udp-end" or not _int(sent) or not 0 <= sent <= limit:
        raise Refusal("bad-request", f"expected udp-end with a count of 0 to {limit}, got "
                                     f"{message.get('op')!r}")
    return sent


# ----------------------------------------------------------------------- the client


@dataclass
class Sent:
    count: int
    elapsed_ns: int


def send_paced(sock: socket.socket, size: int, rate_bps: float, duration_s: float,
               tag: int) -> Sent:
    """Datagrams of ``size`` bytes at ``rate_bps`` for ``duration_s`` on a connected
    socket, paced in C (``_udp.send_paced``): a sender behind schedule sends at once
    until it is back on it."""
    count, elapsed = _udp.send_paced(sock.fileno(), size, rate_bps, duration_s, tag)
    return Sent(count, elapsed)


def client_socket(ctrl: socket.socket) -> socket.socket:
    """This end's socket: on the control connection's local address, with the system's
    send buffer (as iperf3's): a send blocks while the buffer is full, so a local shaper
    slower than the rate (a qdisc on this end's interface) holds the sender back rather
    than dropping, and the rate sent says so."""
    local = ctrl.getsockname()
    sock = socket.socket(ctrl.family, socket.SOCK_DGRAM)
    try:
        sock.bind((local[0], 0, *local[2:]))
    except OSError:
        sock.close()
        raise
    return sock


def run_trial(ctrl: socket.socket, size: int, rate_bps: float, duration_s: float,
              timeout: float) -> JsonObject:
    """One UDP trial from the client: the figures of the size (see :func:`figures`)."""
    with client_socket(ctrl) as sock:
        ctrl.settimeout(timeout)
        protocol.send_message(ctrl, {"op": "udp", "size": size, "rate_bps": rate_bps,
                                     "duration_s": duration_s, "port": sock.getsockname()[1]})
        ready = protocol.expect(protocol.recv_message(ctrl), "udp-ready")
        port, tag = ready.get("port"), ready.get("tag")
        if not (_int(port) and 0 < port <= 65535 and _int(tag) and 0 <= tag < 2**32):
            raise protocol.ProtocolError(f"'udp-ready' frame: port {port!r}, tag {tag!r}")
        peer = ctrl.getpeername()
        sock.connect((peer[0], port, *peer[2:]))  # the control connection's peer, always
        sent = send_paced(sock, size, rate_bps, duration_s, tag)
        protocol.send_message(ctrl, {"op": "udp-end", "sent": sent.count})
        ctrl.settimeout(timeout + DRAIN_S + duration_s)
        done = protocol.expect(protocol.recv_message(ctrl), "udp-done")
    return figures(done, size, rate_bps, duration_s, sent)


def figures(done: JsonObject, size: int, rate_bps: float, duration_s: float,
            sent: Sent) -> JsonObject:
    """The size's UDP figures from the server's counts and this end's: goodput (the
    distinct datagrams' bytes over the server's window from the first to the last
    arrival), loss, reordering, duplicates, jitter and the rate actually sent."""
    counts: dict[str, int] = {}
    for key in ("received", "distinct", "duplicates", "reordered", "bytes", "window_ns"):
        value = done.get(key)
        if not (_int(value) and value >= 0):
            raise protocol.ProtocolError(f"'udp-done' frame: {key} is {value!r}")
        counts[key] = value
    jitter = done.get("jitter_ns")
    if not (_number(jitter) and jitter >= 0):
        raise protocol.ProtocolError(f"'udp-done' frame: jitter_ns is {jitter!r}")
    window, distinct = counts["window_ns"], counts["distinct"]
    # the window spans distinct - 1 intervals between arrivals: as many datagrams' bytes
    goodput = (counts["bytes"] * (distinct - 1) / distinct * 8e9 / window
               if window > 0 and distinct > 1 else None)
    lost = max(0, sent.count - distinct)
    drops = done.get("receiver_drops")  # absent: the server's kernel did not say
    return {"receiver_drops": min(drops, lost) if _int(drops) and drops >= 0 else None,
            "rate_bps": rate_bps, "duration_s": duration_s, "sent": sent.count,
            "sent_bps": sent.count * size * 8e9 / sent.elapsed_ns if sent.elapsed_ns else None,
            "received": counts["received"], "lost": lost,
            "loss": lost / sent.count if sent.count else None,
            "duplicates": counts["duplicates"], "reordered": counts["reordered"],
            "jitter_us": float(jitter) / 1e3,
            "goodput_bps": goodput}

"""Probe transports: ICMP echo, and UDP/TCP echo against `beoperf serve`.

Each prober sends one probe of ``size`` payload bytes and waits at most ``timeout``
seconds for its echo.  The RTT is taken on the monotonic clock around the send and the
receive of the matching reply (replies to earlier, timed-out probes are recognised and
dropped).  The outcome is one of:

* ``ok``: the echo came back (``rtt_us`` set);
* ``timeout``: nothing came back in time;
* ``unreachable``: no route, or an ICMP host/network unreachable came back;
* ``refused``: the host answered but nothing listens (TCP RST, ICMP port unreachable);
* ``error``: a local error (the text says which).

ICMP uses the unprivileged datagram socket where ``net.ipv4.ping_group_range`` allows
it, else a raw socket (root); without either it refuses to start with a clear message.
"""

from __future__ import annotations

import errno
import ipaddress
import secrets
import select
import socket
import struct
import time
from dataclasses import dataclass, replace

from beoperf import errors
from beoperf.engines import echo, protocol
from beoperf.monitor import schedule

IP_RECVERR, IPV6_RECVERR = 11, 25  # linux/in.h, linux/in6.h (not in Python's socket)
UNREACHABLE = {errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN, errno.ENETDOWN,
               errno.EADDRNOTAVAIL}
TCP_INFO_LEN = 232
SEGS_OUT, BYTES_SENT = struct.Struct("I"), struct.Struct("Q")  # offsets 136 and 200


class ProbeSetupError(errors.BeoperfError):
    """The prober cannot be created at all (e.g. ICMP without permission)."""

    category = "monitor"


@dataclass(frozen=True)
class Result:
    t_utc: float  # when the probe was sent
    outcome: str
    rtt_us: float | None
    error: str | None
    wire_bytes: int


def classify(exc: OSError) -> str:
    if isinstance(exc, TimeoutError) or exc.errno == errno.ETIMEDOUT:
        return "timeout"
    if isinstance(exc, ConnectionRefusedError) or exc.errno == errno.ECONNREFUSED:
        return "refused"
    if exc.errno in UNREACHABLE:
        return "unreachable"
    return "error"


def describe(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


IP_MTU, IPV6_MTU = 14, 24  # <linux/in.h>, <linux/in6.h>: the path MTU of a connected socket
IP_MTU_DISCOVER, IPV6_MTU_DISCOVER, IPV6_DONTFRAG = 10, 23, 62  # the same headers
PMTUDISC_PROBE = 3  # IP_PMTUDISC_PROBE / IPV6_PMTUDISC_PROBE: DF set, the route's PMTU ignored
DEFAULT_MTU = 1500


@dataclass(frozen=True)
class Target:
    """A resolved peer: family, numeric address, IPv6 scope (link-local), path MTU."""

    family: int
    address: str
    scope_id: int = 0
    mtu: int = DEFAULT_MTU
    mtu_unknown: str = ""  # why the kernel would not say (then DEFAULT_MTU is assumed)

    @property
    def ipv6(self) -> bool:
        return self.family == socket.AF_INET6

    def sockaddr(self, port: int) -> tuple:
        return (self.address, port, 0, self.scope_id) if self.ipv6 else (self.address, port)

    @property
    def shown(self) -> str:
        """The address as printed and stored (fe80::1%eth0 for a link-local one)."""
        if not self.scope_id:
            return self.address
        try:
            return f"{self.address}%{socket.if_indextoname(self.scope_id)}"
        except OSError:
            return f"{self.address}%{self.scope_id}"


def resolve(host: str, family: int = 0) -> Target:
    """``host`` resolved, with the path MTU; errors.ConnectError if it does not resolve
    (as for every command that reaches a peer), ProbeSetupError if it cannot be probed."""
    try:
        info = socket.getaddrinfo(host, None, family, socket.SOCK_DGRAM)
    except socket.gaierror as exc:
        raise errors.ConnectError(f"cannot resolve host {host!r}: {exc.strerror}") from None
    fam, addr = info[0][0], info[0][4]
    target = Target(fam, str(addr[0]), addr[3] if len(addr) == 4 else 0)
    if target.ipv6 and ipaddress.ip_address(target.address).is_link_local \
            and not target.scope_id:
        raise ProbeSetupError(f"{host}: a link-local address needs its interface, as in "
                              f"{target.address}%eth0")
    try:
        return replace(target, mtu=path_mtu(target))
    except OSError as exc:
        return replace(target, mtu_unknown=describe(exc))


def path_mtu(target: Target) -> int:
    """The MTU of the route to the target as the kernel knows it (the interface's, or a
    smaller one learnt by path MTU discovery), read from a connected UDP socket: nothing
    is sent.  OSError where the kernel will not say (no route, say)."""
    with socket.socket(target.family, socket.SOCK_DGRAM) as sock:
        sock.connect(target.sockaddr(9))
        if target.ipv6:
            return sock.getsockopt(socket.IPPROTO_IPV6, IPV6_MTU)
        return sock.getsockopt(socket.IPPROTO_IP, IP_MTU)


class Prober:
    """Base: the address, the family, and the estimate of a probe's wire bytes (with the
    path MTU read at the start: a large ICMP or UDP probe goes out in fragments)."""

    transport = "?"

    def __init__(self, target: Target, port: int = 0) -> None:
        self.target, self.port = target, port
        self.family, self.ipv6, self.mtu = target.family, target.ipv6, target.mtu
        self.seq = 0

    def estimate(self, size: int) -> int:
        return schedule.wire_bytes(self.transport, size, self.ipv6, self.mtu)

    def probe(self, size: int, timeout: float) -> Result:
        raise NotImplementedError

    def close(self) -> None:
        return None

    def _next_seq(self) -> int:
        self.seq = (self.seq + 1) & 0xFFFF
        return self.seq


def _wait_readable(sock: socket.socket, deadline: float) -> bool:
    left = deadline - time.monotonic()
    if left <= 0:
        return False
    ready, _, _ = select.select([sock], [], [], left)
    return bool(ready)


def _until(sock: socket.socket, deadline: float) -> None:
    """Set the socket's timeout to what is left until ``deadline`` (TimeoutError if none)."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("probe timed out")
    sock.settimeout(left)


def _failed(t_utc: float, exc: OSError, wire: int) -> Result:
    outcome = classify(exc)
    return Result(t_utc, outcome, None, None if outcome == "timeout" else describe(exc), wire)


# --------------------------------------------------------------------------- ICMP


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


class IcmpProber(Prober):
    """ICMP (v4 or v6) echo; datagram socket if allowed, else raw (root)."""

    transport = "icmp"

    def __init__(self, target: Target) -> None:
        super().__init__(target)
        family = target.family
        proto = socket.IPPROTO_ICMPV6 if self.ipv6 else socket.IPPROTO_ICMP
        self.request_type = 128 if self.ipv6 else 8
        self.reply_type = 129 if self.ipv6 else 0
        self.ident = secrets.randbits(16)
        try:
            self.sock = socket.socket(family, socket.SOCK_DGRAM, proto)
            self.raw = False
        except PermissionError:
            try:
                self.sock = socket.socket(family, socket.SOCK_RAW, proto)
            except PermissionError:
                raise ProbeSetupError(
                    "ICMP probes need net.ipv4.ping_group_range to include your group "
                    "(sysctl -w net.ipv4.ping_group_range='0 2147483647') or root; or use "
                    "--transport udp or tcp against 'beoperf serve'") from None
            self.raw = True
        self.mode = "raw socket" if self.raw else "datagram socket"
        self.sock.setblocking(False)
        if not self.raw:  # ICMP errors (host unreachable ...) reported on the socket
            level = socket.IPPROTO_IPV6 if self.ipv6 else socket.IPPROTO_IP
            self.sock.setsockopt(level, IPV6_RECVERR if self.ipv6 else IP_RECVERR, 1)

    def _drain_errors(self) -> None:
        """Empty the socket's error queue (IP_RECVERR queues every ICMP error)."""
        for _ in range(64):
            try:
                self.sock.recvmsg(512, 512, socket.MSG_ERRQUEUE)
            except OSError:
                return

    def probe(self, size: int, timeout: float) -> Result:
        seq = self._next_seq()
        cookie = secrets.token_bytes(8)
        payload = cookie + bytes(size - 8)
        header = struct.pack("!BBHHH", self.request_type, 0, 0, self.ident, seq)
        packet = header + payload
        if self.raw and not self.ipv6:  # the kernel sums ICMPv6 and datagram sockets
            packet = header[:2] + struct.pack("!H", _checksum(packet)) + header[4:] + payload
        wire = self.estimate(size)
        t_utc, start = time.time(), time.monotonic()
        try:
            self.sock.sendto(packet, self.target.sockaddr(0))
        except OSError as exc:
            return _failed(t_utc, exc, 0)
        return self._await(seq, cookie, start, start + timeout, t_utc, wire)

    def _await(self, seq: int, cookie: bytes, start: float, deadline: float, t_utc: float,
               wire: int) -> Result:
        while _wait_readable(self.sock, deadline):
            try:
                data = self.sock.recv(65535)
            except BlockingIOError:
                continue
            except OSError as exc:  # an ICMP error reported on the datagram socket
                self._drain_errors()
                return _failed(t_utc, exc, wire)
            now = time.monotonic()
            verdict = self._match(data, seq, cookie)
            if verdict == "ok":
                return Result(t_utc, "ok", (now - start) * 1e6, None, wire)
            if verdict:
                return Result(t_utc, verdict, None, "ICMP destination unreachable", wire)
        return Result(t_utc, "timeout", None, None, wire)

    def _match(self, data: bytes, seq: int, cookie: bytes) -> str | None:
        """"ok" for our reply, "unreachable"/"refused" for an error about our request."""
        if self.raw and not self.ipv6 and data:
            data = data[(data[0] & 0x0F) * 4:]  # a raw IPv4 socket gets the IP header too
        if len(data) < 8:
            return None
        kind, code, _sum, ident, got_seq = struct.unpack("!BBHHH", data[:8])
        if kind == self.reply_type:
            ours = (not self.raw or ident == self.ident) and got_seq == seq
            return "ok" if ours and data[8:16] == cookie else None
        if not self.raw or kind != (1 if self.ipv6 else 3):  # destination unreachable
            return None
        # the error quotes our request: its IP header, then its first 8 bytes
        quoted = data[8:]
        ip_len = 40 if self.ipv6 else ((quoted[0] & 0x0F) * 4 if quoted else 0)
        inner = quoted[ip_len:]
        if len(inner) < 8 or struct.unpack("!HH", inner[4:8]) != (self.ident, seq):
            return None
        return "refused" if code == (4 if self.ipv6 else 3) else "unreachable"

    def close(self) -> None:
        self.sock.close()


# --------------------------------------------------------------------------- UDP


class UdpProber(Prober):
    """UDP echo against `beoperf serve` (engines/echo.py: the server's own format)."""

    transport = "udp"

    def __init__(self, target: Target, port: int) -> None:
        super().__init__(target, port)
        self.sock = socket.socket(target.family, socket.SOCK_DGRAM)
        self.sock.setblocking(False)
        self.connected = False

    def probe(self, size: int, timeout: float) -> Result:
        payload = echo.udp_probe(secrets.randbits(32), size)
        wire = self.estimate(size)
        reply = echo.udp_answer(payload)  # what the server answers to it, and nothing else
        t_utc, start = time.time(), time.monotonic()
        try:
            self._send(payload)
        except OSError as exc:
            return _failed(t_utc, exc, 0)
        deadline = start + timeout
        while _wait_readable(self.sock, deadline):
            try:
                data = self.sock.recv(65535)
            except BlockingIOError:
                continue
            except OSError as exc:
                return _failed(t_utc, exc, wire)
            if data == reply:
                return Result(t_utc, "ok", (time.monotonic() - start) * 1e6, None, wire)
        return Result(t_utc, "timeout", None, None, wire)

    def dont_fragment(self) -> None:
        """Send every probe whole with DF set, up to the interface's MTU whatever path MTU
        the kernel learnt (IP_PMTUDISC_PROBE): one the path cannot carry is lost, not cut
        into fragments.  (The server's UDP reply keeps its socket's default, DF as long
        as it fits the server's own MTU.)"""
        if self.ipv6:
            self.sock.setsockopt(socket.IPPROTO_IPV6, IPV6_MTU_DISCOVER, PMTUDISC_PROBE)
            self.sock.setsockopt(socket.IPPROTO_IPV6, IPV6_DONTFRAG, 1)
        else:
            self.sock.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, PMTUDISC_PROBE)

    def _send(self, payload: bytes) -> None:
        if not self.connected:  # connected: ICMP port unreachable becomes ECONNREFUSED
            self.sock.connect(self.target.sockaddr(self.port))
            self.connected = True
        try:
            self.sock.send(payload)
        except ConnectionRefusedError:
            # maybe the refusal of an earlier, timed-out probe: this one was not sent
            self.sock.send(payload)

    def close(self) -> None:
        self.sock.close()


# --------------------------------------------------------------------------- TCP


class TcpProber(Prober):
    """TCP echo against `beoperf serve`: one connection, kept while it works; the bytes
    sent are counted from the kernel's TCP_INFO (segments x headers + data)."""

    transport = "tcp"

    def __init__(self, target: Target, port: int) -> None:
        super().__init__(target, port)
        self.sock: socket.socket | None = None
        self.counted = (0, 0)  # (segments out, bytes sent) already accounted
        self._closed_bytes = 0
        self.header = (schedule.IPV6_HEADER if self.ipv6 else schedule.IPV4_HEADER) \
            + schedule.TCP_HEADER

    def _open(self, deadline: float) -> socket.socket:
        """Connect and say hello; the socket is ``self.sock`` from the start, so that a
        failure's bytes (SYN, hello) are counted by ``probe``."""
        sock = self.sock = socket.socket(self.family, socket.SOCK_STREAM)
        self.counted = (0, 0)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        _until(sock, deadline)
        sock.connect(self.target.sockaddr(self.port))
        _until(sock, deadline)
        sock.sendall(echo.tcp_hello())
        _, length = protocol.decode_header(self._recv_exact(protocol.HEADER.size, deadline))
        echo.tcp_accepted(protocol.decode_payload(self._recv_exact(length, deadline)))
        return sock

    def _reusable(self) -> socket.socket | None:
        """The open connection, unless the server closed it meanwhile (idle timeout,
        restart): then None, and the probe reconnects instead of failing."""
        sock = self.sock
        if sock is None:
            return None
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return sock
        self.close()  # its last bytes are kept for this probe's row
        return None

    def _sent(self) -> int:
        """Wire bytes ``self.sock`` sent since last asked (from TCP_INFO), 0 if unknown."""
        if self.sock is None:
            return 0
        try:
            info = self.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_LEN)
        except OSError:
            return 0
        if len(info) < 208:
            return 0
        segs, sent = SEGS_OUT.unpack_from(info, 136)[0], BYTES_SENT.unpack_from(info, 200)[0]
        delta = (segs - self.counted[0]) * self.header + (sent - self.counted[1])
        self.counted = (segs, sent)
        return delta

    def probe(self, size: int, timeout: float) -> Result:
        t_utc, start = time.time(), time.monotonic()
        deadline = start + timeout
        stale = 0
        try:
            sock = self._reusable()
            stale, self._closed_bytes = self._closed_bytes, 0
            sock = sock or self._open(deadline)
            payload = secrets.token_bytes(min(16, size)) + bytes(max(0, size - 16))
            t_utc, start = time.time(), time.monotonic()
            message = echo.tcp_message(payload)
            _until(sock, deadline)
            sock.sendall(message)
            got = self._recv_exact(len(message), deadline)
            rtt = (time.monotonic() - start) * 1e6
            if got != message:
                raise OSError(errno.EPROTO, "echo came back different")
            return Result(t_utc, "ok", rtt, None, stale + self._sent())
        except (OSError, protocol.ProtocolError) as exc:
            wire = stale + self._sent()
            self.close()  # a late echo would be read as the next probe's: start afresh
            if isinstance(exc, OSError):
                return _failed(t_utc, exc, wire)
            return Result(t_utc, "error", None, str(exc), wire)

    def _recv_exact(self, n: int, deadline: float) -> bytes:
        """n bytes, read as they come (a socket with a timeout ignores MSG_WAITALL)."""
        assert self.sock is not None
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            _until(self.sock, deadline)
            k = self.sock.recv_into(view[got:])
            if k == 0:
                raise ConnectionResetError(errno.ECONNRESET, "server closed the echo connection")
            got += k
        return bytes(buf)

    def close(self) -> None:
        """Close the connection; what it sent since last counted is kept in
        ``_closed_bytes`` for the next probe's row."""
        self._closed_bytes = 0
        if self.sock is not None:
            self._closed_bytes = self._sent()
            self.sock.close()
            self.sock = None


def make_prober(transport: str, target: Target, port: int) -> Prober:
    """The prober for ``transport`` to ``target`` (ProbeSetupError if it cannot exist)."""
    if transport == "icmp":
        return IcmpProber(target)
    if transport == "udp":
        return UdpProber(target, port)
    if transport == "tcp":
        return TcpProber(target, port)
    raise ProbeSetupError(f"unknown transport {transport!r}")



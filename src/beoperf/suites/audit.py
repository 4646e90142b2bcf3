"""The audit: this node's network, CPU and firewall settings judged against a profile.

``run(Spec(...))`` picks the interface (the one named, the route to the peer, else the
default route's), measures the RTT to the peer's ``beoperf serve`` when a link speed is
given (for the socket-buffer advice from the bandwidth-delay product), with a peer probes
whether the path carries this interface's MTU both ways (:func:`path_facts`), runs every
check (read-only) and returns the "audit" document.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from beoperf import errors, sysinfo
from beoperf.audit.base import PROFILES, run_audit
from beoperf.audit.buffers import RTT_SIZE, advise, current_limits
from beoperf.audit.checks import ETHERNET_MTU, default_route_interface
from beoperf.engines.protocol import DEFAULT_PORT
from beoperf.model.audit import AuditRun, BufferAdvice, Finding
from beoperf.model.document import Document, JsonObject, make_meta, utc_now
from beoperf.monitor import probes
from beoperf.sweep.probe import measure_size

__all__ = ["PROFILES", "DEFAULT_PORT", "Spec", "run", "pick_interface", "path_facts"]

RTT_TIME_S = 1.0  # seconds of small-message ping-pong behind the RTT
RTT_TIMEOUT_S = 10.0

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Spec:
    """What to audit: a built-in profile's name, the interface (None: the route to
    ``peer``, else the default route's), and with ``link_speed`` (bit/s) and ``peer`` the
    buffer advice (the RTT measured against ``beoperf serve`` on ``peer``:``port``)."""

    profile: str = "latency"
    interface: str | None = None
    peer: str | None = None
    link_speed: float | None = None
    port: int = DEFAULT_PORT
    command_line: tuple[str, ...] = ()


def check_profile_name(profile: str) -> None:
    if profile not in PROFILES:
        raise errors.BadSpec(f"unknown profile {profile!r}: choose {', '.join(PROFILES)}")


def pick_interface(interface: str | None, peer: str | None) -> str | None:
    """The interface to look at; BadSpec if the one named does not exist, or the peer
    cannot be resolved or routed to."""
    if interface:
        bad = "/" in interface or interface in (".", "..")
        if bad or not os.path.isdir(f"/sys/class/net/{interface}"):
            raise errors.BadSpec(f"unknown interface {interface!r}",
                                 "see 'ip link' for this node's interfaces")
        return interface
    if peer:
        try:
            address = sysinfo.resolve_host(peer)
        except ValueError as exc:
            raise errors.BadSpec(f"--peer: {exc}", "give a host name this node resolves, "
                                 "or an IP address") from None
        route = sysinfo.route_interface(address)
        if route is None:
            raise errors.BadSpec(f"no route to --peer {peer!r}"
                                 + (f" ({address})" if address != peer else ""),
                                 "see 'ip route get ADDRESS'")
        return route["dev"]
    return default_route_interface()


def buffer_advice(peer: str, port: int, rate_bps: float) -> BufferAdvice:
    """The BDP advice for a link of ``rate_bps`` to ``peer`` (its RTT measured now)."""
    try:
        measured = measure_size(peer, port, RTT_SIZE, max_time=RTT_TIME_S,
                                timeout=RTT_TIMEOUT_S)
    except errors.BeoperfError as exc:
        raise type(exc)(f"cannot measure the RTT to {peer}: {exc}", exc.hint,
                        exc.category) from None
    rtt_us = 2.0 * measured.central_time_us()
    return advise(rate_bps, rtt_us, measured.samples, current_limits())


# --------------------------------------------------------------------------- the path

SMALL_PACKET = 576  # bytes: the IPv4 minimum every host takes whole (crosses any path)
HEADERS = {False: 28, True: 48}  # IPv4 or IPv6, and UDP: a packet's bytes past its payload
MAX_PACKET = 65535  # IPv4's largest packet (loopback's MTU is 65536)
PROBE_TIMEOUT_S = 1.0
PROBE_TRIES = 3  # per size: a lost datagram is not yet a path that cannot carry it
RETRY_PAUSE_S = 0.3  # lets the server's per-source echo budget refill between big probes


@dataclass
class Probe:
    """One size sent to the peer's echo: its role (small, mtu, ethernet), its bytes on the
    wire, whether it came back and the last outcome."""

    role: str
    bytes: int
    ok: bool
    outcome: str

    def to_dict(self) -> JsonObject:
        return {"role": self.role, "bytes": self.bytes, "ok": self.ok, "outcome": self.outcome}


@dataclass
class PathFacts:
    """What the probes of the path to a peer found (the facts the MTU checks judge by,
    beoperf.audit.checks.PathMtu): the interface's MTU, each probe, the largest size that
    crossed, and why nothing was probed."""

    peer: str
    port: int
    mtu: int | None
    probes: list[Probe] = field(default_factory=list)
    carried: int | None = None
    error: str | None = None

    def to_dict(self) -> JsonObject:
        return {"peer": self.peer, "port": self.port, "mtu": self.mtu,
                "probes": [p.to_dict() for p in self.probes], "carried": self.carried,
                "error": self.error}


def path_facts(peer: str, port: int, interface: str | None) -> JsonObject:
    """What don't-fragment UDP probes to ``beoperf serve`` on ``peer`` found (for the path
    check and the MTU advice, ``beoperf.audit.checks``): a small packet, then one of this
    interface's MTU, and if that one is lost, 1500 bytes.  Each crosses both ways whole or
    not at all (DF on the probe; the echo goes back with DF while it fits the server's MTU),
    and each is the size of its answer: the server's echo budget stays as it is.

    Why serve's echo, not ICMP: a Linux host answers a ping without DF (its reply may be
    cut into fragments on the way back), and a ping needs no program on the peer, so it
    says nothing of the way back; serve is the peer of every beoperf network test."""
    return probe_path(peer, port, interface).to_dict()


def probe_path(peer: str, port: int, interface: str | None) -> PathFacts:
    """The probes of :func:`path_facts`, typed."""
    mtu = sysinfo.interface_facts(interface)["mtu"] if interface else None
    out = PathFacts(peer, port, mtu)
    if mtu is None:
        out.error = f"the MTU of {interface or 'the interface'} is unknown"
        return out
    try:
        target = probes.resolve(peer)
        prober = probes.UdpProber(target, port)
    except (errors.BeoperfError, OSError) as exc:
        out.error = str(exc)
        return out
    try:
        prober.dont_fragment()
        _probe_path(prober, out, min(mtu, MAX_PACKET), HEADERS[target.ipv6])
    finally:
        prober.close()
    return out


def _probe_path(prober: probes.UdpProber, out: PathFacts, mtu: int, headers: int) -> None:
    """Small, then the MTU, then (if that failed) Ethernet's 1500: each as far as needed."""
    plan = [("small", min(SMALL_PACKET, mtu)), ("mtu", mtu)]
    if mtu > ETHERNET_MTU:
        plan.append(("ethernet", ETHERNET_MTU))
    for role, size in plan:
        ok, outcome = _crosses(prober, size - headers)
        out.probes.append(Probe(role, size, ok, outcome))
        if ok:
            out.carried = max(out.carried or 0, size)
        if (role == "small" and not ok) or (role == "mtu" and ok):
            return


def _crosses(prober: probes.UdpProber, payload: int) -> tuple[bool, str]:
    """Whether a datagram of ``payload`` bytes came back (up to PROBE_TRIES sent), and the
    last outcome ("ok", "timeout", "refused", "error: message too long" ...)."""
    outcome = "not sent"
    for k in range(PROBE_TRIES):
        if k:
            time.sleep(RETRY_PAUSE_S)
        got = prober.probe(payload, PROBE_TIMEOUT_S)
        if got.outcome == "ok":
            return True, "ok"
        outcome = got.outcome + (f": {got.error}" if got.error else "")
        if got.outcome in ("refused", "unreachable"):
            break
    return False, outcome


def run(spec: Spec, progress: Progress | None = None) -> Document:
    """The audit document of this node (read-only); with a peer, the path's MTU probed."""
    started = utc_now()
    check_profile_name(spec.profile)
    if spec.link_speed is not None and not spec.peer:
        raise errors.BadSpec("--link-speed needs --peer HOST (running 'beoperf serve')")
    interface = pick_interface(spec.interface, spec.peer)
    advice = None
    if spec.link_speed is not None:
        assert spec.peer is not None
        advice = buffer_advice(spec.peer, spec.port, spec.link_speed)
    path = path_facts(spec.peer, spec.port, interface) if spec.peer else None
    findings = [Finding.from_dict(f.to_dict()) for f in run_audit(spec.profile, interface, path)]
    meta = make_meta(list(spec.command_line), utc_start=started, utc_end=utc_now())
    audited = AuditRun(spec.profile, interface, sysinfo.host_facts(), findings, advice)
    return audited.to_document(meta)

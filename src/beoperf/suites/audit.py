"""The audit: this node's network, CPU and firewall settings judged against a profile.

``run(Spec(...))`` picks the interface (the one named, the route to the peer, else the
default route's), measures the RTT to the peer's ``beoperf serve`` when a link speed is
given (for the socket-buffer advice from the bandwidth-delay product), runs every check
(read-only) and returns the "audit" document.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from beoperf import errors, sysinfo
from beoperf.audit.base import PROFILES, run_audit
from beoperf.audit.buffers import RTT_SIZE, advise, current_limits
from beoperf.audit.checks import default_route_interface
from beoperf.engines.protocol import DEFAULT_PORT
from beoperf.model import audit as audit_doc
from beoperf.model.document import Document, make_meta, utc_now
from beoperf.sweep.probe import measure_size

__all__ = ["PROFILES", "DEFAULT_PORT", "Spec", "run", "pick_interface"]

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


def buffer_advice(peer: str, port: int, rate_bps: float) -> dict[str, Any]:
    """The BDP advice for a link of ``rate_bps`` to ``peer`` (its RTT measured now)."""
    try:
        measured = measure_size(peer, port, RTT_SIZE, max_time=RTT_TIME_S,
                                timeout=RTT_TIMEOUT_S)
    except errors.BeoperfError as exc:
        raise type(exc)(f"cannot measure the RTT to {peer}: {exc}", exc.hint,
                        exc.category) from None
    rtt_us = 2.0 * measured.time_us["median"]
    return advise(rate_bps, rtt_us, measured.samples, current_limits()).to_dict()


def run(spec: Spec, progress: Progress | None = None) -> Document:
    """The audit document of this node (read-only)."""
    started = utc_now()
    check_profile_name(spec.profile)
    if spec.link_speed is not None and not spec.peer:
        raise errors.BadSpec("--link-speed needs --peer HOST (running 'beoperf serve')")
    interface = pick_interface(spec.interface, spec.peer)
    advice = None
    if spec.link_speed is not None:
        assert spec.peer is not None
        advice = buffer_advice(spec.peer, spec.port, spec.link_speed)
    findings = [f.to_dict() for f in run_audit(spec.profile, interface)]
    meta = make_meta(list(spec.command_line), utc_start=started, utc_end=utc_now())
    return audit_doc.make(spec.profile, interface, sysinfo.host_facts(), findings, advice,
                          meta)

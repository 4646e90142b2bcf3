"""Efficiency: a run's peak as a share of the link speed and of the link's goodput limit,
the figure every cluster study quotes ("90% of the medium").

The link speed is ``--link-speed`` when given (``parameters.link_speed_bps``), else the
slower end's NIC as each end recorded it (``local.interface`` and the peer's
``remote.interface``); a NIC whose speed is nominal (loopback, veth, a bridge, a
hypervisor's virtual NIC: ``sysinfo.virtual_reason``) makes it unknown, with the reason;
a peer that recorded no NIC leaves this end's, and the result says so.

The goodput limit is what TCP over Ethernet can carry at that speed: each full segment
carries MSS payload bytes in MTU bytes of IP packet (the MSS TCP_MAXSEG reports is the
payload, TCP options such as timestamps already taken off), and the packet travels in a
frame with Ethernet's 14-byte header, 4-byte FCS, 8-byte preamble and start delimiter and
12-byte inter-frame gap: MTU + 38 bytes of the line's time.  The NIC's speed is that line
rate, so all 38 count.  A shaper (tc tbf, which ``beoperf lab`` and the tests use) counts
only the 14-byte header (MTU + 14 per frame): behind one, the share of the goodput limit
can read up to (MTU + 38) / (MTU + 14) - 1 (1.6% at MTU 1500) above 100%.

The peak is the run's headline peak (the highest per-size median throughput, the
sustained figure); NetPIPE's statistic (the best trial) is given beside it.  In bidir
mode both directions carry the link's speed at once, so the link is counted twice.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from beoperf import sysinfo
from beoperf.model import jsonvalue
from beoperf.model.document import JsonObject
from beoperf.model.pingpong import RunResult
from beoperf.units import format_rate

ETHERNET_HEADER = 14  # destination, source, EtherType: what a qdisc counts beyond the packet
WIRE_EXTRA = 24  # FCS 4, preamble and start delimiter 8, inter-frame gap 12
LINK_SPEED_PARAM = "link_speed_bps"
MAX_HEADERS = 80  # IPv6 40 + TCP 20 + options up to 20: more than that is no full segment


@dataclass(frozen=True)
class LinkSpeed:
    """The link speed a run is judged against (bit/s), where it came from, and a note
    (the peer's NIC not known); or None with the reason it is unknown."""

    bps: float | None
    source: str
    note: str | None = None


@dataclass(frozen=True)
class Efficiency:
    """A run's peak against its link: the shares are fractions (0.94 = 94%); None where a
    figure is unknown, with ``unknown`` or ``goodput_unknown`` saying why."""

    link_bps: float | None
    link_source: str
    link_note: str | None
    unknown: str | None  # why there is no link speed
    directions: int  # 2 in bidir mode: both directions carry the link's speed
    peak_bps: float
    peak_size: int
    best_trial_bps: float | None
    goodput_limit_bps: float | None
    payload_bytes: int | None  # per frame: the MSS
    frame_bytes: int | None  # per frame on the line: MTU + 38
    goodput_unknown: str | None
    peak_of_link: float | None
    peak_of_goodput: float | None
    best_trial_of_link: float | None
    best_trial_of_goodput: float | None

    def to_dict(self) -> JsonObject:
        return jsonvalue.as_object(asdict(self))


def _interface(end: JsonObject) -> JsonObject:
    return jsonvalue.section(end, "interface")


def nic_problem(facts: JsonObject) -> str | None:
    """Why one end's NIC gives no link speed, or None when its speed counts."""
    name = jsonvalue.text(facts, "name") or "?"
    virtual = jsonvalue.text(facts, "virtual")
    driver = jsonvalue.text(facts, "driver")
    if virtual is None and (name == "lo" or driver in sysinfo.VIRTUAL_DRIVERS):
        virtual = f"{name} is loopback" if name == "lo" else \
            f"{name} is a virtual NIC (driver {driver})"  # recorded before "virtual" was
    if virtual:
        speed = jsonvalue.integer(facts, "speed_mbps")
        shown = f"; its {speed} Mb/s is nominal" if speed else ""
        return f"{virtual}{shown}"
    if not jsonvalue.integer(facts, "speed_mbps"):
        return f"{name} reports no link speed"
    return None


def link_speed(run: RunResult) -> LinkSpeed:
    """The speed to judge the run against (see the module docstring)."""
    given = jsonvalue.number(run.parameters, LINK_SPEED_PARAM)
    if given is not None and given > 0:
        return LinkSpeed(given, "--link-speed")
    local, remote = _interface(run.local), _interface(run.remote)
    if not local:
        return LinkSpeed(None, "no network interface recorded for this end (an MPI "
                               "run, or an import); give --link-speed")
    for facts in (local, remote):
        problem = nic_problem(facts) if facts else None
        if problem:
            return LinkSpeed(None, f"{problem}; give --link-speed")
    ends = [("this end", local)] + ([("the peer", remote)] if remote else [])
    who, slower = min(ends, key=lambda end: jsonvalue.integer(end[1], "speed_mbps") or 0)
    mbps = jsonvalue.integer(slower, "speed_mbps") or 0
    source = f"{who}'s NIC {jsonvalue.text(slower, 'name') or '?'} ({mbps} Mb/s)"
    note = None if remote else "the peer's NIC speed is not known: this end's is used"
    return LinkSpeed(mbps * 1e6, source if remote else f"{source}, this end only", note)


def segment_frame(run: RunResult) -> tuple[int, int] | str:
    """(payload, line bytes) of a full TCP segment in an Ethernet frame, or why not known."""
    mss = jsonvalue.integer(jsonvalue.section(run.local, "socket"), "mss")
    mtu = jsonvalue.integer(_interface(run.local), "mtu")
    if not mss or not mtu:
        return "the MSS or the MTU is not recorded (not a TCP run?)"
    if not mtu - MAX_HEADERS <= mss < mtu:
        return f"the MSS ({mss} B) does not fill the MTU ({mtu} B): segment headers not known"
    return mss, mtu + ETHERNET_HEADER + WIRE_EXTRA


def _share(value: float | None, of: float | None) -> float | None:
    return value / of if value is not None and of else None


def efficiency(run: RunResult, peak_bps: float, peak_size: int) -> Efficiency:
    """The run's peak (and best trial) against its link speed and goodput limit."""
    link = link_speed(run)
    directions = 2 if run.parameters.get("mode") == "bidir" else 1
    best = max((v for s in run.sizes if s.size > 0
                for v in [s.throughput_bps.get("from_best_trial")]
                if isinstance(v, int | float) and v > 0), default=None)
    frame = segment_frame(run)
    capacity = link.bps * directions if link.bps else None
    goodput = capacity * frame[0] / frame[1] if capacity and isinstance(frame, tuple) \
        else None
    return Efficiency(
        link_bps=link.bps, link_source=link.source if link.bps else "",
        link_note=link.note, unknown=None if link.bps else link.source,
        directions=directions, peak_bps=peak_bps, peak_size=peak_size, best_trial_bps=best,
        goodput_limit_bps=goodput,
        payload_bytes=frame[0] if isinstance(frame, tuple) else None,
        frame_bytes=frame[1] if isinstance(frame, tuple) else None,
        goodput_unknown=None if isinstance(frame, tuple) else frame,
        peak_of_link=_share(peak_bps, capacity), peak_of_goodput=_share(peak_bps, goodput),
        best_trial_of_link=_share(best, capacity), best_trial_of_goodput=_share(best, goodput))


def text(e: Efficiency) -> str:
    """One line: '94.1% of the 1 Gbit/s link (--link-speed), 100.0% of its goodput limit
    941.5 Mbit/s (1448 B per 1538 B frame on the line); best trial 95.0%, 101.0%', or
    'unknown: REASON'."""
    if e.link_bps is None or e.peak_of_link is None:
        return f"unknown: {e.unknown}"
    both = " (both directions: twice the link)" if e.directions == 2 else ""
    out = f"{e.peak_of_link:.1%} of the {format_rate(e.link_bps)} link{both} ({e.link_source})"
    if e.goodput_limit_bps is not None and e.peak_of_goodput is not None:
        out += (f", {e.peak_of_goodput:.1%} of its goodput limit "
                f"{format_rate(e.goodput_limit_bps)} ({e.payload_bytes} B of TCP payload per "
                f"{e.frame_bytes} B of line time: headers, preamble, FCS, gap)")
    else:
        out += f"; goodput limit unknown: {e.goodput_unknown}"
    if e.best_trial_of_link is not None:
        best = f"{e.best_trial_of_link:.1%}" + (
            f", {e.best_trial_of_goodput:.1%}" if e.best_trial_of_goodput is not None else "")
        out += f"; best trial (NetPIPE's figure) {best}"
    if e.peak_of_link > 1:
        out += ("; above the link's speed, which no link sustains: a shaper's burst (see the "
                "warnings), or a link speed below the real one")
    if e.link_note:
        out += f"; {e.link_note}"
    return out

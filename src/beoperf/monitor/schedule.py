"""The monitor's cycle: which probes, when, and what they cost on the link.

A cycle is a list of steps; a step sends ``count`` probes of ``size`` payload bytes, one
every ``spacing`` seconds.  The published loop (3 pings of 8 bytes 1 s apart, one of
20,000 bytes, 5 s of sleep) is the default: one cycle per 9 s.  Probe ``k`` of a cycle is
sent at a fixed offset from the cycle's start, so a probe that times out never shifts the
others (its timeout ends, at the latest, when the next probe is due).

Bytes are counted as they cross the link in the sending direction: the payload plus the
IP and ICMP/UDP headers of every fragment (TCP: its segments' headers, estimated here and
counted from the kernel's TCP_INFO when sent).  The echo comes back the same size on the
return direction, which has its own capacity on a full-duplex link.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass

IPV4_HEADER, IPV6_HEADER, FRAG_HEADER6 = 20, 40, 8
ICMP_HEADER, UDP_HEADER, TCP_HEADER = 8, 8, 32  # TCP with the timestamp option
UDP_PREFIX = 8  # magic + sequence number at the start of a UDP probe's payload
TCP_PREFIX = 4  # length prefix of a TCP echo message
MIN_SIZE = {"icmp": 8, "udp": UDP_PREFIX, "tcp": 1}
MAX_SIZE = {"icmp": 65507, "udp": 65507, "tcp": 1 << 20}
DEFAULT_STEPS = ("8:3:1", "20000:1:6")  # probes at 0, 1, 2 and 3 s; next cycle at 9 s
RATE_UNITS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}


@dataclass(frozen=True)
class Step:
    size: int  # payload bytes
    count: int
    spacing_s: float  # seconds from one probe to the next

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Slot:
    index: int
    offset_s: float  # from the start of the cycle
    size: int
    window_s: float  # until the next probe is due (the longest its timeout can be)


def parse_step(text: str) -> Step:
    """"SIZE:COUNT:SPACING" (e.g. "8:3:1"); ValueError naming what is wrong."""
    parts = text.split(":")
    if len(parts) != 3:
        raise ValueError(f"step {text!r}: give SIZE:COUNT:SPACING, e.g. 8:3:1")
    try:
        size, count, spacing = int(parts[0]), int(parts[1]), float(parts[2])
    except ValueError:
        raise ValueError(f"step {text!r}: SIZE and COUNT are integers, SPACING seconds") \
            from None
    if count < 1 or not (math.isfinite(spacing) and spacing > 0):
        raise ValueError(f"step {text!r}: COUNT >= 1 and SPACING > 0 seconds")
    return Step(size, count, spacing)


@dataclass(frozen=True)
class Schedule:
    steps: tuple[Step, ...]
    period_s: float

    @classmethod
    def build(cls, steps: list[Step], period_s: float | None, transport: str) -> Schedule:
        """A checked schedule (ValueError with the reason)."""
        if not steps:
            raise ValueError("no probe steps")
        for step in steps:
            lo, hi = MIN_SIZE[transport], MAX_SIZE[transport]
            if not lo <= step.size <= hi:
                raise ValueError(f"probe size {step.size}: {transport} probes carry "
                                 f"{lo}..{hi} bytes")
        busy = sum(s.count * s.spacing_s for s in steps)
        period = busy if period_s is None else period_s
        if not (math.isfinite(period) and period > 0):
            raise ValueError(f"--period {period_s}: give seconds > 0")
        if busy > period * (1 + 1e-9):
            raise ValueError(f"the probes take {busy:g} s (count x spacing), longer than the "
                             f"--period of {period:g} s")
        return cls(tuple(steps), period)

    def slots(self) -> list[Slot]:
        out, offset = [], 0.0
        for step in self.steps:
            for _ in range(step.count):
                out.append(Slot(len(out), offset, step.size, step.spacing_s))
                offset += step.spacing_s
        # the last probe may run on until the next cycle begins
        last = out[-1]
        out[-1] = Slot(last.index, last.offset_s, last.size, self.period_s - last.offset_s)
        return out

    def to_dict(self) -> dict:
        return {"period_s": self.period_s, "schedule": [s.to_dict() for s in self.steps]}


# --------------------------------------------------------------------------- bytes


def wire_bytes(transport: str, size: int, ipv6: bool = False, mtu: int = 1500) -> int:
    """Bytes one probe puts on the link in the sending direction, with headers."""
    ip = IPV6_HEADER if ipv6 else IPV4_HEADER
    if transport == "tcp":  # the data's segments, and the (delayed) ACKs of the echo
        data = size + TCP_PREFIX
        segments = math.ceil(data / (mtu - ip - TCP_HEADER))
        return data + (segments + math.ceil(segments / 2)) * (ip + TCP_HEADER)
    l4 = (ICMP_HEADER if transport == "icmp" else UDP_HEADER) + size
    if ip + l4 <= mtu:
        return ip + l4
    # fragments: each carries a multiple of 8 bytes of the L4 datagram
    per = (mtu - ip - (FRAG_HEADER6 if ipv6 else 0)) // 8 * 8
    fragments = math.ceil(l4 / per)
    return l4 + fragments * (ip + (FRAG_HEADER6 if ipv6 else 0))


def cycle_bytes(schedule: Schedule, transport: str, ipv6: bool = False,
                mtu: int = 1500) -> int:
    return sum(wire_bytes(transport, s.size, ipv6, mtu) * s.count for s in schedule.steps)


# --------------------------------------------------------------------------- budget


@dataclass(frozen=True)
class Budget:
    """A byte rate the probes must stay under (bytes per second)."""

    bytes_per_s: float
    text: str  # as given, e.g. "0.2% of 10 Mbit/s" or "2000 B/s"
    link_bits_per_s: float | None = None


def parse_rate(text: str) -> float:
    """"10M", "10Mbit/s", "1G" -> bits per second (SI); ValueError if not a rate."""
    match = re.fullmatch(r"\s*([0-9.]+(?:[eE][0-9]+)?)\s*([kKmMgGtT]?)(?:bit/s|bps|b/s|bit)?\s*",
                         text)
    if not match:
        raise ValueError(f"--link-speed {text!r}: give bits per second, e.g. 10M or 1G")
    value = float(match.group(1)) * RATE_UNITS[match.group(2).lower()]
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"--link-speed {text!r}: must be > 0")
    return value


def parse_budget(text: str, link_speed: str | None) -> Budget:
    """"0.2%" (with --link-speed) or "2kB/s", "500B/s", "16kbit/s"; ValueError if bad."""
    text = text.strip()
    if text.endswith("%"):
        if link_speed is None:
            raise ValueError(f"--budget {text}: a share of the link needs --link-speed")
        try:
            share = float(text[:-1]) / 100
        except ValueError:
            raise ValueError(f"--budget {text!r}: give a percentage like 0.2%") from None
        if not 0 < share <= 1:
            raise ValueError(f"--budget {text}: give more than 0% and at most 100%")
        link = parse_rate(link_speed)
        return Budget(link * share / 8, f"{text} of {fmt_bits(link)}", link)
    match = re.fullmatch(r"([0-9.]+(?:[eE][0-9]+)?)\s*([kKmMgG]?)(B|bit)/s", text)
    if not match:
        raise ValueError(f"--budget {text!r}: give a share (0.2%, with --link-speed) or a "
                         "rate such as 2kB/s or 16kbit/s")
    value = float(match.group(1)) * RATE_UNITS[match.group(2).lower()]
    per_s = value if match.group(3) == "B" else value / 8
    if not (math.isfinite(per_s) and per_s > 0):
        raise ValueError(f"--budget {text}: must be > 0")
    link = parse_rate(link_speed) if link_speed else None
    return Budget(per_s, text, link)


def fmt_bits(bits_per_s: float) -> str:
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bits_per_s >= scale:
            return f"{bits_per_s / scale:.4g} {unit}"
    return f"{bits_per_s:g} bit/s"


def budget_lines(schedule: Schedule, transport: str, per_cycle: int,
                 budget: Budget | None, link_bits_per_s: float | None,
                 mtu: str = "path MTU 1500") -> list[str]:
    """What the schedule costs, as printed before starting (and in a refusal)."""
    rate = per_cycle / schedule.period_s
    lines = [f"probes: {per_cycle:,} bytes per cycle of {schedule.period_s:g} s with "
             f"{transport} and IP headers ({mtu}) = {rate:,.1f} B/s "
             f"({fmt_bits(rate * 8)}) each way"]
    if link_bits_per_s:
        lines.append(f"share of the {fmt_bits(link_bits_per_s)} link: "
                     f"{100 * rate * 8 / link_bits_per_s:.3f}%")
    if budget is not None:
        lines.append(f"budget: {budget.text} = {budget.bytes_per_s:,.1f} B/s "
                     f"({budget.bytes_per_s * schedule.period_s:,.0f} bytes per cycle)")
    return lines


def over_budget(schedule: Schedule, per_cycle: int, budget: Budget | None) -> bool:
    return budget is not None and per_cycle / schedule.period_s > budget.bytes_per_s

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
from dataclasses import asdict, dataclass

IPV4_HEADER, IPV6_HEADER, FRAG_HEADER6 = 20, 40, 8
ICMP_HEADER, UDP_HEADER, TCP_HEADER = 8, 8, 32  # TCP with the timestamp option
UDP_PREFIX = 8  # magic + sequence number at the start of a UDP probe's payload
TCP_PREFIX = 4  # length prefix of a TCP echo message
MIN_SIZE = {"icmp": 8, "udp": UDP_PREFIX, "tcp": 1}
MAX_SIZE = {"icmp": 65507, "udp": 65507, "tcp": 1 << 20}
DEFAULT_STEPS = ("8:3:1", "20000:1:6")  # probes at 0, 1, 2 and 3 s; next cycle at 9 s
MAX_PROBES = 10_000  # probes in one cycle (each one is a row of the cycle's transaction)
MIN_SPACING_S = 0.001  # the loop's shortest timeout
MAX_PERIOD_S = 2**31 / 1000.0  # about 24.8 days, as every duration option of beoperf


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
    if not 1 <= count <= MAX_PROBES:
        raise ValueError(f"step {text!r}: COUNT from 1 to {MAX_PROBES:,}")
    if not MIN_SPACING_S <= spacing <= MAX_PERIOD_S:  # also refuses NaN
        raise ValueError(f"step {text!r}: SPACING from {MIN_SPACING_S:g} to "
                         f"{MAX_PERIOD_S:.0f} seconds")
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
        if sum(s.count for s in steps) > MAX_PROBES:
            raise ValueError(f"{sum(s.count for s in steps):,} probes per cycle: at most "
                             f"{MAX_PROBES:,}")
        busy = sum(s.count * s.spacing_s for s in steps)
        period = busy if period_s is None else period_s
        if period_s is not None and not 0 < period_s <= MAX_PERIOD_S:  # also refuses NaN
            raise ValueError(f"--period {period_s}: give seconds > 0, at most "
                             f"{MAX_PERIOD_S:.0f}")
        if busy > MAX_PERIOD_S * (1 + 1e-9):
            raise ValueError(f"the probes take {busy:g} s (count x spacing): a cycle lasts "
                             f"at most {MAX_PERIOD_S:.0f} s")
        if busy > period * (1 + 1e-9):
            raise ValueError(f"the probes take {busy:g} s (count x spacing), longer than the "
                             f"--period of {period:g} s")
        return cls(tuple(steps), period)

    def slots(self) -> list[Slot]:
        out: list[Slot] = []
        offset = 0.0
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
    """A byte rate the probes must stay under (bytes per second).  Options are parsed
    with beoperf.units (a rate, or a share of the link speed) by the command line."""

    bytes_per_s: float
    text: str  # as given, e.g. "0.2% of 10 Mbit/s" or "2kB/s"
    link_bits_per_s: float | None = None


def over_budget(schedule: Schedule, per_cycle: int, budget: Budget | None) -> bool:
    """True when the schedule's bytes per second exceed the budget."""
    return budget is not None and per_cycle / schedule.period_s > budget.bytes_per_s

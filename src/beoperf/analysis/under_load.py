"""Latency under load (``beoperf pingpong --under-load``): each size's one-way time
without the load and with it, from the same session, side by side, and the answer a
reader wants first ("p99 at 16 B: 41 us idle, 2.3 ms under load, x56").

The figures compared are the medians and the tail percentiles of analysis/tails.py, each
only where both distributions have enough samples for it (a percentile below its rule is
"n/a (n samples)" and is compared with nothing).  The headline takes the smallest size
measured both ways (the latency's) and the deepest percentile both have, p99.99 down to
the median.
"""

from __future__ import annotations

from dataclasses import dataclass

from beoperf.analysis import tails
from beoperf.model.pingpong import RunResult, SizeResult
from beoperf.units import format_rate, format_size

COMPARED = ("p50", "p99", "p99.9", "p99.99")  # the percentiles shown side by side
HEADLINE = ("p99.99", "p99.9", "p99", "p90", "p50")  # the deepest both have, first


@dataclass(frozen=True)
class Pair:
    """One size measured both ways."""

    size: int
    idle: SizeResult
    loaded: SizeResult

    def value(self, name: str, loaded: bool) -> float | None:
        """A percentile (us) of one side, or the median for "median"; None below the rule."""
        side = self.loaded if loaded else self.idle
        if name == "median":
            median = side.time_us.get("median")
            return float(median) if median is not None and median > 0 else None
        return tails.value_of(side.tail, name)

    def ratio(self, name: str) -> float | None:
        """Loaded over idle, where both are known."""
        a, b = self.value(name, False), self.value(name, True)
        return b / a if a and b else None


def pairs(run: RunResult) -> list[Pair]:
    """The sizes measured both ways, smallest first."""
    loaded = {s.size: s for s in run.loaded_sizes()}
    return [Pair(s.size, s, loaded[s.size]) for s in sorted(run.sizes, key=lambda z: z.size)
            if s.size in loaded]


def time_text(us: float) -> str:
    """A time in the unit that reads best (ns, us, ms, s)."""
    for unit, scale in (("s", 1e6), ("ms", 1e3), ("us", 1.0)):
        if us >= scale:
            return f"{us / scale:.3g} {unit}"
    return f"{us * 1e3:.3g} ns"


def headline(run: RunResult) -> str | None:
    """The answer: at the smallest size measured both ways, the deepest percentile both
    distributions have, idle and under load, and their ratio; None without a pair."""
    found = pairs(run)
    if not found:
        return None
    first = found[0]
    for name in HEADLINE:
        ratio = first.ratio(name)
        if ratio is not None:
            idle, loaded = first.value(name, False), first.value(name, True)
            assert idle is not None and loaded is not None
            return (f"{name} at {format_size(first.size)}: {time_text(idle)} idle, "
                    f"{time_text(loaded)} under load, x{ratio:.3g}")
    return None


def load_text(run: RunResult) -> str:
    """The load itself: its connections and its goodput while the ping-pong ran (the
    server's bytes over its window), or why that is not known."""
    load = (run.under_load or {}).get("load")
    if not isinstance(load, dict) or not load.get("started"):
        return "no load ran (the sweep without load did not complete)"
    streams = load.get("streams")
    rate = load.get("throughput_bps")
    size = load.get("write_bytes")
    what = (f"{streams} TCP connection{'s' if streams != 1 else ''} sending "
            f"{format_size(size) if isinstance(size, int) else '?'} writes")
    if not isinstance(rate, int | float) or isinstance(rate, bool):
        return f"{what}; its throughput is not known"
    window = load.get("window_s")
    span = f" over {window:.3g} s" if isinstance(window, int | float) else ""
    capped = " (ended early by the server's cap)" if load.get("capped") else ""
    return f"{what}: {format_rate(rate)}{span}, as the server received it{capped}"

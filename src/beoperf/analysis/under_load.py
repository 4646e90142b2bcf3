"""Latency under load (``beoperf pingpong --under-load``): each size's one-way time
without the load and with it, from the same session, side by side, and the answer a
reader wants first ("p99 at 16 B: 41 us idle, 2.3 ms under load, x56").

The figures compared are the medians and the tail percentiles of analysis/tails.py, each
only where both distributions have enough samples for it (a percentile below its rule is
"n/a (n samples)" and is compared with nothing).  The headline takes the smallest size
measured both ways (the latency's) and the deepest percentile both have, p99.99 down to
the median.

Each size's median under load is also judged against its median alone with the verdict
of every comparison (analysis/effect.py: the ratio's interval from both medians' own
intervals and the default spread between runs, as the two sweeps ran one after the other,
Bonferroni over the sizes): "worse" says the load slowed that size beyond the margin.
"""

from __future__ import annotations

from dataclasses import dataclass

from beoperf.analysis import effect, tails
from beoperf.model import jsonvalue
from beoperf.model.document import JsonObject
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


def _within_sd(size: SizeResult, sweep: JsonObject | None) -> float | None:
    """The standard deviation of log(median) inside its sweep, as compare reads it: the
    median's interval over trials, widened by that sweep's pass autocorrelation."""
    band = size.ci95_median_us
    sd = effect.log_sd_from_interval(*band) if band and len(band) == 2 else None
    if sd is None and size.trial_medians_us:
        sd = effect.median_log_sd(size.trial_medians_us)
    inflation = jsonvalue.number(sweep, "interval_inflation") or 1.0
    return None if sd is None else sd * max(1.0, inflation)


def median_effects(run: RunResult) -> dict[int, effect.Effect]:
    """Per size measured both ways: the loaded median against the idle one (lower is
    better, so a slower size under load is "worse"), corrected for the sizes at once."""
    found = pairs(run)
    loaded_sweep = jsonvalue.section(run.under_load, "sweep")
    out = {}
    for p in found:
        idle, loaded = p.value("median", False), p.value("median", True)
        if idle is None or loaded is None:
            continue
        out[p.size] = effect.compare(
            [effect.Replicate(idle, _within_sd(p.idle, run.sweep))],
            [effect.Replicate(loaded, _within_sd(p.loaded, loaded_sweep))],
            higher_is_better=False, family=len(found))
    return out

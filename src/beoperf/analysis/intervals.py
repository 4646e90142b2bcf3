"""Intervals of times and rates, which are positive: widened and combined on the log scale.

A time or a rate cannot be zero or negative, and its spread grows with its level (a run
that is 20% slower is slower at every size by a factor, not by a fixed number of
microseconds).  So every interval beoperf derives from another is computed on the log
scale: a median m with an interval [lo, hi] has the log half-widths ln(m / lo) below and
ln(hi / m) above; a widening by k multiplies them by k, and another independent part of
log half-width e is added to each in quadrature:

    lo' = m exp(-sqrt((k ln(m / lo))^2 + e^2)),   hi' = m exp(+sqrt((k ln(hi / m))^2 + e^2))

Both bounds stay positive however wide the spread.  (Order-statistic intervals of positive
samples are positive as they are; a widened or combined one, computed as m -+ k (m - lo),
crossed zero: an MPICH run with --sync showed [-0.097, 5644] us.)

An interval whose half-width, (hi - lo) / 2, exceeds the median says little more than the
order of magnitude: it is shown as "not measured precisely (n trials, spread xS)", S the
ratio of its high bound to its low one, rather than as "+-5453%".
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Z95 = 1.959964  # the normal quantile of a two-sided 95% interval
IMPRECISE = 1.0  # a relative half-width above this: "not measured precisely"


def _valid(median: float, low: float, high: float) -> bool:
    return (all(isinstance(v, int | float) and math.isfinite(v) for v in (median, low, high))
            and 0.0 < low <= median <= high)


def widened(median: float, low: float, high: float, k: float = 1.0,
            extra: float = 0.0) -> tuple[float, float] | None:
    """[lo, hi] around ``median`` with each side's log half-width multiplied by ``k`` and
    ``extra`` (a log half-width of an independent part) added in quadrature; None when
    the interval cannot be one of a positive quantity (a bound <= 0, or not around the
    median) or is beyond what a float holds (a bound of 0 or infinity: no document could
    store it, and no reader could use it)."""
    if not _valid(median, low, high) or not (0 <= k < math.inf and 0 <= extra < math.inf):
        return None
    below = math.hypot(k * math.log(median / low), extra)
    above = math.hypot(k * math.log(high / median), extra)
    try:
        out = median * math.exp(-below), median * math.exp(above)
    except OverflowError:
        return None
    return out if out[0] > 0 and math.isfinite(out[1]) else None


def between_runs_halfwidth(sd: float) -> float:
    """The log half-width a run's level adds to an interval for a next run (95%): the
    next run has a level of its own, so twice the variance of one, 1.96 sqrt(2) sd (sd:
    the standard deviation of log level between runs)."""
    return Z95 * math.sqrt(2.0) * sd


def relative_halfwidth(median: float, low: float, high: float) -> float | None:
    """(high - low) / 2 / median: the "+-x" of an interval, as a fraction of the median;
    None without a positive median."""
    if not (isinstance(median, int | float) and median > 0):
        return None
    return (high - low) / 2.0 / median


def log_relative(halfwidth: float) -> float:
    """The relative half-width of a log-scale interval m exp(-+h): sinh(h)."""
    return math.sinh(halfwidth)


def spread(low: float, high: float) -> float | None:
    """How many times the high bound is the low one (None without a positive low bound)."""
    return high / low if low > 0 else None


def imprecise(median: float, low: float, high: float) -> bool:
    """The interval's half-width exceeds the median."""
    rel = relative_halfwidth(median, low, high)
    return rel is not None and rel > IMPRECISE


def spread_text(low: float, high: float) -> str:
    """x12, x2.5, x1.08: the ratio of the bounds, with the digits that tell it apart."""
    ratio = spread(low, high)
    if ratio is None:
        return "x?"
    return f"x{ratio:.0f}" if ratio >= 10 else f"x{ratio:.2g}" if ratio >= 2 else \
        f"x{ratio:.3g}"


def not_precise_text(trials: int | None, low: float, high: float) -> str:
    """What an interval wider than its median is shown as."""
    count = f"{trials} trial{'s' if trials != 1 else ''}, " if trials is not None else ""
    return f"not measured precisely ({count}spread {spread_text(low, high)})"


def precision_text(median: float | None, interval: Sequence[float] | None,
                   trials: int | None = None, pm: str = "+-") -> str | None:
    """"+-2.3%", or "not measured precisely (12 trials, spread x12)" when the half-width
    exceeds the median; None without an interval."""
    if interval is None or median is None:
        return None
    low, high = float(interval[0]), float(interval[1])
    rel = relative_halfwidth(median, low, high)
    if rel is None or not low > 0:
        return None
    if rel > IMPRECISE:
        return not_precise_text(trials, low, high)
    return f"{pm}{rel * 100:.1f}%"

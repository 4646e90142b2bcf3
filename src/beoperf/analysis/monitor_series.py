"""The monitor report's plotted series: latency, bandwidth and loss binned over time, by
hour of the day, and the latency distribution; and the weekday x hour profile.

Bins keep the maximum and the loss of every bin beside the median and p95, so that
aggregation hides neither a spike nor a loss.  The report's figures
(report/monitor_plots.py) are drawn from these series alone.
"""

from __future__ import annotations

import datetime as dt

import numpy as np

from beoperf.analysis import monitor_events as events
from beoperf.analysis import monitor_local as local
from beoperf.analysis.monitor_cycles import Context, nums
from beoperf.model.monitor import (
    Cdf,
    HourOfDay,
    Quartiles,
    Series,
    Spread,
    Timeline,
    WeekdayHours,
)

MAX_BINS = 600  # time bins of the plotted series
NICE_BINS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
               43200, 86400)
DAY_S = 86400.0


def bin_width(span_s: float, period_s: float) -> float:
    """A round bin width (s) giving at most MAX_BINS bins, and no less than a period."""
    want = max(span_s / MAX_BINS, period_s)
    return float(next((b for b in NICE_BINS_S if b >= want), np.ceil(want / DAY_S) * DAY_S))


def _spread(groups: np.ndarray, values: np.ndarray, n: int, digits: int) -> Spread:
    q, _ = events.grouped_quantiles(groups, values, (0.0, 0.5, 0.95, 1.0), n)
    return Spread(*(nums(q[:, j], digits) for j in range(4)))  # min, median, p95, max


def _finite(values: np.ndarray, digits: int) -> list[float | None]:
    """Values that are finite (times, quantiles of answered probes) as document numbers."""
    return nums(values, digits)


def _loss(groups: np.ndarray, failed: np.ndarray, n: int) -> list[float | None]:
    rows = np.bincount(groups, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        return nums(100.0 * np.bincount(groups, weights=failed, minlength=n) / rows, 3)


def timeline(ctx: Context, large: np.ndarray, bps: np.ndarray) -> Timeline:
    """Binned series over time: min/median/p95/max of latency and bandwidth (`bps`, per
    cycle: NaN where it is no figure, see monitor_bandwidth.shown_bps), loss."""
    lo, hi = float(ctx.c.t[0]), float(ctx.c.cover_end[-1])
    width = bin_width(hi - lo, float(np.median(ctx.c.period)))
    origin = np.floor(lo / width) * width
    n = int(np.ceil((hi - origin) / width)) or 1
    row_bin = np.clip(((ctx.p.t - origin) // width).astype(np.int64), 0, n - 1)
    cyc_bin = np.clip(((ctx.c.t - origin) // width).astype(np.int64), 0, n - 1)
    failed = ctx.p.outcome != 0
    return Timeline(width, _finite(origin + width * np.arange(n), 3),
                    _spread(row_bin, ctx.one_way_ms, n, 3), _loss(row_bin, failed, n),
                    _spread(cyc_bin, bps, n, 0), _loss(row_bin[large], failed[large], n))


def hour_profile(ctx: Context, tz: dt.tzinfo = dt.UTC) -> HourOfDay:
    """One-way latency and loss by hour of the day (of the time zone ``tz``)."""
    hour = local.hour_of_day(ctx.p.t, float(ctx.c.t[0]), float(ctx.c.cover_end[-1]), tz)
    q, n = events.grouped_quantiles(hour, ctx.one_way_ms, (0.25, 0.5, 0.75, 0.95), 24)
    stats = Quartiles(*(nums(q[:, j], 3) for j in range(4)))  # p25, median, p75, p95
    return HourOfDay(list(range(24)), stats, [int(k) for k in n.tolist()],
                     _loss(hour, ctx.p.outcome != 0, 24))


def week_profile(ctx: Context, tz: dt.tzinfo = dt.UTC) -> list[WeekdayHours]:
    """Availability and median one-way latency by local weekday and hour (of ``tz``): the
    office hours, nights and weekends an admin asks about."""
    lo, hi = float(ctx.c.t[0]), float(ctx.c.cover_end[-1])
    day, hour = local.weekday_hour(ctx.p.t, lo, hi, tz)
    cell = day * 24 + hour
    cells = 7 * 24
    probes = np.bincount(cell, minlength=cells)
    answered = np.bincount(cell, weights=ctx.p.outcome == 0, minlength=cells)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = 100.0 * answered / probes
    median, count = events.grouped_quantiles(cell, ctx.one_way_ms, (0.5,), cells)
    out = []
    for k, name in enumerate(local.WEEKDAYS):
        hours = slice(24 * k, 24 * k + 24)
        out.append(WeekdayHours(name, [int(k) for k in probes[hours].tolist()],
                                nums(share[hours], 3), nums(median[hours, 0], 3),
                                [int(k) for k in count[hours].tolist()]))
    return out


def cdf(ctx: Context, points: int = 501) -> Cdf:
    """The distribution of one-way latency at `points` evenly spaced fractions."""
    ms = ctx.one_way_ms[~np.isnan(ctx.one_way_ms)]
    fractions = np.linspace(0.0, 1.0, points)
    values = np.quantile(ms, fractions) if ms.size else np.array([])
    return Cdf(_finite(values, 4), _finite(fractions[: values.size], 4))


def series(ctx: Context, large: np.ndarray, bps: np.ndarray,
           tz: dt.tzinfo = dt.UTC) -> Series:
    """All three, as the report's "series" (hours of the day in ``tz``)."""
    return Series(timeline(ctx, large, bps), hour_profile(ctx, tz), cdf(ctx))

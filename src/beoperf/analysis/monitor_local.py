"""Local time for the monitor report: day and week boundaries, the hour of the day and the
weekday of each probe, in an IANA time zone (``Europe/Berlin``; default UTC).

An admin asks about office hours, classes, nights and Saturdays where the link is, not in
UTC.  A zone's offset changes at its daylight-saving transitions: a local day is then 23
or 25 hours long, and the same UTC hour is another local hour in summer and in winter.
So the boundaries are each local midnight's own instant (zoneinfo), and each probe's
local time is its UTC time plus the offset in force at that instant, the offset found
exactly at every transition of the range (not assumed constant).

Pure computation: no database, no file.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo

import numpy as np

UTC_NAME = "UTC"
HOUR_S, DAY_S = 3600.0, 86400.0
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def zone(name: str) -> dt.tzinfo:
    """The time zone of an IANA name; ValueError (one line) for a name there is none of."""
    if name == UTC_NAME:
        return dt.UTC
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(f"unknown time zone {name!r}: give an IANA name such as "
                         "Europe/Berlin or America/New_York (or UTC)") from None


def _offset(t: float, tz: dt.tzinfo) -> float:
    """Seconds the zone's clock is ahead of UTC at instant t."""
    found = dt.datetime.fromtimestamp(t, tz).utcoffset()
    return 0.0 if found is None else found.total_seconds()


def _transition(a: float, b: float, tz: dt.tzinfo) -> float:
    """The first whole second in (a, b] with the offset of b (the offset at a differs)."""
    lo, hi, want = int(np.floor(a)), int(np.ceil(b)), _offset(b, tz)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _offset(mid, tz) == want else (mid, hi)
    return float(hi)


def offsets(lo: float, hi: float, tz: dt.tzinfo) -> tuple[np.ndarray, np.ndarray]:
    """(instants at which an offset starts, that offset in s) covering [lo, hi]: the first
    instant is -inf; each later one is a transition (found to the second; a zone changes
    its offset at most once an hour)."""
    grid = np.arange(np.floor(lo / HOUR_S) * HOUR_S, hi + HOUR_S, HOUR_S)
    values = np.array([_offset(float(t), tz) for t in grid])
    starts, found = [-np.inf], [float(values[0])]
    for i in np.flatnonzero(np.diff(values) != 0.0).tolist():
        starts.append(_transition(float(grid[i]), float(grid[i + 1]), tz))
        found.append(float(values[i + 1]))
    return np.array(starts), np.array(found)


def local_seconds(t: np.ndarray, lo: float, hi: float, tz: dt.tzinfo) -> np.ndarray:
    """Each UTC time of [lo, hi] as seconds of the zone's wall clock since the epoch."""
    starts, found = offsets(lo, hi, tz)
    return t + found[np.searchsorted(starts, t, side="right") - 1]


def hour_of_day(t: np.ndarray, lo: float, hi: float, tz: dt.tzinfo) -> np.ndarray:
    """The local hour (0-23) of each time."""
    return ((local_seconds(t, lo, hi, tz) % DAY_S) // HOUR_S).astype(np.int64)


def weekday_hour(t: np.ndarray, lo: float, hi: float,
                 tz: dt.tzinfo) -> tuple[np.ndarray, np.ndarray]:
    """The local ISO weekday (Monday 0 to Sunday 6; the epoch, 1970-01-01, was a
    Thursday: 3) and the local hour (0-23) of each time."""
    wall = local_seconds(t, lo, hi, tz)
    return ((wall // DAY_S + 3) % 7).astype(np.int64), \
        ((wall % DAY_S) // HOUR_S).astype(np.int64)


def _midnight(day: dt.date, tz: dt.tzinfo) -> float:
    """The instant of the local midnight starting ``day`` (where a transition skips it, the
    instant the clock jumps past it)."""
    return dt.datetime(day.year, day.month, day.day, tzinfo=tz).timestamp()


def _local_dates(lo: float, hi: float, tz: dt.tzinfo, step: int) -> list[dt.date]:
    """Local dates from the one holding lo (moved back to a Monday when step is 7) to the
    first one after hi, ``step`` days apart."""
    first = dt.datetime.fromtimestamp(lo, tz).date()
    if step == 7:
        first -= dt.timedelta(days=first.weekday())
    last = dt.datetime.fromtimestamp(hi, tz).date() + dt.timedelta(days=step)
    count = (last - first).days // step + 1
    return [first + dt.timedelta(days=step * k) for k in range(count)]


def _edges(lo: float, hi: float, tz: dt.tzinfo, step: int) -> tuple[np.ndarray, list[dt.date]]:
    dates = _local_dates(lo, hi, tz, step)
    edges = np.array([_midnight(d, tz) for d in dates])
    keep = int(np.searchsorted(edges, hi, side="left")) + 1
    keep = max(keep, 2)
    return edges[:keep], dates[:keep - 1]


def day_edges(lo: float, hi: float, tz: dt.tzinfo) -> tuple[np.ndarray, list[str]]:
    """Local day boundaries covering [lo, hi) and the days' names (2026-11-02)."""
    edges, dates = _edges(lo, hi, tz, 1)
    return edges, [d.isoformat() for d in dates]


def week_edges(lo: float, hi: float, tz: dt.tzinfo) -> tuple[np.ndarray, list[str]]:
    """ISO week (local Monday 00:00) boundaries covering [lo, hi) and names (2026-W45)."""
    edges, dates = _edges(lo, hi, tz, 7)
    names = []
    for d in dates:
        year, week, _ = d.isocalendar()
        names.append(f"{year}-W{week:02d}")
    return edges, names

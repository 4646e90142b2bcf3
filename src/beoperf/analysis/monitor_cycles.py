"""A monitor's probe rows as cycles: grouping, probe roles, monitored time, and numbers.

The first step of the monitor report (`analysis/monitor.py`): the rows the store read
(:class:`Probes`, one entry per probe, in time order) are regrouped cycle by cycle; each
cycle gets the time it stands for (until the next one, or one period when a gap or the
end follows), the small probes (latency) and the large ones (bandwidth) are told apart,
and the per-cycle median RTTs are computed (the bandwidth estimate from them is in
`monitor_bandwidth.py`).  Everything is a numpy array indexed by row or by cycle.  RTTs
are microseconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from beoperf.analysis import monitor_events as events
from beoperf.model.monitor import Interval

GAP_PERIODS = 1.5  # more idle time than this many periods after a cycle is "not monitored"


@dataclass(frozen=True)
class Probes:
    """Probe rows as arrays (one entry per row)."""

    t: np.ndarray  # send time, UTC s
    rtt: np.ndarray  # µs, NaN when not answered
    outcome: np.ndarray  # index into model.monitor.OUTCOMES (0 = ok)
    size: np.ndarray  # payload bytes
    key: np.ndarray  # run_id << 32 | cycle

    def take(self, order: np.ndarray) -> Probes:
        return Probes(*(a[order] for a in (self.t, self.rtt, self.outcome, self.size, self.key)))

    @property
    def run(self) -> np.ndarray:
        return self.key >> 32


@dataclass(frozen=True)
class Cycles:
    """One entry per cycle, in time order; rows of cycle i are rows[start[i]:start[i+1]]."""

    t: np.ndarray  # send time of the cycle's first probe, UTC s
    last_t: np.ndarray  # send time of its last probe
    first_ok_t: np.ndarray  # send time of its first answered probe (NaN: none)
    period: np.ndarray  # the run's period, s
    rows: np.ndarray  # probes
    ok: np.ndarray  # answered probes
    start: np.ndarray  # row offsets, length count + 1
    cover_end: np.ndarray  # end of the time the cycle stands for
    gap_before: np.ndarray  # True: a not-monitored gap precedes the cycle

    @property
    def count(self) -> int:
        return int(self.t.size)


def cycle_index(p: Probes) -> tuple[Probes, np.ndarray]:
    """Rows regrouped cycle by cycle (cycles in time order, rows in time order within
    each), and each row's cycle index."""
    change = np.concatenate(([True], p.key[1:] != p.key[:-1]))
    blocks = p.key[change]
    if np.unique(blocks).size == blocks.size:  # each cycle's rows are contiguous already
        return p, np.cumsum(change) - 1
    uniq, first, inverse = np.unique(p.key, return_index=True, return_inverse=True)
    rank = np.empty(uniq.size, dtype=np.int64)
    rank[np.argsort(p.t[first], kind="stable")] = np.arange(uniq.size)
    order = np.argsort(rank[inverse], kind="stable")
    return p.take(order), rank[inverse][order]


def per_run(run_ids: np.ndarray, values: dict[int, float]) -> np.ndarray:
    """values[run] for each entry of run_ids."""
    keys = np.array(sorted(values))
    vals = np.array([values[k] for k in keys], dtype=float)
    return vals[np.searchsorted(keys, run_ids)]


def cycles_of(p: Probes, runs: list[dict],
              t_to: float | None = None) -> tuple[Probes, Cycles, np.ndarray]:
    """Group rows into cycles: (regrouped rows, cycles, cycle index of each row).

    A cycle stands for the time until the next one starts, or for one period (or until
    its last probe, if later) when a gap or the end of the range (`t_to`) follows."""
    p, cyc = cycle_index(p)
    counts = np.bincount(cyc)
    start = np.concatenate(([0], np.cumsum(counts)))
    heads = start[:-1]
    ok = p.outcome == 0
    first_ok = np.minimum.reduceat(np.where(ok, p.t, np.inf), heads)
    t, last_t = p.t[heads], p.t[start[1:] - 1]
    period = per_run(p.run[heads], {r["id"]: float(r["period_s"]) for r in runs})
    busy_until = np.maximum(t + period, last_t)
    nxt = np.append(t[1:], np.inf)
    gap_after = nxt - busy_until > GAP_PERIODS * period
    gap_after[-1] = True
    cover_end = np.where(gap_after, busy_until, nxt)
    if t_to is not None:
        cover_end = np.minimum(cover_end, t_to)
    return p, Cycles(t=t, last_t=last_t, first_ok_t=np.where(np.isinf(first_ok), np.nan, first_ok),
                     period=period, rows=counts.astype(float),
                     ok=np.add.reduceat(ok.astype(float), heads), start=start,
                     cover_end=cover_end,
                     gap_before=np.concatenate(([False], gap_after[:-1]))), cyc


def _schedule_sizes(run: dict) -> tuple[int, int] | None:
    """(small, large) payload sizes of a run's schedule, if its config has one."""
    sizes = [int(step["size"]) for step in run.get("config", {}).get("schedule", [])
             if "size" in step]
    return (min(sizes), max(sizes)) if sizes else None


@dataclass(frozen=True)
class Roles:
    """Which rows are small probes (latency) and large probes (bandwidth)."""

    small: np.ndarray  # bool per row
    large: np.ndarray  # bool per row
    extra_bits: np.ndarray  # per cycle: 8 x (large size - small size), 0 if no large probe


def roles_of(p: Probes, c: Cycles, runs: list[dict]) -> Roles:
    """Small = the smallest size of the run's schedule, large = the largest (from the
    data when a run's config has no schedule)."""
    small: dict[int, float] = {}
    large: dict[int, float] = {}
    for r in runs:
        sizes = _schedule_sizes(r)
        if sizes is None:
            mine = p.size[p.run == r["id"]]
            sizes = (int(mine.min()), int(mine.max()))
        small[r["id"]], large[r["id"]] = sizes
    s_row, l_row = per_run(p.run, small), per_run(p.run, large)
    heads = c.start[:-1]
    s_cyc, l_cyc = per_run(p.run[heads], small), per_run(p.run[heads], large)
    return Roles(small=p.size == s_row, large=(p.size == l_row) & (l_row > s_row),
                 extra_bits=8.0 * (l_cyc - s_cyc))


def cycle_medians(p: Probes, cyc: np.ndarray, rows: np.ndarray, n: int) -> np.ndarray:
    """Median RTT (µs) of the answered probes among `rows`, per cycle (NaN: none)."""
    sel = rows & (p.outcome == 0)
    return events.grouped_quantiles(cyc[sel], p.rtt[sel], (0.5,), n)[0][:, 0]


# --- intervals: monitored time and gaps ----------------------------------------------------


def stretches(c: Cycles) -> np.ndarray:
    """Monitored intervals (k, 2): from a cycle after a gap to the end of the last
    cycle before the next gap."""
    firsts = np.flatnonzero(np.concatenate(([True], c.gap_before[1:])))
    lasts = np.append(firsts[1:] - 1, c.count - 1)
    return np.column_stack([c.t[firsts], c.cover_end[lasts]])


def overlap(intervals: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Seconds of the intervals (k, 2) that fall in each bin [edges[i], edges[i+1])."""
    if intervals.size == 0:
        return np.zeros(edges.size - 1)
    lo = np.maximum(intervals[:, :1], edges[None, :-1])
    hi = np.minimum(intervals[:, 1:], edges[None, 1:])
    return np.clip(hi - lo, 0.0, None).sum(axis=0)


def intervals(items: Sequence[Interval]) -> np.ndarray:
    """Stretches of time (outages, gaps) as an array (k, 2) of their starts and ends."""
    return np.array([[i.start_utc, i.end_utc] for i in items], dtype=float).reshape(-1, 2)


# --- numbers for the document ---------------------------------------------------------


def num(x: float | None, digits: int) -> float | None:
    """A finite number rounded for the document (never -0.0), else None."""
    if x is None or not np.isfinite(x):
        return None
    return round(float(x), digits) + 0.0  # -0.0 + 0.0 is 0.0


def nums(a: np.ndarray, digits: int) -> list[float | None]:
    """An array as document numbers (NaN -> None, never -0.0)."""
    return [None if not np.isfinite(v) else round(v, digits) + 0.0
            for v in np.asarray(a).tolist()]


def pct(part: float, whole: float) -> float | None:
    return num(100.0 * part / whole, 3) if whole > 0 else None


def one_way_ms(rtt_us: float) -> float | None:
    """One-way ms from an RTT in µs."""
    return num(rtt_us / 2000.0, 3)


# --- what the tables, events and series are computed from -------------------------------


@dataclass(frozen=True)
class Context:
    """Everything the period tables, events and series are computed from."""

    p: Probes
    c: Cycles
    cyc: np.ndarray  # cycle index of each row
    one_way_ms: np.ndarray  # per row: RTT/2 in ms for answered small probes, else NaN
    small_us: np.ndarray  # per cycle: median RTT of the answered small probes
    large_us: np.ndarray  # per cycle: median RTT of the answered large probes
    stretches: np.ndarray  # monitored intervals (k, 2)
    outages: np.ndarray  # outage intervals (k, 2)

"""The monitor's report: availability, latency, bandwidth and events of a link, by day and week.

`build_report` reads the store once (one query into numpy arrays) and returns a
versioned JSON-able document; `render_markdown` turns that document (and nothing
else) into Markdown; `write_report` writes report.json, report.md and the plots.

Units in the document: times are UTC seconds since the epoch (``*_utc``), durations
seconds (``*_s``), latencies milliseconds of one-way time (``*_ms``: half the RTT of
the small probes, an estimate that assumes a symmetric path), bandwidth bit/s
(``*_bps``), fractions in percent (``*_pct``).  Missing values are null.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from beoperf import __version__
from beoperf.monitor import events, store

FORMAT = "beoperf.monitor-report"
SCHEMA_VERSION = 1
GAP_PERIODS = 1.5  # more idle time than this many periods after a cycle is "not monitored"
PERSIST_WINDOWS = 36  # a stable state lasting this many windows is a baseline
MAX_BINS = 600  # time bins of the plotted series
NICE_BINS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
               43200, 86400)
PLOTS = ("latency.png", "bandwidth.png", "hour_of_day.png", "latency_cdf.png")
DAY_S, WEEK_S = 86400.0, 7 * 86400.0
MONDAY_OFFSET_S = 3 * DAY_S  # the epoch was a Thursday: ISO weeks start 3 days earlier
FAILURES = store.OUTCOMES[1:]  # outcome codes 1..4 (0 is "ok")

_OUTCOME_CASE = "CASE outcome " + " ".join(
    f"WHEN '{name}' THEN {code}" for code, name in enumerate(store.OUTCOMES)) + " END"
_SELECT = (f"SELECT t_utc, coalesce(rtt_us, -1.0), run_id * 4294967296 + cycle, "
           f"size * 8 + {_OUTCOME_CASE} FROM probes WHERE t_utc >= ? AND t_utc < ?")
_ROW = np.dtype([("t", "f8"), ("rtt", "f8"), ("key", "i8"), ("code", "i8")])


# --- loading ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Probes:
    """Probe rows as arrays (one entry per row)."""

    t: np.ndarray  # send time, UTC s
    rtt: np.ndarray  # µs, NaN when not answered
    outcome: np.ndarray  # index into store.OUTCOMES (0 = ok)
    size: np.ndarray  # payload bytes
    key: np.ndarray  # run_id << 32 | cycle

    def take(self, order: np.ndarray) -> Probes:
        return Probes(*(a[order] for a in (self.t, self.rtt, self.outcome, self.size, self.key)))

    @property
    def run(self) -> np.ndarray:
        return self.key >> 32


def load(db_path: str, t_from: float | None, t_to: float | None,
         host: str | None = None) -> tuple[Probes, list[dict]]:
    """The probes sent in [t_from, t_to) (all hosts, or `host`'s), in time order, and
    the runs they belong to.  ValueError if there are none, or several hosts."""
    db = store.connect(db_path, create=False)
    try:
        all_runs = {r["id"]: r for r in store.runs(db)}
        sql, args = _SELECT, [-np.inf if t_from is None else t_from,
                              np.inf if t_to is None else t_to]
        if host is not None:
            ids = [i for i, r in all_runs.items() if r["host"] == host]
            sql += f" AND run_id IN ({','.join('?' * len(ids))})"
            args += ids
        rows = np.fromiter(db.execute(sql + " ORDER BY t_utc", args), dtype=_ROW)
    finally:
        db.close()
    if rows.size == 0:
        raise ValueError(f"{db_path}: no probes {_range_words(t_from, t_to)}"
                         + (f" to {host}" if host else ""))
    rtt = np.where(rows["rtt"] < 0, np.nan, rows["rtt"])
    probes = Probes(rows["t"], rtt, rows["code"] & 7, rows["code"] >> 3, rows["key"])
    runs = [all_runs[int(i)] for i in np.unique(probes.run)]
    hosts = sorted({r["host"] for r in runs})
    if len(hosts) > 1:
        raise ValueError(f"{db_path}: probes to {len(hosts)} hosts ({', '.join(hosts)}) "
                         f"{_range_words(t_from, t_to)}; choose one host")
    return probes, runs


def _range_words(t_from: float | None, t_to: float | None) -> str:
    if t_from is None and t_to is None:
        return "at all"
    return f"from {iso(t_from) if t_from is not None else 'the start'} " \
           f"to {iso(t_to) if t_to is not None else 'the end'}"


def iso(t: float | None) -> str:
    """'2026-11-02 20:00:00' (UTC) for epoch seconds; '' for None."""
    if t is None:
        return ""
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


# --- cycles -----------------------------------------------------------------------------


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


def _cycle_index(p: Probes) -> tuple[Probes, np.ndarray]:
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


def _per_run(run_ids: np.ndarray, values: dict[int, float]) -> np.ndarray:
    """values[run] for each entry of run_ids."""
    keys = np.array(sorted(values))
    vals = np.array([values[k] for k in keys], dtype=float)
    return vals[np.searchsorted(keys, run_ids)]


def cycles_of(p: Probes, runs: list[dict],
              t_to: float | None = None) -> tuple[Probes, Cycles, np.ndarray]:
    """Group rows into cycles: (regrouped rows, cycles, cycle index of each row).

    A cycle stands for the time until the next one starts, or for one period (or until
    its last probe, if later) when a gap or the end of the range (`t_to`) follows."""
    p, cyc = _cycle_index(p)
    counts = np.bincount(cyc)
    start = np.concatenate(([0], np.cumsum(counts)))
    heads = start[:-1]
    ok = p.outcome == 0
    first_ok = np.minimum.reduceat(np.where(ok, p.t, np.inf), heads)
    t, last_t = p.t[heads], p.t[start[1:] - 1]
    period = _per_run(p.run[heads], {r["id"]: float(r["period_s"]) for r in runs})
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
    small, large = {}, {}
    for r in runs:
        sizes = _schedule_sizes(r)
        if sizes is None:
            mine = p.size[p.run == r["id"]]
            sizes = (int(mine.min()), int(mine.max()))
        small[r["id"]], large[r["id"]] = sizes
    s_row, l_row = _per_run(p.run, small), _per_run(p.run, large)
    heads = c.start[:-1]
    s_cyc, l_cyc = _per_run(p.run[heads], small), _per_run(p.run[heads], large)
    return Roles(small=p.size == s_row, large=(p.size == l_row) & (l_row > s_row),
                 extra_bits=8.0 * (l_cyc - s_cyc))


def cycle_medians(p: Probes, cyc: np.ndarray, rows: np.ndarray, n: int) -> np.ndarray:
    """Median RTT (µs) of the answered probes among `rows`, per cycle (NaN: none)."""
    sel = rows & (p.outcome == 0)
    return events.grouped_quantiles(cyc[sel], p.rtt[sel], (0.5,), n)[0][:, 0]


def bandwidth_per_cycle(small_us: np.ndarray, large_us: np.ndarray,
                        extra_bits: np.ndarray) -> np.ndarray:
    """B = 2 x 8 x (n_large - n_small) / (rtt_large - median rtt_small), bit/s, per cycle.

    The small probes' median RTT of the same cycle stands for alpha in
    t = alpha + beta x n; the echo carries the payload both ways, hence the 2.  NaN
    where there is no answered pair or the large probe was not slower.
    """
    extra_us = large_us - small_us
    with np.errstate(invalid="ignore", divide="ignore"):
        bps = 2.0 * extra_bits / (extra_us * 1e-6)
    return np.where((extra_us > 0) & (extra_bits > 0), bps, np.nan)


# --- intervals: monitored time, gaps, outages --------------------------------------------


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


def not_monitored(c: Cycles) -> list[dict]:
    """The gaps between monitored stretches."""
    s = stretches(c)
    return [{"start_utc": float(a), "end_utc": float(b), "duration_s": _num(b - a, 3)}
            for a, b in zip(s[:-1, 1], s[1:, 0], strict=True)]


def outages(p: Probes, c: Cycles, spans: list[tuple[int, int]]) -> list[dict]:
    """Each outage (cycles first..stop-1 unanswered) as the document lists it."""
    out = []
    for first, stop in spans:
        rows = p.outcome[c.start[first]:c.start[stop]]
        counts = np.bincount(rows, minlength=len(store.OUTCOMES))[1:]
        closed = stop < c.count and not c.gap_before[stop]
        end = float(c.first_ok_t[stop]) if closed else float(c.last_t[stop - 1])
        ended = "answer" if closed else ("end of data" if stop == c.count else "gap")
        start = float(c.t[first])
        out.append({"start_utc": start, "end_utc": end, "duration_s": _num(end - start, 3),
                    "cycles": stop - first, "kind": FAILURES[int(np.argmax(counts))],
                    "open": not closed, "ended_by": ended,
                    "open_start": first == 0 or bool(c.gap_before[first]),
                    "outcomes": {k: int(n) for k, n in zip(FAILURES, counts, strict=True) if n}})
    return out


def _intervals(items: list[dict], lo: str = "start_utc", hi: str = "end_utc") -> np.ndarray:
    return np.array([[i[lo], i[hi]] for i in items], dtype=float).reshape(-1, 2)


# --- numbers for the document ---------------------------------------------------------


def _num(x: float | None, digits: int) -> float | None:
    """A finite number rounded for the document, else None."""
    if x is None or not np.isfinite(x):
        return None
    return round(float(x), digits)


def _nums(a: np.ndarray, digits: int) -> list[float | None]:
    return [None if not np.isfinite(v) else round(v, digits) for v in np.asarray(a).tolist()]


def _pct(num: float, den: float) -> float | None:
    return _num(100.0 * num / den, 3) if den > 0 else None


def _ms(rtt_us: float) -> float | None:
    """One-way ms from an RTT in µs."""
    return _num(rtt_us / 2000.0, 3)


# --- per-period tables ----------------------------------------------------------------


@dataclass(frozen=True)
class Context:
    """Everything the period tables, events and series are computed from."""

    p: Probes
    c: Cycles
    cyc: np.ndarray  # cycle index of each row
    one_way_ms: np.ndarray  # per row: RTT/2 in ms for answered small probes, else NaN
    small_us: np.ndarray  # per cycle: median RTT of the answered small probes
    bps: np.ndarray  # per cycle: bandwidth estimate
    stretches: np.ndarray  # monitored intervals (k, 2)
    outages: np.ndarray  # outage intervals (k, 2)


def period_rows(ctx: Context, edges: np.ndarray, labels: list[str]) -> list[dict]:
    """Availability, latency and bandwidth of each period [edges[i], edges[i+1])."""
    n = edges.size - 1
    row_bin = np.clip(np.searchsorted(edges, ctx.p.t, side="right") - 1, 0, n - 1)
    rows = np.bincount(row_bin, minlength=n)
    answered = np.bincount(row_bin, weights=ctx.p.outcome == 0, minlength=n)
    lat, lat_n = events.grouped_quantiles(row_bin, ctx.one_way_ms, (0.5, 0.95), n)
    lat_sum = np.bincount(row_bin, weights=np.nan_to_num(ctx.one_way_ms), minlength=n)
    cyc_bin = np.clip(np.searchsorted(edges, ctx.c.t, side="right") - 1, 0, n - 1)
    bw, bw_n = events.grouped_quantiles(cyc_bin, ctx.bps, (0.5,), n)
    monitored, down = overlap(ctx.stretches, edges), overlap(ctx.outages, edges)
    span = overlap(np.array([[ctx.c.t[0], ctx.c.cover_end[-1]]]), edges)
    out = []
    for i in range(n):
        out.append({
            "period": labels[i], "start_utc": float(edges[i]), "end_utc": float(edges[i + 1]),
            "monitored_s": _num(monitored[i], 3), "coverage_pct": _pct(monitored[i], span[i]),
            "probes": int(rows[i]), "answered": int(answered[i]),
            "answered_pct": _pct(answered[i], rows[i]),
            "outage_s": _num(down[i], 3),
            "uptime_pct": _pct(monitored[i] - min(down[i], monitored[i]), monitored[i]),
            "one_way_ms": {"count": int(lat_n[i]), "median": _num(lat[i, 0], 3),
                           "mean": _num(lat_sum[i] / lat_n[i], 3) if lat_n[i] else None,
                           "p95": _num(lat[i, 1], 3)},
            "bandwidth_bps": {"count": int(bw_n[i]), "median": _num(bw[i, 0], 0)},
        })
    return out


def day_edges(lo: float, hi: float) -> tuple[np.ndarray, list[str]]:
    """UTC day boundaries covering [lo, hi) and the days' names (2026-11-02)."""
    edges = np.arange(np.floor(lo / DAY_S) * DAY_S, hi + DAY_S, DAY_S)
    edges = edges[: np.searchsorted(edges, hi, side="left") + 1]
    return edges, [iso(t)[:10] for t in edges[:-1]]


def week_edges(lo: float, hi: float) -> tuple[np.ndarray, list[str]]:
    """ISO week (Monday 00:00 UTC) boundaries covering [lo, hi) and names (2026-W45)."""
    first = np.floor((lo + MONDAY_OFFSET_S) / WEEK_S) * WEEK_S - MONDAY_OFFSET_S
    edges = np.arange(first, hi + WEEK_S, WEEK_S)
    edges = edges[: np.searchsorted(edges, hi, side="left") + 1]
    names = []
    for t in edges[:-1]:
        year, week, _ = dt.datetime.fromtimestamp(t, dt.UTC).isocalendar()
        names.append(f"{year}-W{week:02d}")
    return edges, names


def best_and_worst(days: list[dict]) -> tuple[dict | None, dict | None]:
    """Best and worst day by answered %, then uptime %, then median one-way latency.

    Only days monitored at least half of the time they lie in the data are ranked,
    unless no day is."""
    ranked = [d for d in days if d["answered_pct"] is not None]
    full = [d for d in ranked if (d["coverage_pct"] or 0.0) >= 50.0]
    ranked = full or ranked
    if not ranked:
        return None, None

    def key(d: dict) -> tuple[float, float, float]:
        median = d["one_way_ms"]["median"]
        return (d["answered_pct"], d["uptime_pct"] or 0.0,
                -(median if median is not None else np.inf))

    pick = ("period", "answered_pct", "uptime_pct")
    best, worst = max(ranked, key=key), min(ranked, key=key)
    return ({k: best[k] for k in pick} | {"one_way_median_ms": best["one_way_ms"]["median"]},
            {k: worst[k] for k in pick} | {"one_way_median_ms": worst["one_way_ms"]["median"]})


# --- congestion and level shifts -------------------------------------------------------


@dataclass(frozen=True)
class EventInput:
    """The cycles the event detection looks at (outage cycles left out), as a sequence."""

    cycles: np.ndarray  # cycle index of each analysed cycle
    small_us: np.ndarray  # their median small-probe RTT, µs
    windows: events.Windows

    def position(self, window: int) -> int:
        """Position in the sequence of the first cycle of `window` (count: the end)."""
        if window >= self.windows.count:
            return int(self.cycles.size)
        return int(self.windows.first_cycle[window])

    def refine(self, base: float, window: int, rising: bool) -> int:
        """A window edge moved to the best position nearby (see events.refine_edge)."""
        return events.refine_edge(self.small_us, base, self.position(window),
                                  2 * self.windows.width, rising)


def event_input(ctx: Context, small: np.ndarray, spans: list[tuple[int, int]]) -> EventInput:
    """Windows over the cycles not in an outage (an outage is not congestion)."""
    c = ctx.c
    in_outage = np.zeros(c.count, dtype=bool)
    for a, b in spans:
        in_outage[a:b] = True
    keep = np.flatnonzero(~in_outage)
    position = np.full(c.count, -1)
    position[keep] = np.arange(keep.size)
    sel = ~np.isnan(ctx.one_way_ms) & ~in_outage[ctx.cyc]
    width = events.window_width(keep.size, np.count_nonzero(small) / c.count)
    w = events.window_stats(position[ctx.cyc[sel]], ctx.p.rtt[sel], c.rows[keep],
                            c.rows[keep] - c.ok[keep], width)
    return EventInput(keep, ctx.small_us[keep], w)


def _raw_stats(ctx: Context, ev: EventInput, a: int, b: int) -> tuple[np.ndarray, int, int]:
    """One-way ms of the answered small probes, and the probes lost and scheduled, of the
    analysed cycles at positions a..b-1 of the sequence."""
    cycles = ev.cycles[a:b]
    lo, hi = ctx.c.start[cycles[0]], ctx.c.start[cycles[-1] + 1]
    analysed = np.zeros(cycles[-1] - cycles[0] + 1, dtype=bool)
    analysed[cycles - cycles[0]] = True
    keep = analysed[ctx.cyc[lo:hi] - cycles[0]]
    ms = ctx.one_way_ms[lo:hi][keep]
    lost = np.count_nonzero(ctx.p.outcome[lo:hi][keep] != 0)
    return ms[~np.isnan(ms)], lost, np.count_nonzero(keep)


def _episode_span(ev: EventInput, e: events.Episode) -> tuple[int, int]:
    """Positions [a, b) of an episode, its edges refined to the cycle."""
    a = ev.refine(e.base.level, e.first, rising=True)
    b = ev.refine(e.base.level, e.stop, rising=False) if e.stop < ev.windows.count \
        else ev.cycles.size
    return (a, b) if a < b else (ev.position(e.first), ev.position(e.stop))


def congestion_events(ctx: Context, ev: EventInput, episodes: list[events.Episode]) -> list[dict]:
    """Each congestion episode with its severity against the baseline in force; an
    episode whose own probes (edges refined) are not above the baseline is dropped."""
    out = []
    for e in episodes:
        a, b = _episode_span(ev, e)
        ms, lost, rows = _raw_stats(ctx, ev, a, b)
        if ms.size:
            q25, median, q75, p95 = np.percentile(ms, (25, 50, 75, 95))
        else:
            q25 = median = q75 = p95 = np.nan
        if not events.elevated(median * 2000.0, (q75 - q25) * 2000.0, lost, rows, e.base):
            continue
        base_ms = e.base.level / 2000.0
        start, end = ctx.c.t[ev.cycles[a]], ctx.c.cover_end[ev.cycles[b - 1]]
        out.append({
            "start_utc": float(start), "end_utc": float(end),
            "duration_s": _num(end - start, 3), "open": e.stop == ev.windows.count,
            "one_way_ms": {"median": _num(median, 3), "p95": _num(p95, 3),
                           "iqr": _num(q75 - q25, 3)},
            "loss_pct": _pct(lost, rows),
            "baseline": {"one_way_ms": _num(base_ms, 3), "iqr_ms": _ms(e.base.iqr),
                         "loss_pct": _num(100.0 * e.base.loss, 3)},
            "ratio": _num(median / base_ms, 3), "added_ms": _num(median - base_ms, 3),
            "dispersion_ratio": _num((q75 - q25) / (e.base.iqr / 2000.0), 3),
        })
    return out


def level_shifts(ctx: Context, ev: EventInput, shifts: list[events.Shift]) -> list[dict]:
    """Each change of baseline level (a path change)."""
    out = []
    for s in shifts:
        at = ev.refine(s.before.level, s.at, rising=True)
        before, after = s.before.level / 2000.0, s.after.level / 2000.0
        out.append({"at_utc": float(ctx.c.t[ev.cycles[min(at, ev.cycles.size - 1)]]),
                    "from_ms": _num(before, 3), "to_ms": _num(after, 3),
                    "change_ms": _num(after - before, 3), "ratio": _num(after / before, 3),
                    "iqr_before_ms": _ms(s.before.iqr), "iqr_after_ms": _ms(s.after.iqr)})
    return out


# --- plotted series ---------------------------------------------------------------------


def bin_width(span_s: float, period_s: float) -> float:
    """A round bin width (s) giving at most MAX_BINS bins, and no less than a period."""
    want = max(span_s / MAX_BINS, period_s)
    return float(next((b for b in NICE_BINS_S if b >= want), np.ceil(want / DAY_S) * DAY_S))


def _spread(groups: np.ndarray, values: np.ndarray, n: int, digits: int) -> dict:
    q, _ = events.grouped_quantiles(groups, values, (0.0, 0.5, 0.95, 1.0), n)
    return {name: _nums(q[:, j], digits) for j, name in enumerate(("min", "median", "p95",
                                                                     "max"))}


def _loss(groups: np.ndarray, failed: np.ndarray, n: int) -> list[float | None]:
    rows = np.bincount(groups, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        return _nums(100.0 * np.bincount(groups, weights=failed, minlength=n) / rows, 3)


def timeline(ctx: Context, large: np.ndarray) -> dict:
    """Binned series over time: min/median/p95/max of latency and bandwidth, loss."""
    lo, hi = float(ctx.c.t[0]), float(ctx.c.cover_end[-1])
    width = bin_width(hi - lo, float(np.median(ctx.c.period)))
    origin = np.floor(lo / width) * width
    n = int(np.ceil((hi - origin) / width)) or 1
    row_bin = np.clip(((ctx.p.t - origin) // width).astype(np.int64), 0, n - 1)
    cyc_bin = np.clip(((ctx.c.t - origin) // width).astype(np.int64), 0, n - 1)
    failed = ctx.p.outcome != 0
    return {"bin_s": width, "start_utc": _nums(origin + width * np.arange(n), 3),
            "one_way_ms": _spread(row_bin, ctx.one_way_ms, n, 3),
            "loss_pct": _loss(row_bin, failed, n),
            "bandwidth_bps": _spread(cyc_bin, ctx.bps, n, 0),
            "large_loss_pct": _loss(row_bin[large], failed[large], n)}


def hour_profile(ctx: Context) -> dict:
    """One-way latency and loss by hour of the day (UTC)."""
    hour = ((ctx.p.t % DAY_S) // 3600).astype(np.int64)
    q, n = events.grouped_quantiles(hour, ctx.one_way_ms, (0.25, 0.5, 0.75, 0.95), 24)
    stats = {name: _nums(q[:, j], 3) for j, name in enumerate(("p25", "median", "p75", "p95"))}
    return {"hour": list(range(24)), "one_way_ms": stats, "count": n.tolist(),
            "loss_pct": _loss(hour, ctx.p.outcome != 0, 24)}


def cdf(ctx: Context, points: int = 501) -> dict:
    """The distribution of one-way latency at `points` evenly spaced fractions."""
    ms = ctx.one_way_ms[~np.isnan(ctx.one_way_ms)]
    fractions = np.linspace(0.0, 1.0, points)
    values = np.quantile(ms, fractions) if ms.size else np.array([])
    return {"one_way_ms": _nums(values, 4), "fraction": _nums(fractions[: values.size], 4)}


# --- the document -----------------------------------------------------------------------


def method(outage_cycles: int, ev: EventInput, period_s: float,
           persist_windows: int = PERSIST_WINDOWS,
           noise_floor_us: float = events.NOISE_FLOOR_US) -> dict:
    """The rules behind the numbers, in words, with this report's parameters."""
    w = ev.windows.width
    window_s, persist_s = w * period_s, w * period_s * persist_windows
    return {
        "availability": "Answered: probes answered / probes scheduled (every scheduled probe "
                        "has a row, failed ones too). Uptime: 1 - outage time / monitored "
                        "time. Times when the monitor was not running are left out of both.",
        "outage_rule": f"An outage is a run of at least {outage_cycles} consecutive cycles in "
                       "which no probe was answered. It starts when the first probe of the "
                       "run was sent and ends when the first answered probe after it was sent "
                       "(or at the last probe sent, marked open, when the data or a "
                       "monitored stretch end inside it). Its kind is its most common failure.",
        "not_monitored": f"A gap of more than {GAP_PERIODS:g} periods after a cycle's end "
                         "with no probe at all is not monitored: not an outage, and excluded.",
        "one_way": "One-way latency is half the RTT of the small probes (the smallest size "
                   "of the schedule), an estimate that assumes a symmetric path.",
        "bandwidth": "Per cycle, with t = alpha + beta x n and the small probes' median RTT "
                     "of the cycle as alpha: B = 2 x 8 x (n_large - n_small) / (RTT_large - "
                     "median RTT_small) bit/s, n in payload bytes (the echo carries the "
                     "payload both ways; headers are not counted). Cycles where the large "
                     "probe was not slower give no estimate. Tables show the median.",
        "events": (
            f"Windows of {w} cycles (about {words_s(window_s)}; cycles in outages left "
            "out) give the median, IQR and loss of the small probes; PELT change-point "
            "detection (least squares, penalty "
            f"{events.PENALTY_PER_CHANNEL:g} x 3 x log(windows), each statistic in units of "
            "its noise) cuts them into segments. A segment is stable when its IQR is at most "
            f"{events.DISPERSION_RATIO:g} x the time-weighted median IQR and its loss is not "
            "significantly higher than the median loss. Stable segments at one level (within "
            f"{100 * events.LEVEL_TOLERANCE:g} % or one IQR; no IQR is taken as less than "
            f"{noise_floor_us:g} µs of RTT, the probing host's own noise) that last "
            "at least "
            f"{persist_windows} windows (about {words_s(persist_s)}) form a baseline. A "
            "change from one baseline level to another is a level shift (path change: new "
            "stable level, same dispersion, persisting). Congestion is any other stretch "
            "with a higher level, an IQR over "
            f"{events.DISPERSION_RATIO:g} x the baseline's or significantly more loss than "
            "the baseline in force, level and IQR also by more than "
            f"{events.SPREADS:g} x the robust SD of the baseline's window medians and IQRs "
            "(what it wanders by on its own). A short segment that is only the passage "
            "between two levels is not congestion. Its edges are moved to the cycle where "
            "the per-cycle median RTT departs from the baseline, and it is reported, if its "
            "own probes confirm it, with its median against the baseline. A "
            "level rise without more dispersion or loss that lasts longer than the baseline "
            "threshold is reported as a level shift (and, if it ends, a shift back); one "
            "still going at the end of the data is congestion marked open."),
        "best_worst": "Days are ranked by answered %, then uptime %, then lower median "
                      "one-way latency; only days monitored at least half of their time in "
                      "the data are ranked (all days if none is).",
        "parameters": {"outage_cycles": outage_cycles, "window_cycles": w,
                       "persist_windows": persist_windows, "gap_periods": GAP_PERIODS,
                       "noise_floor_us": noise_floor_us},
    }


def words_s(s: float) -> str:
    """'12 s', '4.5 min', '1.5 h', '2.0 d'."""
    for unit, scale in (("d", DAY_S), ("h", 3600.0), ("min", 60.0)):
        if s >= 2 * scale:
            return f"{s / scale:.1f} {unit}"
    return f"{s:.3g} s"


def _context(p: Probes, runs: list[dict], outage_cycles: int,
             t_to: float | None) -> tuple[Context, Roles, list[tuple[int, int]], list[dict]]:
    """Rows in cycles, their roles, the outages (cycle spans and documents)."""
    p, c, cyc = cycles_of(p, runs, t_to)
    roles = roles_of(p, c, runs)
    spans = events.find_outages(c.ok == 0, c.gap_before, outage_cycles)
    down = outages(p, c, spans)
    one_way = np.where(roles.small & (p.outcome == 0), p.rtt / 2000.0, np.nan)
    small_us = cycle_medians(p, cyc, roles.small, c.count)
    bps = bandwidth_per_cycle(small_us, cycle_medians(p, cyc, roles.large, c.count),
                              roles.extra_bits)
    ctx = Context(p, c, cyc, one_way, small_us, bps, stretches(c), _intervals(down))
    return ctx, roles, spans, down


def warnings(ctx: Context, roles: Roles, ev: EventInput) -> list[str]:
    out = []
    if np.isnan(ctx.one_way_ms).all():
        out.append("no small probe was answered: no latency figures")
    if not roles.large.any():
        out.append("the schedule has one probe size: no bandwidth estimate")
    else:
        tried = np.count_nonzero(np.bincount(ctx.cyc[roles.large & (ctx.p.outcome == 0)],
                                             minlength=ctx.c.count))
        bad = tried - np.count_nonzero(~np.isnan(ctx.bps))
        if bad:
            out.append(f"{bad} of {tried} cycles with an answered large probe give no "
                       "bandwidth estimate (no answered small probe, or the large probe was "
                       "not slower)")
    if ev.windows.count < 4:
        out.append(f"only {ev.windows.count} window(s) of {ev.windows.width} cycles: too "
                   "few to look for congestion or level shifts")
    return out


def build_report(db_path: str, t_from: float | None = None, t_to: float | None = None, *,
                 outage_cycles: int = 2, host: str | None = None,
                 baseline_windows: int = PERSIST_WINDOWS,
                 noise_floor_us: float = events.NOISE_FLOOR_US) -> dict:
    """The report document for the probes sent in [t_from, t_to) (UTC s; None: no bound).

    ``baseline_windows``: how many windows a stable level must last to be a baseline (a
    smaller figure suits short ranges: minutes rather than hours of data).
    ``noise_floor_us``: RTT changes and IQRs within this are the probing host's own noise.

    ValueError for an empty range, a range without probes, or probes to several hosts
    (then pass `host`); store.StoreError if the database cannot be used.
    """
    if t_from is not None and t_to is not None and t_from >= t_to:
        raise ValueError(f"empty range: from {iso(t_from)} to {iso(t_to)}")
    p, runs = load(db_path, t_from, t_to, host)
    ctx, roles, spans, down = _context(p, runs, outage_cycles, t_to)
    ev = event_input(ctx, roles.small, spans)
    episodes, shifts = events.detect(ev.windows, baseline_windows, noise_floor_us)
    lo, hi = float(ctx.c.t[0]), float(ctx.c.cover_end[-1])
    days = period_rows(ctx, *day_edges(lo, hi))
    best, worst = best_and_worst(days)
    summary = period_rows(ctx, np.array([lo, hi]), ["all"])[0]
    return {
        "format": FORMAT, "schema_version": SCHEMA_VERSION,
        "generated_utc": round(time.time(), 3), "beoperf_version": __version__,
        "source": {"db": str(db_path), "host": runs[0]["host"],
                   "runs": [_run_doc(r) for r in runs]},
        "range": {"requested_from_utc": t_from, "requested_to_utc": t_to,
                  "from_utc": lo, "to_utc": hi,
                  "monitored_s": summary["monitored_s"], "not_monitored_s": _num(
                      hi - lo - summary["monitored_s"], 3)},
        "method": method(outage_cycles, ev, float(np.median(ctx.c.period)),
                         baseline_windows, noise_floor_us),
        "summary": summary | {"outages": len(down), "congestion_events": len(episodes),
                              "level_shifts": len(shifts)},
        "best_day": best, "worst_day": worst,
        "days": days, "weeks": period_rows(ctx, *week_edges(lo, hi)),
        "outages": down, "not_monitored": not_monitored(ctx.c),
        "congestion": congestion_events(ctx, ev, episodes),
        "level_shifts": level_shifts(ctx, ev, shifts),
        "series": {"timeline": timeline(ctx, roles.large), "hour_of_day": hour_profile(ctx),
                   "cdf": cdf(ctx)},
        "plots": list(PLOTS),
        "warnings": warnings(ctx, roles, ev),
    }


def _run_doc(r: dict) -> dict:
    keep = ("id", "host", "address", "transport", "period_s", "started_utc", "ended_utc",
            "stop_reason")
    return {k: r[k] for k in keep} | {"schedule": r["config"].get("schedule")}


# --- Markdown ---------------------------------------------------------------------------


def _f(x: float | None, digits: int = 3) -> str:
    """A document number as table text ('–' when missing)."""
    return "–" if x is None else f"{x:.{digits}f}"


def _mbps(bps: float | None) -> str:
    return "–" if bps is None else f"{bps / 1e6:.2f}"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    if not rows:
        return ["(none)", ""]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return lines + ["| " + " | ".join(r) + " |" for r in rows] + [""]


PERIOD_HEAD = ["monitored", "answered %", "uptime %", "one-way median ms", "mean ms",
               "p95 ms", "bandwidth median Mbit/s", "outage"]


def _period_cells(d: dict) -> list[str]:
    lat = d["one_way_ms"]
    return [f"{words_s(d['monitored_s'])} ({_f(d['coverage_pct'], 1)} %)",
            _f(d["answered_pct"]), _f(d["uptime_pct"]), _f(lat["median"]), _f(lat["mean"]),
            _f(lat["p95"]), _mbps(d["bandwidth_bps"]["median"]),
            words_s(d["outage_s"]) if d["outage_s"] else "–"]


def _md_summary(doc: dict) -> list[str]:
    s, r = doc["summary"], doc["range"]
    lines = ["## Summary", "", *_table(["range", *PERIOD_HEAD],
                                       [["all", *_period_cells(s)]])]
    lines.append(f"Outages: {s['outages']}; congestion events: {s['congestion_events']}; "
                 f"level shifts: {s['level_shifts']}; not monitored: "
                 f"{words_s(r['not_monitored_s'])}.")
    for name in ("best_day", "worst_day"):
        d = doc[name]
        if d is not None:
            lines.append(f"{name.replace('_', ' ').capitalize()}: {d['period']} (answered "
                         f"{_f(d['answered_pct'])} %, uptime {_f(d['uptime_pct'])} %, one-way "
                         f"median {_f(d['one_way_median_ms'])} ms).")
    return lines + [""]


def _md_periods(doc: dict) -> list[str]:
    lines = []
    for key, title, label in (("days", "Per day (UTC)", "day"),
                              ("weeks", "Per week (UTC, ISO weeks from Monday)", "week")):
        rows = [[d["period"], *_period_cells(d)] for d in doc[key]]
        lines += [f"## {title}", "", *_table([label, *PERIOD_HEAD], rows)]
    return lines


def _md_outages(doc: dict) -> list[str]:
    rows = [[iso(o["start_utc"]), iso(o["end_utc"]), words_s(o["duration_s"]),
             str(o["cycles"]), o["kind"],
             f"open (ends with the {o['ended_by']})" if o["open"] else ""]
            for o in doc["outages"]]
    gaps = [[iso(g["start_utc"]), iso(g["end_utc"]), words_s(g["duration_s"])]
            for g in doc["not_monitored"]]
    return ["## Outages", "", *_table(["start (UTC)", "end (UTC)", "duration", "cycles",
                                       "kind", "note"], rows),
            "## Not monitored", "", *_table(["from (UTC)", "to (UTC)", "duration"], gaps)]


def _md_events(doc: dict) -> list[str]:
    rows = []
    for e in doc["congestion"]:
        b = e["baseline"]
        rows.append([iso(e["start_utc"]), iso(e["end_utc"]) + (" (open)" if e["open"] else ""),
                     words_s(e["duration_s"]), _f(e["one_way_ms"]["median"]),
                     _f(b["one_way_ms"]), _f(e["ratio"]), _f(e["added_ms"]),
                     _f(e["one_way_ms"]["p95"]), f"{_f(e['one_way_ms']['iqr'])} "
                     f"({_f(b['iqr_ms'])})", f"{_f(e['loss_pct'])} ({_f(b['loss_pct'])})"])
    shifts = [[iso(s["at_utc"]), _f(s["from_ms"]), _f(s["to_ms"]), _f(s["change_ms"]),
               f"{_f(s['iqr_before_ms'])} / {_f(s['iqr_after_ms'])}"]
              for s in doc["level_shifts"]]
    return ["## Congestion", "", *_table(
        ["start (UTC)", "end (UTC)", "duration", "one-way median ms", "baseline ms", "ratio",
         "added ms", "p95 ms", "IQR ms (baseline)", "loss % (baseline)"], rows),
        "## Level shifts (path changes)", "", *_table(
            ["at (UTC)", "from ms", "to ms", "change ms", "IQR ms before / after"], shifts)]


def render_markdown(doc: dict) -> str:
    """The report document as Markdown (every number comes from the document)."""
    r, src = doc["range"], doc["source"]
    transports = sorted({run["transport"] for run in src["runs"]})
    lines = [f"# Link report: {src['host']}", "",
             f"{iso(r['from_utc'])} to {iso(r['to_utc'])} UTC; monitored "
             f"{words_s(r['monitored_s'])}; {doc['summary']['probes']} probes "
             f"({', '.join(transports)}) in {len(src['runs'])} run(s) of `{src['db']}`. "
             f"Latencies are one-way estimates: half the RTT of the small probes.",
             "", *_md_summary(doc), *_md_periods(doc), *_md_outages(doc), *_md_events(doc),
             "## Plots", ""]
    lines += [f"![{name}]({name})" for name in doc["plots"]] + ["", "## Method", ""]
    lines += [f"- **{key.replace('_', ' ')}**: {text}" for key, text in doc["method"].items()
              if isinstance(text, str)]
    params = ", ".join(f"{k} = {v}" for k, v in doc["method"]["parameters"].items())
    lines += [f"- **parameters**: {params}", ""]
    if doc["warnings"]:
        lines += ["## Warnings", "", *[f"- {w}" for w in doc["warnings"]], ""]
    lines.append(f"Generated {iso(doc['generated_utc'])} UTC by beoperf "
                 f"{doc['beoperf_version']} ({doc['format']} v{doc['schema_version']}).")
    return "\n".join(lines) + "\n"


def write_report(doc: dict, db_path: str, outdir: str | Path) -> list[str]:
    """Write OUTDIR/report.md, report.json and the plots; the paths written.

    The figures are drawn from the document; `db_path` names their source in a footer.
    OSError (an unwritable directory, say) propagates.
    """
    from beoperf.monitor import plots  # matplotlib is imported only when plots are drawn

    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    md, js = out / "report.md", out / "report.json"
    md.write_text(render_markdown(doc), encoding="utf-8")
    js.write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    figures = plots.write_plots(doc, out, Path(db_path).name)
    return [str(md), str(js), *map(str, figures)]

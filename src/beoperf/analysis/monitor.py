"""The monitor report's analysis: availability, latency, bandwidth and events of a link.

:func:`analyse` turns the probe rows of one host over one transport (read by the store,
`monitor/store.py`) into the parts of a monitor-report document (`model/monitor.py`):
the range, the method in words, the summary, per-day and per-ISO-week tables, the best
and worst day, outages, stretches not monitored, congestion and level shifts, the
series the plots are drawn from, and warnings.  The rows become cycles in
`monitor_cycles.py`; congestion and level shifts are found by the change-point analysis
of `monitor_events.py`; the series are binned in `monitor_series.py`.

This is pure computation on arrays: it reads no database and writes no file.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from beoperf.analysis import monitor_bandwidth as bandwidth
from beoperf.analysis import monitor_events as events
from beoperf.analysis import monitor_local as local
from beoperf.analysis.monitor_cycles import (
    GAP_PERIODS,
    Context,
    Cycles,
    Probes,
    Roles,
    cycle_medians,
    cycles_of,
    intervals,
    num,
    one_way_ms,
    overlap,
    pct,
    roles_of,
    stretches,
)
from beoperf.analysis.monitor_series import series, week_profile
from beoperf.model.monitor import (
    NOISE_FLOOR_US,
    OUTAGE_CYCLES,
    OUTCOMES,
    PERSIST_WINDOWS,
    SPIKE_RTT_MS,
    Baseline,
    Congestion,
    CongestionLatency,
    Interval,
    Latency,
    LevelShift,
    Method,
    MonitorReport,
    Outage,
    Parameters,
    Period,
    Range,
    RankedDay,
    Source,
    Spikes,
    Summary,
)

DAY_S = 86400.0
FAILURES = OUTCOMES[1:]  # outcome codes 1..4 (0 is "ok")


# --- words ------------------------------------------------------------------------------


def iso(t: float | None) -> str:
    """'2026-11-02 20:00:00' (UTC) for epoch seconds; '' for None."""
    if t is None:
        return ""
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def words_s(s: float) -> str:
    """'12 s', '4.5 min', '1.5 h', '2.0 d' ('0 s', never '-0 s')."""
    s = s + 0.0  # -0.0 + 0.0 is 0.0
    for unit, scale in (("d", DAY_S), ("h", 3600.0), ("min", 60.0)):
        if s >= 2 * scale:
            return f"{s / scale:.1f} {unit}"
    return f"{s:.3g} s"


def range_words(t_from: float | None, t_to: float | None) -> str:
    """'at all', or 'from 2026-11-01 00:00:00 to the end'."""
    if t_from is None and t_to is None:
        return "at all"
    return f"from {iso(t_from) if t_from is not None else 'the start'} " \
           f"to {iso(t_to) if t_to is not None else 'the end'}"


# --- one host over one transport --------------------------------------------------------


def one_of(source: str, key: str, p: Probes, runs: list[dict], t_from: float | None,
           t_to: float | None) -> None:
    """ValueError if the runs probed several hosts (key "host") or used several
    transports ("transport"): a report never pools them into one statistic (ICMP is
    answered by the peer's kernel, UDP and TCP by its echo service: their latencies and
    losses differ)."""
    run_ids, counts = np.unique(p.run, return_counts=True)
    per: dict[str, int] = {}
    by_id = {r["id"]: r for r in runs}
    for run_id, n in zip(run_ids.tolist(), counts.tolist(), strict=True):
        per[by_id[run_id][key]] = per.get(by_id[run_id][key], 0) + n
    if len(per) > 1:
        listed = ", ".join(f"{name}: {n:,} probes" for name, n in sorted(per.items()))
        raise ValueError(f"{source}: probes {'to' if key == 'host' else 'over'} {len(per)} "
                         f"{key}s ({listed}) {range_words(t_from, t_to)}; a report is about "
                         f"one host over one transport: choose one (--{key} NAME)")


# --- outages and gaps -------------------------------------------------------------------


def not_monitored(c: Cycles) -> list[Interval]:
    """The gaps between monitored stretches."""
    s = stretches(c)
    return [Interval(float(a), float(b), _seconds(b - a))
            for a, b in zip(s[:-1, 1], s[1:, 0], strict=True)]


def _seconds(value: float) -> float:
    """A duration as the document stores it (3 decimals; a duration is never missing)."""
    found = num(value, 3)
    assert found is not None  # the difference of two finite times
    return found


def outages(p: Probes, c: Cycles, spans: list[tuple[int, int]]) -> list[Outage]:
    """Each outage (cycles first..stop-1 unanswered) as the document lists it."""
    out = []
    for first, stop in spans:
        rows = p.outcome[c.start[first]:c.start[stop]]
        counts = np.bincount(rows, minlength=len(OUTCOMES))[1:]
        closed = stop < c.count and not c.gap_before[stop]
        end = float(c.first_ok_t[stop]) if closed else float(c.last_t[stop - 1])
        ended = "answer" if closed else ("end of data" if stop == c.count else "gap")
        start = float(c.t[first])
        out.append(Outage(start, end, _seconds(end - start), cycles=stop - first,
                          kind=FAILURES[int(np.argmax(counts))], open=not closed,
                          ended_by=ended, open_start=first == 0 or bool(c.gap_before[first]),
                          outcomes={k: int(n) for k, n in zip(FAILURES, counts, strict=True)
                                    if n}))
    return out


# --- per-period tables ----------------------------------------------------------------


def bins(edges: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The period [edges[i], edges[i+1]) of each time (the first and last take the rest)."""
    return np.clip(np.searchsorted(edges, t, side="right") - 1, 0, edges.size - 2)


def spike_counts(ctx: Context, row_bin: np.ndarray, n: int,
                 spike_ms: Sequence[float]) -> list[list[Spikes]]:
    """Per period: the answered small probes whose RTT exceeded each threshold (ms), and
    their share of the period's answered small probes."""
    rtt_ms = ctx.one_way_ms * 2.0  # NaN but for the answered small probes
    answered = np.bincount(row_bin, weights=~np.isnan(rtt_ms), minlength=n)
    above = [np.bincount(row_bin, weights=np.nan_to_num(rtt_ms) > limit, minlength=n)
             for limit in spike_ms]
    return [[Spikes(float(limit), int(counts[i]), pct(counts[i], answered[i]))
             for limit, counts in zip(spike_ms, above, strict=True)] for i in range(n)]


def period_rows(ctx: Context, bw: bandwidth.CycleBandwidth, edges: np.ndarray,
                labels: list[str], spike_ms: Sequence[float] = SPIKE_RTT_MS) -> list[Period]:
    """Availability, latency, bandwidth and spikes (above each of ``spike_ms``, RTT ms)
    of each period [edges[i], edges[i+1])."""
    n = edges.size - 1
    row_bin = bins(edges, ctx.p.t)
    spikes = spike_counts(ctx, row_bin, n, spike_ms)
    rows = np.bincount(row_bin, minlength=n)
    answered = np.bincount(row_bin, weights=ctx.p.outcome == 0, minlength=n)
    lat, lat_n = events.grouped_quantiles(row_bin, ctx.one_way_ms, (0.5, 0.95), n)
    lat_sum = np.bincount(row_bin, weights=np.nan_to_num(ctx.one_way_ms), minlength=n)
    rates = bandwidth.periods(bw, bins(edges, ctx.c.t), n)
    monitored, down = overlap(ctx.stretches, edges), overlap(ctx.outages, edges)
    span = overlap(np.array([[ctx.c.t[0], ctx.c.cover_end[-1]]]), edges)
    out = []
    for i in range(n):
        out.append(Period(
            labels[i], float(edges[i]), float(edges[i + 1]), _seconds(monitored[i]),
            pct(monitored[i], span[i]), int(rows[i]), int(answered[i]),
            pct(answered[i], rows[i]), num(down[i], 3),
            pct(monitored[i] - min(down[i], monitored[i]), monitored[i]),
            Latency(int(lat_n[i]), num(lat[i, 0], 3),
                    num(lat_sum[i] / lat_n[i], 3) if lat_n[i] else None, num(lat[i, 1], 3)),
            rates.item(i), spikes[i]))
    return out


def day_edges(lo: float, hi: float, tz: dt.tzinfo = dt.UTC) -> tuple[np.ndarray, list[str]]:
    """Day boundaries (local midnights of ``tz``) covering [lo, hi) and the days' names
    (2026-11-02)."""
    return local.day_edges(lo, hi, tz)


def week_edges(lo: float, hi: float, tz: dt.tzinfo = dt.UTC) -> tuple[np.ndarray, list[str]]:
    """ISO week (local Monday 00:00 of ``tz``) boundaries covering [lo, hi) and names
    (2026-W45)."""
    return local.week_edges(lo, hi, tz)


def best_and_worst(days: list[Period]) -> tuple[RankedDay | None, RankedDay | None]:
    """Best and worst day by answered %, then uptime %, then median one-way latency.

    Only days monitored at least half of the time they lie in the data are ranked,
    unless no day is."""
    ranked = [d for d in days if d.answered_pct is not None]
    full = [d for d in ranked if (d.coverage_pct or 0.0) >= 50.0]
    ranked = full or ranked
    if not ranked:
        return None, None

    def key(d: Period) -> tuple[float, float, float]:
        median = d.one_way_ms.median
        return (d.answered_pct or 0.0, d.uptime_pct or 0.0,
                -(median if median is not None else np.inf))

    def ranked_day(d: Period) -> RankedDay:
        return RankedDay(d.period, d.answered_pct, d.uptime_pct, d.one_way_ms.median)

    return ranked_day(max(ranked, key=key)), ranked_day(min(ranked, key=key))


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
    return ms[~np.isnan(ms)], int(lost), int(np.count_nonzero(keep))


def _episode_span(ev: EventInput, e: events.Episode) -> tuple[int, int]:
    """Positions [a, b) of an episode, its edges refined to the cycle."""
    a = ev.refine(e.base.level, e.first, rising=True)
    b = ev.refine(e.base.level, e.stop, rising=False) if e.stop < ev.windows.count \
        else ev.cycles.size
    return (a, b) if a < b else (ev.position(e.first), ev.position(e.stop))


def congestion_events(ctx: Context, ev: EventInput,
                      episodes: list[events.Episode]) -> list[Congestion]:
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
        out.append(Congestion(
            float(start), float(end), _seconds(end - start), open=e.stop == ev.windows.count,
            one_way_ms=CongestionLatency(num(median, 3), num(p95, 3), num(q75 - q25, 3)),
            loss_pct=pct(lost, rows),
            baseline=Baseline(num(base_ms, 3), one_way_ms(e.base.iqr),
                              num(100.0 * e.base.loss, 3)),
            ratio=num(median / base_ms, 3), added_ms=num(median - base_ms, 3),
            dispersion_ratio=num((q75 - q25) / (e.base.iqr / 2000.0), 3)))
    return out


def level_shifts(ctx: Context, ev: EventInput, shifts: list[events.Shift]) -> list[LevelShift]:
    """Each change of baseline level (a path change)."""
    out = []
    for s in shifts:
        at = ev.refine(s.before.level, s.at, rising=True)
        before, after = s.before.level / 2000.0, s.after.level / 2000.0
        out.append(LevelShift(float(ctx.c.t[ev.cycles[min(at, ev.cycles.size - 1)]]),
                              num(before, 3), num(after, 3), num(after - before, 3),
                              num(after / before, 3), one_way_ms(s.before.iqr),
                              one_way_ms(s.after.iqr)))
    return out


# --- the parts of the document ----------------------------------------------------------


def method(outage_cycles: int, ev: EventInput, period_s: float,
           persist_windows: int = PERSIST_WINDOWS,
           noise_floor_us: float = NOISE_FLOOR_US, link_bps: float | None = None,
           timezone: str = local.UTC_NAME, spike_ms: Sequence[float] = SPIKE_RTT_MS) -> Method:
    """The rules behind the numbers, in words, with this report's parameters (the link
    speed only when the report was given one: else each run's own counts)."""
    w = ev.windows.width
    window_s, persist_s = w * period_s, w * period_s * persist_windows
    return Method({
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
        "bandwidth": bandwidth.method(noise_floor_us),
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
        "local_time": f"Days, ISO weeks (from Monday) and hours of the day are those of the "
                      f"time zone {timezone}: a day runs from one local midnight to the next "
                      "(23 or 25 hours on a daylight-saving change). Times in the tables are "
                      "UTC.",
        "spikes": "A spike is an answered small probe whose RTT (the round trip, as ping "
                  "shows it: not the one-way estimate) exceeded a threshold ("
                  + ", ".join(f"{x:g} ms" for x in spike_ms) + "); each period counts its "
                  "spikes and their share of its answered small probes. A lost probe is no "
                  "spike: it is in answered %.",
    }, Parameters(outage_cycles, w, persist_windows, GAP_PERIODS, noise_floor_us, link_bps,
                  timezone, [float(x) for x in spike_ms]))


def warnings(ctx: Context, roles: Roles, ev: EventInput, bw: bandwidth.CycleBandwidth,
             days: list[Period], run: dict) -> list[str]:
    """What the reader must know: figures missing, or not figures, and why."""
    out = []
    if np.isnan(ctx.one_way_ms).all():
        out.append("no small probe was answered: no latency figures")
    if not roles.large.any():
        out.append("the schedule has one probe size: no bandwidth estimate")
    else:
        out += _large_lost(ctx, roles)
        tried = np.count_nonzero(np.bincount(ctx.cyc[roles.large & (ctx.p.outcome == 0)],
                                             minlength=ctx.c.count))
        bad = tried - np.count_nonzero(~np.isnan(bw.bps))
        if bad:
            out.append(f"{bad} of {tried} cycles with an answered large probe give no "
                       "bandwidth estimate (no answered small probe, or the large probe was "
                       "not slower)")
        out += bandwidth.warnings(bw, days, run)
    if ev.windows.count < 4:
        out.append(f"only {ev.windows.count} window(s) of {ev.windows.width} cycles: too "
                   "few to look for congestion or level shifts")
    return out


LARGE_LOST = 0.5  # large probes answered at most this share as often as small ones: lost


def _large_lost(ctx: Context, roles: Roles) -> list[str]:
    """Large probes answered far less often than the small ones of the same cycles: big
    packets (fragments) are lost on the path, which no latency figure shows."""
    ok = ctx.p.outcome == 0
    small, large = int(np.count_nonzero(roles.small)), int(np.count_nonzero(roles.large))
    small_ok = int(np.count_nonzero(roles.small & ok))
    large_ok = int(np.count_nonzero(roles.large & ok))
    if not small or not large or not small_ok or \
            large_ok / large > LARGE_LOST * small_ok / small:
        return []
    size = int(np.max(ctx.p.size[roles.large]))
    return [f"the large probes ({size:,} bytes) were answered {large_ok} of {large} times, "
            f"the small ones {small_ok} of {small}: large packets or their fragments are "
            "lost on the path (a path MTU, a firewall dropping fragments, a shaper's "
            "burst); without them the link's rate cannot be estimated"]


def _context(p: Probes, runs: list[dict], outage_cycles: int,
             t_to: float | None) -> tuple[Context, Roles, list[tuple[int, int]], list[Outage]]:
    """Rows in cycles, their roles, the outages (cycle spans and documents)."""
    p, c, cyc = cycles_of(p, runs, t_to)
    roles = roles_of(p, c, runs)
    spans = events.find_outages(c.ok == 0, c.gap_before, outage_cycles)
    down = outages(p, c, spans)
    one_way = np.where(roles.small & (p.outcome == 0), p.rtt / 2000.0, np.nan)
    ctx = Context(p, c, cyc, one_way, cycle_medians(p, cyc, roles.small, c.count),
                  cycle_medians(p, cyc, roles.large, c.count), stretches(c), intervals(down))
    return ctx, roles, spans, down


def analyse(p: Probes, runs: list[dict], source: Source, t_from: float | None = None,
            t_to: float | None = None, *, outage_cycles: int = OUTAGE_CYCLES,
            baseline_windows: int = PERSIST_WINDOWS, noise_floor_us: float = NOISE_FLOOR_US,
            link_bps: float | None = None, plots: Sequence[str] = (),
            timezone: str = local.UTC_NAME,
            spike_ms: Sequence[float] = SPIKE_RTT_MS) -> MonitorReport:
    """The report on the probes (of one host over one transport, at least one) sent in
    [t_from, t_to) (UTC s; None: no bound), and the runs they belong to (``source``: the
    database and those runs, as the report names them; ``plots``: the figures it lists).

    ``baseline_windows``: how many windows a stable level must last to be a baseline (a
    smaller figure suits short ranges: minutes rather than hours of data).
    ``noise_floor_us``: RTT changes and IQRs within this are the probing host's own noise.
    ``link_bps``: the link speed of every run (bit/s; None: each run's recorded
    --link-speed, if any).
    ``timezone``: the IANA zone whose days, weeks and hours the report uses (ValueError
    for a name there is no zone of).  ``spike_ms``: the RTT thresholds (ms) spikes are
    counted above, in every period.
    """
    tz = local.zone(timezone)
    ctx, roles, spans, down = _context(p, runs, outage_cycles, t_to)
    ev = event_input(ctx, roles.small, spans)
    episodes, shifts = events.detect(ev.windows, baseline_windows, noise_floor_us)
    bw = bandwidth.per_cycle(ctx, roles.extra_bits, bandwidth.cycle_noise_us(
        ev.cycles, ev.windows, ctx.c.count, noise_floor_us), runs, link_bps)
    lo, hi = float(ctx.c.t[0]), float(ctx.c.cover_end[-1])
    edges, names = day_edges(lo, hi, tz)
    days = period_rows(ctx, bw, edges, names, spike_ms)
    best, worst = best_and_worst(days)
    whole = period_rows(ctx, bw, np.array([lo, hi]), ["all"], spike_ms)[0]
    congestion = congestion_events(ctx, ev, episodes)
    return MonitorReport(
        source, Range(t_from, t_to, lo, hi, whole.monitored_s,
                      _seconds(hi - lo - whole.monitored_s)),
        method(outage_cycles, ev, float(np.median(ctx.c.period)), baseline_windows,
               noise_floor_us, link_bps, timezone, spike_ms),
        Summary(**vars(whole), outages=len(down), congestion_events=len(episodes),
                level_shifts=len(shifts)),
        best, worst, days, period_rows(ctx, bw, *week_edges(lo, hi, tz), spike_ms), down,
        not_monitored(ctx.c), congestion, level_shifts(ctx, ev, shifts),
        series(ctx, roles.large, bandwidth.shown_bps(bw, bins(edges, ctx.c.t),
                                                     edges.size - 1), tz),
        list(plots), warnings(ctx, roles, ev, bw, days, runs[-1]), week_profile(ctx, tz))

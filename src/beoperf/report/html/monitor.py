"""A link monitor report in the HTML report: availability and latency by day and week
(in the report's time zone), by weekday and hour, the spikes per day, the outages, the
stretches not monitored, congestion and level shifts, the plots drawn from the report's
own binned series, and the method in words.

Plots (beoperf.report.monitor_plots draws the same as PNG): one-way latency over time
(median line, min..p95 band, maxima as dots), loss per time bin, the bandwidth estimate
over time, latency and loss by hour of day (the report's time zone), and the latency
distribution.  Outages are shaded red, stretches not monitored grey, congestion orange,
level shifts marked: binning never hides an event.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from beoperf.analysis.monitor import iso, words_s
from beoperf.model.document import Document, JsonObject
from beoperf.model.monitor import (
    REPORT_KIND,
    HourOfDay,
    MonitorReport,
    Period,
    Spread,
    Timeline,
)
from beoperf.report import renderer
from beoperf.report.html import svg
from beoperf.report.html.markup import (
    Markup,
    bullet_list,
    esc,
    figure,
    heading,
    join,
    num,
    pairs,
    para,
    table,
)
from beoperf.report.monitor import (
    bandwidth_cell,
    no_bandwidth,
    none_found,
    profile_grid,
    spike_note,
    spike_rows,
)

TIME_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
              43200, 86400, 2 * 86400, 7 * 86400, 14 * 86400, 28 * 86400)


NO_BINS = "a time bin without its start in this report: nothing to place on a time axis"


def _ms(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


@renderer(REPORT_KIND, "title")
def title(doc: Document, **_options: Any) -> str:
    found = MonitorReport.from_document(doc)
    src, r = found.source, found.range
    return (f"Link monitor report: {src.host} over {src.transport}, "
            f"{iso(r.from_utc)} to {iso(r.to_utc)} UTC")


# --------------------------------------------------------------------------- tables

PERIOD_HEAD = ["period", "monitored", "answered %", "uptime %", "one-way median ms",
               "mean ms", "p95 ms", "bandwidth median Mbit/s", "outage"]


def _period_row(d: Period, key: str) -> list[Any]:
    lat = d.one_way_ms
    return [d.period, f"{words_s(d.monitored_s)} ({_ms(d.coverage_pct, 1)} %)",
            num(d.answered_pct, _ms(d.answered_pct), f"{key}.answered_pct", unit="%"),
            num(d.uptime_pct, _ms(d.uptime_pct), f"{key}.uptime_pct", unit="%"),
            num(lat.median, _ms(lat.median), f"{key}.one_way_ms.median", unit="ms"),
            _ms(lat.mean),
            num(lat.p95, _ms(lat.p95), f"{key}.one_way_ms.p95", unit="ms"),
            bandwidth_cell(d.bandwidth_bps),
            words_s(d.outage_s) if d.outage_s else "–"]


def periods(b: MonitorReport) -> Markup:
    rows = [_period_row(b.summary, "body.summary")]
    rows[0][0] = "all"
    days = [_period_row(d, f"body.days.{i}") for i, d in enumerate(b.days)]
    weeks = [_period_row(d, f"body.weeks.{i}") for i, d in enumerate(b.weeks)]
    right, tz = range(2, 8), b.method.parameters.zone_name
    return join([table(PERIOD_HEAD, rows, numeric=right, caption="Summary"),
                 table(PERIOD_HEAD, days, numeric=right, caption=f"Per day ({tz})"),
                 table(PERIOD_HEAD, weeks, numeric=right,
                       caption=f"Per ISO week ({tz}, from Monday)"), profile(b), spikes(b)])


def spikes(b: MonitorReport) -> Markup:
    """The spike counts per day, and the note when the thresholds are below the path's
    own RTT; nothing for a report without them (before version 4)."""
    head, rows = spike_rows(b)
    if not rows:
        return join([])
    note = spike_note(b)
    return join([table(head, rows, numeric=range(1, len(head)),
                       caption=f"Spikes per day ({b.method.parameters.zone_name})"),
                 para(note, "note") if note else join([])])


def profile(b: MonitorReport) -> Markup:
    """The weekday x hour profile as two tables (answered %, median one-way ms); nothing
    for a report without one (before version 4)."""
    hours, rows = profile_grid(b)
    if not rows:
        return join([])
    tz, head = b.method.parameters.zone_name, ["weekday", *[f"{h:02d}h" for h in hours]]
    right = range(1, len(head))
    answered = [[w.weekday, *[_ms(w.answered_pct[h], 1) for h in hours]] for w in rows]
    median = [[w.weekday, *[_ms(w.one_way_median_ms[h]) for h in hours]] for w in rows]
    return join([table(head, answered, numeric=right,
                       caption=f"Answered % by weekday and hour ({tz})"),
                 table(head, median, numeric=right,
                       caption=f"One-way median ms by weekday and hour ({tz})")])


def events(b: MonitorReport) -> Markup:
    outages = [[iso(o.start_utc), iso(o.end_utc), words_s(o.duration_s), o.cycles, o.kind,
                f"open (ends with the {o.ended_by})" if o.open else ""] for o in b.outages]
    gaps = [[iso(g.start_utc), iso(g.end_utc), words_s(g.duration_s)]
            for g in b.not_monitored]
    cong = []
    for e in b.congestion:
        base, lat = e.baseline, e.one_way_ms
        cong.append([iso(e.start_utc), iso(e.end_utc) + (" (open)" if e.open else ""),
                     words_s(e.duration_s), _ms(lat.median), _ms(base.one_way_ms),
                     _ms(e.ratio), _ms(e.added_ms), f"{_ms(lat.iqr)} ({_ms(base.iqr_ms)})",
                     f"{_ms(e.loss_pct)} ({_ms(base.loss_pct)})"])
    shifts = [[iso(s.at_utc), _ms(s.from_ms), _ms(s.to_ms), _ms(s.change_ms),
               f"{_ms(s.iqr_before_ms)} / {_ms(s.iqr_after_ms)}"] for s in b.level_shifts]
    return join([
        table(["start (UTC)", "end (UTC)", "duration", "cycles", "kind", "note"], outages,
              numeric=[3], caption="Outages", empty=none_found(b, "outages")),
        table(["from (UTC)", "to (UTC)", "duration"], gaps, caption="Not monitored",
              empty=none_found(b, "not_monitored")),
        table(["start (UTC)", "end (UTC)", "duration", "one-way median ms", "baseline ms",
               "ratio", "added ms", "IQR ms (baseline)", "loss % (baseline)"], cong,
              numeric=range(3, 9), caption="Congestion", empty=none_found(b, "congestion")),
        table(["at (UTC)", "from ms", "to ms", "change ms", "IQR ms before / after"], shifts,
              numeric=range(1, 5), caption="Level shifts (path changes)",
              empty=none_found(b, "level_shifts"))])


# --------------------------------------------------------------------------- plots


def time_ticks(lo: float, hi: float) -> tuple[list[float], float]:
    """Round UTC instants from lo to hi (about six) and the step."""
    span = max(hi - lo, 1.0)
    step = next((s for s in TIME_STEPS if span / s <= 7), TIME_STEPS[-1])
    first = math.ceil(lo / step) * step
    return [first + k * step for k in range(int((hi - first) // step) + 1)], step


def _time_axis(lo: float, hi: float, first: float) -> svg.Axis:
    """Time from lo to hi (UTC seconds); the label names the date of ``first``."""
    ticks, step = time_ticks(lo, hi)
    long = hi - lo > 86400
    fmt = "%m-%d %H:%M" if long else ("%H:%M:%S" if step < 60 else "%H:%M")
    day = time.strftime("%Y-%m-%d", time.gmtime(first))
    return svg.Axis(f"time (UTC, from {day})",
                    lo, hi, ticks=ticks, tick_text=lambda t: time.strftime(fmt, time.gmtime(t)))


def _timeline_axis(tl: Timeline, starts: list[float]) -> svg.Axis:
    """The time axis of the binned timeline: one bin of margin at each end."""
    first, last, width = starts[0], starts[-1], tl.bin_s
    return _time_axis(first - width / 2, last + 1.5 * width, first)


def _floats(values: Sequence[float | None], scale: float = 1.0) -> list[float | None]:
    return [None if v is None else v * scale for v in values]


def _spans(b: MonitorReport) -> list[svg.Span]:
    out = [svg.Span(o.start_utc, o.end_utc, f"outage {words_s(o.duration_s)} ({o.kind})")
           for o in b.outages]
    out += [svg.Span(g.start_utc, g.end_utc, f"not monitored {words_s(g.duration_s)}",
                     cls="gap") for g in b.not_monitored]
    out += [svg.Span(e.start_utc, e.end_utc, f"congestion +{_ms(e.added_ms)} ms",
                     cls="event") for e in b.congestion]
    out += [svg.Span(s.at_utc, s.at_utc, f"level shift {s.change_ms:+.3f} ms", cls="event")
            for s in b.level_shifts]
    return out


def _range(values: Sequence[float | None], log: bool = False) -> tuple[float, float]:
    got = [v for v in values if v is not None and (v > 0 or not log)]
    if not got:
        return (0.0, 1.0)
    return svg.padded(min(got), max(got), log) if log else (0.0, max(got) * 1.08 or 1.0)


def _spread_chart(b: MonitorReport, stats: Spread, scale: float, unit: str, title: str,
                  what: str, nothing: str) -> Markup:
    """Median line, min..p95 band and maxima of binned statistics; ``nothing``: why there
    is nothing to draw (from the report's counts: a plot never contradicts its data)."""
    tl, starts = b.series.timeline, b.series.timeline.bin_starts()
    if starts is None:
        return svg.empty(title, NO_BINS)
    t = [x + tl.bin_s / 2 for x in starts]
    med, lo, p95, top = (_floats(v, scale) for v in (stats.median, stats.min, stats.p95,
                                                     stats.max))
    if not any(v is not None for v in med):
        return svg.empty(title, nothing)
    gap = 1.5 * tl.bin_s  # bins missing from the series: no line across them
    bands = _bands(t, lo, p95, gap)
    tips = [f"{iso(x - tl.bin_s / 2)} + {words_s(tl.bin_s)}: median "
            f"{_num(m)} {unit}, min..p95 {_num(a)}..{_num(c)}, max {_num(d)}"
            for x, m, a, c, d in zip(t, med, lo, p95, top, strict=True)]
    lines = [svg.Line(f"median {what}", t, med, tips, bands=bands, max_gap=gap),
             svg.Line("maximum", t, top, [], color=3, dots_only=True, hover=False)]
    lo_y, hi_y = _range([*lo, *top])
    axis = svg.Axis(f"{what} ({unit})", 0.0, hi_y, tick_text=lambda v: f"{v:g}")
    return svg.chart(title, _timeline_axis(tl, starts), axis, lines,
                     _spans(b))


def _bands(t: Sequence[float], lo: Sequence[float | None], hi: Sequence[float | None],
           gap: float) -> list[list[tuple[float, float]]]:
    """The lo..hi band as one polygon per stretch of bins with data (none across a gap)."""
    out: list[list[tuple[float, float]]] = []
    run: list[int] = []
    for i, x in enumerate(t):
        if lo[i] is None or hi[i] is None or (run and x - t[run[-1]] > gap):
            if run:
                out.append(_outline(t, lo, hi, run))
            run = [] if lo[i] is None or hi[i] is None else [i]
            continue
        run.append(i)
    if run:
        out.append(_outline(t, lo, hi, run))
    return out


def _outline(t: Sequence[float], lo: Sequence[float | None], hi: Sequence[float | None],
             run: list[int]) -> list[tuple[float, float]]:
    """One band's polygon: along lo, then back along hi (both set on every bin of run)."""
    lows = [(t[k], v) for k in run if (v := lo[k]) is not None]
    highs = [(t[k], v) for k in run if (v := hi[k]) is not None]
    return lows + highs[::-1]


def _num(v: float | None) -> str:
    return "–" if v is None else f"{v:.4g}"


def _loss_chart(b: MonitorReport, loss: Sequence[float | None], title: str) -> Markup:
    tl, starts = b.series.timeline, b.series.timeline.bin_starts()
    if starts is None:
        return svg.empty(title, NO_BINS)
    t = [x + tl.bin_s / 2 for x in starts]
    tips = [f"{iso(x - tl.bin_s / 2)}: {_num(v)} % lost" for x, v in zip(t, loss, strict=True)]
    axis = svg.Axis("probes lost (%)", 0.0, max(max((v or 0.0) for v in loss) * 1.1, 1.0),
                    tick_text=lambda v: f"{v:g}")
    return svg.chart(title, _timeline_axis(tl, starts), axis,
                     [svg.Line("loss", t, loss, tips, color=3, max_gap=1.5 * tl.bin_s)],
                     _spans(b), height=200)


def hour_chart(b: MonitorReport) -> Markup:
    h: HourOfDay = b.series.hour_of_day
    lat, tz = h.one_way_ms, b.method.parameters.zone_name
    if not any(v is not None for v in lat.median):
        return svg.empty(f"One-way latency by hour of day ({tz})",
                         "no small probe answered in this range")
    hours = [float(x) for x in h.hour]
    band = [(x, y) for x, y in zip(hours, lat.p25, strict=True) if y is not None] + \
        [(x, y) for x, y in zip(hours, lat.p75, strict=True) if y is not None][::-1]
    tips = [f"{int(x):02d}:00-{int(x):02d}:59 {tz}: median {_num(m)} ms, p25..p75 {_num(a)}.."
            f"{_num(c)}, p95 {_num(d)}, {n} probes, loss {_num(loss)} %"
            for x, m, a, c, d, n, loss in zip(hours, lat.median, lat.p25, lat.p75, lat.p95,
                                             h.count, h.loss_pct, strict=True)]
    lines = [svg.Line("median", hours, lat.median, tips, bands=[band]),
             svg.Line("p95", hours, lat.p95, [f"p95 {_num(v)} ms" for v in lat.p95],
                      color=1, dashed=True)]
    _, top = _range([*lat.p95, *lat.p75])
    return svg.chart(f"One-way latency by hour of day ({tz})",
                     svg.Axis(f"hour of day ({tz})", -0.5, 23.5, ticks=[0, 3, 6, 9, 12, 15, 18, 21],
                              tick_text=lambda v: f"{int(v):02d}h"),
                     svg.Axis("one-way latency (ms)", 0.0, top, tick_text=lambda v: f"{v:g}"),
                     lines)


def cdf_chart(b: MonitorReport) -> Markup:
    xs, fs = b.series.cdf.points()
    if not xs:
        return svg.empty("Distribution of one-way latency",
                         "no small probe answered in this range")
    tips = [f"{f * 100:.1f} % of probes at or below {x:.4g} ms" for x, f in zip(xs, fs,
                                                                              strict=True)]
    lo, hi = svg.padded(min(xs), max(xs), all(x > 0 for x in xs))
    return svg.chart("Distribution of one-way latency (CDF)",
                     svg.Axis("one-way latency (ms)", lo, hi, log=lo > 0,
                              tick_text=lambda v: f"{v:.3g}"),
                     svg.Axis("fraction of answered small probes", 0.0, 1.0,
                              tick_text=lambda v: f"{v:g}"),
                     [svg.Line("CDF", xs, fs, tips, steps=True)])


def plots(found: MonitorReport | JsonObject, anchor: str) -> Markup:
    """The report's figures (of a typed report or its body), drawn from its series."""
    b = MonitorReport.of(found)
    s, src, tl = b.summary, b.source, b.series.timeline
    period = src.runs[0].period_s if src.runs else None
    cond = (f"{src.transport} probes to {src.host}" +
            (f", one cycle every {period:g} s" if period else "") +
            f"; {s.probes} probes, bins of {words_s(tl.bin_s)}")
    legend = svg.legend([svg.Line("median per bin", [], [], []),
                         svg.Line("maximum per bin", [], [], [], color=3)],
                        [("bandsw", "min..p95 per bin"), ("spansw", "outage"),
                         ("gapsw", "not monitored"), ("eventsw", "congestion / level shift")])
    bw = tl.bandwidth_bps
    figs = [
        figure(_spread_chart(b, tl.one_way_ms, 1.0, "ms",
                             "One-way latency over time", "one-way latency",
                             "no small probe answered in this range"),
               join([legend, esc(f"One-way latency: half the RTT of the small probes; {cond}.")]),
               f"{anchor}-latency", "latency"),
        figure(_loss_chart(b, tl.loss_pct, "Small probes lost per bin"),
               esc(f"Share of the small probes of each bin that got no answer; {cond}."),
               f"{anchor}-loss", "loss"),
        figure(_spread_chart(b, bw, 1e-6, "Mbit/s", "Bandwidth estimate over time",
                             "bandwidth", no_bandwidth(b)),
               esc("Per cycle: 2 x 8 x (n_large - n_small) / (RTT_large - median RTT_small); "
                   f"median per bin, min..p95 band; {cond}."), f"{anchor}-bandwidth",
               "bandwidth"),
        figure(hour_chart(b), esc("Median and p25..p75 band per hour of the day, p95 dashed; "
                                  f"{cond}."), f"{anchor}-hours", "hours"),
        figure(cdf_chart(b), esc(f"Distribution of the one-way latency; {cond}."),
               f"{anchor}-cdf", "cdf")]
    return join(figs)


@renderer(REPORT_KIND, "html")
def html(doc: Document, *, anchor: str = "monitor", **_options: Any) -> str:
    b = MonitorReport.from_document(doc)
    src, r = b.source, b.range
    method = [f"{key.replace('_', ' ')}: {text}" for key, text in b.method.rules.items()]
    params = ", ".join(f"{k} = {v}" for k, v in b.method.parameters.to_dict().items())
    best, worst = b.best_day, b.worst_day
    return join([
        pairs([("probed", f"{src.host} over {src.transport}, {len(src.runs)} run(s) "
                          f"of {src.db}"),
               ("range", f"{iso(r.from_utc)} to {iso(r.to_utc)} UTC; monitored "
                         f"{words_s(r.monitored_s)}, not monitored "
                         f"{words_s(r.not_monitored_s)}"),
               ("best day", f"{best.period} (answered {_ms(best.answered_pct)} %, "
                            f"median {_ms(best.one_way_median_ms)} ms)" if best else None),
               ("worst day", f"{worst.period} (answered {_ms(worst.answered_pct)} %, "
                             f"median {_ms(worst.one_way_median_ms)} ms)" if worst else None)]),
        periods(b), heading("Events"), events(b), heading("Plots"), plots(b, anchor),
        heading("Method"), bullet_list(method), para(f"Parameters: {params}.", "none")])

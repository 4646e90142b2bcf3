"""The deep tail of a ping-pong run in the HTML report: the percentiles p50 to p99.99
per size against the message size, the log histogram of one size, and a table with
"n/a (n samples)" where a percentile lacks the samples (beoperf.analysis.tails).

Sizes without a tail (stream mode, documents before version 6, imports) are left out;
a run without any gets no section.
"""

from __future__ import annotations

from beoperf.analysis import tails
from beoperf.model.pingpong import RunResult, SizeResult
from beoperf.report.html import svg
from beoperf.report.html.markup import Markup, details, esc, figure, heading, join, table
from beoperf.units import format_size, size_tick

SHOWN = ("p50", "p99", "p99.9", "p99.99")  # the chart's lines
MAX_ROWS = 1000  # as the size table: a crafted run must not make a huge page


def _time_text(us: float) -> str:
    for unit, scale in (("s", 1e6), ("ms", 1e3), ("µs", 1.0)):
        if us >= scale:
            return f"{us / scale:.4g} {unit}"
    return f"{us * 1e3:.4g} ns"


def _value(s: SizeResult, name: str) -> float | None:
    return tails.value_of(s.tail, name)


def _with_tail(run: RunResult) -> list[SizeResult]:
    return [s for s in run.sizes if isinstance(s.tail, dict)][:MAX_ROWS]


def percentile_chart(sizes: list[SizeResult], what: str = "one-way time") -> Markup:
    """p50 .. p99.99 against the message size (log-log); a percentile without enough
    samples is a gap; an empty message (0 B) has no place on the log axis."""
    drawn = [s for s in sizes if s.size > 0]
    values = [v for s in drawn for n in SHOWN if (v := _value(s, n)) is not None]
    if len(drawn) < 1 or not values:
        return svg.empty("Tail percentiles against message size",
                         "no size has enough samples for a percentile")
    xs = [float(s.size) for s in drawn]
    lines = []
    for color, name in enumerate(SHOWN):
        ys = [_value(s, name) for s in drawn]
        tips = [f"{name} at {format_size(s.size)}: "
                f"{tails.percentile_text(s.tail, name)}" for s in drawn]
        lines.append(svg.Line(name, xs, ys, tips, color=color))
    xlo, xhi = svg.padded(min(xs), max(xs), True)
    ylo, yhi = svg.padded(min(values), max(values), True)
    return svg.chart("Tail percentiles against message size",
                     svg.Axis("message size (bytes; K = 1024)", xlo, xhi, log=True,
                              base2=True, tick_text=size_tick),
                     svg.Axis(what, ylo, yhi, log=True, tick_text=_time_text), lines)


def histogram_chart(s: SizeResult, what: str = "one-way time") -> Markup:
    """The log histogram of one size: samples per 1% bucket against the time."""
    h = tails.histogram_of(s.tail)
    nonzero = [int(i) for i in h.counts.nonzero()[0]]
    if not nonzero:
        return svg.empty(f"Histogram at {format_size(s.size)}", "no samples")
    xs = [tails.bucket_middle_ns(i) / 1000.0 for i in nonzero]
    ys: list[float | None] = [float(h.counts[i]) for i in nonzero]
    tips = [f"{_time_text(x)}: {int(h.counts[i]):,} samples" for x, i in zip(xs, nonzero,
                                                                              strict=True)]
    line = svg.Line("samples per bucket", xs, ys, tips, dots_only=True, hover=len(xs) <= 400)
    xlo, xhi = svg.padded(min(xs), max(xs), True)
    top = float(h.counts.max())
    return svg.chart(f"Histogram at {format_size(s.size)}: {what} "
                     f"({h.total:,} samples, {tails.RATIO - 1:.0%} buckets)",
                     svg.Axis(what, xlo, xhi, log=True, tick_text=_time_text),
                     svg.Axis("samples (log)", 0.8, top * 1.3, log=True,
                              tick_text=lambda v: f"{v:g}"), [line])


def tail_table(sizes: list[SizeResult]) -> Markup:
    rows = [[format_size(s.size), f"{tails.samples_of(s.tail):,}",
             *[tails.percentile_text(s.tail, n).replace(" us", " µs")
               for n, _p in tails.PERCENTILES]] for s in sizes]
    return details(f"Tail percentiles of every size ({len(rows)})",
                   table(["size", "samples", *[n for n, _p in tails.PERCENTILES]], rows,
                         numeric=range(0, 7), cls="tails"))


def section(run: RunResult, latency_size: int | None, anchor: str) -> Markup:
    """The "Tails" heading, the two charts and the table; empty when no size has a tail."""
    sizes = _with_tail(run)
    if not sizes:
        return Markup("")
    shown = next((s for s in sizes if s.size == latency_size), None) or \
        max(sizes, key=lambda s: tails.samples_of(s.tail))
    what = "one-way time" if run.parameters.get("mode") != "bidir" else "time per exchange"
    legend = svg.legend([svg.Line(name, [], [], [], color=i) for i, name in enumerate(SHOWN)])
    caption = join([legend, esc(f"Percentiles of every sample of a size ({what}): "
                                f"{tails.RULE}; below that a percentile is n/a and its "
                                "line has a gap (the table below gives every one).")])
    return join([heading("Tails"),
                 figure(percentile_chart(sizes, what), caption, f"{anchor}-tails", "tails"),
                 figure(histogram_chart(shown, what), esc(
                     f"Samples per bucket at {format_size(shown.size)} (the latency's size "
                     "when it has a tail), both axes logarithmic."),
                     f"{anchor}-histogram", "histogram"),
                 tail_table(sizes)])

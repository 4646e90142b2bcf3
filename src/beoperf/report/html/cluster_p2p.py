"""The cluster's point-to-point patterns (bibw, incast, bisect) in the HTML report: the
answer first (per series the aggregate and the slowest flow), then per series a table of
the aggregate and slowest flow per flow count and size, each flow's own rate, and a
chart of the aggregate against the message size.  Figures carry ``data-key`` and
``data-value`` so that the browser test can check them against the document."""

from __future__ import annotations

from typing import Any

from beoperf import units
from beoperf.model.cluster_mpi import MpiRun, Series
from beoperf.model.document import Document
from beoperf.report import renderer
from beoperf.report.cluster_mpi import series_name
from beoperf.report.cluster_p2p import FLOW, TITLES, flow_median, headline, slowest_text
from beoperf.report.html import svg
from beoperf.report.html.cluster_mpi import _g, _interval_text, series_facts
from beoperf.report.html.markup import Markup, figure, heading, join, num, para, table


@renderer("cluster-p2p", "title")
def p2p_title(doc: Document, **_options: Any) -> str:
    run = MpiRun.from_document(doc)
    b = run.p2p()
    return f"{TITLES.get(b.pattern, b.pattern)} {run.label}: {len(b.sizes)} sizes"


def points_table(s: Series, i: int, pattern: str) -> Markup:
    what, flows, rows = FLOW[pattern], s.flows or [], []
    for k, p in enumerate(s.flow_points or []):
        where = f"body.series.{i}.flow_points.{k}"
        agg, slow = p.aggregate_Bps, p.flow_Bps[p.slowest]
        rows.append([str(p.count), units.format_size(p.size),
                     num(agg.median, _g(agg.median * 1e-6), f"{where}.aggregate_Bps.median",
                         unit="MB/s"),
                     _interval_text(agg, 1e-6), flows[p.slowest].label(pattern),
                     num(slow.median, _g(slow.median * 1e-6),
                         f"{where}.flow_Bps.{p.slowest}.median", unit="MB/s"),
                     _g(flow_median(p) * 1e-6), str(p.trials)])
    return table([f"{what}s", "size", "aggregate MB/s", "95% interval", f"slowest {what}",
                  "its MB/s", f"{what}s' median MB/s", "trials"], rows,
                 numeric=(0, 1, 2, 3, 5, 6, 7), caption="The aggregate and the slowest "
                 f"{what} per count and size; MB/s = 10^6 B/s, medians of the trials")


def flows_table(s: Series, i: int, pattern: str) -> Markup:
    top = max(s.flow_counts or [0])
    points = [(k, p) for k, p in enumerate(s.flow_points or []) if p.count == top]
    rows = []
    for j, f in enumerate((s.flows or [])[:top]):
        rows.append([f.label(pattern), *[
            num(p.flow_Bps[j].median, _g(p.flow_Bps[j].median * 1e-6),
                f"body.series.{i}.flow_points.{k}.flow_Bps.{j}.median", unit="MB/s")
            for k, p in points]])
    return table([FLOW[pattern], *[units.format_size(p.size) for _, p in points]], rows,
                 numeric=range(1, len(points) + 1),
                 caption=f"Each {FLOW[pattern]}'s rate with {top} at once (MB/s)")


def chart(s: Series, i: int, pattern: str) -> Markup:
    points = s.flow_points or []
    if not points:
        return svg.empty("Aggregate rate", "nothing measured")
    lines = []
    for c_i, count in enumerate(s.flow_counts or []):
        pts = [(k, p) for k, p in enumerate(points) if p.count == count]
        lines.append(svg.Line(
            f"{count} {FLOW[pattern]}{'s' if count != 1 else ''}",
            [float(p.size) for _, p in pts], [p.aggregate_Bps.median * 1e-6 for _, p in pts],
            [f"{count}, {units.format_size(p.size)}: {_g(p.aggregate_Bps.median * 1e-6)} MB/s"
             for _, p in pts], color=c_i,
            keys=[f"body.series.{i}.flow_points.{k}.aggregate_Bps.median" for k, _ in pts],
            raw=[p.aggregate_Bps.median for _, p in pts]))
    xs = [float(p.size) for p in points]
    ys = [p.aggregate_Bps.median * 1e-6 for p in points]
    x_lo, x_hi = svg.padded(min(xs), max(xs), True)
    y_lo, y_hi = svg.padded(min(ys), max(ys), True)
    drawn = svg.chart(f"Aggregate rate, {series_name(s)}",
                      svg.Axis("message size", x_lo, x_hi, log=True, base2=True,
                               tick_text=units.size_tick),
                      svg.Axis("MB/s", y_lo, y_hi, log=True), lines)
    return join([drawn, svg.legend(lines)])


@renderer("cluster-p2p", "html")
def p2p_html(doc: Document, **_options: Any) -> str:
    run = MpiRun.from_document(doc)
    b = run.p2p()
    parts = []
    for s in run.series:  # the answer first
        p = headline(s)
        if p is not None:
            parts.append(para(f"{series_name(s)}: {units.format_byte_rate(p.aggregate_Bps.median)}"
                              f" aggregate with {p.count} {FLOW[b.pattern]}"
                              f"{'s' if p.count != 1 else ''} at {units.format_size(p.size)}; "
                              f"{slowest_text(s, p, b.pattern)}."))
    parts.append(para(f"Windows of {b.window} messages. Flows: {b.flows_rule}. "
                      f"{b.statistic}."))
    for i, s in enumerate(run.series):
        parts += [heading(series_name(s), 4), series_facts(s),
                  points_table(s, i, b.pattern), flows_table(s, i, b.pattern),
                  figure(chart(s, i, b.pattern), "Aggregate rate against the message size, "
                         f"one line per {FLOW[b.pattern]} count (MB/s = 10^6 B/s, medians of "
                         "the trials)", kind="p2p")]
    return join(parts)

"""`beoperf cluster rma` in the HTML report: per series, the answer's figures first (the
fastest synchronisation of each operation, against two-sided), then a chart of the time
of one operation against the message size, one line per operation and synchronisation
and a dashed one for the two-sided one-way time, and the table of every point."""

from __future__ import annotations

from typing import Any

from beoperf import units
from beoperf.analysis.cluster_rma import TWO_SIDED, vs_two_sided
from beoperf.model.cluster_mpi import MpiRun, RmaPoint, Series
from beoperf.model.document import Document
from beoperf.report import renderer
from beoperf.report.cluster_mpi import series_name
from beoperf.report.cluster_rma import pair_line, ratio_text, series_figures
from beoperf.report.html import svg
from beoperf.report.html.cluster_mpi import _g, _interval_text, series_facts
from beoperf.report.html.markup import Markup, figure, heading, join, num, para, table


@renderer("cluster-rma", "title")
def rma_title(doc: Document, **_options: Any) -> str:
    run = MpiRun.from_document(doc)
    b = run.rma()
    return (f"One-sided MPI {run.label}: {', '.join(b.ops)} with {', '.join(b.syncs)}, "
            f"{len(b.sizes)} sizes")


def rma_table(s: Series, i: int) -> Markup:
    points = s.rma_points or []
    rows = []
    for k, p in enumerate(points):
        where = f"body.series.{i}.rma_points.{k}"
        ratio = vs_two_sided(p, points)
        rows.append([p.op, p.sync, units.format_size(p.size),
                     num(p.time_s.median, _g(p.time_s.median * 1e6),
                         f"{where}.time_s.median", unit="us"),
                     _interval_text(p.time_s, 1e6),
                     num(p.bandwidth_Bps.median, _g(p.bandwidth_Bps.median * 1e-6),
                         f"{where}.bandwidth_Bps.median", unit="MB/s"),
                     ratio_text(ratio), str(p.trials)])
    return table(["op", "sync", "size", "time us", "95% interval", "MB/s", "vs two-sided",
                  "trials"], rows, numeric=range(2, 8),
                 caption="Time of one operation with its synchronisation (us), the "
                 "bandwidth it gives (MB/s = 10^6 B/s) and its ratio to the two-sided "
                 "one-way time of the same size (below 1: one-sided is faster)")


def _line(name: str, pts: list[tuple[int, RmaPoint]], i: int, color: int,
          dashed: bool = False) -> svg.Line:
    return svg.Line(name, [float(p.size) for _, p in pts],
                    [p.time_s.median * 1e6 for _, p in pts],
                    [f"{name}, {units.format_size(p.size)}: {_g(p.time_s.median * 1e6)} us"
                     for _, p in pts], color=color, dashed=dashed,
                    keys=[f"body.series.{i}.rma_points.{k}.time_s.median" for k, _ in pts],
                    raw=[p.time_s.median for _, p in pts])


FAMILIES = {"latency": ("put", "get"), "bandwidth": ("put_bw", "get_bw")}


def rma_chart(s: Series, i: int, family: str) -> Markup:
    """One family's lines (latency loops, or bandwidth loops) and the two-sided one."""
    ops = (*FAMILIES[family], TWO_SIDED)
    points = [(k, p) for k, p in enumerate(s.rma_points or []) if p.op in ops]
    if not points:
        return svg.empty("One-sided time", "nothing measured")
    names = list(dict.fromkeys((p.op, p.sync) for _, p in points))
    lines = [_line(f"{op} {sync}" if op != TWO_SIDED else "two-sided (one way)",
                   [(k, p) for k, p in points if (p.op, p.sync) == (op, sync)], i, c,
                   dashed=op == TWO_SIDED) for c, (op, sync) in enumerate(names)]
    xs = [float(p.size) for _, p in points]
    ys = [p.time_s.median * 1e6 for _, p in points]
    x_lo, x_hi = svg.padded(min(xs), max(xs), True)
    y_lo, y_hi = svg.padded(min(ys), max(ys), True)
    chart = svg.chart(f"One-sided time ({family} loops), {series_name(s)}",
                      svg.Axis("message size", x_lo, x_hi, log=True, base2=True,
                               tick_text=units.size_tick),
                      svg.Axis("us per operation", y_lo, y_hi, log=True), lines)
    return join([chart, svg.legend(lines)])


@renderer("cluster-rma", "html")
def rma_html(doc: Document, **_options: Any) -> str:
    run = MpiRun.from_document(doc)
    b = run.rma()
    parts = [para(f"Window: MPI_Win_{b.window}, one per synchronisation. {b.statistic}.")]
    families = [f for f, ops in FAMILIES.items() if set(ops) & set(b.ops)]
    for i, s in enumerate(run.series):
        found = series_figures(s, b.ops)
        parts += [heading(series_name(s), 4), *[para(line.text) for line in found],
                  series_facts(s), para(pair_line(s).strip() + ".")]
        parts += [figure(rma_chart(s, i, f), f"Time of one operation with its "
                         f"synchronisation against the message size, {f} loops (medians of "
                         "the trials; dashed: the two-sided one-way time)", kind="rma")
                  for f in families]
        parts.append(rma_table(s, i))
    return join(parts)

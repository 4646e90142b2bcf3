"""`beoperf cluster coll` in the HTML report: per series, a table of every collective and
size (t_avg with its 95% interval, t_min and t_max over the ranks) and a chart of t_avg
against the message size, one line per collective.  The section's answer (the slowest
collective at the largest size, wrong results) is the kind's answer
(report/cluster_coll.py), shown first by the page."""

from __future__ import annotations

from typing import Any

from beoperf import units
from beoperf.model.cluster_mpi import MpiRun, Series
from beoperf.model.document import Document
from beoperf.report import renderer
from beoperf.report.cluster_coll import US, moves_nothing, notes, series_name, us
from beoperf.report.html import svg
from beoperf.report.html.cluster_mpi import _g, series_facts
from beoperf.report.html.markup import Markup, figure, heading, join, num, para, table


@renderer("cluster-coll", "title")
def coll_title(doc: Document, **_options: Any) -> str:
    run = MpiRun.from_document(doc)
    b = run.coll()
    return (f"MPI collectives {run.label}: {len(b.operations)} collectives, "
            f"{len(b.sizes)} sizes")


def coll_table(s: Series, i: int) -> Markup:
    rows = []
    for k, p in enumerate(s.collectives or []):
        where = f"body.series.{i}.collectives.{k}"
        avg = p.t_avg_s
        ci = (_g(avg.ci_low * US) + " - " + _g(avg.ci_high * US)
              if avg.ci_low is not None and avg.ci_high is not None else "-")
        rows.append([p.op, "-" if moves_nothing(p) else units.format_size(p.size),
                     num(avg.median, _g(avg.median * US), f"{where}.t_avg_s.median", unit="us"),
                     ci, _g(us(p.t_min_s)), _g(us(p.t_max_s)),
                     str(p.calls or "-"), str(p.trials),
                     str(p.corrupt) if p.checked else "not checked"])
    return table(["collective", "size", "t_avg us", "95% interval", "t_min us", "t_max us",
                  "calls", "trials", "wrong elements"], rows, numeric=range(2, 9),
                 caption="Each rank's mean time per call reduced over the ranks as IMB does; "
                 "t_avg is OSU's Avg Latency; medians of the trials (us = 10^-6 s)")


def coll_chart(s: Series, i: int) -> Markup:
    points = [(k, p) for k, p in enumerate(s.collectives or []) if not moves_nothing(p)]
    ops = list(dict.fromkeys(p.op for _, p in points))
    lines = []
    for c_i, op in enumerate(ops):
        pts = [(k, p) for k, p in points if p.op == op]
        lines.append(svg.Line(
            op, [float(p.size) for _, p in pts], [p.t_avg_s.median * US for _, p in pts],
            [f"{op}, {units.format_size(p.size)}: {_g(p.t_avg_s.median * US)} us"
             for _, p in pts], color=c_i,
            keys=[f"body.series.{i}.collectives.{k}.t_avg_s.median" for k, _ in pts],
            raw=[p.t_avg_s.median for _, p in pts]))
    if not points:
        return svg.empty("Collectives", "nothing measured but the barrier")
    xs = [float(p.size) for _, p in points]
    ys = [p.t_avg_s.median * US for _, p in points]
    x_lo, x_hi = svg.padded(min(xs), max(xs), True)
    y_lo, y_hi = svg.padded(min(ys), max(ys), True)
    chart = svg.chart(f"Collectives, {series_name(s)}",
                      svg.Axis("message size", x_lo, x_hi, log=True, base2=True,
                               tick_text=units.size_tick),
                      svg.Axis("t_avg (us)", y_lo, y_hi, log=True), lines)
    return join([chart, svg.legend(lines)])


@renderer("cluster-coll", "html")
def coll_html(doc: Document, **_options: Any) -> str:
    run = MpiRun.from_document(doc)
    b = run.coll()
    parts = [para(f"Synchronisation: {b.sync}. {b.statistic}. Root {b.root}; buffers "
                  f"{'not reused (--nocache)' if b.nocache else 'reused'}.")]
    for i, s in enumerate(run.series):
        facts = series_facts(s) if s.started_by() != "imported" else \
            para(f"Imported from {s.launch.get('file')}. " + " ".join(notes(s)))
        parts += [heading(series_name(s), 4), facts, coll_table(s, i),
                  figure(coll_chart(s, i), "t_avg against the message size, one line per "
                         "collective (us, medians of the trials; a size is the vector, "
                         "each rank's block or the whole vector as the table's collective "
                         "takes it)", kind="coll")]
    return join(parts)

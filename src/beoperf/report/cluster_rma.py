"""Renderers of `beoperf cluster rma` documents (kind cluster-rma): text, Markdown and
CSV, and the answer.

One row per operation, synchronisation and size: the time of one operation with its
synchronisation (us) with its 95% interval, the bandwidth it gives (MB/s = 10^6 B/s),
and its ratio to the two-sided one-way time of the same size (below 1: one-sided is
faster).  The answer names, per series, the fastest synchronisation of each operation at
the smallest and the largest size, against two-sided.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from beoperf import units
from beoperf.analysis.cluster_rma import TWO_SIDED, fastest, two_sided_of, vs_two_sided
from beoperf.model.cluster_mpi import MpiRun, RmaPoint, Series
from beoperf.model.document import Document
from beoperf.report import conditions, renderer
from beoperf.report.answer import Level, Line, answer
from beoperf.report.cluster_mpi import (
    Draw,
    Table,
    Title,
    _all_series,
    _interval,
    _or_ok,
    num,
    series_lines,
    series_name,
    with_answer,
)
from beoperf.report.tables import aligned, markdown


def ratio_text(value: float | None) -> str:
    """'0.466x'; '<0.001x' below that (a two-sided time a busy machine stretched)."""
    if value is None:
        return "-"
    return "<0.001x" if value < 0.001 else f"{value:.3g}x"


def rma_table(s: Series) -> Table:
    points = s.rma_points or []
    header = ["op", "sync", "size", "time us [95% interval]", "MB/s", "vs two-sided",
              "trials"]
    rows = [[p.op, p.sync, units.format_size(p.size), _interval(p.time_s, 1e6),
             num(p.bandwidth_Bps.median * 1e-6), ratio_text(vs_two_sided(p, points)),
             str(p.trials)] for p in points]
    if not rows:
        rows = [["-", "-", "-", "nothing measured", "-", "-", "0"]]
    return header, rows, {2, 3, 4, 5, 6}


def pair_line(s: Series) -> str:
    pair = s.rma_pair
    if pair is None:
        return "  origin -> target: -"
    return (f"  origin rank {pair.sender} ({pair.sender_node}) -> target rank "
            f"{pair.receiver} ({pair.receiver_node})")


def _sections(doc: Document, draw: Draw, title: Title) -> list[str]:
    run = MpiRun.from_document(doc)
    b = run.rma()
    out = [title(f"One-sided MPI (as osu_put_latency, osu_get_latency): {run.label}"), "",
           f"Window: MPI_Win_{b.window}, one per synchronisation. {b.statistic}. "
           "'vs two-sided': the one-sided time over the two-sided one-way time of the "
           "same size (below 1: one-sided is faster).", ""]
    for s in run.series:
        out += [title(series_name(s)), "", *series_lines(s), pair_line(s), "",
                *draw(rma_table(s)), ""]
    return out


@renderer("cluster-rma", "text")
def rma_text(doc: Document, **_options: Any) -> str:
    lines = with_answer(doc, _sections(doc, lambda t: aligned(*t), lambda s: s), False)
    return "\n".join(lines + conditions.text_lines(doc.meta, "")).rstrip() + "\n"


@renderer("cluster-rma", "markdown")
def rma_markdown(doc: Document, **_options: Any) -> str:
    lines = with_answer(doc, _sections(doc, lambda t: markdown(*t), lambda s: f"## {s}"),
                        True)
    return "\n".join(lines).rstrip() + "\n"


RMA_FIELDS = ("ranks_per_node", "np", "origin_node", "target_node", "op", "sync", "size",
              "time_s", "time_ci_low_s", "time_ci_high_s", "bandwidth_Bps",
              "bandwidth_ci_low_Bps", "bandwidth_ci_high_Bps", "vs_two_sided", "operations",
              "trials")


@renderer("cluster-rma", "csv")
def rma_csv(doc: Document, **_options: Any) -> str:
    """One row per operation, synchronisation, size and series."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(RMA_FIELDS)
    for s in MpiRun.from_document(doc).series:
        pair = s.rma_pair
        points = s.rma_points or []
        for p in points:
            t, bw = p.time_s, p.bandwidth_Bps
            writer.writerow([s.ranks_per_node, s.np, pair.sender_node if pair else None,
                             pair.receiver_node if pair else None, p.op, p.sync, p.size,
                             t.median, t.ci_low, t.ci_high, bw.median, bw.ci_low, bw.ci_high,
                             vs_two_sided(p, points), p.operations, p.trials])
    return out.getvalue()


# --------------------------------------------------------------------------- the answer


def _at(points: list[RmaPoint], size: int, ops: list[str]) -> str:
    """'put 1.20 us (lock, 0.85x two-sided), get ...' at ``size``."""
    parts = []
    for op in ops:
        best = fastest(points, op, size)
        if best is None:
            continue
        figure = (f"{num(best.time_s.median * 1e6)} us" if size < 65536 else
                  f"{num(best.bandwidth_Bps.median * 1e-6)} MB/s")
        ratio = vs_two_sided(best, points)
        vs = f", {ratio_text(ratio)} two-sided's time" if ratio is not None else ""
        parts.append(f"{op} {figure} ({best.sync}{vs})")
    two = two_sided_of(points).get(size)
    if two is not None:
        parts.append(f"two-sided {num(two.time_s.median * 1e6)} us one way")
    return f"{units.format_size(size)}: " + ", ".join(parts)


def series_figures(s: Series, ops: list[str]) -> list[Line]:
    points = list(s.rma_points or [])
    sizes = sorted({p.size for p in points if p.op != TWO_SIDED})
    if not sizes:
        return []
    at = [_at(points, sizes[0], ops)] + ([_at(points, sizes[-1], ops)] if len(sizes) > 1
                                          else [])
    return [Line(Level.OK, f"{series_name(s)}, fastest synchronisation: {'; '.join(at)}")]


@answer("cluster-rma")
def rma_answer(doc: Document) -> list[Line]:
    run = MpiRun.from_document(doc)
    ops = run.rma().ops
    figures = [line for s in run.series for line in series_figures(s, ops)]
    problems = _all_series(run)
    if figures:
        return [*problems, *figures]
    return _or_ok(problems, "nothing measured")

"""Renderers of `beoperf cluster coll` documents (kind cluster-coll) as text, Markdown and
CSV, and their answer.

The answer first: the slowest collective at the largest size measured (its t_avg with
the 95% interval, per series), then any collective whose check found wrong elements, then
the series' own lines (stopped early, warnings, the time budget).  Then per series one
row per collective and size: t_avg [95% interval], t_min and t_max (IMB's reduction of
the ranks' mean times) and the longest single call of any rank, in us."""

from __future__ import annotations

import csv
import io
from typing import Any

from beoperf import units
from beoperf.model.cluster_mpi import CollPoint, MpiRun, Series, Stat
from beoperf.model.document import Document
from beoperf.report import conditions, renderer
from beoperf.report.answer import Level, Line, answer, plural
from beoperf.report.cluster_mpi import (
    Draw,
    Table,
    Title,
    num,
    series_answer,
    series_lines,
    with_answer,
)
from beoperf.report.cluster_mpi import series_name as mpi_series_name
from beoperf.report.tables import aligned, markdown

US = 1e6
BARRIERS = ("barrier", "ibarrier")


def moves_nothing(p: CollPoint) -> bool:
    """A barrier (blocking or not): no data, no size."""
    return p.op in BARRIERS


def interval_us(st: Stat) -> str:
    """'12.3 [12.1, 12.6]': the median and its 95% interval, in us."""
    ci = f" [{num(st.ci_low * US)}, {num(st.ci_high * US)}]" \
        if st.ci_low is not None and st.ci_high is not None else ""
    return num(st.median * US) + ci


def series_name(s: Series) -> str:
    """'2 ranks per node (4 ranks)'; an import: 'osu_allreduce.txt, OSU Micro-Benchmarks
    v7.3 (4 ranks)'."""
    if s.started_by() != "imported":
        return mpi_series_name(s)
    name = str(s.launch.get("file", "?")).rsplit("/", 1)[-1]
    version = s.launch.get("version")
    tool = f"{s.launch.get('tool', '?')}{' ' + str(version) if version else ''}"
    return f"{name}, {tool} ({s.np} ranks)"


def notes(s: Series) -> list[str]:
    """An import's notes (rows left out ...)."""
    found = s.launch.get("notes")
    return [n for n in found if isinstance(n, str)] if isinstance(found, list) else []


def us(st: Stat | None) -> float | None:
    """A statistic's median in us (None: not known)."""
    return None if st is None else st.median * US


def slowest_at_largest(s: Series) -> CollPoint | None:
    """The collective with the largest t_avg at the largest size measured (the barrier,
    which moves no data, only when it is all there is)."""
    points = [p for p in s.collectives or [] if not moves_nothing(p)] or (s.collectives or [])
    if not points:
        return None
    top = max(p.size for p in points)
    return max((p for p in points if p.size == top), key=lambda p: p.t_avg_s.median)


def headline(p: CollPoint) -> str:
    """'alltoall at 64 KiB: t_avg 123.4 us [120.1, 126.0]'."""
    where = "" if moves_nothing(p) else f" at {units.format_size(p.size)}"
    return f"{p.op}{where}: t_avg {interval_us(p.t_avg_s)} us"


def coll_table(s: Series) -> Table:
    header = ["collective", "size", "bytes a call", "t_avg us [95% interval]", "t_min us",
              "t_max us", "longest us", "calls", "trials", "wrong"]
    rows = [[p.op, "-" if moves_nothing(p) else units.format_size(p.size),
             "-" if moves_nothing(p) else f"{p.count:,} x {p.bytes // max(p.count, 1)} B",
             interval_us(p.t_avg_s), num(us(p.t_min_s)), num(us(p.t_max_s)),
             num(us(p.longest_s)),
             str(p.calls or "-"), str(p.trials),
             f"{p.corrupt} of {p.checked} ranks' checks" if p.corrupt else
             ("0" if p.checked else "not checked")]
            for p in s.collectives or []]
    return header, rows, {3, 4, 5, 6, 7, 8}


def _sections(doc: Document, draw: Draw, title: Title) -> list[str]:
    run = MpiRun.from_document(doc)
    b = run.coll()
    out = [title(f"MPI collectives: {run.label}"), "",
           f"Synchronisation: {b.sync}. {b.statistic}. Root {b.root} (bcast, reduce, gather,"
           f" scatter); buffers {'not reused (--nocache)' if b.nocache else 'reused'}; "
           "us = microseconds.", ""]
    for s in run.series:
        where = series_lines(s) if s.started_by() != "imported" else \
            [f"imported from {s.launch.get('file')}", *(f"  note: {n}" for n in notes(s))]
        out += [title(series_name(s)), "", *where, "", *draw(coll_table(s)), ""]
    return out


@renderer("cluster-coll", "text")
def coll_text(doc: Document, **_options: Any) -> str:
    lines = with_answer(doc, _sections(doc, lambda t: aligned(*t), lambda s: s), False)
    return "\n".join(lines + conditions.text_lines(doc.meta, "")).rstrip() + "\n"


@renderer("cluster-coll", "markdown")
def coll_markdown(doc: Document, **_options: Any) -> str:
    lines = with_answer(doc, _sections(doc, lambda t: markdown(*t), lambda s: f"## {s}"), True)
    return "\n".join(lines).rstrip() + "\n"


FIELDS = ("ranks_per_node", "np", "op", "size", "count", "bytes", "t_avg_s", "t_avg_ci_low_s",
          "t_avg_ci_high_s", "t_min_s", "t_max_s", "calls", "trials", "checked", "corrupt",
          "longest_call_s")


@renderer("cluster-coll", "csv")
def coll_csv(doc: Document, **_options: Any) -> str:
    """One row per collective, size and series (t_min and t_max: medians of the
    trials)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(FIELDS)
    for s in MpiRun.from_document(doc).series:
        for p in s.collectives or []:
            writer.writerow([s.ranks_per_node, s.np, p.op, p.size, p.count, p.bytes,
                             p.t_avg_s.median, p.t_avg_s.ci_low, p.t_avg_s.ci_high,
                             p.t_min_s.median if p.t_min_s else None,
                             p.t_max_s.median if p.t_max_s else None, p.calls, p.trials,
                             p.checked, p.corrupt,
                             p.longest_s.median if p.longest_s else None])
    return out.getvalue()


@answer("cluster-coll")
def coll_answer(doc: Document) -> list[Line]:
    """Per series the slowest collective at the largest size; wrong results (FAIL);
    the series' own lines."""
    run = MpiRun.from_document(doc)
    out = []
    for s in run.series:
        wrong = [p for p in s.collectives or [] if p.corrupt]
        if wrong:
            out.append(Line(Level.FAIL, f"{series_name(s)}: wrong results from "
                            f"{plural(len(wrong), 'collective')}: " + ", ".join(
                                f"{p.op} at {units.format_size(p.size)} "
                                f"({plural(p.corrupt, 'element')})" for p in wrong[:4]),
                            "run the MPI library's own tests; check the network's "
                            "error counters"))
        top = slowest_at_largest(s)
        if top is not None:
            out.append(Line(Level.OK, f"{series_name(s)}: slowest at the largest size: "
                            f"{headline(top)}" + (
                                f" (t_min {num(us(top.t_min_s))}, t_max "
                                f"{num(us(top.t_max_s))} us over the ranks)"
                                if top.t_min_s and top.t_max_s else "")))
        out += [Line(line.level, line.text.replace(mpi_series_name(s), series_name(s), 1),
                     line.todo, line.topic) for line in series_answer(s)]
    if not out:
        out.append(Line(Level.NOTE, "nothing was measured"))
    return out


# --------------------------------------------------------------------------- comparison


def comparison_table(labels: list[str], rows: list[Any]) -> Table:
    """One row per (collective, size): the baseline's t_avg, then each column's t_avg and
    its verdict (rows: analysis.coll_compare.Row)."""
    header = ["collective", "size", f"{labels[0]} us"]
    for label in labels[1:]:
        header += [f"{label} us", "verdict"]
    out = []
    for r in rows:
        cells = [r.op, "-" if r.op in BARRIERS else units.format_size(r.size),
                 num(r.values[0] * US)]
        for value, eff in zip(r.values[1:], r.effects[1:], strict=True):
            cells += [num(value * US), eff.text() if eff is not None else "-"]
        out.append(cells)
    return header, out, {2, *range(3, len(header), 2)}


def comparison_lines(labels: list[str], rows: list[Any], missing: list[tuple[str, int]],
                     statement: str, md: bool = False) -> list[str]:
    """The comparison as text (or Markdown): the table, then the method and what was left
    out."""
    draw = markdown if md else aligned
    lines = [*draw(*comparison_table(labels, rows)), "", statement + "."]
    if missing:
        named = [f"{op} at {units.format_size(size)}" for op, size in missing[:8]]
        more = f" and {len(missing) - 8} more" if len(missing) > 8 else ""
        lines.append("left out, not measured by every column: " + ", ".join(named) + more)
    return lines

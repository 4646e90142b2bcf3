"""Renderers of the cluster's point-to-point patterns (kind cluster-p2p: bibw, incast,
bisect) as text, Markdown and CSV, and their answer.

The answer comes first: per series, the aggregate at the most flows and the largest
size, and the slowest flow (pair or sender) with its rate against the flows' median; a
slowest flow far below the others is a warning.  Then one row per flow count and size
(aggregate with its 95% interval, slowest flow, sum of the flows), and each flow's own
rate at every size.  Rates in MB/s (10^6 B/s).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from typing import Any

import numpy as np

from beoperf import units
from beoperf.model.cluster_mpi import FlowPoint, MpiRun, Series, Stat
from beoperf.model.document import Document
from beoperf.report import conditions, renderer
from beoperf.report.answer import Level, Line, answer, lines_of, markdown_block, plural, text_block
from beoperf.report.cluster_mpi import num, series_answer, series_lines, series_name
from beoperf.report.tables import aligned, markdown

Table = tuple[list[str], list[list[str]], set[int]]
Draw = Callable[[Table], list[str]]
Title = Callable[[str], str]
SLOW_FRACTION = 0.75  # a slowest flow under this share of the flows' median is named
TITLES = {"bibw": "Bidirectional bandwidth, N pairs at once (as osu_bibw)",
          "incast": "Many senders to one receiver (incast)",
          "bisect": "Bisection: half the nodes to the other half, both ways"}
FLOW = {"bibw": "pair", "bisect": "pair", "incast": "sender"}


def headline(s: Series) -> FlowPoint | None:
    """The point an answer quotes: the most flows, then the largest size."""
    points = s.flow_points or []
    return max(points, key=lambda p: (p.count, p.size)) if points else None


def flow_median(p: FlowPoint) -> float:
    return float(np.median([f.median for f in p.flow_Bps]))


def slowest_text(s: Series, p: FlowPoint, pattern: str) -> str:
    flow = (s.flows or [])[p.slowest]
    share = p.flow_Bps[p.slowest].median / flow_median(p)
    return (f"slowest {FLOW[pattern]} {flow.label(pattern)}: "
            f"{units.format_byte_rate(p.flow_Bps[p.slowest].median)}"
            + (f" ({share:.0%} of the {FLOW[pattern]}s' median)" if p.count > 1 else ""))


def headline_lines(run: MpiRun) -> list[Line]:
    """Per series: the aggregate and the slowest flow (a warning when it is far below)."""
    pattern = run.p2p().pattern
    out = []
    for s in run.series:
        p = headline(s)
        if p is None:
            continue
        flows = plural(p.count, FLOW[pattern])
        text = (f"{series_name(s)}: {units.format_byte_rate(p.aggregate_Bps.median)} "
                f"aggregate, {flows} at {units.format_size(p.size)}; {slowest_text(s, p, pattern)}")
        slow = p.count > 1 and p.flow_Bps[p.slowest].median < SLOW_FRACTION * flow_median(p)
        out.append(Line(Level.WARN if slow else Level.OK, text,
                        "beoperf cluster pairs and beoperf pingpong on that "
                        f"{FLOW[pattern]}'s nodes" if slow else ""))
    return out


@answer("cluster-p2p")
def p2p_answer(doc: Document) -> list[Line]:
    run = MpiRun.from_document(doc)
    return [*headline_lines(run), *[line for s in run.series for line in series_answer(s)]]


def _interval(st: Stat, scale: float = 1e-6) -> str:
    ci = f" [{num(st.ci_low * scale)}, {num(st.ci_high * scale)}]" \
        if st.ci_low is not None and st.ci_high is not None else ""
    return num(st.median * scale) + ci


def points_table(s: Series, pattern: str) -> Table:
    what = FLOW[pattern]
    header = [f"{what}s", "size", "aggregate MB/s [95% interval]", f"slowest {what}",
              f"slowest {what} MB/s", f"{what}s' median MB/s", f"sum of {what}s MB/s",
              "trials"]
    flows = s.flows or []
    rows = [[str(p.count), units.format_size(p.size), _interval(p.aggregate_Bps),
             flows[p.slowest].label(pattern), num(p.flow_Bps[p.slowest].median * 1e-6),
             num(flow_median(p) * 1e-6), num(sum(f.median for f in p.flow_Bps) * 1e-6),
             str(p.trials)] for p in s.flow_points or []]
    return header, rows, {0, 1, 2, 4, 5, 6, 7}


def flows_table(s: Series, pattern: str) -> Table:
    """Each flow's rate (MB/s, median of the trials) at each size, with the most flows."""
    counts = s.flow_counts or []
    top = max(counts) if counts else 0
    points = [p for p in s.flow_points or [] if p.count == top]
    header = [FLOW[pattern], *[units.format_size(p.size) for p in points]]
    rows = [[f.label(pattern), *[num(p.flow_Bps[i].median * 1e-6) for p in points]]
            for i, f in enumerate((s.flows or [])[:top])]
    return header, rows, set(range(1, len(header)))


def _sections(doc: Document, draw: Draw, title: Title) -> list[str]:
    run = MpiRun.from_document(doc)
    b = run.p2p()
    out = [title(f"{TITLES.get(b.pattern, b.pattern)}: {run.label}"), "",
           f"Windows of {b.window} messages. Flows: {b.flows_rule}. {b.statistic}.", ""]
    for s in run.series:
        out += [title(series_name(s)), "", *series_lines(s), "",
                *draw(points_table(s, b.pattern)), "",
                f"Each {FLOW[b.pattern]}'s rate, MB/s (with "
                f"{max(s.flow_counts or [0])} at once):", "",
                *draw(flows_table(s, b.pattern)), ""]
    return out


def _with_answer(doc: Document, lines: list[str], md: bool) -> list[str]:
    top = lines_of(doc)
    block = markdown_block(top) if md else [*text_block(top), *([""] if top else [])]
    return [*lines[:2], *block, *lines[2:]]


@renderer("cluster-p2p", "text")
def p2p_text(doc: Document, **_options: Any) -> str:
    lines = _with_answer(doc, _sections(doc, lambda t: aligned(*t), lambda s: s), False)
    return "\n".join(lines + conditions.text_lines(doc.meta, "")).rstrip() + "\n"


@renderer("cluster-p2p", "markdown")
def p2p_markdown(doc: Document, **_options: Any) -> str:
    lines = _with_answer(doc, _sections(doc, lambda t: markdown(*t), lambda s: f"## {s}"),
                         True)
    return "\n".join(lines).rstrip() + "\n"


CSV_FIELDS = ("pattern", "ranks_per_node", "np", "flows", "size", "flow", "rank_a", "rank_b",
              "node_a", "node_b", "Bps", "ci_low_Bps", "ci_high_Bps", "slowest", "trials")


@renderer("cluster-p2p", "csv")
def p2p_csv(doc: Document, **_options: Any) -> str:
    """Per series, flow count and size: a row 'aggregate' (flow empty), then one per flow
    (``slowest`` 1 on the slowest)."""
    run = MpiRun.from_document(doc)
    pattern = run.p2p().pattern
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    for s in run.series:
        flows = s.flows or []
        for p in s.flow_points or []:
            head = [pattern, s.ranks_per_node, s.np, p.count, p.size]
            agg = p.aggregate_Bps
            writer.writerow([*head, "aggregate", "", "", "", "", agg.median, agg.ci_low,
                             agg.ci_high, "", p.trials])
            for i, st in enumerate(p.flow_Bps):
                f = flows[i]
                writer.writerow([*head, i, f.a, f.b, f.node_a, f.node_b, st.median,
                                 st.ci_low, st.ci_high, int(i == p.slowest), st.trials])
    return out.getvalue()

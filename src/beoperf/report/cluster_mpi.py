"""Renderers of the cluster's own MPI tests (kinds cluster-ring, cluster-pairs,
cluster-mbw) as text, Markdown and CSV.

Rings read as HPCC's figures: one row per figure (HPCC's statistic, then the same from
the trials' medians), one column per ranks-per-node series, each cell the mean and, in
parentheses, the sample standard deviation over the repeats; with several series, the
ratio of each to the first.  Pairs: the latency and bandwidth matrices over the nodes,
then the slow nodes and links and the rule that named them.  N pairs at once: one row per
pair count and size.  Every figure is in a stated unit: latencies in us, bandwidths in
MB/s (10^6 B/s) in tables (HPCC's GB/s for HPCC's figures).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from typing import Any

from beoperf import units
from beoperf.analysis.cluster_mpi import HPCC_KEYS, named_links, named_nodes, ratio, summary
from beoperf.model.cluster import Summary
from beoperf.model.cluster_mpi import Findings, Loop, MpiRun, Series, Stat
from beoperf.model.document import Document
from beoperf.report import conditions, renderer
from beoperf.report.answer import (
    PRECISION,
    Level,
    Line,
    answer,
    from_strings,
    lines_of,
    listed,
    markdown_block,
    plural,
    text_block,
)
from beoperf.report.tables import aligned, markdown

Table = tuple[list[str], list[list[str]], set[int]]
Draw = Callable[[Table], list[str]]
Title = Callable[[str], str]
FIGURE_NAMES = {"NaturallyOrderedRingLatency_usec": "natural ring latency (us)",
                "RandomlyOrderedRingLatency_usec": "random ring latency (us)",
                "NaturallyOrderedRingBandwidth_GBytes": "natural ring bandwidth (GB/s)",
                "RandomlyOrderedRingBandwidth_GBytes": "random ring bandwidth (GB/s)"}


def num(value: float | None, digits: int = 4) -> str:
    """4 significant digits; from 10,000 on, whole numbers with thousands separators."""
    if value is None:
        return "-"
    if abs(value) >= 10 ** digits:
        return f"{value:,.0f}"
    return units.format_in(value, "", digits)


def cell(stat: Summary | None) -> str:
    """'93.21 (1.2)': mean (sample standard deviation); '-' when not measured."""
    if stat is None:
        return "-"
    spread = f" ({num(stat.stdev, 2)})" if stat.stdev is not None else ""
    return num(stat.mean) + spread


def series_name(s: Series) -> str:
    return s.name()


def series_lines(s: Series) -> list[str]:
    """Where and how a series ran, and what went wrong around it."""
    argv = " ".join(s.argv()) or f"started by {s.started_by() or '?'}"
    lib = s.mpi_library() or "?"
    state = s.status + (f" ({s.status_reason})" if s.status_reason else "")
    lines = [f"{series_name(s)} on {len(s.nodes)} node{'s' if len(s.nodes) != 1 else ''}"
             f" ({', '.join(s.nodes)}): {state}",
             f"  MPI: {lib}", f"  launch: {argv}"]
    return lines + [f"  warning: {w}" for w in s.warnings or []]


def _ratio_header(series: list[Series]) -> list[str]:
    first = series[0].ranks_per_node
    return [f"{s.ranks_per_node}/{first} per node" for s in series[1:]]


# --------------------------------------------------------------------------- rings


def median_summary(s: Series, key: str) -> Summary | None:
    """A figure from the trials' medians, over the repeats."""
    return summary([r.median_figures.get(key) for r in s.repeats or []])


def _figure_mean(s: Series, key: str, field: str) -> Summary | None:
    if field == "figures":
        return (s.summary or {}).get(key)
    return median_summary(s, key)


def ring_table(run: MpiRun) -> Table:
    series = run.series
    header = ["figure", *(series_name(s) for s in series), *_ratio_header(series)]
    rows = []
    for field, note in (("figures", ""), ("median_figures", ", median of trials")):
        for key in HPCC_KEYS:
            stats = [_figure_mean(s, key, field) for s in series]
            means = [st.mean if st else None for st in stats]
            rows.append([FIGURE_NAMES[key].replace(" (", f"{note} (", 1),
                         *(cell(st) for st in stats),
                         *(num(ratio(m, means[0]), 3) for m in means[1:])])
    return header, rows, set(range(1, len(header)))


def _ring_sections(doc: Document, draw: Draw, title: Title) -> list[str]:
    run = MpiRun.from_document(doc)
    d = run.ring()
    repeats = max((len(s.repeats or []) for s in run.series), default=0)
    out = [title(f"HPCC ring latency and bandwidth: {run.label}"), "",
           f"Both directions; latency at {d.latency_bytes:,} B, bandwidth at "
           f"{d.bandwidth_bytes:,} B; the natural ring and {d.random_rings['latency']} "
           f"random rings ({d.random_rings['bandwidth']} for bandwidth). {d.statistic}."
           f" Cells: mean (sample standard deviation) over {repeats} repeat"
           f"{'s' if repeats != 1 else ''}; GB/s = 10^9 B/s.", ""]
    if run.series:
        out += [*draw(ring_table(run)), ""]
    for s in run.series:
        out += [*series_lines(s), ""]
    return out


@renderer("cluster-ring", "text")
def ring_text(doc: Document, **_options: Any) -> str:
    lines = with_answer(doc, _ring_sections(doc, lambda t: aligned(*t), lambda s: s), False)
    return "\n".join(lines + conditions.text_lines(doc.meta, "")).rstrip() + "\n"


@renderer("cluster-ring", "markdown")
def ring_markdown(doc: Document, **_options: Any) -> str:
    lines = with_answer(doc, _ring_sections(doc, lambda t: markdown(*t), lambda s: f"## {s}"), True)
    return "\n".join(lines).rstrip() + "\n"


RING_FIELDS = ("ranks_per_node", "np", "repeat", "ring", "kind", "size", "order", "trials",
               "hpcc_latency_s", "median_latency_s", "ci_low_s", "ci_high_s")


@renderer("cluster-ring", "csv")
def ring_csv(doc: Document, **_options: Any) -> str:
    """One row per ring, size, repeat and series."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(RING_FIELDS)
    for s in MpiRun.from_document(doc).series:
        for r in s.repeats or []:
            for ring in r.rings:
                ci = ring.ci_s if ring.ci_s is not None else [None, None]
                writer.writerow([s.ranks_per_node, s.np, r.repeat, ring.name,
                                 ring.kind, ring.size, " ".join(map(str, ring.order)),
                                 len(ring.trials), ring.hpcc_s, ring.median_s, *ci])
    return out.getvalue()


# --------------------------------------------------------------------------- pairs


def matrix_table(found: Findings, field: str, scale: float) -> Table:
    nodes = found.nodes
    m = found.matrix.get(field, [])
    rows = [[a, *(num(v * scale) if v is not None else "-" for v in m[i])]
            for i, a in enumerate(nodes)]
    return ["", *nodes], rows, set(range(1, len(nodes) + 1))


def findings_lines(found: Findings) -> list[str]:
    lines = (named_nodes(found.slow_nodes) + named_links(found.slow_links)
             or ["no slow node or link"])
    if found.note:
        lines.append(found.note)
    return lines + [f"rule: {found.rule}"]


def _pairs_sections(doc: Document, draw: Draw, title: Title) -> list[str]:
    run = MpiRun.from_document(doc)
    b = run.pairs()
    how = ("one pair at a time, the other ranks waiting" if b.mode == "serial" else
           "rounds of disjoint pairs at once")
    out = [title(f"All-pairs ping-pong: {run.label}"), "",
           f"{how}; latency at {b.latency_bytes:,} B, bandwidth at "
           f"{b.bandwidth_bytes:,} B. {b.statistic}. Between two nodes: the median of "
           "their rank pairs.", ""]
    for s in run.series:
        found = s.pair_findings()
        out += [title(series_name(s)), "", *series_lines(s), "",
                "Latency (us):", "", *draw(matrix_table(found, "latency_s", 1e6)), "",
                "Bandwidth (MB/s = 10^6 B/s):", "",
                *draw(matrix_table(found, "bandwidth_Bps", 1e-6)), "",
                *findings_lines(found), ""]
    return out


@renderer("cluster-pairs", "text")
def pairs_text(doc: Document, **_options: Any) -> str:
    lines = with_answer(doc, _pairs_sections(doc, lambda t: aligned(*t), lambda s: s), False)
    return "\n".join(lines + conditions.text_lines(doc.meta, "")).rstrip() + "\n"


@renderer("cluster-pairs", "markdown")
def pairs_markdown(doc: Document, **_options: Any) -> str:
    lines = with_answer(doc, _pairs_sections(doc, lambda t: markdown(*t),
                                             lambda s: f"## {s}"), True)
    return "\n".join(lines).rstrip() + "\n"


PAIR_FIELDS = ("ranks_per_node", "a", "b", "node_a", "node_b", "round", "latency_s",
               "latency_ci_low_s", "latency_ci_high_s", "latency_trials", "bandwidth_Bps",
               "bandwidth_ci_low_Bps", "bandwidth_ci_high_Bps", "bandwidth_trials")


def _stat_cells(st: Stat | None) -> list[Any]:
    return [None] * 4 if st is None else [st.median, st.ci_low, st.ci_high, st.trials]


@renderer("cluster-pairs", "csv")
def pairs_csv(doc: Document, **_options: Any) -> str:
    """One row per pair of ranks and series."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(PAIR_FIELDS)
    for s in MpiRun.from_document(doc).series:
        for p in s.pairs or []:
            writer.writerow([s.ranks_per_node, p.a, p.b, p.node_a, p.node_b,
                             p.round, *_stat_cells(p.latency_s),
                             *_stat_cells(p.bandwidth_Bps)])
    return out.getvalue()


# --------------------------------------------------------------------------- pairs at once


def _interval(st: Stat | None, scale: float) -> str:
    if st is None:
        return "-"
    ci = f" [{num(st.ci_low * scale)}, {num(st.ci_high * scale)}]" \
        if st.ci_low is not None and st.ci_high is not None else ""
    return num(st.median * scale) + ci


def mbw_table(s: Series) -> Table:
    header = ["pairs", "size", "aggregate MB/s [95% interval]", "messages/s",
              "slowest pair MB/s", "fastest pair MB/s", "sum of pairs MB/s", "trials"]
    rows = [[str(p.pairs), units.format_size(p.size), _interval(p.bandwidth_Bps, 1e-6),
             _interval(p.rate_per_s, 1.0), num(p.pair_Bps["min"] * 1e-6),
             num(p.pair_Bps["max"] * 1e-6), num(p.pair_Bps["sum"] * 1e-6),
             str(p.trials)] for p in s.points or []]
    return header, rows, set(range(len(header)))


def _mbw_sections(doc: Document, draw: Draw, title: Title) -> list[str]:
    run = MpiRun.from_document(doc)
    b = run.mbw()
    out = [title(f"N pairs at once (as osu_mbw_mr): {run.label}"), "",
           f"Windows of {b.window} messages, each acknowledged. {b.statistic}.", ""]
    for s in run.series:
        pairs = ", ".join(f"{p.sender}->{p.receiver} ({p.sender_node} -> "
                          f"{p.receiver_node})" for p in s.pairings or [])
        out += [title(series_name(s)), "", *series_lines(s), f"  pairs: {pairs}", "",
                *draw(mbw_table(s)), ""]
        if s.skipped_pair_counts:
            out += [f"pair counts left out (more than the ranks make): "
                    f"{', '.join(map(str, s.skipped_pair_counts))}", ""]
    return out


@renderer("cluster-mbw", "text")
def mbw_text(doc: Document, **_options: Any) -> str:
    lines = with_answer(doc, _mbw_sections(doc, lambda t: aligned(*t), lambda s: s), False)
    return "\n".join(lines + conditions.text_lines(doc.meta, "")).rstrip() + "\n"


@renderer("cluster-mbw", "markdown")
def mbw_markdown(doc: Document, **_options: Any) -> str:
    lines = with_answer(doc, _mbw_sections(doc, lambda t: markdown(*t), lambda s: f"## {s}"), True)
    return "\n".join(lines).rstrip() + "\n"


MBW_FIELDS = ("ranks_per_node", "np", "pairs", "size", "bandwidth_Bps", "bandwidth_ci_low_Bps",
              "bandwidth_ci_high_Bps", "rate_per_s", "rate_ci_low_per_s",
              "rate_ci_high_per_s", "slowest_pair_Bps", "fastest_pair_Bps", "sum_of_pairs_Bps",
              "trials")


@renderer("cluster-mbw", "csv")
def mbw_csv(doc: Document, **_options: Any) -> str:
    """One row per pair count, size and series."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(MBW_FIELDS)
    for s in MpiRun.from_document(doc).series:
        for p in s.points or []:
            bw, rate = p.bandwidth_Bps, p.rate_per_s
            writer.writerow([s.ranks_per_node, s.np, p.pairs, p.size, bw.median,
                             bw.ci_low, bw.ci_high, rate.median, rate.ci_low,
                             rate.ci_high, p.pair_Bps["min"], p.pair_Bps["max"],
                             p.pair_Bps["sum"], p.trials])
    return out.getvalue()


# --------------------------------------------------------------------------- the answer


def with_answer(doc: Document, lines: list[str], md: bool) -> list[str]:
    """The sections with the document's answer after their title line."""
    top = lines_of(doc)
    block = markdown_block(top) if md else [*text_block(top), *([""] if top else [])]
    return [*lines[:2], *block, *lines[2:]]


def series_answer(s: Series) -> list[Line]:
    """A series that did not complete, its warnings, and minimum trials that overran the
    time budget (the figures then have fewer trials than asked)."""
    name = series_name(s)
    out = []
    if s.status != "complete":
        text = f"{name}: {s.status}" + (f" ({s.status_reason})" if s.status_reason else "")
        out.append(Line(Level.WARN if s.status == "interrupted" else Level.FAIL, text))
    out += [Line(line.level, f"{name}: {line.text}", line.todo, line.topic)
            for line in from_strings(s.warnings or [])]
    loop = s.loop
    if isinstance(loop, Loop) and loop.over_budget:
        out.append(Line(Level.IMPRECISE, f"{name}: the minimum trials took "
                                         f"{loop.elapsed_s} s, longer than the time "
                                         "budget: no time was left to reach the precision "
                                         "asked",
                        "a longer --time-budget, or fewer sizes", PRECISION))
    return out


def _all_series(run: MpiRun) -> list[Line]:
    return [line for s in run.series for line in series_answer(s)]


def _or_ok(lines: list[Line], what: str) -> list[Line]:
    return lines if any(line.level < Level.NOTE for line in lines) else \
        [*lines, Line(Level.OK, what)]


@answer("cluster-ring")
def ring_answer(doc: Document) -> list[Line]:
    run = MpiRun.from_document(doc)
    return _or_ok(_all_series(run), f"{plural(len(run.series), 'series', 'series')} "
                                    "measured, none stopped early")


@answer("cluster-mbw")
def mbw_answer(doc: Document) -> list[Line]:
    run = MpiRun.from_document(doc)
    return _or_ok(_all_series(run), f"{plural(len(run.series), 'series', 'series')} "
                                    "measured, none stopped early")


@answer("cluster-pairs")
def pairs_answer(doc: Document) -> list[Line]:
    """The slow nodes and links of every series (one line each kind), then the series'
    own lines."""
    run = MpiRun.from_document(doc)
    out = []
    for s in run.series:
        found = s.pair_findings()
        slow, links = named_nodes(found.slow_nodes), named_links(found.slow_links)
        if slow:
            out.append(Line(Level.WARN, f"{series_name(s)}: {listed(slow, 4)}",
                            "beoperf audit and beoperf node on that node, beside a fast one"))
        if links:
            text = (f"{series_name(s)}: {listed(links, 3)}" if len(links) <= 3 else
                    f"{series_name(s)}: {len(links)} slow links: {listed(links, 3)}")
            out.append(Line(Level.WARN, text, "beoperf pingpong between the two nodes of a "
                                              "slow link; check its cables and switch ports"))
    return _or_ok([*out, *_all_series(run)], "no slow node or link")

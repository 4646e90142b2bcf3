"""The cluster's own MPI tests in the HTML report: HPCC's ring figures per ranks-per-node
series (and every ring's trials, folded), the all-pairs matrix as two heat maps with the
slow nodes and links named, and N pairs at once as a table and a chart of the aggregate
bandwidth against the message size.

Heat map cells are SVG rectangles whose colour runs from the best figure to at least
twice as bad as the median (darker is worse), each with its figure on it, its hover
text, and ``data-key``/``data-value`` so that the browser test checks it against the
document."""

from __future__ import annotations

from typing import Any

from beoperf import units
from beoperf.analysis.cluster_mpi import HPCC_KEYS, named_links, named_nodes, ratio
from beoperf.model.cluster import Summary
from beoperf.model.cluster_mpi import Findings, MpiRun, Series, Stat
from beoperf.model.document import Document
from beoperf.report import renderer
from beoperf.report.cluster_mpi import FIGURE_NAMES, median_summary, series_name
from beoperf.report.html import svg
from beoperf.report.html.markup import (
    Markup,
    bullet_list,
    code,
    details,
    esc,
    figure,
    heading,
    join,
    num,
    pairs,
    para,
    status_mark,
    table,
)

# viridis at five stops (dark to bright), interpolated linearly
VIRIDIS = ((68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37))
CELL, LABEL_W, TOP = 56, 110, 34
METRIC_OF = {"latency_s": "latency", "bandwidth_Bps": "bandwidth"}


def _g(value: float | None) -> str:
    """4 significant digits, thousands separated from 10,000 on."""
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"


def series_facts(s: Series) -> Markup:
    argv = s.argv()
    return pairs([("series", series_name(s)), ("status", status_mark(
                      "ok" if s.status == "complete" else s.status)),
                  ("why it stopped", s.status_reason),
                  ("nodes", ", ".join(s.nodes)),
                  ("MPI", s.mpi_library()),
                  ("launch", code(" ".join(argv)) if argv else s.started_by()),
                  ("launcher's variables", ", ".join(f"{k}={v}" for k, v in
                                                     s.launch_environment().items())
                   or None)])


# --------------------------------------------------------------------------- rings


@renderer("cluster-ring", "title")
def ring_title(doc: Document, **_options: Any) -> str:
    run = MpiRun.from_document(doc)
    return (f"HPCC ring latency and bandwidth {run.label}: "
            f"{', '.join(series_name(s) for s in run.series) or 'no series'}")


def _figure_cell(s: Series, i: int, key: str) -> Markup:
    st = (s.summary or {}).get(key)
    if st is None:
        return esc("-")
    where = f"body.series.{i}.summary.{key}"
    spread = [esc(" ("), num(st.stdev, _g(st.stdev), f"{where}.stdev"), esc(")")] \
        if st.stdev is not None else []
    return join([num(st.mean, _g(st.mean), f"{where}.mean"), *spread])


def _mean(st: Summary | None) -> float | None:
    return st.mean if st else None


def ring_figures_table(series: list[Series]) -> Markup:
    head = ["figure", *(series_name(s) for s in series),
            *(f"{s.ranks_per_node}/{series[0].ranks_per_node} per node"
              for s in series[1:])]
    rows = []
    for key in HPCC_KEYS:
        means = [_mean((s.summary or {}).get(key)) for s in series]
        rows.append([FIGURE_NAMES[key], *(_figure_cell(s, i, key) for i, s in enumerate(series)),
                     *(_g(ratio(m, means[0])) for m in means[1:])])
    for key in HPCC_KEYS:
        stats = [median_summary(s, key) for s in series]
        rows.append([FIGURE_NAMES[key].replace(" (", ", median of trials (", 1),
                     *(_g(st.mean) if st else "-" for st in stats),
                     *("" for _ in series[1:])])
    return table(head, rows, numeric=range(1, len(head)),
                 caption="HPCC's figures: mean (sample standard deviation) over the repeats; "
                         "GB/s = 10^9 B/s; then the same from the trials' medians")


def rings_table(s: Series, i: int) -> Markup:
    rows = []
    for r_i, rep in enumerate(s.repeats or []):
        for k, ring in enumerate(rep.rings):
            where = f"body.series.{i}.repeats.{r_i}.rings.{k}"
            ci = ring.ci_s
            interval = esc("-") if ci is None else join([
                esc("["), num(ci[0], _g(ci[0] * 1e6), f"{where}.ci_s.0", unit="us"), esc(", "),
                num(ci[1], _g(ci[1] * 1e6), f"{where}.ci_s.1", unit="us"), esc("]")])
            rows.append([str(rep.repeat), ring.name, units.format_size(ring.size),
                         " ".join(map(str, ring.order)), str(len(ring.trials)),
                         num(ring.hpcc_s, _g(ring.hpcc_s * 1e6), f"{where}.hpcc_s",
                             unit="us"),
                         num(ring.median_s, _g(ring.median_s * 1e6), f"{where}.median_s",
                             unit="us"), interval])
    return table(["repeat", "ring", "size", "order of the ranks", "trials",
                  "minimum (us)", "median (us)", "95% interval (us)"], rows,
                 numeric=[4, 5, 6, 7], caption="Each ring's latency per message: HPCC's "
                 "statistic is the minimum over the trials")


@renderer("cluster-ring", "html")
def ring_html(doc: Document, **_options: Any) -> str:
    run = MpiRun.from_document(doc)
    d = run.ring()
    parts = [para(f"Both directions; latency at {d.latency_bytes:,} B, bandwidth at "
                  f"{d.bandwidth_bytes:,} B; the natural ring and "
                  f"{d.random_rings['latency']} random rings "
                  f"({d.random_rings['bandwidth']} for bandwidth); each trial "
                  f"{d.loop_length['latency']} steps at the latency size, "
                  f"{d.loop_length['bandwidth']} at the bandwidth size. {d.statistic}.")]
    if run.series:
        parts.append(ring_figures_table(run.series))
    for i, s in enumerate(run.series):
        parts += [heading(series_name(s), 4), series_facts(s),
                  details(f"Every ring of {series_name(s)}", rings_table(s, i))]
    return join(parts)


# --------------------------------------------------------------------------- pairs


def _colour(frac: float) -> str:
    """Viridis at ``frac`` (0 dark .. 1 bright) as #rrggbb."""
    frac = min(1.0, max(0.0, frac)) * (len(VIRIDIS) - 1)
    i = min(int(frac), len(VIRIDIS) - 2)
    t = frac - i
    rgb = [round(a + (b - a) * t) for a, b in zip(VIRIDIS[i], VIRIDIS[i + 1], strict=True)]
    return "#" + "".join(f"{c:02x}" for c in rgb)


def _brightness(values: list[float], field: str) -> tuple[float, float, bool]:
    """(lo, hi, bright_is_high): the colour range, as the PNG's (report/pairs_plots)."""
    med = sorted(values)[len(values) // 2]
    if field == "latency_s":
        return min(values), max(max(values), 2 * med), False
    return min(min(values), med / 2), max(values), True


def _missing_cell(x: int, y: int, a: str, b: str) -> str:
    return (f'<rect x="{x}" y="{y}" width="{CELL}" height="{CELL}" fill="#d9d9d9"><title>'
            f"{esc(a)} - {esc(b)}: not measured</title></rect>")


def _cell(x: int, y: int, v: float, frac: float, edge: bool, tip: str, key: str,
          shown: str) -> list[str]:
    """A measured cell: its colour (frac 0..1 of the scale), a red edge for a slow link,
    the value as stored and where (data-value, data-key), and the figure written in it."""
    stroke = ' stroke="#c0392b" stroke-width="3"' if edge else ""
    ink = "#fff" if frac < 0.5 else "#000"  # (a style: the page's CSS sets fill)
    return [f'<rect x="{x}" y="{y}" width="{CELL}" height="{CELL}" '
            f'fill="{_colour(frac)}"{stroke} data-value="{v!r}" data-key="{key}">'
            f"<title>{esc(tip)}</title></rect>",
            f'<text x="{x + CELL / 2}" y="{y + CELL / 2 + 4}" text-anchor="middle" '
            f'style="fill:{ink}">{esc(shown)}</text>']


def _node_labels(nodes: list[str], slow_nodes: set[str]) -> list[str]:
    """Each node's name left of its row and slanted under its column (a slow node red)."""
    out = []
    n = len(nodes)
    for k, node in enumerate(nodes):
        colour = ' style="fill:#c0392b;font-weight:bold"' if node in slow_nodes else ""
        short = node if len(node) <= 14 else node[:13] + "…"
        out.append(f'<text class="tick" x="{LABEL_W - 6}" y="{TOP + k * CELL + CELL / 2 + 4}" '
                   f'text-anchor="end"{colour}>{esc(short)}</text>')
        cx, cy = LABEL_W + k * CELL + CELL / 2, TOP + n * CELL + 8
        out.append(f'<text class="tick" x="{cx}" y="{cy}" text-anchor="end" '
                   f'transform="rotate(-45 {cx} {cy})"{colour}>{esc(short)}</text>')
    return out


def _fraction(v: float, lo: float, hi: float, bright_high: bool) -> float:
    """Where v sits on the colour scale (0..1; bright for the better end)."""
    frac = (v - lo) / (hi - lo) if hi > lo else 0.5
    return frac if bright_high else 1 - frac


def heatmap(found: Findings, field: str, i: int, title: str, scale: float,
            unit: str) -> Markup:
    """The node x node matrix of ``field`` as an SVG heat map (see the module's doc)."""
    nodes, m = found.nodes, found.matrix.get(field, [])
    values = [v for row in m for v in row if v is not None]
    n = len(nodes)
    width = max(LABEL_W + CELL * n + 10, 8 * len(title) + 20)
    height = TOP + CELL * n + 90  # room for the slanted labels
    # drawn at its own size (not stretched to the page's width), shrunk if it must
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="heat" width="{width}" '
           f'height="{height}" viewBox="0 0 {width} {height}" style="max-width:100%;'
           f'height:auto;display:block;background:#fff" role="img" '
           f'aria-label="{esc(title)}"><title>{esc(title)}</title>']
    lo, hi, bright_high = _brightness(values, field) if values else (0.0, 1.0, True)
    metric = METRIC_OF[field]
    slow = {(s.a, s.b) for s in found.slow_links if s.metric == metric}
    for r in range(n):
        for c in range(n):
            x, y, v = LABEL_W + c * CELL, TOP + r * CELL, m[r][c]
            if v is None:
                out.append(_missing_cell(x, y, nodes[r], nodes[c]))
                continue
            edge = (nodes[r], nodes[c]) in slow or (nodes[c], nodes[r]) in slow
            out += _cell(x, y, v, _fraction(v, lo, hi, bright_high), edge,
                         f"{nodes[r]} - {nodes[c]}: {_g(v * scale)} {unit}",
                         f"body.series.{i}.findings.matrix.{field}.{r}.{c}", _g(v * scale))
    out += _node_labels(nodes, {s.node for s in found.slow_nodes if s.metric == metric})
    out.append(f'<text class="title" x="{width / 2:.0f}" y="18" text-anchor="middle">'
               f"{esc(title)}</text></svg>")
    return Markup("".join(out))


@renderer("cluster-pairs", "title")
def pairs_title(doc: Document, **_options: Any) -> str:
    run = MpiRun.from_document(doc)
    slow = sum(len(s.pair_findings().slow_nodes) + len(s.pair_findings().slow_links)
               for s in run.series)
    return (f"All-pairs ping-pong {run.label} ({run.pairs().mode}): "
            f"{slow or 'no'} slow node{'s' if slow != 1 else ''} or link{'s' if slow != 1 else ''}")


@renderer("cluster-pairs", "html")
def pairs_html(doc: Document, **_options: Any) -> str:
    run = MpiRun.from_document(doc)
    b = run.pairs()
    how = ("one pair at a time, the other ranks waiting" if b.mode == "serial" else
           "rounds of disjoint pairs at once")
    parts = [para(f"{how}; latency at {b.latency_bytes:,} B, bandwidth at "
                  f"{b.bandwidth_bytes:,} B. {b.statistic}. Between two nodes: the "
                  "median of their rank pairs; darker is worse.")]
    for i, s in enumerate(run.series):
        found = s.pair_findings()
        lat = heatmap(found, "latency_s", i, f"Latency (us), {series_name(s)}", 1e6, "us")
        bw = heatmap(found, "bandwidth_Bps", i, f"Bandwidth (MB/s = 10^6 B/s), "
                     f"{series_name(s)}", 1e-6, "MB/s")
        found_lines = (named_nodes(found.slow_nodes) + named_links(found.slow_links)
                       or ["no slow node or link"])
        parts += [heading(series_name(s), 4), series_facts(s),
                  figure(lat, "Latency between every two nodes: half the round trip, "
                         "median of the trials (us)", kind="pairs-latency"),
                  figure(bw, "Bandwidth between every two nodes: the message size over half "
                         "the round trip, median of the trials (MB/s)", kind="pairs-bandwidth"),
                  bullet_list(found_lines), para(f"Rule: {found.rule}.")]
        if found.note:
            parts.append(para(found.note))
    return join(parts)


# --------------------------------------------------------------------------- pairs at once


@renderer("cluster-mbw", "title")
def mbw_title(doc: Document, **_options: Any) -> str:
    run = MpiRun.from_document(doc)
    counts = sorted({c for s in run.series for c in s.pair_counts or []})
    return (f"N pairs at once {run.label}: {', '.join(map(str, counts)) or 'no'} pairs, "
            f"{len(run.mbw().sizes)} sizes")


def _interval_text(st: Stat, scale: float) -> str:
    if st.ci_low is None or st.ci_high is None:
        return "-"
    return _g(st.ci_low * scale) + " - " + _g(st.ci_high * scale)


def mbw_table(s: Series, i: int) -> Markup:
    rows = []
    for k, p in enumerate(s.points or []):
        where = f"body.series.{i}.points.{k}"
        bw, rate = p.bandwidth_Bps, p.rate_per_s
        rows.append([str(p.pairs), units.format_size(p.size),
                     num(bw.median, _g(bw.median * 1e-6), f"{where}.bandwidth_Bps.median",
                         unit="MB/s"),
                     _interval_text(bw, 1e-6),
                     num(rate.median, _g(rate.median), f"{where}.rate_per_s.median"),
                     _g(p.pair_Bps["min"] * 1e-6), _g(p.pair_Bps["max"] * 1e-6),
                     _g(p.pair_Bps["sum"] * 1e-6), str(p.trials)])
    return table(["pairs", "size", "aggregate MB/s", "95% interval", "messages/s",
                  "slowest pair MB/s", "fastest pair MB/s", "sum of pairs MB/s", "trials"],
                 rows, numeric=range(0, 9), caption="Aggregate bandwidth (osu_mbw_mr's: pairs x "
                 "size x messages / the senders' mean time) and message rate; MB/s = 10^6 B/s")


def mbw_chart(s: Series, i: int) -> Markup:
    points = s.points or []
    lines = []
    for c_i, count in enumerate(s.pair_counts or []):
        pts = [(k, p) for k, p in enumerate(points) if p.pairs == count]
        lines.append(svg.Line(
            f"{count} pair{'s' if count != 1 else ''}", [float(p.size) for _, p in pts],
            [p.bandwidth_Bps.median * 1e-6 for _, p in pts],
            [f"{count} pairs, {units.format_size(p.size)}: "
             f"{_g(p.bandwidth_Bps.median * 1e-6)} MB/s" for _, p in pts], color=c_i,
            keys=[f"body.series.{i}.points.{k}.bandwidth_Bps.median" for k, _ in pts],
            raw=[p.bandwidth_Bps.median for _, p in pts]))
    xs = [float(p.size) for p in points]
    ys = [p.bandwidth_Bps.median * 1e-6 for p in points]
    if not xs:
        return svg.empty("Aggregate bandwidth", "nothing measured")
    x_lo, x_hi = svg.padded(min(xs), max(xs), True)
    y_lo, y_hi = svg.padded(min(ys), max(ys), True)
    chart = svg.chart(f"Aggregate bandwidth, {series_name(s)}",
                      svg.Axis("message size", x_lo, x_hi, log=True, base2=True,
                               tick_text=units.size_tick),
                      svg.Axis("MB/s", y_lo, y_hi, log=True), lines)
    return join([chart, svg.legend(lines)])


@renderer("cluster-mbw", "html")
def mbw_html(doc: Document, **_options: Any) -> str:
    run = MpiRun.from_document(doc)
    b = run.mbw()
    parts = [para(f"Windows of {b.window} messages, each acknowledged. {b.statistic}.")]
    for i, s in enumerate(run.series):
        pairing = ", ".join(f"{p.sender}→{p.receiver} ({p.sender_node} → "
                            f"{p.receiver_node})" for p in s.pairings or [])
        parts += [heading(series_name(s), 4), series_facts(s), para(f"Pairs: {pairing}."),
                  mbw_table(s, i),
                  figure(mbw_chart(s, i), "Aggregate bandwidth against the message size, one "
                         "line per pair count (MB/s = 10^6 B/s, medians of the trials)",
                         kind="mbw")]
    return join(parts)

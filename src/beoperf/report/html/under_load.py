"""Latency under load in the HTML report (``beoperf pingpong --under-load``): the answer
first (the deepest percentile both ways at the smallest size, and the ratio), the load's
throughput, a chart of the median and p99 against the size without the load and with it,
the load's own tail percentiles, and a table of every size both ways
(beoperf.analysis.under_load).  A run without --under-load gets nothing.
"""

from __future__ import annotations

from beoperf.analysis import tails as tail_figures
from beoperf.analysis import under_load
from beoperf.model.pingpong import RunResult
from beoperf.report.html import svg, tails
from beoperf.report.html.markup import Markup, esc, figure, heading, join, para, table
from beoperf.units import format_size, size_tick

DRAWN = ("median", "p99")


def answer(run: RunResult) -> Markup:
    """The one line a reader wants first; empty without --under-load."""
    if run.under_load is None:
        return Markup("")
    said = under_load.headline(run) or "no size was measured both with and without the load"
    said = said.replace(" us", " µs")
    return para(esc(f"Under load: {said}. Load: {under_load.load_text(run)}."), "answer")


def chart(run: RunResult) -> Markup:
    """Median and p99 against the size, idle (solid) and under load (dashed)."""
    found = [p for p in under_load.pairs(run) if p.size > 0]
    values = [v for p in found for n in DRAWN for side in (False, True)
              if (v := p.value(n, side)) is not None]
    if not found or not values:
        return svg.empty("Latency without and with the load", "no size measured both ways")
    xs = [float(p.size) for p in found]
    lines = []
    for color, name in enumerate(DRAWN):
        for loaded in (False, True):
            label = f"{name} {'under load' if loaded else 'idle'}"
            ys = [p.value(name, loaded) for p in found]
            tips = [f"{label} at {format_size(p.size)}: "
                    f"{under_load.time_text(y) if y is not None else 'n/a'}"
                    for p, y in zip(found, ys, strict=True)]
            lines.append(svg.Line(label, xs, ys, tips, color=color, dashed=loaded))
    xlo, xhi = svg.padded(min(xs), max(xs), True)
    ylo, yhi = svg.padded(min(values), max(values), True)
    return svg.chart("Latency without and with the load",
                     svg.Axis("message size (bytes; K = 1024)", xlo, xhi, log=True,
                              base2=True, tick_text=size_tick),
                     svg.Axis("one-way time", ylo, yhi, log=True, tick_text=_micro), lines)


def _micro(us: float) -> str:
    return under_load.time_text(us).replace(" us", " µs")


def _legend() -> Markup:
    return svg.legend([svg.Line(f"{name}: solid idle, dashed under load", [], [], [],
                                color=color) for color, name in enumerate(DRAWN)])


def _cell(pair: under_load.Pair, name: str, loaded: bool) -> str:
    value = pair.value(name, loaded)
    side = pair.loaded if loaded else pair.idle
    return _micro(value) if value is not None else \
        f"n/a ({tail_figures.samples_of(side.tail):,} samples)"


def size_table(run: RunResult) -> Markup:
    shown = ("median", *under_load.COMPARED[1:])
    rows = []
    verdicts = under_load.median_effects(run)
    for p in under_load.pairs(run)[:tails.MAX_ROWS]:
        found = verdicts.get(p.size)
        row = [format_size(p.size), found.verdict if found is not None else "-"]
        for name in shown:
            ratio = p.ratio(name)
            row += [_cell(p, name, False), _cell(p, name, True),
                    f"x{ratio:.3g}" if ratio is not None else "-"]
        rows.append(row)
    head = ["size", "median under load (verdict)",
            *[f"{n} {side}" for n in shown for side in ("idle", "load", "ratio")]]
    return table(head, rows, numeric=[0, *range(2, len(head))], cls="tails",
                 empty="no size was measured both ways")


def section(run: RunResult, anchor: str) -> Markup:
    """The "Latency under load" heading, the chart, the loaded tails and the table."""
    if run.under_load is None:
        return Markup("")
    status = run.under_load.get("status")
    state = "" if status == "complete" else \
        f" The loaded sweep {status}: {run.under_load.get('status_reason') or '-'}."
    loaded = [s for s in run.loaded_sizes() if isinstance(s.tail, dict)]
    parts = [heading("Latency under load"),
             para(esc(f"The same sizes in one session, first alone, then while "
                      f"{under_load.load_text(run)}.{state}")),
             figure(chart(run), join([_legend(), esc(
                 "Median and p99 one-way time, idle (solid) and under load (dashed); a p99 "
                 "without enough samples is a gap.")]),
                    f"{anchor}-under-load", "under-load"),
             size_table(run)]
    if loaded:
        parts.append(figure(tails.percentile_chart(loaded, "one-way time under load"),
                            join([svg.legend([svg.Line(n, [], [], [], color=i)
                                              for i, n in enumerate(tails.SHOWN)]),
                                  esc(f"Percentiles under load: {tail_figures.RULE}.")]),
                            f"{anchor}-under-load-tails", "tails"))
    return join(parts)

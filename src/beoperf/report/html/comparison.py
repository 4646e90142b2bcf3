"""A comparison in the HTML report: the verdicts first, then one row per configuration
with its figures and, against the baseline, the latency and peak verdicts with their
intervals and the sizes' tally (the same figures `beoperf compare` prints;
beoperf.analysis.compare and beoperf.analysis.effect say how they are judged), then the
tuning studies' impact table."""

from __future__ import annotations

from typing import Any

from beoperf.analysis.compare import Comparison, Row
from beoperf.analysis.effect import BETTER, WORSE, Effect
from beoperf.model.document import Document
from beoperf.report import renderer
from beoperf.report.compare import collapse_cell
from beoperf.report.html.markup import Markup, esc, heading, join, num, para, table, tag
from beoperf.report.html.pingpong import time_text
from beoperf.units import format_rate, format_size


def _k(i: int, field: str) -> str:
    return f"body.rows.{i}.{field}"


@renderer("comparison", "title")
def title(doc: Document, **_options: Any) -> str:
    found = Comparison.from_document(doc)
    return f"Comparison of {len(found.rows)} configurations against {found.baseline}"


MARKS = {BETTER: "pass", WORSE: "fail"}


def _change(i: int, row: Row, field: str, test: Effect | None) -> Markup | str:
    """The change of a figure, its interval and its verdict (what the interval holds on
    hover)."""
    value = getattr(row, field)
    if row.baseline or test is None:
        return tag("span", "baseline", class_="mark unk")
    span = test.span_text()
    shown = num(value, f"{value:+.1f}%", _k(i, field)) if value is not None else esc("-")
    within = esc(f" [{span}]") if span else esc("")
    return join([shown, within, esc(" "),
                 tag("span", test.verdict, class_=f"mark {MARKS.get(test.verdict, 'unk')}",
                     title=test.spread_text() or (test.reason or ""))])


def _cells(i: int, r: Row) -> list[Any]:
    p99 = r.latency_p99_us
    return [r.label, str(r.runs),
            num(r.latency_us, time_text(r.latency_us), _k(i, "latency_us")),
            num(p99, time_text(p99) if p99 is not None else "n/a", _k(i, "latency_p99_us")),
            num(r.peak_bps, format_rate(r.peak_bps), _k(i, "peak_bps")),
            format_size(r.peak_size),
            num(r.peak_of_link, r.efficiency_text(), title=r.efficiency_unknown),
            format_size(r.saturation_size) if r.saturation_size else "-",
            format_size(r.n_half) if r.n_half else "-",
            num(r.alpha_us, time_text(r.alpha_us) if r.alpha_us is not None else "n/a",
                _k(i, "alpha_us")),
            num(r.bandwidth_bps, format_rate(r.bandwidth_bps) if r.bandwidth_bps else "n/a",
                _k(i, "bandwidth_bps")),
            _change(i, r, "latency_change_pct", r.latency_test),
            _change(i, r, "peak_change_pct", r.peak_test), r.sizes_text(),
            collapse_cell(r.collapses)]


def impact(rows: list[Row]) -> Markup:
    """Latency mean (variance) of the trial medians and the impact against the baseline."""
    out = []
    for i, r in enumerate(rows):
        mean = num(r.latency_mean_us, f"{r.latency_mean_us:.2f}" if r.latency_mean_us
                   is not None else "n/a", _k(i, "latency_mean_us"), unit="µs")
        var = num(r.latency_variance, f"{r.latency_variance:.2f}" if r.latency_variance
                  is not None else "n/a", _k(i, "latency_variance"), unit="µs²")
        imp = "-" if r.baseline or r.impact_pct is None else num(
            r.impact_pct, f"{r.impact_pct:.2f}%", _k(i, "impact_pct"))
        out.append([r.label, mean, var, imp])
    return table(["configuration", "latency mean µs", "variance µs²", "impact"], out,
                 numeric=[1, 2, 3], caption="Impact (the tuning studies' table)")


@renderer("comparison", "html")
def html(doc: Document, **_options: Any) -> str:
    found = Comparison.from_document(doc)
    rows, statement = found.rows, found.statement
    head = ["configuration", "runs", "latency", "p99", "peak", "peak at", "peak of link",
            "saturation",
            "n1/2", "alpha", "1/beta", "latency change", "peak change", "sizes", "collapses"]
    classes = ["base" if r.baseline else None for r in rows]
    return join([
        table(head, [_cells(i, r) for i, r in enumerate(rows)], numeric=range(1, 12),
              row_classes=classes,
              caption=f"Configurations against the baseline {found.baseline}"),
        para("One-way times; latency = the median time of the middle size (by median) "
             "among sizes <= 16 B; rates SI (bit/s); the verdicts compare one size every run "
             "measured: latency + = slower, peak + = faster, with the interval of the "
             "change; peak of link: the peak's share of the link speed (--link-speed, else "
             "the slower NIC; unknown for virtual NICs, the reason on hover) and of its TCP "
             "goodput limit.", "none"),
        para(statement, "none") if statement else Markup(""),
        heading("Impact"), impact(rows),
        para("Mean and variance (ddof=1) of the per-trial medians of the one-way time at "
             "the size compared; impact = (baseline mean - mean) / baseline mean.",
             "none")])

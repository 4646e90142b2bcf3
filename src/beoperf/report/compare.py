"""Renderers of a comparison: the verdicts first, then the aligned table, Markdown, CSV
and the tuning studies' impact table (beoperf.analysis.compare says what is compared and
how it is judged)."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from beoperf.analysis.compare import Comparison, Row, statement
from beoperf.analysis.curve import COLLAPSE_FACTOR, LATENCY_MAX_SIZE, Collapse, latency_name
from beoperf.analysis.effect import CANNOT_TELL, DEFAULT_MARGIN, WORSE, Effect
from beoperf.model.document import Document
from beoperf.report import renderer
from beoperf.report.answer import (
    Level,
    Line,
    answer,
    markdown_block,
    ordered,
    text_block,
)
from beoperf.report.tables import aligned as _aligned


def _baseline_label(table: Sequence[Row]) -> str:
    return next((r.label for r in table if r.baseline), "?")


def collapse_notes(table: Sequence[Row]) -> list[str]:
    """One warning line per throughput collapse of any run (none when there is none)."""
    return [f"Warning: {r.label}: {c.text()}; its figures leave those sizes out "
            f"(collapse: throughput below 1/{COLLAPSE_FACTOR:g} of the best at a smaller "
            "size)." for r in table for c in r.collapses]


REPEAT = ("repeat each configuration (files given one --label are its runs) or keep a "
          "history of the setup, to narrow the interval")


def _peak_where(r: Row) -> str:
    """' at 16381 B', or ' (16381 -> 12285 B)' when the two peak at different sizes."""
    if r.peak_test_size is None:
        return ""
    if r.peak_baseline_size not in (None, r.peak_test_size):
        return f" ({r.peak_baseline_size} -> {r.peak_test_size} B)"
    return f" at {r.peak_test_size} B"


def _row_level(r: Row) -> Level:
    tests = [t for t in (r.latency_test, r.peak_test) if t is not None]
    verdicts = {t.verdict for t in tests} | {v for v, n in (r.size_verdicts or {}).items()
                                             if n}
    if WORSE in verdicts:
        return Level.WARN
    if any(t.verdict == CANNOT_TELL for t in tests):
        return Level.IMPRECISE
    return Level.OK


def verdict_lines(table: Sequence[Row]) -> list[Line]:
    """Each configuration against the baseline: latency, peak and the sizes on one line
    (a WARN when anything is worse, IMPRECISE when a headline cannot be told), what the
    interval holds, and the settings unlike the baseline's."""
    out = []
    base = _baseline_label(table)
    base_mode = next((r.mode for r in table if r.baseline), None)
    for r in table:
        if r.baseline or r.latency_test is None or r.peak_test is None:
            continue
        lat = f" at {r.latency_size} B" if r.latency_size is not None else ""
        peak = _peak_where(r)
        level = _row_level(r)
        out.append(Line(level, f"{r.label} vs {base}: {latency_name(base_mode)}{lat} "
                               f"{r.latency_test.text()}; peak{peak} {r.peak_test.text()}; "
                               f"{r.sizes_text()}",
                        REPEAT if level == Level.IMPRECISE else ""))
        spread = r.latency_test.spread_text()
        if spread:
            out.append(Line(Level.NOTE, f"{r.label}: {spread}"))
        if r.differs:
            out.append(Line(Level.NOTE, f"{r.label} is unlike the baseline in: "
                                        f"{'; '.join(r.differs)}"))
    out += [Line(Level.WARN, n.removeprefix("Warning: ")) for n in collapse_notes(table)]
    return out


@answer("comparison")
def comparison_answer(doc: Document) -> list[Line]:
    return verdict_lines(Comparison.from_document(doc).rows)


def _notes(table: Sequence[Row], margin: float) -> list[str]:
    return [
            f"Baseline: {_baseline_label(table)}. One-way times; latency = the median time of "
            f"the middle size (by median) among sizes <= {LATENCY_MAX_SIZE} B; Mbit/s = 10^6 "
            "bit/s; verdicts compare one size every run measured (latency: lower is better, "
            "peak: higher is better); runs shows how many runs a row's figures are the "
            "medians of; peak of link: the peak's share of the link speed (--link-speed, "
            "else the slower NIC; unknown for virtual NICs) and of its TCP goodput limit.",
            statement(margin), *_unknown_links(table)]


def _unknown_links(table: Sequence[Row]) -> list[str]:
    """Why a row's link speed is unknown, once per reason."""
    reasons = dict.fromkeys(r.efficiency_unknown for r in table if r.efficiency_unknown)
    out = []
    for why in reasons:
        labels = ", ".join(r.label for r in table if r.efficiency_unknown == why)
        out.append(f"Link speed unknown ({labels}): {why}.")
    return out


COLUMNS = ("run", "runs", "latency us", "p99 us", "peak Mbit/s", "peak at B", "peak of link",
           "saturation B",
           "n1/2 B", "alpha us", "1/beta Mbit/s", "latency verdict", "peak verdict",
           "sizes", "throughput collapse")
NUMERIC = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}


def _fmt(value: float | None, spec: str, scale: float = 1.0) -> str:
    return "n/a" if value is None else format(value / scale, spec)


def collapse_cell(collapses: Sequence[Collapse]) -> str:
    """'65533..1048579 B (1/3171)' per collapse, '; '-separated; 'none' without any."""
    return "; ".join(f"{c.first_size}..{c.last_size} B (1/{c.factor:.0f})"
                     for c in collapses) or "none"


def verdict_cell(test: Effect | None, size: int | None) -> str:
    """'better (-12.3%, -18..-6.2%) at 1 B'; 'baseline' for the baseline."""
    if test is None:
        return "baseline"
    return test.text() + (f" at {size} B" if size is not None else "")


def _cells(row: Row) -> list[str]:
    return [row.label, str(row.runs), _fmt(row.latency_us, ".2f"),
            _fmt(row.latency_p99_us, ".2f"), _fmt(row.peak_bps, ".1f", 1e6), str(row.peak_size),
            row.efficiency_text(),
            _fmt(row.saturation_size, ".0f"), _fmt(row.n_half, ".0f"), _fmt(row.alpha_us, ".2f"),
            _fmt(row.bandwidth_bps, ".1f", 1e6), verdict_cell(row.latency_test, row.latency_size),
            verdict_cell(row.peak_test, None) + (_peak_where(row) if row.peak_test else ""),
            row.sizes_text(),
            collapse_cell(row.collapses)]


def _head(table: Sequence[Row]) -> list[Line]:
    return ordered(verdict_lines(table))


def _columns(table: Sequence[Row]) -> tuple[str, ...]:
    """The table's columns; runs all in stream mode have a time per message, no latency."""
    if table and all(r.mode == "stream" for r in table):
        return tuple(c.replace("latency", "time/msg") for c in COLUMNS)
    return COLUMNS


def render_table(table: Sequence[Row], margin: float = DEFAULT_MARGIN) -> str:
    """The verdicts first, then the aligned table (one line per configuration), the notes
    and the method."""
    lines = _aligned(_columns(table), [_cells(r) for r in table], NUMERIC)
    head = text_block(_head(table))
    return "\n".join([*head, *([""] if head else []), *lines, "",
                      *_notes(table, margin)]) + "\n"


def render_markdown(table: Sequence[Row], margin: float = DEFAULT_MARGIN) -> str:
    """The verdicts as a list, a pipe table, then the notes and the method as a paragraph."""
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    align = ["---:" if i in NUMERIC else "---" for i in range(len(COLUMNS))]
    out = [*markdown_block(_head(table)), line(_columns(table)), line(align),
           *(line(_cells(r)) for r in table)]
    return "\n".join([*out, "", *(f"{n}  " for n in _notes(table, margin))]).rstrip() + "\n"


CSV_FIELDS = ("label", "baseline", "runs", "latency_us", "latency_p99_us", "peak_Mbit_s",
              "peak_size_B", "saturation_size_B", "n_half_B", "alpha_us", "inv_beta_Mbit_s",
              "latency_test_size_B", "latency_verdict", "latency_change_pct",
              "latency_change_low_pct", "latency_change_high_pct", "latency_p",
              "peak_test_size_B", "peak_verdict", "peak_change_pct", "peak_change_low_pct",
              "peak_change_high_pct", "peak_p", "sizes_compared", "sizes_better",
              "sizes_worse", "sizes_no_difference", "sizes_cannot_tell",
              "latency_mean_us", "latency_variance_us2", "impact_pct", "throughput_collapses",
              "link_Mbit_s", "peak_of_link", "peak_of_goodput", "efficiency_unknown")


def _num(value: float | None, scale: float = 1.0) -> str:
    return "" if value is None else format(value / scale, ".10g")


def _test_fields(test: Effect | None) -> list[str]:
    if test is None:
        return ["baseline", "", "", "", ""]
    span = test.interval_pct() or (None, None)
    return [test.verdict, _num(test.change_pct), _num(span[0]), _num(span[1]), _num(test.p)]


def _size_counts(r: Row) -> list[str]:
    counts = r.size_verdicts
    if counts is None:
        return ["", "", "", ""]
    return [str(counts.get(v, 0)) for v in ("better", "worse", "no difference shown",
                                            "cannot tell")]


def _csv_record(r: Row) -> list[str]:
    return [r.label, "1" if r.baseline else "0", str(r.runs), _num(r.latency_us),
            _num(r.latency_p99_us), _num(r.peak_bps, 1e6), _num(r.peak_size),
            _num(r.saturation_size), _num(r.n_half), _num(r.alpha_us),
            _num(r.bandwidth_bps, 1e6), _num(r.latency_size), *_test_fields(r.latency_test),
            _num(r.peak_test_size), *_test_fields(r.peak_test), str(r.sizes_compared),
            *_size_counts(r), _num(r.latency_mean_us), _num(r.latency_variance),
            _num(r.impact_pct), _collapse_field(r.collapses), _num(r.link_bps, 1e6),
            _num(r.peak_of_link), _num(r.peak_of_goodput), r.efficiency_unknown or ""]


def _collapse_field(collapses: Sequence[Collapse]) -> str:
    """'first-last:factor' per collapse, ';'-separated, bare numbers; empty without any."""
    return ";".join(f"{c.first_size}-{c.last_size}:{c.factor:.6g}" for c in collapses)


def render_csv(table: Sequence[Row], margin: float = DEFAULT_MARGIN) -> str:
    """Header and one record per run; units in the header names, bare numbers in cells.

    The method is not in the CSV (it would break the table); callers print
    statement(margin) elsewhere (the CLI: on stderr).
    """
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    writer.writerows(_csv_record(r) for r in table)
    return buf.getvalue()


IMPACT_COLUMNS = ("Configuration", "Latency mean (variance)", "Impact")


def impact_lines(entries: Sequence[tuple[str, float | None, float | None, float | None]],
                 ) -> list[str]:
    """The tuning studies' table: (label, mean, variance, impact % or None for the
    baseline) per row, as 'Default 50.03 (4.31) -' ... 'Combined 21.31 (2.09) 57.40%'."""
    def cells(label: str, mean: float | None, variance: float | None,
              impact: float | None) -> list[str]:
        return [label, f"{_fmt(mean, '.2f')} ({_fmt(variance, '.2f')})",
                "-" if impact is None else f"{impact:.2f}%"]

    return _aligned(IMPACT_COLUMNS, [cells(*e) for e in entries], set(), gap="   ")


def _impact_entry(row: Row) -> tuple[str, float | None, float | None, float | None]:
    impact = None if row.baseline else row.impact_pct
    return row.label, row.latency_mean_us, row.latency_variance, impact


def render_impact(table: Sequence[Row], margin: float = DEFAULT_MARGIN) -> str:
    """The tuning-study shape: label, latency mean (variance), impact in % of the baseline.

    The mean and variance are of the trial medians at the size the latency verdict
    compares; the verdict's percentage is the change of the median latency there, as in
    the other formats."""
    lines = impact_lines([_impact_entry(r) for r in table])
    sizes = sorted({r.latency_size for r in table if r.latency_size is not None})
    size_text = ", ".join(str(s) for s in sizes)
    note = (f"Latency: mean and variance (ddof=1) of the per-trial medians of the one-way time "
            f"at the size compared ({size_text} B: the baseline's middle size by median among "
            f"sizes <= {LATENCY_MAX_SIZE} B), us; impact = (baseline mean - mean) / baseline "
            f"mean; baseline: {_baseline_label(table)}.")
    verdicts = "; ".join(f"{r.label}: {r.latency_test.text()}" for r in table
                         if r.latency_test is not None)
    notes = [note, f"The median latency's change and verdict: {verdicts}." if verdicts
             else "", statement(margin), *collapse_notes(table)]
    if any(r.latency_mean_us is not None and r.latency_variance is None for r in table):
        notes.append("Variance n/a: the source lacks trial data; its own time is shown as mean.")
    return "\n".join([*lines, "", *(n for n in notes if n)]) + "\n"




def _typed(doc: Document) -> tuple[list[Row], float]:
    """The rows of a comparison document and its margin."""
    found = Comparison.from_document(doc)
    return found.rows, found.margin


@renderer("comparison", "text")
def text(doc: Document, **_options: Any) -> str:
    return render_table(*_typed(doc))


@renderer("comparison", "table")
def table(doc: Document, **_options: Any) -> str:
    return render_table(*_typed(doc))


@renderer("comparison", "markdown")
def markdown(doc: Document, **_options: Any) -> str:
    return render_markdown(*_typed(doc))


@renderer("comparison", "csv")
def csv_text(doc: Document, **_options: Any) -> str:
    return render_csv(*_typed(doc))


@renderer("comparison", "impact")
def impact(doc: Document, **_options: Any) -> str:
    return render_impact(*_typed(doc))

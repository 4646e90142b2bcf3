"""The cluster suite in the HTML report: an HPCC run (its verdict, how it ran, its
performance figures), a scaling study (per series, each metric's mean and standard
deviation at each process count, parallel efficiency, what stopped scaling, the runs
left out, the reference systems with the ratio) and an HPCC comparison.  The figures
are HPCC's, in HPCC's units, in a column of their own (the cells carry only numbers)."""

from __future__ import annotations

from typing import Any

from beoperf.analysis import scaling
from beoperf.model import hpcc
from beoperf.model.cluster import ClusterRun, HpccComparison, ScalingStudy, Summary
from beoperf.model.document import Document
from beoperf.report import renderer
from beoperf.report.cluster import efficiency_table, own_count_row, reference_table
from beoperf.report.html.markup import (
    Markup,
    bullet_list,
    code,
    esc,
    heading,
    join,
    num,
    pairs,
    para,
    status_mark,
    table,
)

UNITS_NOTE = ("HPCC's units: GB/s = 10^9 B/s, GUP/s = 10^9 updates/s, latencies in µs; "
              "mean (sample standard deviation) over the runs that passed")


def figure_of(value: float | None, key: str | None) -> Markup:
    """A number as HPCC tables print it (4 significant digits), marked with its place."""
    return num(value, "-" if value is None else f"{value:.4g}", key)


# --------------------------------------------------------------------------- one run


@renderer("cluster", "title")
def cluster_title(doc: Document, **_options: Any) -> str:
    b = ClusterRun.from_document(doc)
    return (f"HPC Challenge run {b.label}: {scaling.processes(b.np)}, "
            f"{'passed' if b.status == 'ok' else 'failed'}")


@renderer("cluster", "html")
def cluster_html(doc: Document, **_options: Any) -> str:
    b = ClusterRun.from_document(doc)
    facts = pairs([("verdict", status_mark(b.status)),
                   ("nodes", ", ".join(b.nodes or []) or None),
                   ("ranks per node", b.ranks_per_node),
                   ("HPL input", f"N={b.input.n} NB={b.input.nb} grid {b.input.p} x "
                    f"{b.input.q}" if b.input else None),
                   ("HPL scaled residual", b.checks.hpl_residual),
                   ("hpcc", (b.hpcc.binary.path if b.hpcc.binary else None)
                    or b.hpcc.version),
                   ("BLAS", b.hpcc.blas_kind()),
                   ("launch", code(" ".join(b.launch.argv)) if b.launch else None)])
    rows = [[hpcc.short_name(k), e.unit, figure_of(
        e.value if isinstance(e.value, int | float) else None, f"body.metrics.{k}.value")]
        for k, e in b.metrics.items() if hpcc.info(k).role in hpcc.PERFORMANCE]
    notes = bullet_list(b.launch.notes) if b.launch and b.launch.notes else ""
    return join([facts, notes, table(["metric", "unit", "value"], rows, numeric=[2],
                                      caption="Performance figures (HPCC's units)")])


# --------------------------------------------------------------------------- a study


@renderer("scaling", "title")
def scaling_title(doc: Document, **_options: Any) -> str:
    b = ScalingStudy.from_document(doc)
    counts = sorted({p.np for p in b.points})
    return (f"HPC Challenge scaling study {b.label}: {len(b.runs)} runs at "
            f"{', '.join(map(str, counts)) or 'no'} processes")


def failed_runs(study: ScalingStudy) -> list[str]:
    """The runs left out of the statistics, and why."""
    return [f"{r.label}: {'; '.join(r.failures)}" for r in study.runs if r.status != "ok"]


def _mean_cell(st: Summary | None, where: str) -> Markup | str:
    """Mean (standard deviation) of a point's figure, each marked with its place."""
    if st is None:
        return "-"
    spread = [esc(" ("), figure_of(st.stdev, f"{where}.stdev"), esc(")")] \
        if st.stdev is not None else []
    return join([figure_of(st.mean, f"{where}.mean"), *spread])


def _means(b: ScalingStudy, series: str) -> Markup:
    indexed = [(i, p) for i, p in enumerate(b.points) if p.series == series]
    head = ["metric", "unit", *(f"np {p.np}" for _, p in indexed)]
    present = {k for _, p in indexed for k in p.metrics}
    rows: list[list[Any]] = [["runs passed", "", *(f"{p.runs} of {p.runs + p.failed}"
                                                   for _, p in indexed)]]
    for key in (k for k in hpcc.performance_keys() if k in present):
        rows.append([hpcc.short_name(key), b.units.get(key, ""),
                     *(_mean_cell(p.metrics.get(key), f"body.points.{i}.metrics.{key}")
                       for i, p in indexed)])
        rows += own_count_row(key, [p for _, p in indexed])
    return table(head, rows, numeric=range(2, len(head)), caption=f"Series {series}: "
                 + UNITS_NOTE)


def _plain(t: tuple[list[str], list[list[str]], set[int]] | None, caption: str) -> Markup:
    if t is None:
        return Markup("")
    head, rows, numeric = t
    return table(head, rows, numeric=numeric, caption=caption)


@renderer("scaling", "html")
def scaling_html(doc: Document, **_options: Any) -> str:
    b = ScalingStudy.from_document(doc)
    parts: list[Markup] = []
    for name in b.series_names():
        parts.append(_means(b, name))
        parts.append(_plain(efficiency_table(b, name), "Parallel efficiency (speedup) "
                            "against the smallest count that measured the metric"))
    hits = [f"{h.series}: {hpcc.short_name(h.metric)} at np {h.np}: {h.why}"
            for h in b.stopped_scaling]
    parts += [heading("Stopped scaling"), para(b.rules.statement),
              bullet_list(hits) if hits else para("none")]
    refs = reference_table(b)
    if refs is not None:
        parts.append(_plain(refs, "Reference systems beside the largest count "
                                  "(ratio = this run / the reference)"))
    failed = failed_runs(b)
    if failed:
        parts += [heading("Left out of the statistics"), bullet_list(failed)]
    return join(parts)


# --------------------------------------------------------------------------- comparison


@renderer("hpcc-comparison", "title")
def comparison_title(doc: Document, **_options: Any) -> str:
    cols = HpccComparison.from_document(doc).columns
    return f"HPCC comparison: {cols[0].label} beside {len(cols) - 1} other"


@renderer("hpcc-comparison", "html")
def comparison_html(doc: Document, **_options: Any) -> str:
    comp = HpccComparison.from_document(doc)
    head = ["metric", "unit"]
    for i, c in enumerate(comp.columns):
        head += [c.label] if i == 0 else [c.label, "ratio", "verdict"]
    rows = []
    for r_i, r in enumerate(comp.rows):
        cells: list[Any] = [hpcc.short_name(r.metric), r.unit]
        verdicts = r.verdicts or [None] * len(r.values)
        for i, value in enumerate(r.values):
            shown = figure_of(value, f"body.rows.{r_i}.values.{i}")
            cells += [shown] if i == 0 else [
                shown, figure_of(r.ratios[i], f"body.rows.{r_i}.ratios.{i}"),
                verdicts[i] or "-"]
        rows.append(cells)
    numeric = [i for i in range(2, len(head)) if head[i] != "verdict"]
    return join([table(head, rows, numeric=numeric), para(comp.statement)])

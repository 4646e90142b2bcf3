"""Renderers of the cluster suite's documents: one HPCC run (kind "cluster") and a scaling
study (kind "scaling"), as text, Markdown and CSV.

A scaling study reads as the published tables do: one row per metric (its short name,
HPL for HPL_Tflops), one column per process count, each cell the mean and, in
parentheses, the sample standard deviation over the runs that passed, in HPCC's units;
then the parallel efficiency (and speedup where it is defined) against the smallest
count, the metrics that stopped scaling, the runs left out and why, and the reference
systems beside the largest count with the ratio this run / reference.  ``all_keys``
shows every key with statistics, not only the performance figures.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from typing import Any

from beoperf import units
from beoperf.analysis import scaling
from beoperf.model import hpcc
from beoperf.model.cluster import (
    ClusterRun,
    HpccColumn,
    HpccComparison,
    HpccFacts,
    HpccValue,
    ReferencePoint,
    ScalingPoint,
    ScalingStudy,
    Summary,
)
from beoperf.model.document import Document
from beoperf.report import renderer
from beoperf.report.answer import (
    Level,
    Line,
    answer,
    lines_of,
    listed,
    markdown_block,
    plural,
    text_block,
)
from beoperf.report.tables import aligned, markdown

Table = tuple[list[str], list[list[str]], set[int]]


def num(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else units.format_in(value, "", digits)


def cell(stat: Summary | None) -> str:
    """'0.01839 (0.00021)': mean (sample standard deviation); '-' when not measured."""
    if stat is None:
        return "-"
    spread = f" ({num(stat.stdev, 2)})" if stat.stdev is not None else ""
    return num(stat.mean) + spread


def _keys(study: ScalingStudy, all_keys: bool) -> list[str]:
    present = {k for p in study.points for k in p.metrics}
    if all_keys:
        ordered = [k for k in hpcc.KEYS if k in present]
        return ordered + sorted(present - set(ordered))
    return [k for k in hpcc.performance_keys() if k in present]


def _heading(point: ScalingPoint) -> str:
    where = f", {point.nodes} node{'s' if point.nodes != 1 else ''}" if point.nodes else ""
    return f"np {point.np}{where}"


def means_table(study: ScalingStudy, series: str, all_keys: bool) -> Table:
    points = [p for p in study.points if p.series == series]
    header = ["metric", "unit", *(_heading(p) for p in points)]
    rows = [["runs passed", "", *(f"{p.runs} of {p.runs + p.failed}" for p in points)]]
    for key in _keys(study, all_keys):
        rows.append([hpcc.short_name(key), study.units.get(key, ""),
                     *(cell(p.metrics.get(key)) for p in points)])
        rows += own_count_row(key, points)
    return header, rows, set(range(2, len(header)))


def own_count_row(key: str, points: list[ScalingPoint]) -> list[list[str]]:
    """A row under a figure that ran on a part of the job (HPL on its P x Q grid): the
    processes it ran on, which its speedup and efficiency are taken against."""
    counts = [scaling.own_processes(p, key) if key in p.metrics else p.np for p in points]
    if all(c == p.np for c, p in zip(counts, points, strict=True)):
        return []
    return [[f"  {hpcc.short_name(key)} processes", hpcc.own_count_name(key),
             *("?" if c is None else str(c) if key in p.metrics else "-"
               for c, p in zip(counts, points, strict=True))]]


def _efficiency_cell(point: ScalingPoint, key: str) -> str:
    eff = point.efficiency.get(key)
    if eff is None:
        return "-"
    speedup = point.speedup.get(key)
    return num(eff, 3) + (f" (x{num(speedup, 3)})" if speedup is not None else "")


def efficiency_table(study: ScalingStudy, series: str) -> Table | None:
    points = scaling.chain_of(study.points, series)
    if len(points) < 2:
        return None
    header = ["metric", "role", "against", *(f"np {p.np}" for p in points[1:])]
    rows = []
    for key in _keys(study, False):
        base = scaling.base_point(points, key)
        if base is None or base is points[-1]:
            continue
        own = scaling.own_processes(base, key)
        against = f"np {base.np}" + (f" ({hpcc.short_name(key)} on {own})"
                                     if own_count_row(key, points) else "")
        rows.append([hpcc.short_name(key), hpcc.info(key).role, against,
                     *(_efficiency_cell(p, key) if p.np > base.np else ""
                       for p in points[1:])])
    return header, rows, set(range(3, len(header)))


def stopped_lines(study: ScalingStudy) -> list[str]:
    hits = study.stopped_scaling
    if not hits:
        return ["Stopped scaling: none of the metrics (" + study.rules.statement + ")."]
    lines = ["Stopped scaling (" + study.rules.statement + "):"]
    for hit in hits:
        lines.append(f"  {hit.series}: {hpcc.short_name(hit.metric)} at np {hit.np}"
                     f": {hit.why}")
    return lines


def failed_lines(study: ScalingStudy) -> list[str]:
    failed = [r for r in study.runs if r.status != "ok"]
    if not failed:
        return []
    lines = [f"Left out of the statistics ({len(failed)} run"
             f"{'s' if len(failed) != 1 else ''}):"]
    lines += [f"  {r.label}: {'; '.join(r.failures)}" for r in failed]
    return lines


def _reference_row(key: str, study: ScalingStudy, mine: Summary | None,
                   refs: list[ReferencePoint]) -> list[str]:
    row = [hpcc.short_name(key), study.units.get(key, ""), cell(mine)]
    for ref in refs:
        theirs = ref.metrics.get(key)
        row += [num(theirs), num(scaling.ratio(mine.mean if mine else None, theirs), 3)]
    return row


def reference_table(study: ScalingStudy, all_keys: bool = False) -> Table | None:
    """This study's largest count beside each reference system (its point at the same
    count if it has one, else its largest), with the ratio this / reference."""
    ours = scaling.largest_point(study)
    names = scaling.reference_names(study.references)
    if ours is None or not names:
        return None
    refs = [r for n in names if (r := scaling.nearest_reference(study.references, n, ours.np))]
    header = ["metric", "unit", f"this run (np {ours.np})"]
    for ref in refs:
        header += [f"{ref.name} (np {ref.np})" if ref.np else ref.name, "ratio"]
    rows = [_reference_row(key, study, ours.metrics.get(key), refs)
            for key in _keys(study, all_keys) if any(key in r.metrics for r in refs)]
    return header, rows, set(range(2, len(header)))


def _sections(doc: Document, all_keys: bool, draw: Callable[[Table], list[str]],
              title: Callable[[str], str],
              answer_lines: Callable[[list[Line]], list[str]]) -> list[str]:
    b = ScalingStudy.from_document(doc)
    passed = sum(1 for r in b.runs if r.status == "ok")
    out = [title(f"HPC Challenge scaling study: {b.label}"), "",
           f"{len(b.runs)} runs: {passed} passed, {len(b.runs) - passed} failed "
           "(a failed run is left out of the statistics). Cells: mean (sample standard "
           "deviation) over the runs that passed, in HPCC's units (GB/s = 10^9 B/s, "
           "GUP/s = 10^9 updates/s).", ""]
    out += answer_lines(lines_of(doc))
    for series in b.series_names():
        out += [title(f"Series: {series}"), "", *draw(means_table(b, series, all_keys)), ""]
        eff = efficiency_table(b, series)
        if eff is not None:
            out += ["Parallel efficiency (speedup) against the smallest count that "
                    "measured the metric:", "", *draw(eff), ""]
    out += [*stopped_lines(b), ""]
    refs = reference_table(b, all_keys)
    if refs is not None:
        out += [title("Reference systems"), "", "ratio = this run / the reference.", "",
                *draw(refs), ""]
    failed = failed_lines(b)
    return out + ([*failed, ""] if failed else [])


@renderer("scaling", "text")
def scaling_text(doc: Document, all_keys: bool = False, **_options: Any) -> str:
    lines = _sections(doc, all_keys, lambda t: aligned(*t), lambda s: s,
                      lambda top: [*text_block(top), *([""] if top else [])])
    return "\n".join(lines).rstrip() + "\n"


@renderer("scaling", "markdown")
def scaling_markdown(doc: Document, all_keys: bool = False, **_options: Any) -> str:
    lines = _sections(doc, all_keys, lambda t: markdown(*t), lambda s: f"## {s}",
                      markdown_block)
    return "\n".join(lines).rstrip() + "\n"


CSV_FIELDS = ("series", "np", "ranks_per_node", "nodes", "metric", "unit", "role", "mean",
              "stdev", "min", "max", "n", "speedup", "efficiency")


@renderer("scaling", "csv")
def scaling_csv(doc: Document, **_options: Any) -> str:
    """One row per series, count and key (every key with statistics)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    study = ScalingStudy.from_document(doc)
    for p in study.points:
        for key, st in p.metrics.items():
            writer.writerow([p.series, p.np, p.ranks_per_node, p.nodes, key,
                             study.units.get(key, ""), hpcc.info(key).role,
                             st.mean, st.stdev, st.min, st.max, st.n,
                             p.speedup.get(key), p.efficiency.get(key)])
    return out.getvalue()


# --------------------------------------------------------------------------- one run


def _hpcc_line(facts: HpccFacts) -> str:
    """The hpcc binary: its version, path and BLAS."""
    path = facts.binary.path if facts.binary else None
    blas = facts.blas_kind()
    return (f"hpcc {facts.version or '?'}" + (f" ({path})" if path else "")
            + (f", BLAS: {blas}" if blas else ""))


def run_lines(doc: Document, all_keys: bool) -> list[str]:
    b = ClusterRun.from_document(doc)
    verdict = "passed" if b.status == "ok" else "FAILED: " + "; ".join(b.failures)
    lines = [f"HPC Challenge run {b.label}: {scaling.processes(b.np)}, {verdict}",
             *text_block(lines_of(doc))]
    if b.nodes:
        lines.append(f"nodes: {', '.join(b.nodes)} ({b.ranks_per_node} per node)")
    if b.input:
        i = b.input
        lines.append(f"HPL: N={i.n} NB={i.nb} grid {i.p} x {i.q}")
    residual = b.checks.hpl_residual
    if residual is not None:
        lines.append(f"HPL scaled residual {residual:.4g} (must be below "
                     f"{b.checks.hpl_threshold:g}); Success={b.checks.success}")
    lines.append(_hpcc_line(b.hpcc))
    if b.launch:
        lines.append("launch: " + " ".join(b.launch.argv))
        lines += [f"note: {n}" for n in b.launch.notes]
    if b.elapsed_s is not None:
        lines.append(f"elapsed: {units.format_time(b.elapsed_s)}")
    return lines


def run_table(doc: Document, all_keys: bool) -> Table:
    metrics = ClusterRun.from_document(doc).metrics
    keys = [k for k in metrics if all_keys or hpcc.info(k).role in hpcc.PERFORMANCE]
    rows = []
    for key in keys:
        entry = metrics[key]
        rows.append([key if all_keys else hpcc.short_name(key), _shown(entry), entry.unit])
    return ["metric", "value", "unit"], rows, {1}


def _shown(entry: HpccValue) -> str:
    """A run's value as the table shows it: 'not run' for what HPCC did not measure (a
    denormal it never wrote, stored so by imports before issue 28), a NaN's text."""
    value = entry.value
    if value is None:
        return hpcc.missing_text(entry.raw)
    if hpcc.is_uninitialised(value):
        return "not run"
    return num(value) if isinstance(value, float) else str(value)


@renderer("cluster", "text")
def cluster_text(doc: Document, all_keys: bool = False, **_options: Any) -> str:
    return "\n".join([*run_lines(doc, all_keys), "",
                      *aligned(*run_table(doc, all_keys))]) + "\n"


@renderer("cluster", "markdown")
def cluster_markdown(doc: Document, all_keys: bool = False, **_options: Any) -> str:
    head = run_lines(doc, all_keys)
    return "\n".join([f"## {head[0]}", "", *(f"{line}  " for line in head[1:]), "",
                      *markdown(*run_table(doc, all_keys))]) + "\n"


@renderer("cluster", "csv")
def cluster_csv(doc: Document, **_options: Any) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(("label", "np", "status", "key", "value", "unit", "role"))
    b = ClusterRun.from_document(doc)
    for key, entry in b.metrics.items():
        value = entry.value if entry.value is not None else \
            ("" if entry.raw is None else hpcc.missing_text(entry.raw))
        writer.writerow((b.label, b.np, b.status, key, value, entry.unit, hpcc.info(key).role))
    return out.getvalue()


# --------------------------------------------------------------------------- comparison


def _column_name(c: HpccColumn) -> str:
    return c.label + (f" (np {c.np})" if c.np and "np " not in c.label else "")


def comparison_table(doc: Document) -> Table:
    comp = HpccComparison.from_document(doc)
    header = ["metric", "unit"]
    for i, c in enumerate(comp.columns):
        header += [_column_name(c)] if i == 0 else [_column_name(c), "ratio", "verdict"]
    rows = []
    for r in comp.rows:
        row = [hpcc.short_name(r.metric), r.unit]
        verdicts = r.verdicts or [None] * len(r.values)
        for i, (value, stdev) in enumerate(zip(r.values, r.stdevs, strict=True)):
            shown = num(value) + (f" ({num(stdev, 2)})" if stdev is not None else "")
            row += [shown] if i == 0 else [shown, num(r.ratios[i], 3), verdicts[i] or "-"]
        rows.append(row)
    return header, rows, {i for i in range(2, len(header)) if header[i] != "verdict"}


def _comparison_notes(doc: Document) -> list[str]:
    comp = HpccComparison.from_document(doc)
    notes = [comp.statement + "."]
    for c in comp.columns:
        if c.kind == "run" and c.runs == 0:
            notes.append(f"Warning: {c.label} failed its checks; its figures are shown "
                         "but do not count.")
    return notes


@renderer("hpcc-comparison", "text")
def comparison_text(doc: Document, **_options: Any) -> str:
    first = text_block(lines_of(doc))
    return "\n".join([*first, *([""] if first else []), *aligned(*comparison_table(doc)), "",
                      *_comparison_notes(doc)]) + "\n"


@renderer("hpcc-comparison", "markdown")
def comparison_markdown(doc: Document, **_options: Any) -> str:
    return "\n".join([*markdown_block(lines_of(doc)), *markdown(*comparison_table(doc)), "",
                      *(f"{n}  " for n in _comparison_notes(doc))]).rstrip() + "\n"


@renderer("hpcc-comparison", "csv")
def comparison_csv(doc: Document, **_options: Any) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    comp = HpccComparison.from_document(doc)
    writer.writerow(("metric", "unit", "column", "np", "kind", "value", "stdev",
                     "baseline_ratio", "verdict", "change_low_pct", "change_high_pct"))
    for r in comp.rows:
        width = len(r.values)
        for c, value, stdev, rat, verdict, span in zip(
                comp.columns, r.values, r.stdevs, r.ratios, r.verdicts or [None] * width,
                r.intervals or [None] * width, strict=True):
            low, high = span if span else (None, None)
            writer.writerow((r.metric, r.unit, c.label, c.np, c.kind, value,
                             stdev, rat, verdict, low, high))
    return out.getvalue()


# --------------------------------------------------------------------------- the answer


@answer("cluster")
def run_answer(doc: Document) -> list[Line]:
    """A run that failed (HPCC's checks, or the run itself), else that it passed."""
    b = ClusterRun.from_document(doc)
    if b.status != "ok":
        why = "; ".join(b.failures) or "no reason recorded"
        return [Line(Level.FAIL, f"the HPCC run failed: {why}",
                     "its output file says more (hpccoutf.txt beside the run)")]
    residual = b.checks.hpl_residual
    checked = f" (HPL scaled residual {residual:.3g})" if residual is not None else ""
    return [Line(Level.OK, f"the HPCC run passed its checks{checked}")]


def _todo_of(warning: str) -> tuple[str, str]:
    """What to do about a scaling document's warning, and its topic."""
    if "different process counts" in warning:
        return ("give the runs of one count one grid (hpccinf.txt's P x Q), or import them "
                "as studies of their own", "one count run on several grids")
    return ("import the files of each machine or HPCC version as a study of its own (hosts "
            "that are nodes of one cluster may stay together)",
            "runs pooled from several hosts or versions")


@answer("scaling")
def scaling_answer(doc: Document) -> list[Line]:
    """The runs that failed (left out of the statistics), one line; each metric that
    stopped scaling."""
    b = ScalingStudy.from_document(doc)
    failed = [r for r in b.runs if r.status != "ok"]
    out = [Line(Level.WARN, w, *_todo_of(w)) for w in b.warnings]
    if failed:
        why = listed([f"{r.label} ({'; '.join(r.failures) or 'no reason'})"
                      for r in failed], 4)
        out.append(Line(Level.FAIL, f"{len(failed)} of {plural(len(b.runs), 'run')} "
                                    f"failed and are left out of the statistics: {why}",
                        "each run's output file says more"))
    for series in dict.fromkeys(h.series for h in b.stopped_scaling):
        hits = [h for h in b.stopped_scaling if h.series == series]
        named = [f"{hpcc.short_name(h.metric)} at np {h.np}"
                 + (f" ({h.why})" if len(hits) <= 2 else "") for h in hits]
        out.append(Line(Level.WARN, f"{series}: {plural(len(hits), 'metric')} stopped "
                                    f"scaling: {listed(named, 8)}",
                        "the list under Stopped scaling says by how much"))
    if not out:
        out.append(Line(Level.OK, f"all {plural(len(b.runs), 'run')} passed; no metric "
                                  "stopped scaling"))
    return out


@answer("hpcc-comparison")
def comparison_answer(doc: Document) -> list[Line]:
    """Each column against the baseline (the first): the metrics worse (WARN), those that
    cannot be told (IMPRECISE, only for runs: a reference's figure is one published run)
    and those better (OK).  Documents made before the verdicts: nothing judged."""
    comp = HpccComparison.from_document(doc)
    cols, rows = comp.columns, comp.rows
    out = []
    for i, col in enumerate(cols[1:], 1):
        by = {v: [hpcc.short_name(r.metric) for r in rows
                  if (r.verdicts or [None] * len(cols))[i] == v]
              for v in ("worse", "cannot tell", "better")}
        name = f"{col.label} vs {cols[0].label}"
        if by["worse"]:
            out.append(Line(Level.WARN, f"{name}: {plural(len(by['worse']), 'metric')} worse: "
                                        f"{listed(by['worse'])}"))
        if by["cannot tell"] and col.kind == "run":
            out.append(Line(Level.IMPRECISE, f"{name}: {plural(len(by['cannot tell']), 'metric')}"
                                             f" cannot tell: {listed(by['cannot tell'])}",
                            "repeat the runs (a scaling study's repeats give each point its "
                            "spread)"))
        if by["better"]:
            out.append(Line(Level.OK, f"{name}: {plural(len(by['better']), 'metric')} better: "
                                      f"{listed(by['better'])}"))
    return out

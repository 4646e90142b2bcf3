"""Renderers of the node documents: the suite's tables (text, Markdown, CSV), a fleet's
outliers, and node runs compared.

The text is what cluster people publish: STREAM by thread count (best, per core, and the
spread), the PEAK kernels x loop lengths table with the cache level of each length and
the drops between levels, DGEMM / RandomAccess / FFT, and the I/O patterns with
min/avg/max MB/s per directory side by side; with ``--reference`` the published system's
figures sit in their own columns.  Everything that came from a document (directory names,
node names) is shown with control characters escaped.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from beoperf import units
from beoperf.analysis.effect import WIDE
from beoperf.analysis.node import describe_test
from beoperf.model.document import Document, JsonObject
from beoperf.model.node import (
    Conditions,
    FleetMetric,
    IoDir,
    Metric,
    NodeComparison,
    NodeFleet,
    NodeRun,
)
from beoperf.report import conditions, renderer
from beoperf.report.answer import Level, Line, answer, lines_of, listed, plural, text_block
from beoperf.report.compare import _aligned as aligned
from beoperf.report.fleet import printable

REF_LENGTH_TOLERANCE = 0.01  # the source prints 262114 for 262144
REF_SIZE_TOLERANCE = 0.1  # 10MB (10^7) against a 10 MiB file


def _f(value: float | None, digits: int = 4) -> str:
    if value is None:
        return "n/a"
    return f"{value:.{digits}g}" if abs(value) < 10 ** digits else f"{value:.0f}"


def _spread(m: Metric) -> str:
    rel = m.stdev / m.mean * 100 if m.mean else 0.0
    return f"{_f(m.mean)} ±{rel:.1f}%"


def _by_part(run: NodeRun, part: str) -> list[Metric]:
    return [m for _, m in run.of(part)]


def repeat_count(ms: Iterable[Metric]) -> str:
    """The repetitions of some metrics: '5', or '3-5' when they differ."""
    repeats = sorted({m.repeat for m in ms})
    return str(repeats[0]) if len(repeats) == 1 else f"{repeats[0]}-{repeats[-1]}"


# --------------------------------------------------------------------------- conditions


def blas_core(run: NodeRun) -> str | None:
    """The core type the BLAS chose (OpenBLAS's corename), from the DGEMM runs."""
    return next((r.corename for r in run.detail("dgemm").runs if r.corename), None)


def _caches_text(c: Conditions) -> str:
    return ", ".join(f"L{x['level']}{'d' if x['type'] == 'Data' else ''} "
                     f"{units.format_size(x['size'])}" for x in c.caches
                     if x["type"] != "Instruction" and x["size"])


def _machine_line(c: Conditions, meta: Mapping[str, Any]) -> str:
    """Node, CPU, cores used, caches, memory, NUMA nodes and governor."""
    numa = c.numa
    gov = c.governor
    mem = c.memory
    return (f"node {printable(str(meta.get('host', '?')))}: {printable(str(c.cpu_model))}, "
            f"{c.cores_used} of {c.cpus} cores used; caches "
            f"{_caches_text(c) or 'unknown'}; "
            f"memory {units.format_size(mem) if mem else 'unknown'}; NUMA "
            f"{len(numa)} node{'s' if len(numa) != 1 else ''}; governor "
            + (", ".join(f"{g} ({cpus})" for g, cpus in gov.items()) if gov else
               "n/a (no cpufreq)"))


def _build_line(run: NodeRun) -> str:
    """The kernels' compiler and flags, the BLAS, its core type and environment."""
    c = run.facts()
    env = " ".join(f"{k}={v}" for k, v in c.blas_environment.items())
    core = blas_core(run)
    return (f"kernels built by {c.compiler} with {c.flags}; BLAS "
            f"{c.blas_library} {c.blas_version}"
            + (f" (core type {core})" if core else "") + (f"; {env}" if env else ""))


def condition_lines(run: NodeRun, meta: Mapping[str, Any]) -> list[str]:
    reason = f" ({printable(run.status_reason)})" if run.status_reason else ""
    return [_machine_line(run.facts(), meta), _build_line(run),
            f"status: {run.status}{reason}; --repeat {run.repeat}; "
            f"{_f(run.facts().elapsed_s, 3)} s"]


# --------------------------------------------------------------------------- parts


def warm_phrase(detail: JsonObject) -> str:
    """'after 1 s of untimed iterations, ' (documents before the warm-up have none)."""
    warm = detail.get("warm_s")
    if isinstance(warm, int | float) and warm > 0:
        return f"after {warm:g} s of untimed iterations, "
    return ""


def _stream_row(m: Metric) -> list[str]:
    return [str(m.params["threads"]), m.name, _f(m.figure("best")), _f(m.figure("per_core")),
            _f(m.mean), _f(m.stdev, 2), _f(m.min), _f(m.max),
            *(_time(m.figure(k)) for k in ("avg_time_s", "min_time_s", "max_time_s")),
            str(m.repeat)]


def _time(seconds: float | None) -> str:
    return "n/a" if seconds is None else units.format_time(seconds)


def stream_lines(run: NodeRun) -> list[str]:
    ms = _by_part(run, "stream")
    if not ms:
        return []
    d = run.detail("stream")
    head = ("threads", "test", "best GB/s", "per core", "mean", "stdev", "min", "max",
            "avg time", "min time", "max time", "n")
    ok = "passed" if d.ok else "FAILED"
    title = (f"STREAM: 3 arrays of {units.format_size(d.array_bytes or 0)} "
             f"({printable(str(d.size_rule))}; {d.stores} stores); "
             "GB/s = 10^9 B/s, copy/scale 16 B, "
             f"add/triad 24 B an element; {warm_phrase(run.part('stream'))}first iteration "
             f"dropped; validation {ok} (average relative error <= {d.epsilon})")
    lines = ["", title, *aligned(head, [_stream_row(m) for m in ms], set(range(2, 12)))]
    if d.below_4x_cache:
        lines.append("note: the arrays are smaller than 4 x the last-level cache: this is "
                     "cache bandwidth, not memory bandwidth")
    return lines


def _ref_kernel(run: NodeRun, kernel: str, length: int) -> float | None:
    for r in run.ref_kernels():
        if r.kernel == kernel and abs(r.length - length) <= REF_LENGTH_TOLERANCE * length:
            return r.mflops
    return None


def ref_name(run: NodeRun) -> str | None:
    """The reference system's name (None without one)."""
    ref = run.ref()
    return ref.name if ref else None


def levels(by_kernel: Mapping[str, str]) -> str:
    """The cache level of a loop length: one word when every kernel's working set is in
    the same level, else each level with its kernels (div moves 8 B an element, the
    others 16 B: at one length they may sit in different caches)."""
    groups: dict[str, list[str]] = {}
    for k, level in by_kernel.items():
        groups.setdefault(str(level), []).append(k)
    if len(groups) <= 1:
        return next(iter(groups), "?")
    return "; ".join(f"{level}: {', '.join(ks)}" for level, ks in groups.items())


def _kernel_row(run: NodeRun, n: int, kernels: list[str],
                cell: Mapping[tuple[str, int], Metric], with_ref: bool) -> list[str]:
    found = {k: cell[(k, n)] for k in kernels if (k, n) in cell}
    row = [f"{n:,}", levels({k: m.level for k, m in found.items()}),
           *(_spread(found[k]) if k in found else "-" for k in kernels)]
    if with_ref:
        row += [_f(_ref_kernel(run, k, n)) for k in kernels]
    return row


def _drops_line(run: NodeRun) -> list[str]:
    drops = run.kernels().drops
    if not drops:
        return []
    return ["drops between levels: " + "; ".join(
        f"{d.kernel} {d.from_level}->{d.to_level} {d.change_pct:+.0f}%"
        for d in drops if d.change_pct is not None)]


def kernel_lines(run: NodeRun) -> list[str]:
    ms = _by_part(run, "kernels")
    if not ms:
        return []
    kernels = list(dict.fromkeys(m.name for m in ms))
    cell = {(m.name, m.length): m for m in ms}
    with_ref = bool(run.ref_kernels())
    name = ref_name(run)
    head = ["length", "level", *kernels, *([f"{name} {k}" for k in kernels] if with_ref else [])]
    rows = [_kernel_row(run, n, kernels, cell, with_ref) for n in sorted({m.length for m in ms})]
    return ["", f"PEAK kernels, MFLOP/s (mean ±stdev over {repeat_count(ms)} trials; "
            "flops/element: div 1, daxpy 2, dot 2, "
            "poly 10; level: the cache of cpu0 that holds the working set)",
            *aligned(head, rows, set(range(2, len(head)))), *_drops_line(run)]


HPCC_REF = {("dgemm", 1): "SingleDGEMM", ("randomaccess", 1): "SingleRandomAccess",
            ("fft", None): "SingleFFT"}


def compute_lines(run: NodeRun) -> list[str]:
    ms = [m for m in run.metrics if m.part in ("dgemm", "randomaccess", "fft")]
    if not ms:
        return []
    ref = {r.metric: r.value for r in run.ref_hpcc()}
    head = ["figure", "unit", "mean", "stdev", "min", "max", "n", "check",
            *(["reference"] if ref else [])]
    rows = []
    for m in ms:
        params = ", ".join(f"{k} {v}" for k, v in m.params.items())
        check = "ok" if m.ok else "FAILED"
        row = [f"{m.part} ({params})", m.unit, _f(m.mean), _f(m.stdev, 2),
               _f(m.min), _f(m.max), str(m.repeat), check]
        if ref:
            name = HPCC_REF.get((m.part, m.threads))
            row.append(f"{_f(ref[name])} ({name})" if name is not None and name in ref else "-")
        rows.append(row)
    return ["", "DGEMM (numpy BLAS, 2N^3 flops), RandomAccess (HPCC updates), FFT "
            "(5 N log2 N flops)", *aligned(head, rows, {2, 3, 4, 5, 6})]


def _ref_io(run: NodeRun, where: str, size: int, test: str) -> float | None:
    ref = run.ref()
    for r in ref.io.get(where, []) if ref else []:
        if r.test == test and abs(r.file_size - size) <= REF_SIZE_TOLERANCE * size:
            return r.mb_s
    return None


def io_refs(run: NodeRun) -> list[str]:
    """The reference system's I/O columns present: "local", "nfs"."""
    ref = run.ref()
    return [w for w in ("local", "nfs") if ref and ref.io.get(w)]


def _io_cell(m: Metric | None) -> str:
    return f"{_f(m.min, 3)}/{_f(m.mean, 3)}/{_f(m.max, 3)}" if m else "-"


def _dir_line(e: IoDir) -> str:
    m = e.mount
    methods = ", ".join(sorted({str(v) for v in e.method.values()}))
    return (f"  {printable(e.dir)}: {printable(str(m.get('fstype')))} "
            f"{printable(str(m.get('source')))} on "
            f"{printable(str(m.get('mount_point')))} "
            f"({printable(str(m.get('options')))}); cache: {methods}")


def io_lines(run: NodeRun) -> list[str]:
    ms = _by_part(run, "io")
    if not ms:
        return []
    d = run.io()
    dirs = [e.dir for e in d.dirs]
    refs = io_refs(run)
    cell = {(m.params["dir"], m.params["file_size"], m.name): m for m in ms}
    head = ["file", "test", *(f"{printable(x)} min/avg/max" for x in dirs),
            *(f"{ref_name(run)} {w}" for w in refs)]
    rows = [[units.format_size(size), test, *(_io_cell(cell.get((x, size, test))) for x in dirs),
             *(_f(_ref_io(run, w, size, test)) for w in refs)]
            for size in d.file_sizes for test in d.patterns]
    lines = ["", f"I/O: {units.format_size(d.block)} blocks, MB/s = 10^6 B/s",
             *(_dir_line(e) for e in d.dirs)]
    return [*lines, *aligned(head, rows, set(range(2, len(head))))]


def report_lines(doc: Document) -> list[str]:
    run = NodeRun.from_document(doc)
    lines = condition_lines(run, doc.meta)
    for part in (stream_lines, kernel_lines, compute_lines, io_lines):
        lines += part(run)
    ref = run.ref()
    if ref:
        lines += ["", f"reference: {ref.name} ({printable(str(ref.system))}), from "
                  f"{ref.source}"]
    return lines


@renderer("node", "text")
def text(doc: Document, **_options: Any) -> str:
    top = text_block(lines_of(doc))
    return "\n".join([*top, *([""] if top else []), *report_lines(doc),
                      *conditions.text_lines(doc.meta, "")]) + "\n"


@renderer("node", "markdown")
def markdown(doc: Document, **_options: Any) -> str:
    return "```\n" + text(doc) + "```\n"


CSV_FIELDS = ("id", "part", "name", "params", "unit", "repeat", "mean", "stdev", "min", "max",
              "ok")


@renderer("node", "csv")
def csv_text(doc: Document, **_options: Any) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    for m in NodeRun.from_document(doc).metrics:
        params = ";".join(f"{k}={v}" for k, v in m.params.items())
        writer.writerow([m.id, m.part, m.name, params, m.unit, m.repeat,
                         f"{m.mean:.10g}", f"{m.stdev:.10g}", f"{m.min:.10g}",
                         f"{m.max:.10g}", "" if m.ok is None else int(m.ok)])
    return buf.getvalue()


# --------------------------------------------------------------------------- fleets


def _outlier_lines(fleet: NodeFleet) -> list[str]:
    if not fleet.outliers:
        return ["outlier nodes: none"]
    lines = [f"outlier nodes: {', '.join(printable(n) for n in fleet.outliers)}"]
    for node, ids in fleet.outliers.items():
        lines.append(f"  {printable(node)}: {len(ids)} metric(s): "
                     + ", ".join(printable(i) for i in ids[:8])
                     + (" ..." if len(ids) > 8 else ""))
    return lines


def _fleet_row(m: FleetMetric) -> list[str]:
    values = m.values
    low = min(values, key=lambda n: values[n])
    high = max(values, key=lambda n: values[n])
    return [printable(m.id), m.unit, _f(m.median), _f(m.mad, 2),
            f"{_f(values[low])} {printable(low)}", f"{_f(values[high])} {printable(high)}",
            ", ".join(f"{printable(n)} ({m.z[n]:+.1f})" for n in m.outliers) or "-"]


def fleet_lines(fleet: NodeFleet) -> list[str]:
    lines = [f"did not answer: {ns} ({printable(reason)})"
             for reason, ns in fleet.no_answer.items()]
    lines += [f"another beoperf version, not used: {ns} (beoperf {printable(v)})"
              for v, ns in fleet.other_version.items()]
    lines.append(f"answered: {fleet.answered or '-'}")
    lines += _outlier_lines(fleet)
    head = ["metric", "unit", "median", "MAD", "lowest", "highest", "outliers (z)"]
    rows = [_fleet_row(m) for m in fleet.metrics]
    return [*lines, "", *aligned(head, rows, {2, 3}), "", fleet.method.statement]


@renderer("node-fleet", "text")
def fleet_text(doc: Document, **_options: Any) -> str:
    top = text_block(lines_of(doc))
    return "\n".join([*top, *([""] if top else []),
                      *fleet_lines(NodeFleet.from_document(doc))]) + "\n"


# --------------------------------------------------------------------------- comparing


def _label(c: NodeComparison, i: int) -> str:
    runs = c.runs[i] if i < len(c.runs) else 1
    return printable(c.labels[i]) + (f" ({runs} runs)" if runs > 1 else "")


def change_text(change: float | None, interval: Sequence[float] | None) -> str:
    """'+31.7% [+12.0, +55.0]' (the interval of the change), '+31.2% [over x10]' when its
    ends are more than ten times apart, '-' without one."""
    if change is None:
        return "-"
    return f"{change:+.1f}%" + (f" {interval_cell(interval)}" if interval else "")


def interval_cell(interval: Sequence[float]) -> str:
    """'[+12.0, +55.0]', or '[over x10]' for an interval of a ratio wider than that."""
    low, high = 1 + interval[0] / 100, 1 + interval[1] / 100
    if low <= 0 or high / low > WIDE:
        return f"[over x{WIDE:g}]"
    return f"[{interval[0]:+.1f}, {interval[1]:+.1f}]"


def comparison_rows(c: NodeComparison) -> tuple[list[str], list[list[str]]]:
    labels = c.labels
    base = labels.index(c.baseline)
    head = ["metric", "unit"]
    for i in range(len(labels)):
        head += [_label(c, i)] if i == base else [_label(c, i), "change", "verdict"]
    rows = []
    for r in c.rows:
        row = [printable(r.id), r.unit]
        intervals = r.intervals or [None] * len(labels)
        for i in range(len(labels)):
            row.append(_f(r.means[i]))
            if i != base:
                row += [change_text(r.changes[i], intervals[i]), r.verdicts[i] or "-"]
        rows.append(row)
    return head, rows


LEVELS = (("worse", Level.WARN, "slower"), ("cannot tell", Level.IMPRECISE, "cannot tell"),
          ("better", Level.OK, "faster"))


@answer("node-comparison")
def comparison_answer(doc: Document) -> list[Line]:
    """Per configuration: the metrics worse (WARN), those that cannot be told (IMPRECISE)
    and those better (OK) than the baseline."""
    b = NodeComparison.from_document(doc)
    out = []
    for i, label in enumerate(b.labels):
        if label == b.baseline:
            continue
        for verdict, level, word in LEVELS:
            ids = [r.id for r in b.rows if r.verdicts[i] == verdict]
            if ids:
                todo = ("repeat each configuration (files given one --label are its runs)"
                        if level == Level.IMPRECISE else "")
                out.append(Line(level, f"{printable(label)} vs {printable(b.baseline)}: "
                                       f"{plural(len(ids), 'metric')} {word}: {listed(ids)}",
                                todo))
    return out


@renderer("node-comparison", "table")
def comparison_table(doc: Document, **_options: Any) -> str:
    c = NodeComparison.from_document(doc)
    head, rows = comparison_rows(c)
    numeric = {i for i, h in enumerate(head) if i >= 2 and h != "verdict"}
    first = text_block(lines_of(doc))
    return "\n".join([*first, *([""] if first else []), *aligned(head, rows, numeric), "",
                      f"Baseline: {printable(c.baseline)}; change of the mean and "
                      "its interval, + = faster (every figure is a rate).",
                      str(c.test["statement"])]) + "\n"


@renderer("node-comparison", "text")
def comparison_text(doc: Document, **options: Any) -> str:
    return comparison_table(doc, **options)


@renderer("node-comparison", "markdown")
def comparison_markdown(doc: Document, **_options: Any) -> str:
    c = NodeComparison.from_document(doc)
    head, rows = comparison_rows(c)

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"

    return "\n".join([line(head), line(["---"] * len(head)), *(line(r) for r in rows), "",
                      str(c.test["statement"])]) + "\n"


@renderer("node-comparison", "csv")
def comparison_csv(doc: Document, **_options: Any) -> str:
    head, rows = comparison_rows(NodeComparison.from_document(doc))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(head)
    writer.writerows(rows)
    return buf.getvalue()


__all__ = ["describe_test", "text", "fleet_text", "comparison_table"]


# --------------------------------------------------------------------------- the answer


def validation_failures(run: NodeRun) -> list[str]:
    """Each part's failed validation, with the figure that failed it."""
    out = []
    for r in run.detail("stream").runs:
        if r.ok is False:
            errs = ", ".join(f"{k} {v:.3g}" for k, v in r.errors.items())
            out.append(f"STREAM validation failed at {plural(r.threads or 0, 'thread')} "
                       f"(average relative errors {errs})")
    dgemm = run.detail("dgemm")
    for r in dgemm.runs:
        if r.ok is False:
            out.append(f"DGEMM check failed at {plural(r.threads or 0, 'thread')}: scaled "
                       f"residual {r.residual} over {dgemm.threshold}")
    for r in run.detail("randomaccess").runs:
        if r.ok is False:
            out.append(f"RandomAccess check failed at {plural(r.threads or 0, 'thread')}: "
                       f"{r.wrong} wrong table words")
    fft = run.detail("fft")
    if fft.ok is False:
        out.append(f"FFT check failed: error {fft.error} over {fft.threshold}")
    return out


CHECK_TODO = ("a failed check means wrong results: check the memory (EDAC counters, "
              "memtest) and the build before trusting any figure of this node")


@answer("node")
def node_answer(doc: Document) -> list[Line]:
    """A run that did not complete, each failed check, the figures whose check failed,
    STREAM measuring a cache instead of memory; all checks passed: says so."""
    run = NodeRun.from_document(doc)
    out = []
    if run.status != "complete":
        reason = f": {run.status_reason}" if run.status_reason else ""
        out.append(Line(Level.WARN if run.status == "interrupted" else Level.FAIL,
                        f"the node suite is {run.status}{reason}"))
    out += [Line(Level.FAIL, text, CHECK_TODO) for text in validation_failures(run)]
    failed = [m.id for m in run.metrics if m.ok is False]
    if failed:
        out.append(Line(Level.FAIL, f"{plural(len(failed), 'figure')} whose check failed: "
                                    f"{listed(failed)}", CHECK_TODO))
    if run.detail("stream").below_4x_cache:
        out.append(Line(Level.WARN, "STREAM's arrays are smaller than 4 x the last-level "
                                    "cache: its figures are cache bandwidth, not memory "
                                    "bandwidth",
                        "a larger --array-size (at least 4 x the last-level cache)"))
    if not out:
        checked = sum(m.ok is True for m in run.metrics)
        out.append(Line(Level.OK, f"{plural(len(run.metrics), 'figure')} measured; the "
                                  f"{plural(checked, 'check')} of their results passed"))
    return out


@answer("node-fleet")
def fleet_answer(doc: Document) -> list[Line]:
    """Nodes that did not answer or run another beoperf, and the outlier nodes (each with
    how many figures and which)."""
    b = NodeFleet.from_document(doc)
    out = [Line(Level.FAIL, f"did not answer: {printable(ns)} ({printable(reason)})",
                "check that beoperf runs there over ssh, then run again")
           for reason, ns in b.no_answer.items()]
    out += [Line(Level.WARN, f"another beoperf version, not used: {printable(ns)} (beoperf "
                             f"{printable(v)})", "install the same beoperf on every node")
            for v, ns in b.other_version.items()]
    out += [Line(Level.WARN, f"outlier node {printable(node)}: {plural(len(ids), 'figure')} "
                             "apart from the other nodes "
                             f"({listed([printable(i) for i in ids], 4)})",
                 f"beoperf node on {printable(node)} beside a normal node (and beoperf audit)")
            for node, ids in b.outliers.items()]
    if not out:
        out.append(Line(Level.OK, f"{b.answered or 'no node'} answered; no outlier node in "
                                  f"{plural(len(b.metrics), 'figure')}"))
    return out

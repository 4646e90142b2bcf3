"""Node documents in the HTML report.

A node's suite: its conditions (CPU, cores, caches, memory, governor, compiler and
flags, BLAS, the file systems measured with their mount options, local or network), then
a table per part, every figure with its unit, mean, spread, repetitions and the part's
own validation; the PEAK kernels drawn against loop length with the cache boundaries
marked; the I/O patterns with min/mean/max MB/s side by side per directory; with
``--reference`` the published system's figure beside ours.  A fleet: each node's
conditions and the per-metric table of outliers.  Node runs compared: the comparison
table.

Every number shown from a document is written with :func:`markup.num` and the path
where it is stored (``body.metrics.3.mean``), so that the browser test checks each one
against the document.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from beoperf import units
from beoperf.model import jsonvalue
from beoperf.model.document import Document, JsonObject
from beoperf.model.node import (
    ComparisonRow,
    Conditions,
    Drop,
    FleetMetric,
    IoDir,
    IoPart,
    Metric,
    NodeComparison,
    NodeFleet,
    NodeRun,
    ParamValue,
    PartDetail,
    PartRun,
)
from beoperf.report import node as text
from beoperf.report import renderer
from beoperf.report.html import svg
from beoperf.report.html.markup import (
    Markup,
    code,
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
from beoperf.units import size_tick

STATS = ("mean", "stdev", "min", "max")
KERNEL_NOTE = ("flops per element: div 1, daxpy 2, dot 2, poly 10; level: the cache of "
               "cpu0 that holds each kernel's working set")
COMPUTE = (("dgemm", "DGEMM", "numpy's BLAS, 2N³ flops"),
           ("randomaccess", "RandomAccess", "HPCC's updates of a random table"),
           ("fft", "FFT", "complex 1-D, 5 N log2 N flops"))
# file systems whose data leaves the node (a write may be acknowledged before it has)
NETWORK_FS = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse.sshfs", "sshfs", "lustre",
              "gpfs", "beegfs", "fuse.beegfs", "ceph", "fuse.ceph", "glusterfs",
              "fuse.glusterfs", "9p", "afs", "ocfs2", "orangefs", "pvfs2", "fuse.s3fs")
HPCC_STREAM = {"copy": "SingleSTREAM_Copy", "scale": "SingleSTREAM_Scale",
               "add": "SingleSTREAM_Add", "triad": "SingleSTREAM_Triad"}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _shown(value: float) -> str:
    """4 significant digits, thousands separated (what a table of rates needs)."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _n(value: Any, key: str | None) -> Markup:
    """A stored figure shown to 4 digits and marked with its place (``-`` when absent)."""
    ok = _is_number(value)
    return num(value if ok else None, _shown(value) if ok else "-", key)


def _fig(m: Metric, field: str, i: int) -> Markup:
    return _n(m.figure(field), f"body.metrics.{i}.{field}")


def _plural(n: ParamValue, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _params(m: Metric) -> str:
    p = m.params
    out = []
    if "threads" in p:
        out.append(_plural(p["threads"], "thread"))
    if "length" in p:
        out.append(f"length {p['length']:,}")
    if "n" in p:
        out.append(f"N = {p['n']:,}")
    return ", ".join(out)


def _check(ok: Any) -> Markup:
    return status_mark(None if ok is None else ("ok" if ok else "failed"))


def _bad(failed: bool) -> str | None:
    """A table row's class: "bad" for a row whose check failed."""
    return "bad" if failed else None


def network_fs(fstype: Any) -> bool:
    """Whether a mount's file system type is one whose data crosses a network."""
    return str(fstype).lower() in NETWORK_FS


# --------------------------------------------------------------------------- warnings


@renderer("node", "title")
def title(doc: Document, **_options: Any) -> str:
    parts = ", ".join(doc.body.get("parts", {})) or "no part"
    return f"Node suite on {doc.meta.get('host', '?')}: {parts}"


# --------------------------------------------------------------------------- conditions


def _caches(c: Conditions) -> str:
    out = []
    for x in c.caches:
        size = x["size"]
        if not size:
            continue
        kind = {"Data": "d", "Instruction": "i"}.get(x["type"] or "", "")
        out.append(f"L{x['level']}{kind} {units.format_size(size)} (cpus "
                   f"{x['shared_cpus'] or '?'})")
    return ", ".join(out) or "unknown"


def _cpu(c: Conditions) -> str:
    return (f"{c.cpu_model}; {c.cores_used} of {c.cpus} cores used"
            + (f"; {c.os}, Linux {c.kernel}" if c.os else ""))


def _memory(c: Conditions) -> str | None:
    mem, free, numa = c.memory, c.memory_available, c.numa
    if not mem:
        return None
    nodes = "; ".join(f"node {n['node']}: cpus {n['cpus']}"
                      + (f", {units.format_size(n['memory'])}" if n["memory"] else "")
                      for n in numa)
    return (units.format_size(mem) + (f" ({units.format_size(free)} available)" if free else "")
            + (f"; NUMA {_plural(len(numa), 'node')} ({nodes})" if numa else ""))


def _governor(c: Conditions) -> str:
    gov = c.governor
    return ", ".join(f"{g} (cpus {cpus})" for g, cpus in gov.items()) if gov else \
        "n/a (no cpufreq: a virtual machine or a kernel without it)"


def _blas(run: NodeRun) -> str | None:
    c = run.facts()
    if not c.has_blas:
        return None
    core = text.blas_core(run)
    env = " ".join(f"{k}={v}" for k, v in c.blas_environment.items())
    return (f"{c.blas_library} {c.blas_version}"
            + (f", core type {core}" if core else "") + (f"; {env}" if env else "")
            + (f"; built {c.blas_configuration}" if c.blas_configuration else ""))


def _mount(e: IoDir) -> Markup:
    m = e.mount
    where = "network" if network_fs(m.get("fstype")) else "local"
    methods = ", ".join(sorted({str(v) for v in e.method.values()}))
    return join([esc(f"{e.dir} ({e.realpath}): {m.get('fstype')}, {where}, "
                     f"{m.get('source')} on {m.get('mount_point')}; options "),
                 code(str(m.get("options"))),
                 esc(f"; cold cache by {methods or '?'}"
                     + (f"; {units.format_size(e.free_bytes)} free" if e.free_bytes else ""))])


def _run_state(run: NodeRun) -> Markup:
    """How the run ended, its --repeat and how long it took."""
    elapsed = run.facts().elapsed_s
    reason = f" ({run.status_reason})" if run.status_reason else ""
    return join([status_mark(run.status) if run.status != "complete" else Markup(""),
                 esc(f" {run.status}{reason}; --repeat {run.repeat}"
                     + (f"; {elapsed:.3g} s" if elapsed is not None else ""))])


def _conditions(doc: Document, run: NodeRun) -> Markup:
    c = run.facts()
    dirs = run.io().dirs
    items: list[tuple[str, Any]] = [
        ("node", doc.meta.get("host")),
        ("CPU", _cpu(c)),
        ("caches", _caches(c)),
        ("memory", _memory(c)),
        ("governor", _governor(c)),
        ("compiler", c.compiler),
        ("flags", code(c.flags) if c.flags else None),
        ("OpenMP", c.openmp),
        ("BLAS", _blas(run)),
        ("FFT", run.detail("fft").library),
        ("clock", f"{c.clock_source}, resolution {c.clock_resolution_ns} ns"
         if c.clock_source else None),
        *((f"file system {k + 1}" if len(dirs) > 1 else "file system", _mount(e))
          for k, e in enumerate(dirs)),
        ("run", _run_state(run)),
    ]
    return pairs(items)


# --------------------------------------------------------------------------- reference


T = TypeVar("T")


def _ref_index(entries: Sequence[T], match: Callable[[T], bool]) -> int | None:
    return next((j for j, r in enumerate(entries) if match(r)), None)


def _ref_hpcc(run: NodeRun, metric: str) -> Markup | None:
    """The reference system's HPCC figure of that name, marked with its place."""
    entries = run.ref_hpcc()
    j = _ref_index(entries, lambda r: r.metric == metric)
    return None if j is None else _n(entries[j].value, f"body.reference.hpcc.{j}.value")


def _ref_name(run: NodeRun) -> str:
    return str(text.ref_name(run))


# --------------------------------------------------------------------------- STREAM


def _stream_row(run: NodeRun, i: int, m: Metric, valid: Mapping[Any, Any],
                ref: bool) -> list[Any]:
    threads = m.params.get("threads")
    row: list[Any] = [_plural(m.params.get("threads", "?"), "thread"), m.name, *(
        _fig(m, f, i) for f in ("best", "mean", "min", "max", "stdev", "per_core")),
        m.repeat, _check(valid.get(threads, m.ok))]
    if ref:
        row.append((_ref_hpcc(run, HPCC_STREAM.get(m.name, "")) if threads == 1 else None)
                   or "-")
    return row


def _stream_table(run: NodeRun) -> Markup:
    """Per thread count and test: STREAM's figure (the best), mean, min, max, stdev,
    per core; the validation of that thread count's run."""
    ms = run.of("stream")
    if not ms:
        return Markup("")
    d = run.detail("stream")
    valid = {r.threads: r.ok for r in d.runs}
    ref = bool(run.ref_hpcc())
    rows = [_stream_row(run, i, m, valid, ref) for i, m in ms]
    classes = [_bad(valid.get(m.threads) is False) for _, m in ms]
    head = ["threads", "test", "best", "mean", "min", "max", "stdev", "best per core",
            "repetitions", "validation", *([f"{_ref_name(run)} (HPCC Single)"]
                                           if ref else [])]
    size = units.format_size(d.array_bytes) if d.array_bytes else "?"
    warm = text.warm_phrase(run.part("stream"))
    caption = (f"STREAM, GB/s (10^9 B/s): best = STREAM's figure; mean, min, max, sample "
               f"standard deviation over the repetitions ({warm}first iteration "
               f"dropped); 3 "
               f"arrays of {size} ({d.size_rule or '?'}), {d.stores or '?'} "
               f"stores; copy and scale move 16 B an element, add and triad 24 B; "
               f"validation: average relative error within "
               f"{'?' if d.epsilon is None else d.epsilon}")
    return table(head, rows, numeric=[*range(2, 9), *([10] if ref else [])], caption=caption,
                 row_classes=classes)


# --------------------------------------------------------------------------- PEAK kernels


def _kernel_line(k: str, c: int, ms: list[tuple[int, Metric]]
                 ) -> tuple[svg.Line, list[float], list[int]]:
    """One kernel's line, its median (else mean) per loop length with the other statistics
    in each point's hover text; the values and lengths drawn."""
    pts = sorted(((m.length, i, m) for i, m in ms if m.name == k), key=lambda t: t[0])
    central = [m.central() for _, _, m in pts]
    ys = [y for _, y in central]
    lengths = [n for n, _, _ in pts]
    return svg.Line(k, lengths, ys, [
        f"{k} at length {n:,} ({m.level}): {_shown(y)} MFLOP/s "
        f"({f}; mean {_shown(m.mean)}, min {_shown(m.min)}, max {_shown(m.max)}, "
        f"{m.repeat} trials)" for (n, _, m), (f, y) in zip(pts, central, strict=True)],
        color=c, keys=[f"body.metrics.{i}.{f}" for (_, i, _), (f, _) in
                       zip(pts, central, strict=True)], raw=ys), ys, lengths


def _kernel_lines(run: NodeRun) -> tuple[list[svg.Line], list[float], list[float]]:
    ms = run.of("kernels")
    kernels = list(dict.fromkeys(m.name for _, m in ms))
    lines: list[svg.Line] = []
    values: list[float] = []
    lengths: list[float] = []
    for c, k in enumerate(kernels):
        line, ys, ns = _kernel_line(k, c, ms)
        lines.append(line)
        values += ys
        lengths += ns
    return lines, values, lengths


def _common_width(run: NodeRun) -> tuple[float, list[str], list[str]] | None:
    """The bytes per element most of the shown kernels move, those kernels, and a phrase
    for each other kernel (where it crosses); None without any."""
    shown = {m.name for _, m in run.of("kernels")}
    per = {k: v for k, v in run.kernels().bytes_per_element.items() if k in shown}
    if not per:
        return None
    sizes = list(per.values())
    bpe = max(set(sizes), key=sizes.count)
    same = [k for k, v in per.items() if v == bpe]
    others = [f"{k} ({v} B an element) at {bpe / v:g}x the length" for k, v in per.items()
              if v != bpe]
    return bpe, same, others


def _cache_marks(run: NodeRun, lo: float, hi: float) -> tuple[list[svg.Span], str]:
    """Where the most common working set per element (16 B) outgrows each data cache of
    cpu0, as thin marks over the plot, and a sentence for the kernels that cross at
    other lengths."""
    width = _common_width(run)
    if width is None:
        return [], ""
    bpe, same, others = width
    names = " and ".join([", ".join(same[:-1]), same[-1]] if len(same) > 1 else same)
    spans = []
    for c in run.caches():
        size = c["size"] or 0
        if lo < size / bpe < hi:
            spans.append(svg.Span(size / bpe, size / bpe,
                                  f"L{c['level']} {units.format_size(size)}", cls="gap"))
    note = (f" Grey marks: the loop length past which the arrays of {names} ({bpe} B an "
            f"element) outgrow each data cache of cpu0" + (f"; {', '.join(others)}"
                                                          if others else "") + ".")
    return spans, note if spans else ""


def _kernel_chart(run: NodeRun) -> Markup:
    """MFLOP/s against loop length, one line per kernel, log-log, the cache boundaries
    marked: where each kernel falls out of a cache shows as a step after a mark."""
    lines, values, lengths = _kernel_lines(run)
    if not values:
        return Markup("")
    xlo, xhi = svg.padded(min(lengths), max(lengths), True)
    ylo, yhi = svg.padded(min(values), max(values), True)
    spans, note = _cache_marks(run, xlo, xhi)
    chart = svg.chart("PEAK kernels: MFLOP/s against loop length",
                      svg.Axis("loop length (elements; K = 1024)", xlo, xhi, log=True,
                               base2=True, tick_text=size_tick),
                      svg.Axis("MFLOP/s (10^6 flop/s)", ylo, yhi, log=True,
                               tick_text=lambda v: f"{v:,.0f}" if v >= 1 else f"{v:g}"),
                      lines, spans)
    return figure(join([chart, svg.legend(lines, [("gapsw", "a data cache's size")]
                                          if spans else ())]),
                  f"Each kernel's median over its trials (hover a point for the mean, min, "
                  f"max and trial count); {KERNEL_NOTE}.{note}", None, "kernels")


def _ref_kernel(run: NodeRun, kernel: str, length: int) -> Markup:
    entries = run.ref_kernels()
    j = _ref_index(entries, lambda r: r.kernel == kernel and abs(
        r.length - length) <= text.REF_LENGTH_TOLERANCE * length)
    return Markup("-") if j is None else _n(entries[j].mflops,
                                             f"body.reference.kernels.{j}.mflops")


def _kernel_row(run: NodeRun, n: int, kernels: list[str],
                cell: Mapping[tuple[str, int], tuple[int, Metric]],
                ref: bool) -> tuple[list[Any], bool]:
    """A loop length's row (its level, each kernel's mean ± stdev, the reference's
    figures) and whether a figure's check failed."""
    found = {k: cell[(k, n)] for k in kernels if (k, n) in cell}
    row: list[Any] = [f"{n:,}", text.levels({k: m.level for k, (_, m) in found.items()})]
    row += [join([_fig(found[k][1], "mean", found[k][0]), esc(" ± "),
                  _fig(found[k][1], "stdev", found[k][0])]) if k in found else "-"
            for k in kernels]
    if ref:
        row += [_ref_kernel(run, k, n) for k in kernels]
    return row, any(m.ok is False for _, m in found.values())


def _kernel_table(run: NodeRun) -> Markup:
    ms = run.of("kernels")
    if not ms:
        return Markup("")
    kernels = list(dict.fromkeys(m.name for _, m in ms))
    cell = {(m.name, m.length): (i, m) for i, m in ms}
    ref = bool(run.ref_kernels())
    made = [_kernel_row(run, n, kernels, cell, ref) for n in sorted({m.length for _, m in ms})]
    name = _ref_name(run)
    head = ["length", "level", *kernels, *([f"{name} {k}" for k in kernels] if ref else [])]
    return table(head, [row for row, _ in made], numeric=range(2, len(head)),
                 row_classes=[_bad(bad) for _, bad in made],
                 caption=f"PEAK kernels, MFLOP/s: mean ± sample standard deviation over the "
                 f"trials; {KERNEL_NOTE}" + (f"; {name}: the reference system's "
                                             "figure" if ref else ""))


def _drop_cell(j: int, d: Drop) -> Markup | str:
    pct = d.change_pct
    if pct is None:
        return "-"
    return num(pct, f"{pct:+.0f}", f"body.parts.kernels.drops.{j}.change_pct", unit="%",
               title=f"median {_shown(d.from_mflops or 0.0)} → {_shown(d.to_mflops or 0.0)} "
                     "MFLOP/s")


def _drops_table(run: NodeRun) -> Markup:
    """Each kernel's change of its median MFLOP/s from one cache level to the next."""
    drops = run.kernels().drops
    steps = list(dict.fromkeys(d.step for d in drops))
    if not steps:
        return Markup("")
    kernels = list(dict.fromkeys(d.kernel for d in drops))
    cell = {(d.kernel, d.step): (j, d) for j, d in enumerate(drops)}
    rows = [[k, *(_drop_cell(*cell[(k, s)]) if (k, s) in cell else "-" for s in steps)]
            for k in kernels]
    return join([para(esc("Change of each kernel's median MFLOP/s from one cache level to "
                          "the next, in % (hover a figure for the two medians):")),
                 table(["kernel", *steps], rows, numeric=range(1, len(steps) + 1))])


# --------------------------------------------------------------------------- compute


def _run_of(d: PartDetail, threads: ParamValue | None) -> PartRun | None:
    """The part's run at that thread count (the first, as stored)."""
    return next((r for r in d.runs if r.threads == threads), None)


def _validation(part: str, d: PartDetail, threads: ParamValue | None) -> Markup:
    """The figure a part's check judged, marked with its place."""
    got = _run_of(d, threads)
    if part == "dgemm" and got and got.residual is not None:
        return join([esc("scaled residual "),
                     num(got.residual, f"{got.residual:.3g}",
                         f"body.parts.dgemm.runs.{got.place}.residual"),
                     esc(f" (< {d.threshold})")])
    if part == "randomaccess" and got and got.wrong is not None:
        allowed = "?" if d.max_error_fraction is None else d.max_error_fraction
        return join([num(got.wrong, f"{got.wrong:,}",
                         f"body.parts.randomaccess.runs.{got.place}.errors"),
                     esc(f" wrong of {d.table_words or 0:,} words (< {allowed} allowed)")])
    if part == "fft" and d.error is not None:
        return join([esc("error "), num(d.error, f"{d.error:.3g}", "body.parts.fft.error"),
                     esc(f" (< {d.threshold})")])
    return Markup("")


HPCC_SINGLE = {"dgemm": "SingleDGEMM", "randomaccess": "SingleRandomAccess",
               "fft": "SingleFFT"}


def _compute_row(run: NodeRun, part: str, i: int, m: Metric, ref: bool) -> list[Any]:
    threads = m.params.get("threads")
    row: list[Any] = [_params(m) or "-", m.unit, *(_fig(m, f, i) for f in STATS),
                      m.repeat, _check(m.ok), _validation(part, run.detail(part), threads)]
    if ref:
        row.append((_ref_hpcc(run, HPCC_SINGLE[part]) if threads in (1, None) else None)
                   or "-")
    return row


def _problem_size(d: PartDetail) -> str:
    if d.n is not None:
        return f"N = {d.n:,}"
    return f"a table of {units.format_size(d.table_bytes)}" if d.table_bytes else ""


def _compute_table(run: NodeRun, part: str, name: str, what: str) -> Markup:
    ms = run.of(part)
    if not ms:
        return Markup("")
    ref = bool(run.ref_hpcc())
    rows = [_compute_row(run, part, i, m, ref) for i, m in ms]
    size = _problem_size(run.detail(part))
    head = ["conditions", "unit", *STATS, "repetitions", "check", "validation",
            *([f"{_ref_name(run)} (HPCC {HPCC_SINGLE[part]})"] if ref else [])]
    return table(head, rows, numeric=[*range(2, 7), *([9] if ref else [])],
                 row_classes=[_bad(m.ok is False) for _, m in ms],
                 caption=f"{name} ({what}{'; ' + size if size else ''}): mean, sample "
                 "standard deviation, min and max over the repetitions")


# --------------------------------------------------------------------------- I/O


def _ref_io(run: NodeRun, where: str, size: int, test: str) -> Markup | str:
    """The reference system's figure (local or NFS) for a file size and pattern."""
    ref = run.ref()
    entries = ref.io.get(where, []) if ref else []
    j = _ref_index(entries, lambda r: r.test == test and abs(
        r.file_size - size) <= text.REF_SIZE_TOLERANCE * size)
    return "-" if j is None else _n(entries[j].mb_s, f"body.reference.io.{where}.{j}.mb_s")


def _io_row(run: NodeRun, size: int, test: str, names: list[str],
            cell: Mapping[tuple[str, int, str], tuple[int, Metric]]) -> tuple[list[Any], bool]:
    """A file size and pattern's row: min, mean, max per directory, the reference's
    figures; and whether a figure's check failed."""
    row: list[Any] = [units.format_size(size), test]
    found = [cell.get((x, size, test)) for x in names]
    for got in found:
        row += ["-"] * 3 if got is None else [_fig(got[1], f, got[0])
                                              for f in ("min", "mean", "max")]
    row += [_ref_io(run, w, size, test) for w in text.io_refs(run)]
    return row, any(got is not None and got[1].ok is False for got in found)


def _io_head(run: NodeRun, d: IoPart, names: list[str]) -> list[str]:
    """file, pattern, then min/mean/max per directory (its real path and file system)."""
    real = {e.dir: e.realpath or e.dir for e in d.dirs}
    kind = {e.dir: f"{e.fstype}, {'network' if network_fs(e.fstype) else 'local'}"
            for e in d.dirs}
    head = ["file", "pattern"]
    for x in names:
        head += [f"{real.get(x, x)} ({kind.get(x, '?')}) min", "mean", "max"]
    return head + [f"{text.ref_name(run)} {w}" for w in text.io_refs(run)]


def _io_table(run: NodeRun) -> Markup:
    """Per file size and pattern: min, mean, max MB/s in each directory side by side (a
    local disk beside a network file system), and the reference system's local and NFS
    figures."""
    ms = run.of("io")
    if not ms:
        return Markup("")
    d = run.io()
    names = list(dict.fromkeys([*(e.dir for e in d.dirs),
                                *(str(m.params["dir"]) for _, m in ms)]))
    cell = {(str(m.params["dir"]), int(m.params["file_size"]), m.name): (i, m) for i, m in ms}
    sizes = d.file_sizes or sorted({int(m.params["file_size"]) for _, m in ms})
    patterns = d.patterns or list(dict.fromkeys(m.name for _, m in ms))
    made = [_io_row(run, size, test, names, cell) for size in sizes for test in patterns]
    head = _io_head(run, d, names)
    return table(head, [row for row, _ in made], numeric=range(2, len(head)),
                 row_classes=[_bad(bad) for _, bad in made],
                 caption=f"I/O, MB/s (10^6 B/s) of the file covered, "
                 f"{units.format_size(d.block)} blocks: min, mean and max over "
                 f"{text.repeat_count(m for _, m in ms)} repetitions per directory (its file "
                 "system in brackets; the mount options are in the conditions above)")


# --------------------------------------------------------------------------- the section


@renderer("node", "html")
def section(doc: Document, **_options: Any) -> str:
    run = NodeRun.from_document(doc)
    parts = [heading("Conditions", 4), _conditions(doc, run)]
    stream = _stream_table(run)
    if stream:
        parts += [heading("STREAM", 4), stream]
    if run.of("kernels"):
        parts += [heading("PEAK kernels", 4), _kernel_chart(run), _kernel_table(run),
                  _drops_table(run)]
    for part, name, what in COMPUTE:
        got = _compute_table(run, part, name, what)
        if got:
            parts += [heading(name, 4), got]
    io = _io_table(run)
    if io:
        parts += [heading("I/O", 4), io]
    ref = run.reference
    if ref:
        parts.append(para(esc(f"Reference system {ref['name']}: {ref.get('system')}, from "
                              f"{ref.get('source')}.")))
    return join(parts)


# --------------------------------------------------------------------------- fleets


@renderer("node-fleet", "title")
def fleet_title(doc: Document, **_options: Any) -> str:
    return f"Node suite on {NodeFleet.from_document(doc).nodes}"


def _node_key(key: str, node: str) -> str | None:
    """The place of a per-node value (none for a node name with a dot: the path would be
    ambiguous)."""
    return None if "." in node else f"{key}.{node}"


def _fleet_node_row(fleet: NodeFleet, node: str, c: JsonObject) -> list[Any]:
    cores, memory, llc = (jsonvalue.integer(c, k) for k in ("cores_used", "memory", "llc_total"))
    return [node, c.get("cpu_model") or "-",
            num(cores, str(cores), None if "." in node else f"body.conditions.{node}.cores_used")
            if cores is not None else "-",
            units.format_size(memory) if memory else "-",
            units.format_size(llc) if llc else "-",
            c.get("status") or "-", len(fleet.outliers.get(node, []))]


def _fleet_nodes(fleet: NodeFleet) -> Markup:
    rows = [_fleet_node_row(fleet, node, c) for node, c in fleet.conditions.items()]
    return table(["node", "CPU", "cores used", "memory", "last-level cache", "status",
                  "outlier metrics"], rows, numeric=[2, 3, 4, 6],
                 row_classes=[_bad(bool(row[-1])) for row in rows],
                 caption="The nodes that answered and what they ran on")


def _fleet_metric_row(i: int, m: FleetMetric) -> list[Any]:
    values = m.values
    base = f"body.metrics.{i}"
    ext = []
    for pick in (min, max):
        node = pick(values, key=lambda n: values[n])
        ext.append(join([_n(values[node], _node_key(f"{base}.values", node)), esc(f" {node}")]))
    outs = [join([esc(f"{n} ("), num(m.z[n], f"{m.z[n]:+.1f}", _node_key(f"{base}.z", n)),
                  esc(")")]) for n in m.outliers]
    return [m.id, m.unit, _n(m.median, f"{base}.median"), _n(m.mad, f"{base}.mad"), *ext,
            join([Markup(", ").join(outs)]) if outs else "-"]


def _fleet_metrics(fleet: NodeFleet) -> Markup:
    return table(["metric", "unit", "fleet median", "MAD", "lowest", "highest",
                  "outliers (z)"], [_fleet_metric_row(i, m) for i, m in enumerate(fleet.metrics)],
                 numeric=[2, 3, 4, 5], row_classes=[_bad(bool(m.outliers)) for m in fleet.metrics],
                 caption="Each metric across the fleet: its median, median absolute "
                 "deviation, the lowest and highest node, and the nodes judged outliers")


@renderer("node-fleet", "html")
def fleet_section(doc: Document, **_options: Any) -> str:
    b = NodeFleet.from_document(doc)
    facts = pairs([("nodes asked", b.nodes), ("answered", b.answered or "none"),
                   *((f"did not answer ({reason})", ns) for reason, ns in b.no_answer.items()),
                   *((f"beoperf {v} (not used)", ns) for v, ns in b.other_version.items()),
                   ("outlier nodes", ", ".join(b.outliers) or "none")])
    return join([facts, _fleet_nodes(b), _fleet_metrics(b), para(esc(b.method.statement))])


@renderer("node-comparison", "title")
def comparison_title(doc: Document, **_options: Any) -> str:
    return f"Node runs compared against {NodeComparison.from_document(doc).baseline}"


def _change_cell(c: NodeComparison, k: int, i: int, r: ComparisonRow) -> Any:
    change = r.changes[i]
    if not _is_number(change):
        return "-"
    span = (r.intervals or [None] * len(c.labels))[i]
    return join([num(change, f"{change:+.1f}", f"body.rows.{k}.changes.{i}", unit="%"),
                 esc(f" {text.interval_cell(span)}" if span else "")])


def _comparison_rows(c: NodeComparison) -> tuple[list[str], list[list[Any]], list[str | None]]:
    """The text view's columns, each mean and change marked with its place."""
    base = c.labels.index(c.baseline)
    head, _ = text.comparison_rows(c)
    rows, classes = [], []
    for k, r in enumerate(c.rows):
        row: list[Any] = [r.id, r.unit]
        for i in range(len(c.labels)):
            row.append(_n(r.means[i], f"body.rows.{k}.means.{i}"))
            if i != base:
                row += [_change_cell(c, k, i, r), r.verdicts[i] or "-"]
        rows.append(row)
        classes.append("warn" if "worse" in r.verdicts else None)
    return head, rows, classes


@renderer("node-comparison", "html")
def comparison_section(doc: Document, **_options: Any) -> str:
    c = NodeComparison.from_document(doc)
    head, rows, classes = _comparison_rows(c)
    numeric = {i for i, h in enumerate(head) if i >= 2 and h != "verdict"}
    return join([table(head, rows, numeric=numeric, row_classes=classes,
                       caption=f"Each metric's mean per configuration against "
                       f"{c.baseline}; change of the mean in % with its interval, "
                       "+ = faster (every figure is a rate)"),
                 para(esc(c.test["statement"]))])

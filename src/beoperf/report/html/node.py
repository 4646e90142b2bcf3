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

from collections.abc import Mapping, Sequence
from typing import Any

from beoperf import units
from beoperf.model.document import Document
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


def _fig(m: Mapping[str, Any], field: str, i: int) -> Markup:
    return _n(m.get(field), f"body.metrics.{i}.{field}")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _params(m: Mapping[str, Any]) -> str:
    p = m["params"]
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


def _metrics(b: Mapping[str, Any], part: str) -> list[tuple[int, dict[str, Any]]]:
    return [(i, m) for i, m in enumerate(b["metrics"]) if m["part"] == part]


def network_fs(fstype: Any) -> bool:
    """Whether a mount's file system type is one whose data crosses a network."""
    return str(fstype).lower() in NETWORK_FS


# --------------------------------------------------------------------------- warnings


@renderer("node", "title")
def title(doc: Document, **_options: Any) -> str:
    parts = ", ".join(doc.body.get("parts", {})) or "no part"
    return f"Node suite on {doc.meta.get('host', '?')}: {parts}"


# --------------------------------------------------------------------------- conditions


def _caches(c: Mapping[str, Any]) -> str:
    out = []
    for x in c.get("caches", []):
        if not x.get("size"):
            continue
        kind = {"Data": "d", "Instruction": "i"}.get(x.get("type"), "")
        out.append(f"L{x['level']}{kind} {units.format_size(x['size'])} (cpus "
                   f"{x.get('shared_cpus', '?')})")
    return ", ".join(out) or "unknown"


def _cpu(c: Mapping[str, Any]) -> str:
    host = c.get("host") or {}
    return (f"{c.get('cpu_model')}; {c.get('cores_used')} of {c.get('cpus')} cores used"
            + (f"; {host['os']}, Linux {host.get('kernel')}" if host.get("os") else ""))


def _memory(c: Mapping[str, Any]) -> str | None:
    mem, free = c.get("memory"), c.get("memory_available")
    if not mem:
        return None
    numa = c.get("numa") or []
    nodes = "; ".join(f"node {n.get('node')}: cpus {n.get('cpus')}"
                      + (f", {units.format_size(n['memory'])}" if n.get("memory") else "")
                      for n in numa)
    return (units.format_size(mem) + (f" ({units.format_size(free)} available)" if free else "")
            + (f"; NUMA {_plural(len(numa), 'node')} ({nodes})" if numa else ""))


def _governor(c: Mapping[str, Any]) -> str:
    gov = c.get("governor")
    return ", ".join(f"{g} (cpus {cpus})" for g, cpus in gov.items()) if gov else \
        "n/a (no cpufreq: a virtual machine or a kernel without it)"


def _blas(b: Mapping[str, Any]) -> str | None:
    blas = b["conditions"].get("blas") or {}
    if not blas:
        return None
    core = next((r["blas"].get("corename") for r in b["parts"].get("dgemm", {})
                 .get("runs", []) if r.get("blas")), None)
    env = " ".join(f"{k}={v}" for k, v in (blas.get("environment") or {}).items())
    return (f"{blas.get('library')} {blas.get('version')}"
            + (f", core type {core}" if core else "") + (f"; {env}" if env else "")
            + (f"; built {blas['configuration']}" if blas.get("configuration") else ""))


def _mount(e: Mapping[str, Any]) -> Markup:
    m = e.get("mount") or {}
    where = "network" if network_fs(m.get("fstype")) else "local"
    methods = ", ".join(sorted({str(v) for v in (e.get("method") or {}).values()}))
    free = e.get("free_bytes")
    return join([esc(f"{e.get('dir')} ({e.get('realpath')}): {m.get('fstype')}, {where}, "
                     f"{m.get('source')} on {m.get('mount_point')}; options "),
                 code(str(m.get("options"))),
                 esc(f"; cold cache by {methods or '?'}"
                     + (f"; {units.format_size(free)} free" if free else ""))])


def _conditions(doc: Document) -> Markup:
    b = doc.body
    c = b["conditions"]
    build = c.get("build") or {}
    clock = c.get("clock") or {}
    dirs = b["parts"].get("io", {}).get("dirs", [])
    items: list[tuple[str, Any]] = [
        ("node", doc.meta.get("host")),
        ("CPU", _cpu(c)),
        ("caches", _caches(c)),
        ("memory", _memory(c)),
        ("governor", _governor(c)),
        ("compiler", build.get("compiler")),
        ("flags", code(build["flags"]) if build.get("flags") else None),
        ("OpenMP", build.get("openmp")),
        ("BLAS", _blas(b)),
        ("FFT", b["parts"].get("fft", {}).get("library")),
        ("clock", f"{clock['source']}, resolution {clock.get('resolution_ns')} ns"
         if clock.get("source") else None),
        *((f"file system {k + 1}" if len(dirs) > 1 else "file system", _mount(e))
          for k, e in enumerate(dirs)),
        ("run", join([status_mark(b["status"]) if b["status"] != "complete" else Markup(""),
                      esc(f" {b['status']}" + (f" ({b['status_reason']})" if
                                               b.get("status_reason") else "")
                          + f"; --repeat {b['repeat']}"
                          + (f"; {c['elapsed_s']:.3g} s" if _is_number(c.get("elapsed_s"))
                             else ""))])),
    ]
    return pairs(items)


# --------------------------------------------------------------------------- reference


def _ref_index(entries: Sequence[Mapping[str, Any]], match: Any) -> int | None:
    return next((j for j, r in enumerate(entries) if match(r)), None)


def _ref_hpcc(b: Mapping[str, Any], metric: str) -> Markup | None:
    """The reference system's HPCC figure of that name, marked with its place."""
    entries = (b.get("reference") or {}).get("hpcc") or []
    j = _ref_index(entries, lambda r: r.get("metric") == metric)
    return None if j is None else _n(entries[j]["value"], f"body.reference.hpcc.{j}.value")


# --------------------------------------------------------------------------- STREAM


def _stream_table(b: Mapping[str, Any]) -> Markup:
    """Per thread count and test: STREAM's figure (the best), mean, min, max, stdev,
    per core; the validation of that thread count's run."""
    ms = _metrics(b, "stream")
    if not ms:
        return Markup("")
    d = b["parts"].get("stream", {})
    valid = {r.get("threads"): r.get("ok") for r in d.get("runs", [])}
    ref = bool((b.get("reference") or {}).get("hpcc"))
    rows, classes = [], []
    for i, m in ms:
        threads = m["params"].get("threads")
        row: list[Any] = [_plural(threads, "thread"), m["name"], *(
            _fig(m, f, i) for f in ("best", "mean", "min", "max", "stdev", "per_core")),
            m["repeat"], _check(valid.get(threads, m.get("ok")))]
        if ref:
            row.append((_ref_hpcc(b, HPCC_STREAM.get(m["name"], "")) if threads == 1 else None)
                       or "-")
        rows.append(row)
        classes.append("bad" if valid.get(threads) is False else None)
    head = ["threads", "test", "best", "mean", "min", "max", "stdev", "best per core",
            "repetitions", "validation", *([f"{b['reference']['name']} (HPCC Single)"]
                                           if ref else [])]
    size = units.format_size(d["array_bytes"]) if d.get("array_bytes") else "?"
    caption = (f"STREAM, GB/s (10^9 B/s): best = STREAM's figure; mean, min, max, sample "
               f"standard deviation over the repetitions ({text.warm_phrase(d)}first iteration "
               f"dropped); 3 "
               f"arrays of {size} ({d.get('size_rule', '?')}), {d.get('stores', '?')} "
               f"stores; copy and scale move 16 B an element, add and triad 24 B; "
               f"validation: average relative error within {d.get('epsilon', '?')}")
    return table(head, rows, numeric=[*range(2, 9), *([10] if ref else [])], caption=caption,
                 row_classes=classes)


# --------------------------------------------------------------------------- PEAK kernels


def _kernel_lines(b: Mapping[str, Any]) -> tuple[list[svg.Line], list[float], list[float]]:
    ms = _metrics(b, "kernels")
    kernels = list(dict.fromkeys(m["name"] for _, m in ms))
    lines, values, lengths = [], [], []
    for c, k in enumerate(kernels):
        pts = sorted(((m["params"]["length"], i, m) for i, m in ms if m["name"] == k),
                     key=lambda t: t[0])
        field = [("median" if m.get("median") is not None else "mean") for _, _, m in pts]
        ys = [m[f] for (_, _, m), f in zip(pts, field, strict=True)]
        lines.append(svg.Line(k, [n for n, _, _ in pts], ys, [
            f"{k} at length {n:,} ({m.get('level', '?')}): {_shown(y)} MFLOP/s "
            f"({f}; mean {_shown(m['mean'])}, min {_shown(m['min'])}, max {_shown(m['max'])}, "
            f"{m['repeat']} trials)" for (n, _, m), y, f in zip(pts, ys, field, strict=True)],
            color=c, keys=[f"body.metrics.{i}.{f}" for (_, i, _), f in
                           zip(pts, field, strict=True)], raw=ys))
        values += ys
        lengths += [n for n, _, _ in pts]
    return lines, values, lengths


def _cache_marks(b: Mapping[str, Any], lo: float, hi: float) -> tuple[list[svg.Span], str]:
    """Where the most common working set per element (16 B) outgrows each data cache of
    cpu0, as thin marks over the plot, and a sentence for the kernels that cross at
    other lengths."""
    per = b["parts"].get("kernels", {}).get("bytes_per_element") or {}
    shown = {m["name"] for _, m in _metrics(b, "kernels")}
    sizes = [v for k, v in per.items() if k in shown and _is_number(v) and v > 0]
    if not sizes:
        return [], ""
    bpe = max(set(sizes), key=sizes.count)
    same = [k for k, v in per.items() if k in shown and v == bpe]
    names = " and ".join([", ".join(same[:-1]), same[-1]] if len(same) > 1 else same)
    caches = sorted((c for c in b["conditions"].get("caches", [])
                     if c.get("type") != "Instruction" and c.get("size")),
                    key=lambda c: (c["level"], c["size"]))
    spans = []
    for c in caches:
        x = c["size"] / bpe
        if lo < x < hi:
            label = f"L{c['level']} {units.format_size(c['size'])}"
            spans.append(svg.Span(x, x, label, cls="gap"))
    others = [f"{k} ({v} B an element) at {bpe / v:g}x the length" for k, v in per.items()
              if k in shown and _is_number(v) and v > 0 and v != bpe]
    note = (f" Grey marks: the loop length past which the arrays of {names} ({bpe} B an "
            f"element) outgrow each data cache of cpu0" + (f"; {', '.join(others)}"
                                                          if others else "") + ".")
    return spans, note if spans else ""


def _kernel_chart(b: Mapping[str, Any]) -> Markup:
    """MFLOP/s against loop length, one line per kernel, log-log, the cache boundaries
    marked: where each kernel falls out of a cache shows as a step after a mark."""
    lines, values, lengths = _kernel_lines(b)
    if not values:
        return Markup("")
    xlo, xhi = svg.padded(min(lengths), max(lengths), True)
    ylo, yhi = svg.padded(min(values), max(values), True)
    spans, note = _cache_marks(b, xlo, xhi)
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


def _ref_kernel(b: Mapping[str, Any], kernel: str, length: int) -> Markup:
    entries = (b.get("reference") or {}).get("kernels") or []
    j = _ref_index(entries, lambda r: r.get("kernel") == kernel and abs(
        r.get("length", 0) - length) <= text.REF_LENGTH_TOLERANCE * length)
    return Markup("-") if j is None else _n(entries[j]["mflops"],
                                             f"body.reference.kernels.{j}.mflops")


def _kernel_table(b: Mapping[str, Any]) -> Markup:
    ms = _metrics(b, "kernels")
    if not ms:
        return Markup("")
    kernels = list(dict.fromkeys(m["name"] for _, m in ms))
    cell = {(m["name"], m["params"]["length"]): (i, m) for i, m in ms}
    ref = b.get("reference") if (b.get("reference") or {}).get("kernels") else None
    rows, classes = [], []
    for n in sorted({m["params"]["length"] for _, m in ms}):
        row: list[Any] = [f"{n:,}", text.levels({k: cell[(k, n)][1].get("level", "?")
                                             for k in kernels if (k, n) in cell})]
        bad = False
        for k in kernels:
            if (k, n) not in cell:
                row.append("-")
                continue
            i, m = cell[(k, n)]
            bad = bad or m.get("ok") is False
            row.append(join([_fig(m, "mean", i), esc(" ± "), _fig(m, "stdev", i)]))
        if ref:
            row += [_ref_kernel(b, k, n) for k in kernels]
        rows.append(row)
        classes.append("bad" if bad else None)
    head = ["length", "level", *kernels, *([f"{ref['name']} {k}" for k in kernels] if ref
                                          else [])]
    return table(head, rows, numeric=range(2, len(head)), row_classes=classes,
                 caption=f"PEAK kernels, MFLOP/s: mean ± sample standard deviation over the "
                 f"trials; {KERNEL_NOTE}" + (f"; {ref['name']}: the reference system's "
                                             "figure" if ref else ""))


def _drops_table(b: Mapping[str, Any]) -> Markup:
    """Each kernel's change of its median MFLOP/s from one cache level to the next."""
    drops = b["parts"].get("kernels", {}).get("drops", [])
    steps = list(dict.fromkeys(f"{d['from']} → {d['to']}" for d in drops))
    if not steps:
        return Markup("")
    kernels = list(dict.fromkeys(d["kernel"] for d in drops))
    cell = {(d["kernel"], f"{d['from']} → {d['to']}"): (j, d) for j, d in enumerate(drops)}
    rows = []
    for k in kernels:
        row: list[Any] = [k]
        for s in steps:
            j, d = cell.get((k, s), (None, None))
            pct = None if d is None else d.get("change_pct")
            row.append("-" if pct is None else num(
                pct, f"{pct:+.0f}", f"body.parts.kernels.drops.{j}.change_pct", unit="%",
                title=f"median {_shown(d['from_mflops'])} → {_shown(d['to_mflops'])} MFLOP/s"))
        rows.append(row)
    return join([para(esc("Change of each kernel's median MFLOP/s from one cache level to "
                          "the next, in % (hover a figure for the two medians):")),
                 table(["kernel", *steps], rows, numeric=range(1, len(steps) + 1))])


# --------------------------------------------------------------------------- compute


def _validation(part: str, p: Mapping[str, Any], threads: Any) -> Markup:
    """The figure a part's check judged, marked with its place."""
    if part == "dgemm":
        runs = p.get("runs", [])
        j = _ref_index(runs, lambda r: r.get("threads") == threads)
        if j is not None and _is_number(runs[j].get("residual")):
            return join([esc("scaled residual "), num(runs[j]["residual"],
                                                      f"{runs[j]['residual']:.3g}",
                                                      f"body.parts.dgemm.runs.{j}.residual"),
                         esc(f" (< {p.get('threshold')})")])
    if part == "randomaccess":
        runs = p.get("runs", [])
        j = _ref_index(runs, lambda r: r.get("threads") == threads)
        if j is not None and _is_number(runs[j].get("errors")):
            return join([num(runs[j]["errors"], f"{runs[j]['errors']:,}",
                             f"body.parts.randomaccess.runs.{j}.errors"),
                         esc(f" wrong of {p.get('table_words', 0):,} words "
                             f"(< {p.get('max_error_fraction', '?')} allowed)")])
    if part == "fft" and _is_number(p.get("error")):
        return join([esc("error "), num(p["error"], f"{p['error']:.3g}", "body.parts.fft.error"),
                     esc(f" (< {p.get('threshold')})")])
    return Markup("")


HPCC_SINGLE = {"dgemm": "SingleDGEMM", "randomaccess": "SingleRandomAccess",
               "fft": "SingleFFT"}


def _compute_table(b: Mapping[str, Any], part: str, name: str, what: str) -> Markup:
    ms = _metrics(b, part)
    if not ms:
        return Markup("")
    p = b["parts"].get(part, {})
    ref = bool((b.get("reference") or {}).get("hpcc"))
    rows, classes = [], []
    for i, m in ms:
        threads = m["params"].get("threads")
        row: list[Any] = [_params(m) or "-", m["unit"], *(_fig(m, f, i) for f in STATS),
                          m["repeat"], _check(m.get("ok")), _validation(part, p, threads)]
        if ref:
            row.append((_ref_hpcc(b, HPCC_SINGLE[part]) if threads in (1, None) else None)
                       or "-")
        rows.append(row)
        classes.append("bad" if m.get("ok") is False else None)
    size = (f"N = {p['n']:,}" if _is_number(p.get("n")) else
            f"a table of {units.format_size(p['table_bytes'])}" if p.get("table_bytes") else "")
    head = ["conditions", "unit", *STATS, "repetitions", "check", "validation",
            *([f"{b['reference']['name']} (HPCC {HPCC_SINGLE[part]})"] if ref else [])]
    return table(head, rows, numeric=[*range(2, 7), *([9] if ref else [])],
                 row_classes=classes,
                 caption=f"{name} ({what}{'; ' + size if size else ''}): mean, sample "
                 "standard deviation, min and max over the repetitions")


# --------------------------------------------------------------------------- I/O


def _io_table(b: Mapping[str, Any]) -> Markup:
    """Per file size and pattern: min, mean, max MB/s in each directory side by side (a
    local disk beside a network file system), and the reference system's local and NFS
    figures."""
    ms = _metrics(b, "io")
    if not ms:
        return Markup("")
    d = b["parts"].get("io", {})
    dirs = d.get("dirs", [])
    fstype = {e["dir"]: (e.get("mount") or {}).get("fstype", "?") for e in dirs}
    kind = {x: f"{t}, {'network' if network_fs(t) else 'local'}" for x, t in fstype.items()}
    names = list(dict.fromkeys([*(e["dir"] for e in dirs), *(m["params"]["dir"] for _, m in ms)]))
    cell = {(m["params"]["dir"], m["params"]["file_size"], m["name"]): (i, m) for i, m in ms}
    ref = b.get("reference") or {}
    refs = [w for w in ("local", "nfs") if (ref.get("io") or {}).get(w)]
    rows, classes = [], []
    sizes = d.get("file_sizes") or sorted({m["params"]["file_size"] for _, m in ms})
    patterns = d.get("patterns") or list(dict.fromkeys(m["name"] for _, m in ms))
    for size in sizes:
        for test in patterns:
            row: list[Any] = [units.format_size(size), test]
            bad = False
            for x in names:
                i, m = cell.get((x, size, test), (None, None))
                row += (["-"] * 3 if m is None else [_fig(m, f, i) for f in ("min", "mean", "max")])
                bad = bad or (m is not None and m.get("ok") is False)
            for w in refs:
                entries = ref["io"][w]
                j = _ref_index(entries, lambda r, t=test, s=size: r.get("test") == t and abs(
                    r.get("file_size", 0) - s) <= text.REF_SIZE_TOLERANCE * s)
                row.append("-" if j is None else _n(entries[j]["mb_s"],
                                                   f"body.reference.io.{w}.{j}.mb_s"))
            rows.append(row)
            classes.append("bad" if bad else None)
    head = ["file", "pattern"]
    real = {e["dir"]: e.get("realpath") or e["dir"] for e in dirs}
    for x in names:
        where = f"{real.get(x, x)} ({kind.get(x, '?')})"
        head += [f"{where} min", "mean", "max"]
    head += [f"{ref.get('name')} {w}" for w in refs]
    repeats = sorted({m["repeat"] for _, m in ms})
    count = str(repeats[0]) if len(repeats) == 1 else f"{repeats[0]}-{repeats[-1]}"
    return table(head, rows, numeric=range(2, len(head)), row_classes=classes,
                 caption=f"I/O, MB/s (10^6 B/s) of the file covered, "
                 f"{units.format_size(d.get('block', 0))} blocks: min, mean and max over "
                 f"{count} repetitions per directory (its file system in brackets; the "
                 "mount options are in the conditions above)")


# --------------------------------------------------------------------------- the section


@renderer("node", "html")
def section(doc: Document, **_options: Any) -> str:
    b = doc.body
    parts = [heading("Conditions", 4), _conditions(doc)]
    stream = _stream_table(b)
    if stream:
        parts += [heading("STREAM", 4), stream]
    if _metrics(b, "kernels"):
        parts += [heading("PEAK kernels", 4), _kernel_chart(b), _kernel_table(b),
                  _drops_table(b)]
    for part, name, what in COMPUTE:
        got = _compute_table(b, part, name, what)
        if got:
            parts += [heading(name, 4), got]
    io = _io_table(b)
    if io:
        parts += [heading("I/O", 4), io]
    ref = b.get("reference")
    if ref:
        parts.append(para(esc(f"Reference system {ref['name']}: {ref.get('system')}, from "
                              f"{ref.get('source')}.")))
    return join(parts)


# --------------------------------------------------------------------------- fleets


@renderer("node-fleet", "title")
def fleet_title(doc: Document, **_options: Any) -> str:
    return f"Node suite on {doc.body['nodes']}"


def _node_key(key: str, node: str) -> str | None:
    """The place of a per-node value (none for a node name with a dot: the path would be
    ambiguous)."""
    return None if "." in node else f"{key}.{node}"


def _fleet_nodes(b: Mapping[str, Any]) -> Markup:
    conditions = b.get("conditions") or {}
    rows, classes = [], []
    for node, c in conditions.items():
        n_out = len(b["outliers"].get(node, []))
        rows.append([node, c.get("cpu_model") or "-",
                     num(c["cores_used"], str(c["cores_used"]),
                         None if "." in node else f"body.conditions.{node}.cores_used")
                     if _is_number(c.get("cores_used")) else "-",
                     units.format_size(c["memory"]) if c.get("memory") else "-",
                     units.format_size(c["llc_total"]) if c.get("llc_total") else "-",
                     c.get("status") or "-", n_out])
        classes.append("bad" if n_out else None)
    return table(["node", "CPU", "cores used", "memory", "last-level cache", "status",
                  "outlier metrics"], rows, numeric=[2, 3, 4, 6], row_classes=classes,
                 caption="The nodes that answered and what they ran on")


def _fleet_metrics(b: Mapping[str, Any]) -> Markup:
    rows, classes = [], []
    for i, m in enumerate(b["metrics"]):
        values = m["values"]
        base = f"body.metrics.{i}"
        ext = []
        for pick in (min, max):
            node = pick(values, key=values.get)
            ext.append(join([_n(values[node], _node_key(f"{base}.values", node)),
                             esc(f" {node}")]))
        outs = [join([esc(f"{n} ("), num(m["z"][n], f"{m['z'][n]:+.1f}",
                                         _node_key(f"{base}.z", n)), esc(")")])
                for n in m["outliers"]]
        rows.append([m["id"], m["unit"], _n(m["median"], f"{base}.median"),
                     _n(m["mad"], f"{base}.mad"), *ext,
                     join([Markup(", ").join(outs)]) if outs else "-"])
        classes.append("bad" if m["outliers"] else None)
    return table(["metric", "unit", "fleet median", "MAD", "lowest", "highest",
                  "outliers (z)"], rows, numeric=[2, 3, 4, 5], row_classes=classes,
                 caption="Each metric across the fleet: its median, median absolute "
                 "deviation, the lowest and highest node, and the nodes judged outliers")


@renderer("node-fleet", "html")
def fleet_section(doc: Document, **_options: Any) -> str:
    b = doc.body
    facts = pairs([("nodes asked", b["nodes"]), ("answered", b["answered"] or "none"),
                   *((f"did not answer ({reason})", ns)
                     for reason, ns in b["no_answer"].items()),
                   *((f"beoperf {v} (not used)", ns) for v, ns in b["other_version"].items()),
                   ("outlier nodes", ", ".join(b["outliers"]) or "none")])
    return join([facts, _fleet_nodes(b), _fleet_metrics(b),
                 para(esc(b["method"]["statement"]))])


@renderer("node-comparison", "title")
def comparison_title(doc: Document, **_options: Any) -> str:
    return f"Node runs compared against {doc.body['baseline']}"


def _comparison_rows(b: Mapping[str, Any]) -> tuple[list[str], list[list[Any]], list[str | None]]:
    """The text view's columns, each mean and change marked with its place."""
    labels, base = b["labels"], b["labels"].index(b["baseline"])
    head, _ = text.comparison_rows(b)
    rows, classes = [], []
    for k, r in enumerate(b["rows"]):
        row: list[Any] = [r["id"], r["unit"]]
        for i in range(len(labels)):
            row.append(_n(r["means"][i], f"body.rows.{k}.means.{i}"))
            if i != base:
                change = r["changes"][i]
                span = (r.get("intervals") or [None] * len(labels))[i]
                row += ["-" if not _is_number(change) else join([num(
                    change, f"{change:+.1f}", f"body.rows.{k}.changes.{i}", unit="%"),
                    esc(f" {text.interval_cell(span)}" if span else "")]),
                    r["verdicts"][i] or "-"]
        rows.append(row)
        classes.append("warn" if "worse" in r["verdicts"] else None)
    return head, rows, classes


@renderer("node-comparison", "html")
def comparison_section(doc: Document, **_options: Any) -> str:
    head, rows, classes = _comparison_rows(doc.body)
    numeric = {i for i, h in enumerate(head) if i >= 2 and h != "verdict"}
    return join([table(head, rows, numeric=numeric, row_classes=classes,
                       caption=f"Each metric's mean per configuration against "
                       f"{doc.body['baseline']}; change of the mean in % with its interval, "
                       "+ = faster (every figure is a rate)"),
                 para(esc(doc.body["test"]["statement"]))])

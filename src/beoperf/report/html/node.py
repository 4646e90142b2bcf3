"""Node documents in the HTML report: a node's suite (its conditions; a table per part,
every figure with its unit, mean, spread, repetitions and check, each number marked with
where it is stored; the PEAK kernels drawn against loop length), a fleet's outliers and
node runs compared (as tables)."""

from __future__ import annotations

from typing import Any

from beoperf import units
from beoperf.model.document import Document
from beoperf.report import node as text
from beoperf.report import renderer
from beoperf.report.html import svg
from beoperf.report.html.markup import (
    Markup,
    bullet_list,
    details,
    esc,
    figure,
    heading,
    join,
    num,
    para,
    status_mark,
    table,
    tag,
)
from beoperf.units import size_tick


@renderer("node", "title")
def title(doc: Document, **_options: Any) -> str:
    parts = ", ".join(doc.body.get("parts", {})) or "no part"
    return f"Node suite on {doc.meta.get('host', '?')}: {parts}"


@renderer("node", "warnings")
def warnings(doc: Document, **_options: Any) -> str:
    b = doc.body
    failed = [m["id"] for m in b["metrics"] if m.get("ok") is False]
    out = [f"status {b['status']}: {b.get('status_reason') or ''}".rstrip(": ")
           ] if b["status"] != "complete" else []
    return "\n".join(out + ([f"checks failed: {', '.join(failed)}"] if failed else []))


PARTS = (("dgemm", "DGEMM"), ("randomaccess", "RandomAccess"),
         ("fft", "FFT"), ("io", "I/O"))
STATS = ("mean", "stdev", "min", "max")
KERNEL_NOTE = ("flops per element: div 1, daxpy 2, dot 2, poly 10; level: the cache of "
               "cpu0 that holds the working set")


def _block(lines: list[str]) -> Markup:
    return tag("pre", esc("\n".join(lines).strip("\n"), limit=1 << 20), class_="text")


def _shown(value: float) -> str:
    """4 significant digits, thousands separated (what a table of rates needs)."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _fig(m: dict[str, Any], field: str, i: int) -> Markup:
    value = m.get(field)
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return num(value if ok else None, _shown(value) if ok else "-",
               f"body.metrics.{i}.{field}")


def _params(m: dict[str, Any]) -> str:
    p = m["params"]
    out = []
    if "threads" in p:
        out.append(f"{p['threads']} thread{'s' if p['threads'] != 1 else ''}")
    if "length" in p:
        out.append(f"length {p['length']:,}")
    if "n" in p:
        out.append(f"N = {p['n']:,}")
    if "file_size" in p:
        out.append(f"{units.format_size(p['file_size'])} file")
    if "dir" in p:
        out.append(f"in {p['dir']}")
    return ", ".join(out)


def _check(m: dict[str, Any]) -> Markup:
    ok = m.get("ok")
    return status_mark(None if ok is None else ("ok" if ok else "failed"))


def _part_table(b: dict[str, Any], part: str, name: str) -> Markup:
    """Every figure of a part: mean, stdev, min, max over its repetitions (STREAM: the best
    too, as STREAM reports), its unit and its check."""
    rows, best = [], part == "stream"
    for i, m in enumerate(b["metrics"]):
        if m["part"] != part:
            continue
        rows.append([m["name"], _params(m), m["unit"], *(_fig(m, f, i) for f in STATS),
                     *([_fig(m, "best", i)] if best else []), m["repeat"], _check(m)])
    if not rows:
        return Markup("")
    head = ["figure", "conditions", "unit", *STATS, *(["best"] if best else []),
            "repetitions", "check"]
    return table(head, rows, numeric=range(3, len(head) - 1),
                 caption=f"{name}: mean, sample standard deviation, min and max over the "
                 "repetitions" + ("; best = STREAM's figure" if best else ""))


def _kernel_chart(b: dict[str, Any]) -> Markup:
    """MFLOP/s against loop length, one line per kernel, log-log: where each kernel falls
    out of a cache shows as a step."""
    ms = [(i, m) for i, m in enumerate(b["metrics"]) if m["part"] == "kernels"]
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
    if not values:
        return Markup("")
    xlo, xhi = svg.padded(min(lengths), max(lengths), True)
    ylo, yhi = svg.padded(min(values), max(values), True)
    chart = svg.chart("PEAK kernels: MFLOP/s against loop length",
                      svg.Axis("loop length (elements; K = 1024)", xlo, xhi, log=True,
                               base2=True, tick_text=size_tick),
                      svg.Axis("MFLOP/s (10^6 flop/s)", ylo, yhi, log=True), lines)
    return figure(join([chart, svg.legend(lines)]),
                  f"Each kernel's median over its trials (hover a point for the mean, min, "
                  f"max and trial count); {KERNEL_NOTE}. A step down marks the loop "
                  "length whose arrays no longer fit in a cache level.", None, "kernels")


def _kernel_table(b: dict[str, Any]) -> Markup:
    ms = [(i, m) for i, m in enumerate(b["metrics"]) if m["part"] == "kernels"]
    if not ms:
        return Markup("")
    kernels = list(dict.fromkeys(m["name"] for _, m in ms))
    cell = {(m["name"], m["params"]["length"]): (i, m) for i, m in ms}
    rows = []
    for n in sorted({m["params"]["length"] for _, m in ms}):
        level = next((cell[(k, n)][1].get("level") for k in kernels if (k, n) in cell), "?")
        row: list[Any] = [f"{n:,}", level]
        for k in kernels:
            if (k, n) not in cell:
                row.append("-")
                continue
            i, m = cell[(k, n)]
            row.append(join([_fig(m, "mean", i), esc(" ± "), _fig(m, "stdev", i)]))
        rows.append(row)
    return table(["length", "level", *kernels], rows, numeric=range(2, len(kernels) + 2),
                 caption=f"PEAK kernels, MFLOP/s: mean ± sample standard deviation over the "
                 f"trials; {KERNEL_NOTE}")


def _conditions(doc: Document) -> Markup:
    return bullet_list([esc(line) for line in text.condition_lines(doc.body, doc.meta)
                        if line.strip()])


@renderer("node", "html")
def section(doc: Document, **_options: Any) -> str:
    b = doc.body
    parts = [heading("Conditions", 4), _conditions(doc)]
    stream = _part_table(b, "stream", "STREAM")
    if stream:
        parts += [heading("STREAM", 4), stream]
    if any(m["part"] == "kernels" for m in b["metrics"]):
        parts += [heading("PEAK kernels", 4), _kernel_chart(b), _kernel_table(b)]
        drops = b["parts"].get("kernels", {}).get("drops", [])
        if drops:
            parts.append(para(esc("Drops between levels: " + "; ".join(
                f"{d['kernel']} {d['from']}→{d['to']} {d['change_pct']:+.0f}%"
                for d in drops if d["change_pct"] is not None))))
    for part, name in PARTS:
        got = _part_table(b, part, name)
        if got:
            parts += [heading(name, 4), got]
    ref = b.get("reference")
    if ref:
        lines = [*text.kernel_lines(b), *text.compute_lines(b), *text.io_lines(b)]
        parts.append(details(f"Beside the reference system {ref.get('system') or ref['name']} "
                             "(as the text report prints it)", _block(lines)))
    return join(parts)


@renderer("node-fleet", "title")
def fleet_title(doc: Document, **_options: Any) -> str:
    return f"Node suite on {doc.body['nodes']}"


@renderer("node-fleet", "warnings")
def fleet_warnings(doc: Document, **_options: Any) -> str:
    return "\n".join(f"outlier node {n}: {len(ids)} metric(s)"
                     for n, ids in doc.body["outliers"].items())


@renderer("node-fleet", "html")
def fleet_section(doc: Document, **_options: Any) -> str:
    lines = text.fleet_lines(doc.body)
    return _block(lines)


@renderer("node-comparison", "title")
def comparison_title(doc: Document, **_options: Any) -> str:
    return f"Node runs compared against {doc.body['baseline']}"


@renderer("node-comparison", "html")
def comparison_section(doc: Document, **_options: Any) -> str:
    head, rows = text.comparison_rows(doc.body)
    numeric = {i for i, h in enumerate(head) if i >= 2 and h != "verdict"}
    return join([table(head, rows, numeric=numeric), para(esc(doc.body["test"]["statement"]))])

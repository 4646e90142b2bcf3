"""Charts as inline SVG, written directly (no plotting library, no script).

A chart is axes (linear or log, ticks with their unit), lines of points, optional bands
(a spread around a line, as polygons), shaded spans (collapses, outages) and marks (a
saturation point).  Every drawn point carries a ``<title>``: the browser shows it when the
pointer rests on the point, which gives the hover values without any script; points also
carry ``data-x``/``data-y`` (and ``data-key`` where the value is stored in a document) so
that a test can read what was drawn.  Colours come from the page's CSS classes ``c0`` ..
``c9`` (the same for lines, bands and legend swatches), so the SVG holds no styles.

Coordinates are written with one decimal and at most ``MAX_TIPS`` points of a line carry
a title (evenly spread): a long monitor timeline stays a few hundred kilobytes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from beoperf.report.html.markup import Markup, esc, join, tag

WIDTH, HEIGHT = 760, 340
MARGIN = {"left": 74, "right": 18, "top": 40, "bottom": 50}
MAX_TIPS = 400
COLORS = 10  # CSS classes c0..c9
MAX_TICKS = 10


@dataclass
class Axis:
    """One axis: its label (with the unit), log or linear, and the data range shown."""

    label: str
    lo: float
    hi: float
    log: bool = False
    tick_text: Callable[[float], str] = lambda v: f"{v:g}"
    ticks: list[float] | None = None  # None: chosen here
    base2: bool = False  # log ticks at powers of two (byte sizes)

    def frac(self, v: float) -> float:
        """Position of ``v`` along the axis, 0 at lo and 1 at hi."""
        if self.log:
            lo, hi = math.log(self.lo), math.log(self.hi)
            return (math.log(max(v, 1e-300)) - lo) / (hi - lo) if hi > lo else 0.5
        return (v - self.lo) / (self.hi - self.lo) if self.hi > self.lo else 0.5

    def tick_values(self) -> list[float]:
        if self.ticks is not None:
            return [t for t in self.ticks if self.lo <= t <= self.hi]
        if self.log:
            return log2_ticks(self.lo, self.hi) if self.base2 else log10_ticks(self.lo, self.hi)
        return linear_ticks(self.lo, self.hi)


@dataclass
class Line:
    """A series: points (x, y) in data units, each with its hover text; an optional band
    (polygons in data units) and marks (x, y, text) drawn as rings."""

    name: str
    x: Sequence[float]
    y: Sequence[float | None]
    tips: Sequence[str]
    color: int = 0
    keys: Sequence[str | None] | None = None  # where each point's value is stored, if it is
    raw: Sequence[float] | None = None  # each point's value as stored (data-value)
    bands: list[list[tuple[float, float]]] = field(default_factory=list)
    marks: list[tuple[float, float, str]] = field(default_factory=list)
    dashed: bool = False
    dots_only: bool = False  # no line between points (e.g. maxima)
    steps: bool = False  # draw as steps (a CDF)
    hover: bool = True  # False: points drawn as one path, without titles (smaller)
    max_gap: float | None = None  # a step in x larger than this breaks the line (no data)


@dataclass
class Span:
    """A shaded range of x over the whole height, with a label (its class: span, gap,
    event)."""

    x0: float
    x1: float
    label: str
    cls: str = "span"


def nice_step(span: float, target: int = 6) -> float:
    raw = span / max(target, 1)
    if raw <= 0:
        return 1.0
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if m * mag >= raw:
            return m * mag
    return 10 * mag


def linear_ticks(lo: float, hi: float) -> list[float]:
    """Round numbers from lo to hi (about six)."""
    if hi <= lo:
        return [lo]
    step = nice_step(hi - lo)
    first = math.ceil(lo / step - 1e-9) * step
    out: list[float] = []
    v = first
    while v <= hi + step * 1e-9 and len(out) < 50:
        out.append(round(v, 12))
        v += step
    return out


def log10_ticks(lo: float, hi: float) -> list[float]:
    """Decades, or 1-2-5 per decade when the range is short, at most MAX_TICKS."""
    lo_k, hi_k = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    for subs in ((1.0,), (1.0, 2.0, 5.0), (1.0, 2.0, 3.0, 5.0, 7.0)):
        ticks = [m * 10.0**k for k in range(lo_k, hi_k + 1) for m in subs]
        ticks = [t for t in ticks if lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9)]
        if len(ticks) >= 3:
            step = math.ceil(len(ticks) / MAX_TICKS)
            return ticks[::step]
    return linear_ticks(lo, hi)


def log2_ticks(lo: float, hi: float) -> list[float]:
    """Powers of two from lo to hi, every k-th to keep at most MAX_TICKS."""
    first, last = math.ceil(math.log2(max(lo, 1e-300))), math.floor(math.log2(hi))
    powers = [2.0**k for k in range(first, last + 1)]
    if len(powers) < 3:
        return linear_ticks(lo, hi)
    step = math.ceil(len(powers) / MAX_TICKS)
    return [p for p in powers if round(math.log2(p)) % step == 0] or powers[::step]


def padded(lo: float, hi: float, log: bool, pad: float = 0.04) -> tuple[float, float]:
    """A data range widened a little, so that points at its ends are not on the frame."""
    if log:
        lo, hi = max(lo, 1e-300), max(hi, 1e-300)
        if hi <= lo:
            return lo / 2, hi * 2
        ratio = (hi / lo) ** pad
        return lo / ratio, hi * ratio
    if hi <= lo:
        return lo - 1, hi + 1
    width = hi - lo
    return lo - width * pad, hi + width * pad


class _Frame:
    """Data units -> pixel coordinates of the plot area."""

    def __init__(self, x: Axis, y: Axis, width: int, height: int) -> None:
        self.x, self.y = x, y
        self.left, self.top = MARGIN["left"], MARGIN["top"]
        self.w = width - MARGIN["left"] - MARGIN["right"]
        self.h = height - MARGIN["top"] - MARGIN["bottom"]

    def px(self, v: float) -> float:
        return self.left + self.x.frac(v) * self.w

    def py(self, v: float) -> float:
        return self.top + (1.0 - self.y.frac(v)) * self.h

    def clip_y(self, v: float) -> float:
        return min(max(self.py(v), self.top - 4), self.top + self.h + 4)


def _f(v: float) -> str:
    return f"{v:.1f}"


def _axes(fr: _Frame, width: int, height: int) -> list[str]:
    out = [f'<rect class="frame" x="{fr.left}" y="{fr.top}" width="{fr.w}" height="{fr.h}"/>']
    for t in fr.x.tick_values():
        px = _f(fr.px(t))
        out.append(f'<line class="grid" x1="{px}" y1="{fr.top}" x2="{px}" '
                   f'y2="{fr.top + fr.h}"/>')
        out.append(f'<text class="tick" x="{px}" y="{fr.top + fr.h + 16}" '
                   f'text-anchor="middle">{esc(fr.x.tick_text(t))}</text>')
    for t in fr.y.tick_values():
        py = _f(fr.py(t))
        out.append(f'<line class="grid" x1="{fr.left}" y1="{py}" x2="{fr.left + fr.w}" '
                   f'y2="{py}"/>')
        out.append(f'<text class="tick" x="{fr.left - 6}" y="{py}" text-anchor="end" '
                   f'dominant-baseline="middle">{esc(fr.y.tick_text(t))}</text>')
    out.append(f'<text class="label" x="{fr.left + fr.w / 2:.1f}" y="{height - 8}" '
               f'text-anchor="middle">{esc(fr.x.label)}</text>')
    out.append(f'<text class="label" transform="translate(14,{fr.top + fr.h / 2:.1f}) '
               f'rotate(-90)" text-anchor="middle">{esc(fr.y.label)}</text>')
    return out


def _spans(fr: _Frame, spans: Sequence[Span]) -> list[str]:
    """The shaded ranges (drawn under the data)."""
    out = []
    for s in spans:
        x0 = max(fr.left, fr.px(s.x0))
        width = max(min(fr.left + fr.w, fr.px(s.x1)) - x0, 2.0)
        out.append(f'<g class="{esc(s.cls)}"><rect x="{_f(x0)}" y="{fr.top}" '
                   f'width="{_f(width)}" height="{fr.h}"><title>{esc(s.label)}</title></rect>'
                   "</g>")
    return out


def _span_labels(fr: _Frame, spans: Sequence[Span]) -> list[str]:
    """Their labels, in the strip above the plot area (never over the data); a label
    that would overlap the one before is left out (its range keeps its hover title)."""
    out, taken = [], -1.0
    for s in sorted(spans, key=lambda s: s.x0):
        x0 = max(fr.left, fr.px(s.x0))
        width = 5.6 * len(s.label)  # about, at 10 px
        x = min(x0, fr.left + fr.w - width)
        if x < taken + 6:
            continue
        out.append(f'<g class="{esc(s.cls)}"><text class="spanlabel" x="{_f(x)}" '
                   f'y="{fr.top - 4}">{esc(s.label)}</text></g>')
        taken = x + width
    return out


def _path(fr: _Frame, pts: list[tuple[float, float]], steps: bool) -> str:
    if steps:
        out, prev = [], None
        for x, y in pts:
            if prev is not None:
                out.append(f"{_f(fr.px(x))},{_f(fr.clip_y(prev))}")
            out.append(f"{_f(fr.px(x))},{_f(fr.clip_y(y))}")
            prev = y
        return " ".join(out)
    return " ".join(f"{_f(fr.px(x))},{_f(fr.clip_y(y))}" for x, y in pts)


def _runs(line: Line) -> list[list[tuple[float, float]]]:
    """Stretches of consecutive points with a value (a None breaks the line)."""
    runs: list[list[tuple[float, float]]] = [[]]
    for x, y in zip(line.x, line.y, strict=True):
        if y is None or not math.isfinite(y):
            if runs[-1]:
                runs.append([])
            continue
        if runs[-1] and line.max_gap is not None and x - runs[-1][-1][0] > line.max_gap:
            runs.append([])
        runs[-1].append((x, y))
    return [r for r in runs if r]


def _tip_indices(n: int) -> set[int]:
    if n <= MAX_TIPS:
        return set(range(n))
    return {round(i * (n - 1) / (MAX_TIPS - 1)) for i in range(MAX_TIPS)}


def _dots(fr: _Frame, line: Line) -> str:
    """A line's points as one path of small circles (a line without hover points)."""
    return "".join(f"M{_f(fr.px(x) - 1.6)},{_f(fr.clip_y(y))}a1.6,1.6 0 1,0 3.2,0"
                   f"a1.6,1.6 0 1,0 -3.2,0" for x, y in zip(line.x, line.y, strict=True)
                   if y is not None and math.isfinite(y))


def _point(fr: _Frame, line: Line, i: int, x: float, y: float) -> str:
    """A hover point: its place, the value as stored and where (data-value, data-key),
    and its tip."""
    key = line.keys[i] if line.keys is not None else None
    key_attr = f' data-key="{esc(key)}"' if key else ""
    if line.raw is not None:
        key_attr += f' data-value="{line.raw[i]!r}"'
    return (f'<circle class="pt" cx="{_f(fr.px(x))}" cy="{_f(fr.clip_y(y))}" r="3" '
            f'data-x="{x:.6g}" data-y="{y:.6g}"{key_attr}><title>{esc(line.tips[i])}'
            f'</title></circle>')


def _points(fr: _Frame, line: Line) -> list[str]:
    """The hover points (at most MAX_TIPS, spread over the line) with a value."""
    shown = _tip_indices(len(line.x))
    return [_point(fr, line, i, x, y) for i, (x, y) in enumerate(zip(line.x, line.y, strict=True))
            if i in shown and y is not None and math.isfinite(y)]


def _line(fr: _Frame, line: Line) -> list[str]:
    cls = f"c{line.color % COLORS}"
    out = [f'<g class="series {cls}" data-series="{esc(line.name)}">']
    for band in line.bands:
        pts = " ".join(f"{_f(fr.px(x))},{_f(fr.clip_y(y))}" for x, y in band)
        out.append(f'<polygon class="band" points="{pts}"/>')
    if not line.dots_only:
        dash = ' stroke-dasharray="5 3"' if line.dashed else ""
        out += [f'<polyline class="line" points="{_path(fr, run, line.steps)}"{dash}/>'
                for run in _runs(line)]
    if not line.hover:
        return [*out, f'<path class="dots" d="{_dots(fr, line)}"/>', "</g>"]
    out += _points(fr, line)
    for x, y, text in line.marks:
        out.append(f'<circle class="mark" cx="{_f(fr.px(x))}" cy="{_f(fr.clip_y(y))}" r="8">'
                   f'<title>{esc(text)}</title></circle>')
    out.append("</g>")
    return out


def chart(title: str, x: Axis, y: Axis, lines: Sequence[Line], spans: Sequence[Span] = (),
          width: int = WIDTH, height: int = HEIGHT, note: str | None = None) -> Markup:
    """The SVG of one chart (``note`` is written in the plot area when nothing is drawn)."""
    fr = _Frame(x, y, width, height)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {width} '
             f'{height}" role="img" aria-label="{esc(title)}">',
             f"<title>{esc(title)}</title>",
             f'<text class="title" x="{width / 2:.0f}" y="18" text-anchor="middle">'
             f"{esc(title)}</text>"]
    parts += _axes(fr, width, height)
    parts += _spans(fr, spans)
    for line in lines:
        parts += _line(fr, line)
    parts += _span_labels(fr, spans)
    if note:
        parts.append(f'<text class="note" x="{fr.left + fr.w / 2:.0f}" '
                     f'y="{fr.top + fr.h / 2:.0f}" text-anchor="middle">{esc(note)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def legend(lines: Sequence[Line], extra: Sequence[tuple[str, str]] = ()) -> Markup:
    """The legend as HTML (swatch in the line's colour, its name), then ``extra`` entries
    (css class of the swatch, text) for bands and spans."""
    items = [tag("li", join([Markup(f'<span class="sw c{ln.color % COLORS}"></span>'),
                             esc(ln.name)])) for ln in lines]
    items += [tag("li", join([Markup(f'<span class="sw {esc(cls)}"></span>'), esc(text)]))
              for cls, text in extra]
    return tag("ul", join(items), class_="legend")


def bars(title: str, labels: Sequence[str], values: Sequence[float], unit_label: str,
         tips: Sequence[str], value_text: Callable[[float], str],
         keys: Sequence[str | None] | None = None, width: int = WIDTH) -> Markup:
    """A horizontal bar chart (one bar per label), values from 0; each bar has its title."""
    row_h, left = 22, 230
    height = MARGIN["top"] + row_h * len(labels) + 40
    top = max(values, default=0.0) or 1.0
    span = width - left - 90
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart bars" viewBox="0 0 {width} '
             f'{height}" role="img" aria-label="{esc(title)}">', f"<title>{esc(title)}</title>",
             f'<text class="title" x="{width / 2:.0f}" y="18" text-anchor="middle">'
             f"{esc(title)}</text>"]
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        y0 = MARGIN["top"] + i * row_h
        w = max(value / top * span, 1.0)
        key = keys[i] if keys is not None else None
        key_attr = f' data-key="{esc(key)}"' if key else ""
        short = label if len(label) <= 36 else label[:35] + "…"
        parts.append(f'<text class="tick" x="{left - 6}" y="{y0 + row_h / 2:.1f}" '
                     f'text-anchor="end" dominant-baseline="middle">{esc(short)}</text>')
        parts.append(f'<rect class="bar c{i % COLORS}" x="{left}" y="{y0 + 3}" width="{w:.1f}" '
                     f'height="{row_h - 6}" data-value="{value!r}"{key_attr}>'
                     f"<title>{esc(tips[i])}</title></rect>")
        parts.append(f'<text class="tick" x="{left + w + 4:.1f}" y="{y0 + row_h / 2:.1f}" '
                     f'dominant-baseline="middle">{esc(value_text(value))}</text>')
    parts.append(f'<text class="label" x="{left + span / 2:.0f}" y="{height - 8}" '
                 f'text-anchor="middle">{esc(unit_label)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def empty(title: str, text: str, width: int = WIDTH, height: int = 120) -> Markup:
    """A chart that has nothing to draw says so (never a blank)."""
    return Markup(f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {width} '
                  f'{height}" role="img" aria-label="{esc(title)}"><title>{esc(title)}</title>'
                  f'<text class="title" x="{width / 2:.0f}" y="18" text-anchor="middle">'
                  f'{esc(title)}</text><text class="note" x="{width / 2:.0f}" y="70" '
                  f'text-anchor="middle">{esc(text)}</text></svg>')

"""The three graphs of a cluster interconnect study, one curve per run.

- throughput: throughput against message size (NetPIPE's main graph);
- signature: throughput against one-way time; the first point is the latency;
- saturation: one-way time against message size, log-log; past the
  saturation point time grows linearly with size.

In stream mode a sample is the time per message of messages sent back to back, not a
one-way time, and its first point no latency: the titles and axes say "time per message"
(``time_label``).

Curves use each size's central statistic (the median for beoperf runs,
whatever the source has for imports). The band spans the one-way time from
the minimum to the 90th percentile where the result stores them: on the
signature graph it is the polygon between the curve of the minimum times and
that of the 90th percentiles (each size's point moves along its own
size/time hyperbola between the two). The saturation point and the
throughput collapses come from `beoperf.analysis.curve.analyze_run`: the
point is marked in its curve's colour, with a marker shape of its own so
that points that coincide stay distinguishable, and its size is written in
the legend next to the run's name; a collapse is a shaded span in the curve's
colour, labelled with its factor.

Reading: throughput is in Gbit/s (10^9 bit/s) when the largest throughput
of the runs drawn reaches GBIT_FROM_MBPS, in Mbit/s (10^6 bit/s) otherwise,
the same on both throughput graphs; time ticks carry their own unit (ns, µs,
ms, s); log axes carry at least MIN_LOG_TICKS labelled ticks. The legend sits
beside the axes, never over the data, and the constrained layout engine keeps
every label inside the figure (it costs about 0.1 s a figure, measured).

Figures are built with matplotlib's object API (no pyplot global state) and
written with the Agg renderer, so no display is needed.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.legend_handler import HandlerTuple
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullFormatter

from beoperf.analysis.curve import Collapse, analyze_run, time_name
from beoperf.model.pingpong import RunResult, SizeResult

if TYPE_CHECKING:
    from matplotlib.typing import ColorType

FIGSIZE = (8.0, 5.0)  # inches: the axes and their labels; the legend adds LEGEND_WIDTH
LEGEND_WIDTH_PER_CHAR = 0.075  # inches per character of the longest legend line (8 pt)
MAX_LEGEND_WIDTH = 4.5  # inches
DPI = 120
FORMATS = ("png", "svg")
SIZE_LABEL = "message size (bytes)"
TIME_LABEL = "one-way time"  # the ticks carry the unit
GBIT_FROM_MBPS = 1000.0
BAND_ALPHA = 0.2
COLLAPSE_ALPHA = 0.12
MIN_LOG_TICKS = 4
MAX_LOG_TICKS = 12
SATURATION_GID = "saturation"
BAND_GID = "band"
COLLAPSE_GID = "collapse"
SATURATION_MARKERS = ("o", "s", "D", "^", "v", "p", "h", "<", ">", "8")


@dataclass(frozen=True)
class Series:
    """What the graphs need of one run, sizes ascending, positive values only."""

    sizes: np.ndarray  # bytes
    time_us: np.ndarray  # central one-way time
    mbps: np.ndarray  # central throughput, 10^6 bit/s
    band_us: tuple[np.ndarray, np.ndarray] | None  # one-way time min, p90
    saturation: int | None  # saturation size (bytes), if the analysis finds one
    collapses: list[Collapse] = field(default_factory=list)

    def mbps_at(self, time_us: np.ndarray) -> np.ndarray:
        """Throughput for other one-way times at the same sizes (keeps bidir's factor 2)."""
        return self.mbps * self.time_us / time_us

    def saturation_index(self) -> int | None:
        """Index of the saturation size in `sizes`, or None."""
        hits = np.nonzero(self.sizes == self.saturation)[0]
        return int(hits[0]) if self.saturation is not None and hits.size else None

    def collapsed(self, c: Collapse) -> np.ndarray:
        """Mask of the sizes in a collapse."""
        return (self.sizes >= c.first_size) & (self.sizes <= c.last_size)


def _band(rows: list[SizeResult]) -> tuple[np.ndarray, np.ndarray] | None:
    """The min and p90 times of the sizes, or None unless every size has both."""
    if not rows or not all(_has_band(s.time_us) for s in rows):
        return None
    return (np.array([s.time_us["min"] for s in rows], dtype=float),
            np.array([s.time_us["p90"] for s in rows], dtype=float))


def series(run: RunResult) -> Series:
    """Extract the plotted arrays of a run; the band is None unless every size has it."""
    rows = [s for s in run.sizes if s.size > 0 and s.central_time_us() > 0]
    # empty messages (size 0) have no place on a log axis and no throughput: left out,
    # they do not cost the curve its analysis as a size with a bad time does
    dropped = any(s.size > 0 and not s.central_time_us() > 0 for s in run.sizes)
    band = _band(rows)
    analysis = analyze_run(run) if rows and not dropped else None
    return Series(sizes=np.array([s.size for s in rows], dtype=float),
                  time_us=np.array([s.central_time_us() for s in rows]),
                  mbps=np.array([s.central_bps() / 1e6 for s in rows]),
                  band_us=band, saturation=analysis.saturation_size if analysis else None,
                  collapses=list(analysis.collapses) if analysis else [])


def _has_band(time_us: dict[str, float | None]) -> bool:
    lo, hi = time_us.get("min"), time_us.get("p90")
    return lo is not None and hi is not None and 0 < lo <= hi


# --- units and ticks -----------------------------------------------------------------------

def size_text(n: float, _pos: object = None) -> str:
    """Tick text for a byte count: 512, 1K, 64K, 8M (K = 1024, as --sizes reads it)."""
    for unit, scale in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if n >= scale and n % scale == 0:
            return f"{int(n // scale)}{unit}"
    return f"{n:g}"


def time_text(us: float, _pos: object = None) -> str:
    """Tick text for a time in microseconds, in the unit that fits: 500 ns, 20 µs, 1.5 ms."""
    for unit, scale in (("s", 1e6), ("ms", 1e3), ("µs", 1.0)):
        if us >= scale:
            return f"{us / scale:.4g} {unit}"
    return f"{us * 1e3:.4g} ns"


def throughput_unit(top_mbps: float) -> tuple[str, float]:
    """(unit, Mbit/s per unit) for throughputs up to top_mbps: Gbit/s from GBIT_FROM_MBPS."""
    return ("Gbit/s", 1e3) if top_mbps >= GBIT_FROM_MBPS else ("Mbit/s", 1.0)


def throughput_label(unit: str) -> str:
    """Axis label naming the unit and that it is SI (10^6 or 10^9 bit/s)."""
    return f"throughput ({unit}, 10^{9 if unit == 'Gbit/s' else 6} bit/s)"


def _decade_ticks(lo: float, hi: float, subs: Sequence[float]) -> list[float]:
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    ticks = [m * 10.0**k for k in range(first, last + 1) for m in subs]
    return [t for t in ticks if lo <= t <= hi]


def log10_ticks(lo: float, hi: float) -> list[float]:
    """At least MIN_LOG_TICKS ticks in [lo, hi]: decades, then 1-2-5, then 1..9 per decade,
    then evenly spaced round numbers; at most MAX_LOG_TICKS (every other decade if needed)."""
    for subs in ((1.0,), (1.0, 2.0, 5.0), tuple(float(m) for m in range(1, 10))):
        ticks = _decade_ticks(lo, hi, subs)
        if len(ticks) >= MIN_LOG_TICKS:
            step = math.ceil(len(ticks) / MAX_LOG_TICKS) if len(subs) == 1 else 1
            return ticks[::step]
    return _linear_ticks(lo, hi)


def log2_ticks(lo: float, hi: float) -> list[float]:
    """Whole byte counts in [lo, hi]: powers of two (every k-th when there are more than
    MAX_LOG_TICKS), with 1.5 x 2^k added, then evenly spaced whole numbers, until there
    are MIN_LOG_TICKS."""
    first, last = math.ceil(math.log2(max(lo, 1.0))), math.floor(math.log2(hi))
    powers = [2.0**k for k in range(first, last + 1)]
    if len(powers) >= MIN_LOG_TICKS:
        step = math.ceil(len(powers) / MAX_LOG_TICKS)
        return [p for p in powers if round(math.log2(p)) % step == 0] or powers[::step]
    halves = sorted(p for k in range(first - 1, last + 1) for p in (2.0**k, 1.5 * 2.0**k)
                    if lo <= p <= hi and p == int(p))
    return halves if len(halves) >= MIN_LOG_TICKS else _linear_ticks(lo, hi, whole=True)


def _linear_ticks(lo: float, hi: float, whole: bool = False) -> list[float]:
    """Round numbers in a narrow range (where powers are too sparse to label it); whole
    numbers only for bytes, so a range holding fewer than 4 of them gets fewer ticks."""
    ticks = MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10], integer=whole).tick_values(lo, hi)
    return [float(t) for t in ticks if lo <= t <= hi and t > 0]


LOG2 = {"value": "log", "base": 2}  # the byte axes
LOG10 = {"value": "log"}  # the time axes


def _set_log_ticks(ax: Axes, which: str, ticks: Callable[[float, float], list[float]],
                   text: Callable[[float, object], str]) -> None:
    """Label ticks chosen for the final view limits (call once all the data is drawn)."""
    lo, hi = sorted(ax.get_xlim() if which == "x" else ax.get_ylim())
    axis = ax.xaxis if which == "x" else ax.yaxis
    axis.set_major_locator(FixedLocator(ticks(max(lo, 1e-300), hi)))
    axis.set_major_formatter(FuncFormatter(text))
    axis.set_minor_formatter(NullFormatter())
    (ax.set_xlim if which == "x" else ax.set_ylim)(lo, hi)  # as they were: the ticks fit them


def _size_ticks(ax: Axes, which: str = "x") -> None:
    """Byte ticks written 1K, 1M on a log2 axis."""
    _set_log_ticks(ax, which, log2_ticks, size_text)


def _time_ticks(ax: Axes, which: str) -> None:
    """Time ticks, each in the unit that fits it (1 µs, 10 µs, 1 ms), on a log10 axis."""
    _set_log_ticks(ax, which, log10_ticks, time_text)


def _throughput_y(ax: Axes, unit: str, scale: float) -> None:
    """A linear axis from 0 in the unit chosen for all the graphs of these runs."""
    ax.set_ylabel(throughput_label(unit))
    ax.yaxis.set_major_formatter(FuncFormatter(
        lambda v, _pos: f"{v / scale:,.0f}" if scale == 1.0 else f"{v / scale:g}"))
    ax.set_ylim(bottom=0)


# --- drawing -------------------------------------------------------------------------------

@dataclass
class Curve:
    """One drawn run: its data, legend handle and label, and its colour."""

    series: Series
    label: str
    color: ColorType  # as matplotlib gave the line (a name or an RGB tuple)
    handle: object
    marker: str


def _new_axes(title: str, xlabel: str, ylabel: str, width: float, xscale: dict | None,
              yscale: dict | None) -> tuple[Figure, Axes]:
    fig = Figure(figsize=(width, FIGSIZE[1]), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if xscale:
        ax.set_xscale(**xscale)
    if yscale:
        ax.set_yscale(**yscale)
    ax.grid(True, which="major", alpha=0.5)
    ax.grid(True, which="minor", alpha=0.15)
    return fig, ax


def _mark_saturation(ax: Axes, x: float, y: float, curve: Curve) -> None:
    """The saturation point in the curve's colour and its own marker shape."""
    ax.scatter([x], [y], s=110, marker=curve.marker, facecolors="none",
               edgecolors=curve.color, linewidths=1.8, zorder=5, gid=SATURATION_GID,
               label="_nolegend_")


def _legend_entry(curve: Curve) -> tuple[object, str]:
    """The run's line with its saturation marker on it, and its name (and saturation)."""
    s = curve.series
    if s.saturation_index() is None:
        return curve.handle, curve.label
    marker = Line2D([], [], linestyle="none", marker=curve.marker, markersize=9,
                    markerfacecolor="none", markeredgecolor=curve.color, markeredgewidth=1.8)
    return (curve.handle, marker), f"{curve.label}\nsaturation {s.saturation} B"


def _legend(ax: Axes, curves: Sequence[Curve], runs: Sequence[RunResult]) -> None:
    """Beside the axes: the runs (with their saturation), then what band, span and line are."""
    entries = [_legend_entry(c) for c in curves]
    handles: list[Any] = [h for h, _ in entries]
    labels = [label for _, label in entries]
    if any(c.series.band_us is not None for c in curves):
        handles.append(Patch(facecolor="grey", alpha=BAND_ALPHA))
        labels.append(f"band: {time_label(runs)} min..p90")
    if any(c.series.collapses for c in curves):
        handles.append(Patch(facecolor="grey", alpha=COLLAPSE_ALPHA * 2, hatch="//"))
        labels.append("throughput collapse")
    handles.append(Line2D([], [], color="grey"))
    labels.append(f"line: {central_statistic(runs)}")
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8,
              framealpha=0.9, borderaxespad=0.0, handler_map={tuple: HandlerTuple(ndivide=1)})


def _legend_width(labels: Sequence[str], runs: Sequence[RunResult]) -> float:
    """Inches the legend needs beside the axes (an estimate; the layout engine adjusts)."""
    lines = [line for text in [*labels, f"line: {central_statistic(runs)}"]
             for line in text.split("\n")]
    chars = max(len(line) for line in lines)
    return min(MAX_LEGEND_WIDTH, 0.6 + LEGEND_WIDTH_PER_CHAR * chars)


def central_statistic(runs: Sequence[RunResult]) -> str:
    """What the curves show: the median, unless some import only has another figure."""
    what = time_label(runs)
    if all(s.time_us.get("median") is not None for run in runs for s in run.sizes):
        return f"median {what}"
    return f"median {what} (imports: the source's figure)"


def time_label(runs: Sequence[RunResult]) -> str:
    """What the time axis shows: "time per message" when every run is a stream (no
    latency in it), "one-way time" when none is, both names when they are mixed."""
    modes = {run.parameters.get("mode") == "stream" for run in runs}
    if modes == {True}:
        return time_name("stream")
    return TIME_LABEL if modes != {True, False} else f"{TIME_LABEL} or time per message"


def _mark_collapses(ax: Axes, curve: Curve, spans: list[tuple[float, float]],
                    factors: list[float], slot: int, named: bool) -> int:
    """Shade each collapse's span in the curve's colour and label it with its factor (and
    the run's name when there are several); labels of successive collapses go one line
    lower each, so they never overlap. Returns the next free line."""
    xmin, xmax = ax.get_xlim()
    name = f"{curve.label}: " if named else ""
    for (lo, hi), factor in zip(spans, factors, strict=True):
        ax.axvspan(lo, hi, color=curve.color, alpha=COLLAPSE_ALPHA, hatch="//", linewidth=0,
                   gid=COLLAPSE_GID)
        left = math.log(lo / xmin) / math.log(xmax / xmin)  # both collapse axes are log in x
        x, ha = (lo, "left") if left < 0.55 else (hi, "right")
        ax.text(x, 0.97 - 0.065 * slot, f"{name}throughput collapse 1/{factor:.0f}",
                transform=ax.get_xaxis_transform(), ha=ha, va="top", fontsize=8,
                color=curve.color, gid=COLLAPSE_GID,
                bbox={"boxstyle": "round,pad=0.2", "facecolor": "white",
                      "edgecolor": curve.color, "alpha": 0.85})
        slot += 1
    return slot


def _size_spans(s: Series) -> list[tuple[float, float]]:
    """Each collapse from half-way (in log size) to its healthy neighbours."""
    spans = []
    for c in s.collapses:
        idx = np.nonzero(s.collapsed(c))[0]
        i, j = int(idx[0]), int(idx[-1])
        lo = math.sqrt(s.sizes[i - 1] * s.sizes[i]) if i > 0 else s.sizes[i]
        hi = math.sqrt(s.sizes[j] * s.sizes[j + 1]) if j + 1 < len(s.sizes) else s.sizes[j]
        spans.append((float(lo), float(hi)))
    return spans


def _time_spans(s: Series) -> list[tuple[float, float]]:
    """Each collapse over the one-way times of its sizes (a little wider to be seen)."""
    return [(float(s.time_us[s.collapsed(c)].min()) / 1.15,
             float(s.time_us[s.collapsed(c)].max()) * 1.15) for c in s.collapses]


Draw = Callable[[Axes, Series, str, str], Curve]


@dataclass(frozen=True)
class Kind:
    """What differs between the three graphs."""

    title: str
    xlabel: str
    ylabel: str
    draw: Draw
    spans: Callable[[Series], list[tuple[float, float]]]  # collapses, in x
    xscale: dict | None = None
    yscale: dict | None = None


def _figure(runs: Sequence[RunResult], labels: Sequence[str], kind: Kind) -> Figure:
    """One figure, one curve per run via kind.draw, then collapses and the legend."""
    if len(runs) != len(labels):
        raise ValueError(f"{len(runs)} run(s) but {len(labels)} label(s)")
    data = [series(run) for run in runs]
    entries = [*labels, *(f"saturation {s.saturation} B" for s in data)]
    fig, ax = _new_axes(kind.title, kind.xlabel, kind.ylabel,
                        FIGSIZE[0] + _legend_width(entries, runs), kind.xscale, kind.yscale)
    curves = [kind.draw(ax, s, label, SATURATION_MARKERS[k % len(SATURATION_MARKERS)])
              for k, (s, label) in enumerate(zip(data, labels, strict=True))]
    slot = 0
    for curve in curves:
        slot = _mark_collapses(ax, curve, kind.spans(curve.series),
                               [c.factor for c in curve.series.collapses], slot, len(runs) > 1)
    _legend(ax, curves, runs)
    return fig


def _curve(ax: Axes, x: np.ndarray, y: np.ndarray, s: Series, label: str,
           marker: str) -> Curve:
    """Plot the central curve and ring its saturation point; the Curve drawn."""
    (line,) = ax.plot(x, y, marker=".", markersize=4, label=label)
    curve = Curve(series=s, label=label, color=line.get_color(), handle=line, marker=marker)
    i = s.saturation_index()
    if i is not None:
        _mark_saturation(ax, x[i], y[i], curve)
    return curve


def _draw_throughput(ax: Axes, s: Series, label: str, marker: str) -> Curve:
    curve = _curve(ax, s.sizes, s.mbps, s, label, marker)
    if s.band_us is not None:
        ax.fill_between(s.sizes, s.mbps_at(s.band_us[1]), s.mbps_at(s.band_us[0]),
                        color=curve.color, alpha=BAND_ALPHA, linewidth=0, gid=BAND_GID)
    return curve


def _draw_signature(ax: Axes, s: Series, label: str, marker: str) -> Curve:
    curve = _curve(ax, s.time_us, s.mbps, s, label, marker)
    if s.band_us is not None:
        ax.add_collection(PolyCollection(signature_band(s, s.band_us), facecolors=curve.color,
                                         alpha=BAND_ALPHA, linewidths=0, gid=BAND_GID),
                          autolim=True)
    return curve


def signature_band(s: Series, band_us: tuple[np.ndarray, np.ndarray]) -> list[np.ndarray]:
    """The band as polygons in (time, throughput): along the points at the minimum times
    (fastest: left and up) and back along those at the 90th percentiles. One polygon per
    stretch of healthy or collapsed sizes: a band bridging a collapse would paint the
    empty plane between microseconds and the stalls' milliseconds."""
    fast = np.column_stack([band_us[0], s.mbps_at(band_us[0])])
    slow = np.column_stack([band_us[1], s.mbps_at(band_us[1])])
    inside = np.zeros(len(s.sizes), dtype=bool)
    for c in s.collapses:
        inside |= s.collapsed(c)
    cuts = [0, *(np.nonzero(inside[1:] != inside[:-1])[0] + 1), len(s.sizes)]
    return [np.concatenate([fast[a:b], slow[a:b][::-1]])
            for a, b in zip(cuts, cuts[1:], strict=False) if b > a]


def _draw_saturation(ax: Axes, s: Series, label: str, marker: str) -> Curve:
    curve = _curve(ax, s.sizes, s.time_us, s, label, marker)
    if s.band_us is not None:
        ax.fill_between(s.sizes, s.band_us[0], s.band_us[1], color=curve.color,
                        alpha=BAND_ALPHA, linewidth=0, gid=BAND_GID)
    return curve


def _unit(runs: Sequence[RunResult]) -> tuple[str, float]:
    """The throughput unit of these runs' graphs, from the largest central throughput."""
    top = max((s.central_bps() / 1e6 for run in runs for s in run.sizes), default=0.0)
    return throughput_unit(top)


def throughput_figure(runs: Sequence[RunResult], labels: Sequence[str]) -> Figure:
    """Throughput (linear) against message size (bytes, log2)."""
    unit, scale = _unit(runs)
    fig = _figure(runs, labels, Kind("Throughput against message size", SIZE_LABEL,
                                     throughput_label(unit), _draw_throughput, _size_spans,
                                     xscale=LOG2))
    ax = fig.axes[0]
    _throughput_y(ax, unit, scale)
    _size_ticks(ax, "x")
    return fig


def signature_figure(runs: Sequence[RunResult], labels: Sequence[str]) -> Figure:
    """Throughput (linear) against one-way time (log); first point = latency."""
    unit, scale = _unit(runs)
    what = time_label(runs)
    first = "latency" if what == TIME_LABEL else "the smallest size"
    fig = _figure(runs, labels, Kind(f"Signature: throughput against {what} "
                                     f"(first point = {first})", what,
                                     throughput_label(unit), _draw_signature, _time_spans,
                                     xscale=LOG10))
    ax = fig.axes[0]
    _throughput_y(ax, unit, scale)
    _time_ticks(ax, "x")
    return fig


def saturation_figure(runs: Sequence[RunResult], labels: Sequence[str]) -> Figure:
    """One-way time against message size (bytes), log-log, saturation points marked."""
    what = time_label(runs)
    fig = _figure(runs, labels, Kind(f"Saturation: {what} against message size",
                                     SIZE_LABEL, what, _draw_saturation, _size_spans,
                                     xscale=LOG2, yscale=LOG10))
    ax = fig.axes[0]
    _size_ticks(ax, "x")
    _time_ticks(ax, "y")
    return fig


FIGURES: dict[str, Callable[[Sequence[RunResult], Sequence[str]], Figure]] = {
    "throughput": throughput_figure,
    "signature": signature_figure,
    "saturation": saturation_figure,
}


def figure_files(runs: Sequence[RunResult], labels: Sequence[str],
                 fmt: str = "png") -> dict[str, bytes]:
    """{"throughput.png": bytes, "signature.png": ..., "saturation.png": ...}: the three
    graphs as files to write (the caller writes them, through safeio)."""
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r}: expected one of {', '.join(FORMATS)}")
    files = {}
    for name, build in FIGURES.items():
        stream = io.BytesIO()
        build(runs, labels).savefig(stream, format=fmt)
        files[f"{name}.{fmt}"] = stream.getvalue()
    return files

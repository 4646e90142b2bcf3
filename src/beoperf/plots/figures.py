"""The three graphs of a cluster interconnect study, one curve per run.

- throughput: throughput against message size (NetPIPE's main graph);
- signature: throughput against one-way time; the first point is the latency;
- saturation: one-way time against message size, log-log; past the
  saturation point time grows linearly with size.

Curves use each size's central statistic (the median for beoperf runs,
whatever the source has for imports); the band spans the one-way time from
the minimum to the 90th percentile where the result stores them. The
saturation point comes from `beoperf.analysis.curve.analyze_run`.

Figures are built with matplotlib's object API (no pyplot global state) and
written with the Agg renderer, so no display is needed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from beoperf.analysis.curve import analyze_run
from beoperf.results.model import RunResult

FIGSIZE = (8.0, 5.0)  # inches
DPI = 120
FORMATS = ("png", "svg")
SIZE_LABEL = "message size (bytes)"
THROUGHPUT_LABEL = "throughput (Mbit/s, 10^6 bit/s)"
TIME_LABEL = "one-way time (µs)"
BAND_ALPHA = 0.2
SATURATION_GID = "saturation"
BAND_GID = "band"


@dataclass(frozen=True)
class Series:
    """What the graphs need of one run, sizes ascending, positive values only."""

    sizes: np.ndarray  # bytes
    time_us: np.ndarray  # central one-way time
    mbps: np.ndarray  # central throughput, 10^6 bit/s
    band_us: tuple[np.ndarray, np.ndarray] | None  # one-way time min, p90
    saturation: int | None  # saturation size (bytes), if the analysis finds one

    def mbps_at(self, time_us: np.ndarray) -> np.ndarray:
        """Throughput for other one-way times at the same sizes (keeps bidir's factor 2)."""
        return self.mbps * self.time_us / time_us

    def saturation_index(self) -> int | None:
        """Index of the saturation size in `sizes`, or None."""
        hits = np.nonzero(self.sizes == self.saturation)[0]
        return int(hits[0]) if self.saturation is not None and hits.size else None


def series(run: RunResult) -> Series:
    """Extract the plotted arrays of a run; the band is None unless every size has it."""
    rows = [s for s in run.sizes if s.size > 0 and s.central_time_us() > 0]
    band = None
    if rows and all(_has_band(s.time_us) for s in rows):
        band = (np.array([float(s.time_us["min"]) for s in rows]),
                np.array([float(s.time_us["p90"]) for s in rows]))
    analysis = analyze_run(run) if rows and len(rows) == len(run.sizes) else None
    return Series(sizes=np.array([s.size for s in rows], dtype=float),
                  time_us=np.array([s.central_time_us() for s in rows]),
                  mbps=np.array([s.central_bps() / 1e6 for s in rows]),
                  band_us=band, saturation=analysis.saturation_size if analysis else None)


def _has_band(time_us: dict[str, float | None]) -> bool:
    lo, hi = time_us.get("min"), time_us.get("p90")
    return lo is not None and hi is not None and 0 < lo <= hi


def size_text(n: float, _pos: object = None) -> str:
    """Tick text for a byte count: 512, 1K, 64K, 8M (K = 1024, as --sizes reads it)."""
    for unit, scale in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if n >= scale and n % scale == 0:
            return f"{int(n // scale)}{unit}"
    return f"{n:g}"


def _size_axis(ax: Axes, axis: str = "x") -> None:
    """Log2 byte axis with power-of-two ticks written 1K, 1M."""
    target = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log", base=2)
    target.set_major_locator(LogLocator(base=2, numticks=12))
    target.set_major_formatter(FuncFormatter(size_text))
    target.set_minor_formatter(NullFormatter())


def _time_axis(ax: Axes, axis: str) -> None:
    """Log10 microsecond axis with plain numbers (1, 10, 100) rather than powers."""
    target = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    target.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))


INSIDE_LEGEND_MAX = 4
MARGINS = {"left": 0.1, "right": 0.97, "bottom": 0.11, "top": 0.92}
OUTSIDE_LEGEND_WIDTH = 3.6  # inches added for a legend beside the axes


def _new_axes(title: str, xlabel: str, ylabel: str) -> tuple[Figure, Axes]:
    fig = Figure(figsize=FIGSIZE, dpi=DPI)  # fixed margins: a layout engine costs ~0.3 s
    fig.subplots_adjust(**MARGINS)
    ax = fig.add_subplot()
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.5)
    ax.grid(True, which="minor", alpha=0.15)
    return fig, ax


def _mark_saturation(ax: Axes, x: float, y: float, first: bool) -> None:
    """A ring around the saturation point; one legend entry for all runs."""
    ax.scatter([x], [y], s=130, facecolors="none", edgecolors="black", linewidths=1.6,
               zorder=5, gid=SATURATION_GID, label="saturation point" if first else "_nolegend_")


def _finish(ax: Axes, banded: bool, runs: Sequence[RunResult], loc: str) -> None:
    """Legend: the runs, then the saturation ring if drawn, the band and the line."""
    handles, labels = ax.get_legend_handles_labels()
    order = sorted(range(len(handles)), key=lambda i: not isinstance(handles[i], Line2D))
    handles, labels = [handles[i] for i in order], [labels[i] for i in order]
    if banded:
        handles.append(Patch(facecolor="grey", alpha=BAND_ALPHA))
        labels.append("band: one-way time min..p90")
    handles.append(Line2D([], [], color="grey"))
    labels.append(f"line: {central_statistic(runs)}")
    if len(runs) > INSIDE_LEGEND_MAX:  # many curves: beside the axes, not over the data
        width, height = FIGSIZE
        ax.figure.set_size_inches(width + OUTSIDE_LEGEND_WIDTH, height)
        ax.figure.subplots_adjust(right=width * MARGINS["right"] / (width + OUTSIDE_LEGEND_WIDTH))
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8,
                  framealpha=0.9)
    else:
        ax.legend(handles, labels, loc=loc, fontsize=9, framealpha=0.9)


def central_statistic(runs: Sequence[RunResult]) -> str:
    """What the curves show: the median, unless some import only has another figure."""
    if all(s.time_us.get("median") is not None for run in runs for s in run.sizes):
        return "median one-way time"
    return "median one-way time (imports: the source's figure)"


Draw = Callable[[Axes, Series, str, bool], bool]


def _figure(runs: Sequence[RunResult], labels: Sequence[str], axes: tuple[str, str, str],
            draw: Draw, loc: str = "upper left") -> Figure:
    """One figure, one curve per run via `draw` (which says whether it drew a band)."""
    if len(runs) != len(labels):
        raise ValueError(f"{len(runs)} run(s) but {len(labels)} label(s)")
    fig, ax = _new_axes(*axes)
    banded, marked = False, False
    for run, label in zip(runs, labels, strict=True):
        s = series(run)
        banded |= draw(ax, s, label, not marked)
        marked |= s.saturation_index() is not None
    _finish(ax, banded, runs, loc)
    return fig


def _draw_throughput(ax: Axes, s: Series, label: str, first_mark: bool) -> bool:
    (line,) = ax.plot(s.sizes, s.mbps, marker=".", markersize=4, label=label)
    if s.band_us is not None:
        ax.fill_between(s.sizes, s.mbps_at(s.band_us[1]), s.mbps_at(s.band_us[0]),
                        color=line.get_color(), alpha=BAND_ALPHA, linewidth=0, gid=BAND_GID)
    i = s.saturation_index()
    if i is not None:
        _mark_saturation(ax, s.sizes[i], s.mbps[i], first_mark)
    return s.band_us is not None


def _draw_signature(ax: Axes, s: Series, label: str, first_mark: bool) -> bool:
    (line,) = ax.plot(s.time_us, s.mbps, marker=".", markersize=4, label=label)
    if s.band_us is not None:
        ax.add_collection(LineCollection(_signature_spans(s, s.band_us), colors=line.get_color(),
                                         alpha=BAND_ALPHA, linewidths=6, capstyle="round",
                                         gid=BAND_GID), autolim=True)
    i = s.saturation_index()
    if i is not None:
        _mark_saturation(ax, s.time_us[i], s.mbps[i], first_mark)
    return s.band_us is not None


def _signature_spans(s: Series, band_us: tuple[np.ndarray, np.ndarray],
                     steps: int = 8) -> list[np.ndarray]:
    """Per size, where the point lies for times min..p90: a piece of size/time hyperbola.

    Time is not monotonic in size on a noisy path, so a filled band between
    consecutive points would be meaningless here; each point gets its own span.
    """
    spans = []
    for k, (lo, hi) in enumerate(zip(*band_us, strict=True)):
        times = np.geomspace(lo, hi, steps)
        spans.append(np.column_stack([times, s.mbps[k] * s.time_us[k] / times]))
    return spans


def _draw_saturation(ax: Axes, s: Series, label: str, first_mark: bool) -> bool:
    (line,) = ax.plot(s.sizes, s.time_us, marker=".", markersize=4, label=label)
    color = line.get_color()
    if s.band_us is not None:
        ax.fill_between(s.sizes, s.band_us[0], s.band_us[1], color=color, alpha=BAND_ALPHA,
                        linewidth=0, gid=BAND_GID)
    i = s.saturation_index()
    if i is not None:
        _mark_saturation(ax, s.sizes[i], s.time_us[i], first_mark)
        _annotate_saturation(ax, s, i, color)
    return s.band_us is not None


def _annotate_saturation(ax: Axes, s: Series, i: int, color: str) -> None:
    """'saturation N B' just below and right of the ring (below a rising curve),
    or left of it when the point is among the last sizes."""
    right = i < len(s.sizes) - 3
    ax.annotate(f"saturation {int(s.sizes[i])} B", xy=(s.sizes[i], s.time_us[i]),
                xytext=(10 if right else -10, -10), textcoords="offset points",
                ha="left" if right else "right", va="top", color=color, fontsize=9,
                bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": color,
                      "alpha": 0.85})


def _throughput_y(ax) -> None:
    """Mbit/s on a linear axis from 0, with thousands separators."""
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}"))
    ax.set_ylim(bottom=0)


def throughput_figure(runs: Sequence[RunResult], labels: Sequence[str]) -> Figure:
    """Throughput (Mbit/s, linear) against message size (bytes, log2)."""
    fig = _figure(runs, labels, ("Throughput against message size", SIZE_LABEL,
                                 THROUGHPUT_LABEL), _draw_throughput, "best")
    _size_axis(fig.axes[0], "x")
    _throughput_y(fig.axes[0])
    return fig


def signature_figure(runs: Sequence[RunResult], labels: Sequence[str]) -> Figure:
    """Throughput (Mbit/s, linear) against one-way time (µs, log); first point = latency."""
    fig = _figure(runs, labels, ("Signature: throughput against one-way time "
                                 "(first point = latency)", TIME_LABEL, THROUGHPUT_LABEL),
                  _draw_signature, "best")
    _time_axis(fig.axes[0], "x")
    _throughput_y(fig.axes[0])
    return fig


def saturation_figure(runs: Sequence[RunResult], labels: Sequence[str]) -> Figure:
    """One-way time (µs) against message size (bytes), log-log, saturation point annotated."""
    fig = _figure(runs, labels, ("Saturation: one-way time against message size",
                                 SIZE_LABEL, TIME_LABEL), _draw_saturation)
    ax = fig.axes[0]
    _size_axis(ax, "x")
    _time_axis(ax, "y")
    return fig


FIGURES: dict[str, Callable[[Sequence[RunResult], Sequence[str]], Figure]] = {
    "throughput": throughput_figure,
    "signature": signature_figure,
    "saturation": saturation_figure,
}


def write_figures(runs: Sequence[RunResult], labels: Sequence[str], outdir: Path,
                  fmt: str = "png") -> list[Path]:
    """Write OUTDIR/{throughput,signature,saturation}.FMT; return the paths written.

    OSError (e.g. an unwritable directory) propagates to the caller.
    """
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r}: expected one of {', '.join(FORMATS)}")
    outdir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, build in FIGURES.items():
        path = outdir / f"{name}.{fmt}"
        build(runs, labels).savefig(path, format=fmt)
        paths.append(path)
    return paths

"""The monitor report's figures, drawn from the report document alone (its body).

- latency.png: one-way latency over time (per time bin: median line, min..p95 band,
  max dots) above the loss per bin;
- bandwidth.png: the bandwidth estimate over time, the same way, above the loss of
  the large probes;
- hour_of_day.png: one-way latency by hour of the day (the report's time zone) above
  the loss by hour;
- latency_cdf.png: the distribution of one-way latency.

Time plots shade outages (red) and not-monitored gaps (grey, hatched), mark
congestion (orange) and level shifts (dashed lines), so that binning never hides a
maximum, a loss or an event.  A figure without data says so in words: never blank.
Built with matplotlib's object API and the Agg renderer, as beoperf.plots.figures.
:func:`figure` draws one of those a document lists; the caller writes it (the CLI,
through safeio), as renderers never write files.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
from matplotlib import dates as mdates
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from beoperf.analysis.monitor import iso, words_s
from beoperf.model.document import Document, JsonObject
from beoperf.model.monitor import Interval, MonitorReport, Spread
from beoperf.report.monitor import no_bandwidth

FIGSIZE = (10.0, 6.0)  # inches
DPI = 100
MARGINS = {"left": 0.08, "right": 0.98, "bottom": 0.1, "top": 0.93, "hspace": 0.08}
BAND_ALPHA = 0.25


class Shade(TypedDict):
    """How an event is shaded: its colour and opacity (keyword arguments of a patch)."""

    color: str
    alpha: float


class Hatch(TypedDict):
    """How a gap is hatched (keyword arguments of a patch)."""

    facecolor: str
    edgecolor: str
    hatch: str
    linewidth: float


OUTAGE: Shade = {"color": "tab:red", "alpha": 0.25}
CONGESTION: Shade = {"color": "tab:orange", "alpha": 0.3}
GAP: Hatch = {"facecolor": "none", "edgecolor": "grey", "hatch": "//", "linewidth": 0}
NO_DATA = "no small probe answered in this range"


def _dates(t_utc: Sequence[float | None] | np.ndarray) -> np.ndarray:
    """matplotlib date numbers for UTC epoch seconds (None: not a time)."""
    us = (np.asarray(t_utc, dtype=float) * 1e6).astype("datetime64[us]")
    return mdates.date2num(us)


def _floats(values: list[float | None]) -> np.ndarray:
    """Document numbers (None for missing) as floats with NaN."""
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def _two_panels(title: str, ylabel: str, loss_label: str) -> tuple[Figure, Axes, Axes]:
    """A figure with a tall value panel over a short loss panel sharing the x axis."""
    fig = Figure(figsize=FIGSIZE, dpi=DPI)
    fig.subplots_adjust(**MARGINS)
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    top.set_title(title)
    top.set_ylabel(ylabel)
    bottom.set_ylabel(loss_label)
    for ax in (top, bottom):
        ax.grid(True, alpha=0.4)
    return fig, top, bottom


def _footer(fig: Figure, doc: MonitorReport, source: str) -> None:
    r = doc.range
    fig.text(0.01, 0.005, f"{source} · {doc.source.host} · {iso(r.from_utc)} to "
             f"{iso(r.to_utc)} UTC", fontsize=7, color="grey", va="bottom")


def _no_data(ax: Axes, text: str = NO_DATA) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=12,
            color="grey")
    ax.set_yticks([])  # an empty axis has no scale to show


def _spread(ax: Axes, x: np.ndarray, stats: Spread, scale: float, color: str) -> bool:
    """Median line, min..p95 band and max dots of binned statistics; False if all empty."""
    med = _floats(stats.median) * scale
    if np.isnan(med).all():
        return False
    ax.fill_between(x, _floats(stats.min) * scale, _floats(stats.p95) * scale,
                    color=color, alpha=BAND_ALPHA, linewidth=0, label="min..p95 per bin")
    ax.plot(x, med, color=color, linewidth=1.2, label="median per bin")
    ax.plot(x, _floats(stats.max) * scale, linestyle="none", marker=".", markersize=2,
            color="black", alpha=0.6, label="max per bin")
    return True


def _loss_bars(ax: Axes, edges: np.ndarray, loss: list[float | None]) -> None:
    """Loss % per bin as filled steps (one artist, however many bins)."""
    values = _floats(loss)
    ax.stairs(np.nan_to_num(values), edges, fill=True, color="tab:red", linewidth=0)
    ax.set_ylim(0, max(5.0, float(np.nanmax(values, initial=0.0)) * 1.1))


def _spans(ax: Axes, spans: np.ndarray, **style: Any) -> None:
    """Full-height vertical bands [lo, hi) (x in data units), one collection for all."""
    if len(spans):
        verts = [[(lo, 0.0), (lo, 1.0), (hi, 1.0), (hi, 0.0)] for lo, hi in spans]
        ax.add_collection(PolyCollection(verts, transform=ax.get_xaxis_transform(), **style),
                          autolim=False)


def _mark_events(axes: list[Axes], doc: MonitorReport) -> list:
    """Shade outages and gaps, mark congestion and level shifts; legend handles.

    Spans too short to see at the plot's scale also get a marker on the top edge."""
    kinds: list[tuple[Sequence[Interval], Shade, str, str]] = [
        (doc.outages, OUTAGE, "outage", "x"), (doc.congestion, CONGESTION, "congestion", "v")]
    handles = []
    for found, style, label, marker in kinds:
        spans = _dates(np.array([[i.start_utc, i.end_utc] for i in found],
                                dtype=float).reshape(-1, 2))
        for ax in axes:
            _spans(ax, spans, linewidth=0, **style)
        axes[0].plot(spans.mean(axis=1), np.full(len(spans), 0.985), linestyle="none",
                     marker=marker, color=style["color"], markersize=5,
                     transform=axes[0].get_xaxis_transform(), clip_on=False)
        if found:
            handles.append(Patch(label=f"{label} ({marker} on top)", **style))
    gaps = _dates(np.array([[g.start_utc, g.end_utc] for g in doc.not_monitored],
                           dtype=float).reshape(-1, 2))
    for ax in axes:
        _spans(ax, gaps, **GAP)
    if doc.not_monitored:
        handles.append(Patch(label="not monitored", **GAP))
    for item in doc.level_shifts:
        for ax in axes:
            ax.axvline(_dates([item.at_utc])[0], color="tab:purple", linestyle="--",
                       linewidth=1)
    if doc.level_shifts:
        handles.append(Patch(color="tab:purple", label="level shift (dashed)"))
    return handles


def _time_axis(ax: Axes) -> None:
    locator = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.set_xlabel("time (UTC)")


def _timeline_figure(doc: MonitorReport, source: str, latency: bool) -> Figure:
    """Latency (``latency``) or bandwidth over time."""
    series = doc.series.timeline
    fig, top, bottom = _two_panels(
        ("One-way latency (RTT/2 of the small probes)" if latency
         else "Bandwidth estimate from the large probes") + f", bins of {words_s(series.bin_s)}",
        "one-way latency (ms)" if latency else "bandwidth (Mbit/s, 10^6 bit/s)",
        "loss %" if latency else "large-probe loss %")
    width = series.bin_s / 86400.0
    x = _dates(series.start_utc) + width / 2
    drawn = _spread(top, x, series.one_way_ms if latency else series.bandwidth_bps,
                    1.0 if latency else 1e-6, "tab:blue")
    if not drawn:
        _no_data(top, NO_DATA if latency else no_bandwidth(doc))
    _loss_bars(bottom, np.append(x - width / 2, x[-1] + width / 2),
               series.loss_pct if latency else series.large_loss_pct)
    handles = _mark_events([top, bottom], doc)
    start, end = _dates([doc.range.from_utc, doc.range.to_utc])
    top.set_xlim(float(start), float(end))
    if drawn or handles:
        top.legend(handles=top.get_legend_handles_labels()[0] + handles, loc="upper left",
                   fontsize=8, framealpha=0.9, ncols=2)
    _time_axis(bottom)
    _footer(fig, doc, source)
    return fig


def latency_figure(body: JsonObject, source: str = "") -> Figure:
    """One-way latency over time of a monitor-report body."""
    return _timeline_figure(MonitorReport.from_body(body), source, latency=True)


def bandwidth_figure(body: JsonObject, source: str = "") -> Figure:
    """The bandwidth estimate over time of a monitor-report body."""
    return _timeline_figure(MonitorReport.from_body(body), source, latency=False)


def hour_of_day_figure(body: JsonObject, source: str = "") -> Figure:
    """Median, p25..p75 and p95 of one-way latency by hour (of the report's time zone),
    loss below."""
    doc = MonitorReport.from_body(body)
    prof, tz = doc.series.hour_of_day, doc.method.parameters.zone_name
    fig, top, bottom = _two_panels(f"One-way latency by hour of the day ({tz})",
                                   "one-way latency (ms)", "loss %")
    x = np.array(prof.hour) + 0.5
    stats = prof.one_way_ms
    if np.isnan(_floats(stats.median)).all():
        _no_data(top)
    else:
        top.fill_between(x, _floats(stats.p25), _floats(stats.p75), color="tab:blue",
                         alpha=BAND_ALPHA, linewidth=0, label="p25..p75")
        top.plot(x, _floats(stats.median), marker="o", markersize=3, label="median")
        top.plot(x, _floats(stats.p95), marker=".", linestyle=":", color="tab:blue",
                 label="p95")
        top.legend(loc="upper left", fontsize=8)
    _loss_bars(bottom, np.arange(25.0), prof.loss_pct)
    bottom.set_xlim(0, 24)
    bottom.set_xticks(range(0, 25, 3))
    bottom.set_xlabel(f"hour of the day ({tz})")
    _footer(fig, doc, source)
    return fig


def cdf_figure(body: JsonObject, source: str = "") -> Figure:
    """Cumulative distribution of one-way latency, median and p95 marked."""
    doc = MonitorReport.from_body(body)
    fig = Figure(figsize=FIGSIZE, dpi=DPI)
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.1, top=0.93)
    ax = fig.add_subplot()
    ax.set_title("Distribution of one-way latency (RTT/2 of the small probes)")
    ax.set_xlabel("one-way latency (ms)")
    ax.set_ylabel("fraction of answered small probes")
    ax.grid(True, alpha=0.4)
    series = doc.series.cdf
    if not series.one_way_ms:
        _no_data(ax)
    else:
        ax.plot(_floats(series.one_way_ms), _floats(series.fraction), color="tab:blue")
        summary = doc.summary.one_way_ms
        for name, value, style in (("median", summary.median, "--"), ("p95", summary.p95, ":")):
            if value is not None:  # a CDF has both
                ax.axvline(value, color="grey", linestyle=style, label=f"{name} {value:.3f} ms")
        ax.set_ylim(0, 1)
        ax.legend(loc="lower right", fontsize=9)
    _footer(fig, doc, source)
    return fig


FIGURES = {
    "latency.png": latency_figure,
    "bandwidth.png": bandwidth_figure,
    "hour_of_day.png": hour_of_day_figure,
    "latency_cdf.png": cdf_figure,
}


def figure(doc: Document, name: str) -> Figure:
    """The figure ``name`` (one of model.monitor.PLOTS) of a monitor-report document; its
    footer names the database by its file name."""
    return FIGURES[name](doc.body, Path(MonitorReport.from_document(doc).source.db).name)

"""The scaling study's figures: each performance metric against the process count.

One figure per metric (``<KEY>.png``), drawn from the scaling document alone:

- each series (a ranks-per-node setting) as its means joined by a line, the sample
  standard deviation as error bars and the range of the runs (min..max) as a pale bar
  behind each point;
- ideal scaling from the series' smallest count as a dashed line: proportional to the
  process count for aggregate figures (HPL, PTRANS, MPI FFT, MPI RandomAccess), flat for
  per-process, single-process and latency figures;
- the reference systems as points at their own process counts (one marker shape each).

The process count is on a log2 axis labelled with the counts themselves; the value axis
is logarithmic when the figures span more than LOG_FROM (reference systems often differ
by 100x), linear from zero otherwise.  Built with matplotlib's object API and the Agg
renderer; the caller writes the figures (the CLI, through safeio).
"""

from __future__ import annotations

from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from beoperf.model import hpcc
from beoperf.model.document import Document

FIGSIZE = (8.0, 5.0)
DPI = 110
LOG_FROM = 30.0  # max / min of the values drawn above which the value axis is logarithmic
COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink")
REF_MARKERS = ("s", "D", "^", "v", "P", "X", "*", "h")
REF_COLOR = "0.35"


def keys(doc: Document) -> list[str]:
    """The performance metrics the study has figures for, in HPCC's order."""
    present = {k for p in doc.body["points"] for k in p["metrics"]}
    return [k for k in hpcc.performance_keys() if k in present]


def file_name(key: str) -> str:
    return f"{key}.png"


def _series(body: dict[str, Any], key: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for point in body["points"]:
        if point["runs"] > 0 and key in point["metrics"]:
            out.setdefault(point["series"], []).append(point)
    return out


def _ideal(points: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    base = points[0]
    m0, p0 = base["metrics"][key]["mean"], base["np"]
    xs = [p["np"] for p in points]
    if hpcc.info(key).role == "aggregate":
        return xs, [m0 * x / p0 for x in xs]
    return xs, [m0 for _ in xs]


def _draw_series(ax: Axes, name: str, points: list[dict[str, Any]], key: str,
                 color: str) -> list[float]:
    xs = [p["np"] for p in points]
    stats = [p["metrics"][key] for p in points]
    means = [s["mean"] for s in stats]
    ax.vlines(xs, [s["min"] for s in stats], [s["max"] for s in stats], color=color,
              alpha=0.25, linewidth=7, zorder=1)
    errors = [s["stdev"] or 0.0 for s in stats]
    runs = sum(p["runs"] for p in points)
    ax.errorbar(xs, means, yerr=errors, color=color, marker="o", capsize=4, zorder=3,
                label=f"{name} (mean \u00b1 stdev, {runs} runs; bar: min..max)")
    if len(points) > 1:
        ix, iy = _ideal(points, key)
        ax.plot(ix, iy, linestyle="--", color=color, alpha=0.8, zorder=2,
                label=f"{name}: ideal scaling")
    return [*means, *(s["min"] for s in stats), *(s["max"] for s in stats),
            *_ideal(points, key)[1]]


def _draw_references(ax: Axes, body: dict[str, Any], key: str) -> list[float]:
    values: list[float] = []
    names: list[str] = []
    for ref in body["references"]:
        if ref["name"] not in names:
            names.append(ref["name"])
    for i, name in enumerate(names):
        pts = [r for r in body["references"] if r["name"] == name and key in r["metrics"]
               and r["np"]]
        if not pts:
            continue
        xs, ys = [r["np"] for r in pts], [r["metrics"][key] for r in pts]
        counts = ", ".join(str(x) for x in xs)
        ax.scatter(xs, ys, marker=REF_MARKERS[i % len(REF_MARKERS)], color=REF_COLOR,
                   edgecolor="black", s=55, zorder=4, label=f"{name} ({counts} procs)")
        values += ys
    return values


def _axes(ax: Axes, counts: list[int], values: list[float], unit: str) -> None:
    ax.set_xscale("log", base=2)
    lo, hi = min(counts), max(counts)
    ax.set_xlim(lo / 1.4, hi * 1.4)
    ax.xaxis.set_major_locator(FixedLocator(sorted(set(counts))))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _p: f"{x:g}"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("processes")
    ax.set_ylabel(unit or "value")
    positive = [v for v in values if v > 0]
    if positive and max(positive) / min(positive) > LOG_FROM:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0, top=max(values) * 1.15 if values and max(values) > 0 else 1)
    ax.grid(True, which="major", alpha=0.3)


def figure(doc: Document, key: str) -> Figure:
    """One metric of the study (see the module's docstring)."""
    body = doc.body
    fig = Figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    info = hpcc.info(key)
    ax.set_title(f"{key}\n{info.description}", fontsize=10)
    values: list[float] = []
    counts: list[int] = []
    for i, (name, points) in enumerate(_series(body, key).items()):
        values += _draw_series(ax, name, points, key, COLORS[i % len(COLORS)])
        counts += [p["np"] for p in points]
    refs = _draw_references(ax, body, key)
    values += refs
    counts += [r["np"] for r in body["references"] if key in r["metrics"] and r["np"]]
    if not counts:
        ax.text(0.5, 0.5, "no run measured this metric", ha="center", va="center",
                transform=ax.transAxes)
        return fig
    _axes(ax, counts, values, body["units"].get(key, info.unit))
    if info.role == "latency":
        ax.text(0.01, 0.99, "lower is better", transform=ax.transAxes, va="top",
                fontsize=8, color="0.4")
    handles, labels = ax.get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: ("mean" not in labels[i],
                                                      "ideal" not in labels[i]))
    fig.legend([handles[i] for i in order], [labels[i] for i in order], fontsize=8,
               loc="outside lower center", ncols=2, frameon=False)
    return fig

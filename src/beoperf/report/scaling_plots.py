"""The scaling study's figures: each performance metric against the process count.

One figure per metric (``<KEY>.png``), drawn from the scaling document alone:

- each series (a ranks-per-node setting) as its means joined by a line, the sample
  standard deviation as error bars and the range of the runs (min..max) as a pale bar
  behind each point;
- ideal scaling from the series' smallest count as a dashed line: proportional to the
  processes the figure ran on for aggregate figures (HPL, PTRANS, MPI FFT, MPI
  RandomAccess; HPL's on its P x Q grid, beoperf.analysis.scaling.own_processes), flat
  for per-process, single-process and latency figures;
- the reference systems as points at their own process counts (one marker shape each).

The process count is on a log2 axis labelled with the counts themselves; the value axis
is logarithmic when the figures span more than LOG_FROM (reference systems often differ
by 100x), linear from zero otherwise.  Built with matplotlib's object API and the Agg
renderer; the caller writes the figures (the CLI, through safeio).
"""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from beoperf.analysis import scaling
from beoperf.model import hpcc
from beoperf.model.cluster import ScalingPoint, ScalingStudy
from beoperf.model.document import Document

FIGSIZE = (8.0, 5.0)
DPI = 110
LOG_FROM = 30.0  # max / min of the values drawn above which the value axis is logarithmic
COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink")
REF_MARKERS = ("s", "D", "^", "v", "P", "X", "*", "h")
REF_COLOR = "0.35"


def keys(doc: Document) -> list[str]:
    """The performance metrics the study has figures for, in HPCC's order."""
    present = {k for p in ScalingStudy.from_document(doc).points for k in p.metrics}
    return [k for k in hpcc.performance_keys() if k in present]


def file_name(key: str) -> str:
    return f"{key}.png"


def _series(study: ScalingStudy, key: str) -> dict[str, list[ScalingPoint]]:
    out: dict[str, list[ScalingPoint]] = {}
    for point in study.points:
        if point.runs > 0 and key in point.metrics:
            out.setdefault(point.series, []).append(point)
    return out


def _ideal(points: list[ScalingPoint], key: str) -> tuple[list[int], list[float]]:
    """The ideal at each count of the job: an aggregate grows with the processes the
    figure itself ran on (HPL's P x Q grid: scaling.own_processes), the rest stay."""
    base = points[0]
    m0, p0 = base.metrics[key].mean, scaling.own_processes(base, key)
    if hpcc.info(key).role != "aggregate":
        return [p.np for p in points], [m0 for _ in points]
    own = [(p.np, scaling.own_processes(p, key)) for p in points]
    if p0 is None:
        return [], []
    return ([x for x, n in own if n is not None],
            [m0 * n / p0 for _, n in own if n is not None])


def _runs_text(points: list[ScalingPoint]) -> str:
    """'5 runs per count' ('runs per count vary' when they do)."""
    counts = {p.runs for p in points}
    if len(counts) != 1:
        return "runs per count vary"
    n = counts.pop()
    return f"{n} run{'s' if n != 1 else ''} per count"


def _draw_series(ax: Axes, name: str, points: list[ScalingPoint], key: str,
                 color: str, log: bool) -> bool:
    """The series' means, spread and ideal; whether a lower error bar was clipped (on a
    log axis mean - stdev <= 0 cannot be drawn: the bar stops at the smallest run)."""
    xs = [p.np for p in points]
    stats = [p.metrics[key] for p in points]
    means = [s.mean for s in stats]
    ax.vlines(xs, [s.min for s in stats], [s.max for s in stats], color=color,
              alpha=0.25, linewidth=7, zorder=1)
    upper = [s.stdev or 0.0 for s in stats]
    lower = [min(u, s.mean - s.min) if log and s.mean - u <= 0 else u
             for u, s in zip(upper, stats, strict=True)]
    ax.errorbar(xs, means, yerr=[lower, upper], color=color, marker="o", capsize=4,
                zorder=3, label=f"{name} (mean \u00b1 stdev, {_runs_text(points)}; "
                                "bar: min..max)")
    if len(points) > 1:
        ix, iy = _ideal(points, key)
        ax.plot(ix, iy, linestyle="--", color=color, alpha=0.8, zorder=2,
                label=f"{name}: ideal scaling")
    return lower != upper


def _values(study: ScalingStudy, key: str) -> list[float]:
    """Every value a figure draws (to choose its scale before drawing)."""
    values: list[float] = []
    for points in _series(study, key).values():
        for p in points:
            st = p.metrics[key]
            values += [st.mean, st.min, st.max]
        if len(points) > 1:
            values += _ideal(points, key)[1]
    values += [r.metrics[key] for r in study.references if key in r.metrics]
    return values


def _reference_counts(study: ScalingStudy, key: str) -> list[int]:
    """The process counts at which the reference systems give ``key``."""
    return [r.np for r in study.references if key in r.metrics and r.np]


def _draw_references(ax: Axes, study: ScalingStudy, key: str) -> None:
    names = list(dict.fromkeys(r.name for r in study.references))
    for i, name in enumerate(names):
        pts = [(r.np, r.metrics[key]) for r in study.references
               if r.name == name and key in r.metrics and r.np]
        if not pts:
            continue
        xs, ys = [x for x, _ in pts], [y for _, y in pts]
        counts = ", ".join(str(x) for x in xs)
        ax.scatter(xs, ys, marker=REF_MARKERS[i % len(REF_MARKERS)], color=REF_COLOR,
                   edgecolor="black", s=55, zorder=4, label=f"{name} ({counts} procs)")


def is_log(values: list[float]) -> bool:
    """Whether the value axis is logarithmic: the values span more than LOG_FROM."""
    positive = [v for v in values if v > 0]
    return bool(positive) and max(positive) / min(positive) > LOG_FROM


def _axes(ax: Axes, counts: list[int], values: list[float], unit: str, log: bool) -> None:
    ax.set_xscale("log", base=2)
    lo, hi = min(counts), max(counts)
    ax.set_xlim(lo / 1.4, hi * 1.4)
    ax.xaxis.set_major_locator(FixedLocator(sorted(set(counts))))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _p: f"{x:g}"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("processes")
    ax.set_ylabel(unit or "value")
    if log:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0, top=max(values) * 1.15 if values and max(values) > 0 else 1)
    ax.grid(True, which="major", alpha=0.3)


def figure(doc: Document, key: str) -> Figure:
    """One metric of the study (see the module's docstring)."""
    study = ScalingStudy.from_document(doc)
    fig = Figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    info = hpcc.info(key)
    ax.set_title(f"{key}\n{info.description}", fontsize=10)
    values = _values(study, key)
    log = is_log(values)
    counts: list[int] = []
    clipped = False
    for i, (name, points) in enumerate(_series(study, key).items()):
        clipped |= _draw_series(ax, name, points, key, COLORS[i % len(COLORS)], log)
        counts += [p.np for p in points]
    _draw_references(ax, study, key)
    counts += _reference_counts(study, key)
    if not counts:
        ax.text(0.5, 0.5, "no run measured this metric", ha="center", va="center",
                transform=ax.transAxes)
        return fig
    _axes(ax, counts, values, study.units.get(key, info.unit), log)
    if clipped:
        ax.text(0.99, 0.01, "log axis: a bar whose mean - stdev is below 0 stops at the "
                "smallest run", transform=ax.transAxes, ha="right", va="bottom",
                fontsize=7, color="0.4")
    if info.role == "latency":
        ax.text(0.01, 0.99, "lower is better", transform=ax.transAxes, va="top",
                fontsize=8, color="0.4")
    handles, labels = ax.get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: ("mean" not in labels[i],
                                                      "ideal" not in labels[i]))
    fig.legend([handles[i] for i in order], [labels[i] for i in order], fontsize=8,
               loc="outside lower center", ncols=2, frameon=False)
    return fig

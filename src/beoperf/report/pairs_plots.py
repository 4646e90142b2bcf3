"""The all-pairs matrix as heat maps: latency and bandwidth between every two nodes.

One row of two panels per ranks-per-node series: latency (us) on the left, bandwidth
(MB/s, 10^6 B/s) on the right, each cell the median over the rank pairs between two
nodes (the diagonal: the pairs within a node, with several ranks per node; grey where
nothing was measured).  The colour scales run so that darker is worse in both panels
(more latency, less bandwidth), from the best figure to at least twice as bad as the
median, so that noise between healthy pairs does not look like a difference.  Slow nodes are
named in red on both axes, slow links outlined in red; the figure's title says what a
cell is and the footnote the rule that named them.  Cells carry their figure while the
matrix is small enough to read (ANNOTATE_UP_TO nodes).  Built with matplotlib's object
API and the Agg renderer; the caller writes the figure (the CLI, through safeio).
"""

from __future__ import annotations

import textwrap

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from beoperf.model.cluster_mpi import Findings, MpiRun
from beoperf.model.document import Document

DPI = 110
ANNOTATE_UP_TO = 16
SLOW = "#c0392b"
PANELS = (("latency_s", "latency (us)", 1e6, "viridis_r", "latency"),
          ("bandwidth_Bps", "bandwidth (MB/s)", 1e-6, "viridis", "bandwidth"))


def _matrix(found: Findings, field: str, scale: float) -> np.ndarray:
    rows = found.matrix.get(field, [])
    return np.array([[np.nan if v is None else v * scale for v in row] for row in rows],
                    dtype=float)


def _annotate(ax: Axes, m: np.ndarray, lo: float, hi: float, dark_low: bool) -> None:
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            v = m[i, j]
            if np.isnan(v):
                ax.text(j, i, "-", ha="center", va="center", color="0.4", fontsize=8)
                continue
            frac = 0.5 if hi <= lo else (v - lo) / (hi - lo)
            dark = frac < 0.45 if dark_low else frac > 0.55
            ax.text(j, i, f"{v:.3g}", ha="center", va="center", fontsize=8,
                    color="white" if dark else "black")


def _range(m: np.ndarray, metric: str) -> tuple[float, float]:
    """The colour scale: from the best figure to at least twice as bad as the median (so
    that a few percent of noise between healthy pairs stays one colour and a slow one
    stands out), or to the worst figure if that is further."""
    finite = m[np.isfinite(m)]
    if not finite.size:
        return 0.0, 1.0
    med = float(np.median(finite))
    if metric == "latency":
        lo, hi = float(finite.min()), max(float(finite.max()), 2 * med)
    else:
        lo, hi = min(float(finite.min()), med / 2), float(finite.max())
    return (lo, hi) if hi > lo else (lo, lo + 1.0)


def _panel(fig: Figure, ax: Axes, found: Findings, spec: tuple, title: str) -> None:
    field, label, scale, cmap, metric = spec
    nodes = found.nodes
    m = _matrix(found, field, scale)
    lo, hi = _range(m, metric)
    image = ax.imshow(np.ma.masked_invalid(m), cmap=cmap, vmin=lo, vmax=hi)
    image.cmap.set_bad("0.85")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label=label)
    ax.set_xticks(range(len(nodes)), nodes, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(nodes)), nodes, fontsize=8)
    slow = {s.node for s in found.slow_nodes if s.metric == metric}
    for tick in [*ax.get_xticklabels(), *ax.get_yticklabels()]:
        if tick.get_text() in slow:
            tick.set_color(SLOW)
            tick.set_fontweight("bold")
    index = {n: i for i, n in enumerate(nodes)}
    for link in (s for s in found.slow_links if s.metric == metric):
        i, j = index[link.a], index[link.b]
        for r, c in ((i, j), (j, i)):
            ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, edgecolor=SLOW,
                                   linewidth=2.5))
    if len(nodes) <= ANNOTATE_UP_TO:
        _annotate(ax, m, lo, hi, dark_low=cmap == "viridis")
    ax.set_title(title, fontsize=10)


def _named(found: Findings, metric: str) -> str:
    nodes = [s.node for s in found.slow_nodes if s.metric == metric]
    links = [f"{s.a}-{s.b}" for s in found.slow_links if s.metric == metric]
    parts = ([f"slow node{'s' if len(nodes) > 1 else ''} {', '.join(nodes)}"] if nodes else []) \
        + ([f"slow link{'s' if len(links) > 1 else ''} {', '.join(links)}"] if links else [])
    return "; ".join(parts) or "none slow"


def figure(doc: Document) -> Figure:
    """The heat maps of a cluster-pairs document (see the module's docstring)."""
    run = MpiRun.from_document(doc)
    b, series = run.pairs(), run.series
    n = max((len(s.pair_findings().nodes) for s in series), default=1)
    side = min(9.0, max(3.6, 0.55 * n + 2.2))
    fig = Figure(figsize=(2 * side + 0.6, 0.82 * side * max(1, len(series)) + 1.2), dpi=DPI,
                 layout="constrained")
    axes = fig.subplots(max(1, len(series)), 2, squeeze=False)
    how = "one pair at a time" if b.mode == "serial" else "disjoint pairs at once"
    for row, s in zip(axes, series, strict=False):
        k = s.ranks_per_node
        where = f"{k} rank{'s' if k != 1 else ''} per node"
        for ax, spec in zip(row, PANELS, strict=True):
            _panel(fig, ax, s.pair_findings(), spec, f"{spec[1]}, {where}: "
                   f"{_named(s.pair_findings(), spec[4])}")
    fig.suptitle(f"All-pairs ping-pong {run.label} ({how}): latency at {b.latency_bytes:,} "
                 f"B, bandwidth at {b.bandwidth_bytes:,} B; each cell the median over the "
                 "rank pairs of two nodes of the trials' medians (darker is worse)",
                 fontsize=10, wrap=True)
    rule = series[0].pair_findings().rule if series else ""
    fig.supxlabel("\n".join(textwrap.wrap(f"Named by: {rule}", 170)), fontsize=7)
    return fig

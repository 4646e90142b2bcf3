"""The MPI overhead per size: a table and a graph of what one run adds to another at every
size both measured (TCP against MPI on the same hosts, or one MPI setting against
another), from beoperf.analysis.mpi.overhead."""

from __future__ import annotations

import io
from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from beoperf.analysis.mpi import Overhead, overhead
from beoperf.model.pingpong import RunResult
from beoperf.report.plots import DPI, FIGSIZE, _size_ticks

COLUMNS = ("size B", "{base} us", "{other} us", "added us", "ratio")


def overhead_markdown(base: RunResult, others: Sequence[RunResult], labels: Sequence[str]) -> str:
    """One table per other run: per size, both one-way times, the difference and ratio."""
    out = []
    for run, label in zip(others, labels[1:], strict=True):
        rows = overhead(base, run)
        head = [c.format(base=labels[0], other=label) for c in COLUMNS]
        out += [f"### {label} against {labels[0]}", "",
                "| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
        out += [f"| {r.size} | {r.base_us:.2f} | {r.other_us:.2f} | {r.added_us:+.2f} | "
                f"{r.ratio:.3f} |" for r in rows]
        out.append("")
    out.append("One-way times (the median for beoperf runs); added = the second minus the "
               "first at the same size; ratio = second / first.")
    return "\n".join(out) + "\n"


def overhead_figure(base: RunResult, others: Sequence[RunResult],
                    labels: Sequence[str]) -> Figure:
    """What each other run adds to the first, per size: the difference in microseconds
    (top) and the ratio of the times (bottom, log scale: 1 = the same), on a log2 size
    axis (the difference alone hides the small sizes behind the large ones)."""
    fig = Figure(figsize=(FIGSIZE[0] + 2.0, FIGSIZE[1] + 2.0), dpi=DPI, layout="constrained")
    added, ratio = fig.subplots(2, 1, sharex=True)
    added.set_title(f"overhead per message size, against {labels[0]}")
    added.set_ylabel("added one-way time (µs)")
    ratio.set_ylabel(f"time / time of {labels[0]}")
    ratio.set_xlabel("message size (bytes)")
    ratio.set_yscale("log")
    for ax, level in ((added, 0.0), (ratio, 1.0)):
        ax.set_xscale("log", base=2)
        ax.axhline(level, color="black", linewidth=0.8)
        ax.grid(True, which="both", alpha=0.3)
    for run, label in zip(others, labels[1:], strict=True):
        rows: list[Overhead] = overhead(base, run)
        sizes = [r.size for r in rows]
        line, = added.plot(sizes, [r.added_us for r in rows], marker="o", markersize=3,
                           label=f"{label} against {labels[0]}")
        ratio.plot(sizes, [r.ratio for r in rows], marker="o", markersize=3,
                   color=line.get_color())
    ratio.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    _size_ticks(ratio)
    added.legend(loc="best", fontsize=8)
    return fig


def overhead_png(base: RunResult, others: Sequence[RunResult], labels: Sequence[str]) -> bytes:
    buf = io.BytesIO()
    overhead_figure(base, others, labels).savefig(buf, format="png")
    return buf.getvalue()


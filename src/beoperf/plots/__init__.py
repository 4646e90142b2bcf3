"""Graphs of ping-pong results (matplotlib, Agg renderer, object API only).

`beoperf plot` draws them; the builders return `matplotlib.figure.Figure`
objects so that callers and tests can inspect them before writing.
"""

from beoperf.plots.figures import (
    FIGURES,
    FORMATS,
    saturation_figure,
    signature_figure,
    throughput_figure,
    write_figures,
)

__all__ = ["FIGURES", "FORMATS", "saturation_figure", "signature_figure", "throughput_figure",
           "write_figures"]

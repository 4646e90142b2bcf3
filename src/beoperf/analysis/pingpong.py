"""What a ping-pong document derives from its measurements: the summary and the analysis.

They are computed here (the model layer is pure data) and stored in the body when the
document is written, for readers without beoperf; beoperf itself recomputes them when it
reads a run, so a later, better analysis applies to old files too.
"""

from __future__ import annotations

from typing import Any

from beoperf.analysis.curve import analyze_run
from beoperf.analysis.mpi import protocol_switch
from beoperf.model.document import Document
from beoperf.model.pingpong import RunResult


def summary(run: RunResult) -> dict[str, Any]:
    """The headline figures, those of the curve analysis (`beoperf.analysis.curve`): the
    latency (the middle small size's median, its p99 and its CI), the peak throughput and
    where it was reached, and how many throughput collapses were left out of them.

    Without an analysis (it failed) only the counts are given, never other figures."""
    if not run.sizes:
        return {"sizes_measured": 0}
    counts = {"sizes_measured": len(run.sizes),
              "sizes_not_converged": sum(1 for s in run.sizes if not s.converged),
              "corrupt_messages": sum(s.corrupt for s in run.sizes)}
    try:
        a = analyze_run(run)
    except Exception:  # noqa: BLE001 - the analysis never costs the measured data
        return counts
    out = {**counts, "latency_size": a.latency_size, "latency_median_us": a.latency_us,
           "latency_p99_us": a.latency_p99_us,
           "latency_ci95_halfwidth_us": a.latency_ci95_halfwidth_us,
           "peak_throughput_bps": a.peak_bps, "peak_size": a.peak_size,
           "throughput_collapses": len(a.collapses)}
    switch = protocol_switch(run)  # MPI runs: the eager/rendezvous switch and its setting
    if switch is not None:
        out["protocol_switch"] = switch.to_dict()
    return out


def derived(run: RunResult) -> dict[str, Any]:
    """{"summary", "analysis"} for the body; an analysis that fails is an error entry."""
    try:
        analysis = analyze_run(run)
        found: dict[str, Any] | None = analysis.to_dict() if analysis else None
    except Exception as exc:  # noqa: BLE001 - the analysis must never cost the measured data
        found = {"error": f"{type(exc).__name__}: {exc}"}
    return {"summary": summary(run), "analysis": found}


def document(run: RunResult) -> Document:
    """The document of a run, with its summary and analysis."""
    return run.to_document(derived(run))

"""What a ping-pong document derives from its measurements: the summary and the analysis.

They are computed here (the model layer is pure data) and stored in the body when the
document is written, for readers without beoperf; beoperf itself recomputes them when it
reads a run, so a later, better analysis applies to old files too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from beoperf.analysis.curve import analyze_run
from beoperf.analysis.mpi import protocol_switch
from beoperf.model.document import Document
from beoperf.model.pingpong import RunResult, SizeResult
from beoperf.units import format_size, size_tick


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


def precision_shortfall(sizes: Sequence[SizeResult], precision: float | None) -> str | None:
    """The sizes whose interval is wider than asked, in one line ("41 of 124 sizes did not
    reach ±2%: widest ±23.4% at 48 KiB"); None when every size reached it.  The stored
    warning and the report's answer say it in these words."""
    late = [s for s in sizes if not s.converged]
    if not late:
        return None
    goal = f"±{precision * 100:.3g}%" if isinstance(precision, int | float) else \
        "the precision asked"
    worst = max(late, key=lambda s: s.ci95_relative or 0.0)
    widest = (f": widest ±{worst.ci95_relative * 100:.3g}% at {size_text(worst.size)}"
              if worst.ci95_relative is not None else "")
    return (f"{len(late)} of {len(sizes)} size{'s' if len(sizes) != 1 else ''} did not "
            f"reach {goal}{widest}")


def size_text(n: int) -> str:
    """A message size as a reader checks it against the table: '48 KiB' when exact, else
    its bytes ('1048579 B', not a rounded '1 MiB')."""
    return format_size(n) if n < 1024 or not size_tick(n).isdigit() else f"{n} B"

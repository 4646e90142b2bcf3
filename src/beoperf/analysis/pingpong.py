"""What a ping-pong document derives from its measurements: the summary and the analysis.

They are computed here (the model layer is pure data) and stored in the body when the
document is written, for readers without beoperf; beoperf itself recomputes them when it
reads a run, so a later, better analysis applies to old files too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

from beoperf.analysis import intervals
from beoperf.analysis.curve import analyze_run
from beoperf.analysis.efficiency import efficiency
from beoperf.analysis.mpi import protocol_switch
from beoperf.model import jsonvalue
from beoperf.model.document import Document, JsonObject
from beoperf.model.pingpong import RunResult, SizeResult
from beoperf.units import format_size, size_tick


class Summary(TypedDict, total=False):
    """A run's headline figures (summary): the counts always; the rest only when the curve
    analysis succeeded (latency at its size with its p99 and intervals, the peak
    throughput, collapses left out, why no model, an MPI run's protocol switch, the peak's
    efficiency against the link: analysis.efficiency)."""

    sizes_measured: int
    sizes_not_converged: int
    corrupt_messages: int
    latency_size: int
    latency_median_us: float
    latency_p99_us: float | None
    latency_ci95_halfwidth_us: float | None
    latency_ci95_us: list[float] | None
    latency_ci95_within_run_us: list[float] | None
    latency_trials: int
    peak_throughput_bps: float
    peak_size: int
    throughput_collapses: int
    model_problem: str
    protocol_switch: JsonObject
    efficiency: JsonObject


def summary(run: RunResult) -> Summary:
    """The headline figures, those of the curve analysis (`beoperf.analysis.curve`): the
    latency (the middle small size's median, its p99 and its CI), the peak throughput and
    where it was reached, and how many throughput collapses were left out of them.

    Without an analysis (it failed) only the counts are given, never other figures."""
    if not run.sizes:
        return {"sizes_measured": 0}
    counts: Summary = {"sizes_measured": len(run.sizes),
              "sizes_not_converged": sum(1 for s in run.sizes if not s.converged),
              "corrupt_messages": sum(s.corrupt for s in run.sizes)}
    try:
        a = analyze_run(run)
    except Exception:  # noqa: BLE001 - the analysis never costs the measured data
        return counts
    if a is None:
        return counts
    size = next(s for s in run.sizes if s.size == a.latency_size)
    out: Summary = {
           **counts, "latency_size": a.latency_size, "latency_median_us": a.latency_us,
           "latency_p99_us": a.latency_p99_us,
           "latency_ci95_halfwidth_us": a.latency_ci95_halfwidth_us,
           "latency_ci95_us": interval_of(size), "latency_ci95_within_run_us": within_run(size),
           "latency_trials": size.trials,
           "peak_throughput_bps": a.peak_bps, "peak_size": a.peak_size,
           "throughput_collapses": len(a.collapses)}
    if a.hockney is None and a.model_problem:
        out["model_problem"] = a.model_problem
    if a.peak_size > 0:  # a run of empty messages only has no peak to share
        out["efficiency"] = efficiency(run, a.peak_bps, a.peak_size).to_dict()
    switch = protocol_switch(run)  # MPI runs: the eager/rendezvous switch and its setting
    if switch is not None:
        out["protocol_switch"] = switch.to_dict()
    return out


def interval_of(size: SizeResult) -> list[float] | None:
    """A size's interval for a next run: ``ci95_us``; a result written before beoperf
    stored bounds has only a half-width, read as median -+ half-width (when that stays
    above zero: the upgrade to version 4 drops one that does not)."""
    if size.ci95_us is not None:
        return size.ci95_us
    median, half = size.time_us.get("median"), size.ci95_halfwidth_us
    if median is None or half is None or not median - half > 0:
        return None
    return [median - half, median + half]


def within_run(size: SizeResult) -> list[float] | None:
    """This run's own part of a size's interval: ``ci95_within_run_us``; a document written
    before every size carried it has it only where the spread between runs was added,
    and elsewhere its interval (interval_of) is the within-run one itself."""
    return size.ci95_within_run_us if size.ci95_within_run_us is not None else \
        interval_of(size)


SOURCES = ("own", "own+host", "host", "none")


@dataclass(frozen=True)
class BetweenRuns:
    """A run's ``sweep.between_runs`` as its readers need it, each value checked: where
    the spread between runs came from (``source``, one of SOURCES), the spread and the
    part it adds to an interval (relative), how many earlier runs and other setups gave
    it, why there is none, and the history file, what was read and whether the run was
    added.  ``recorded_any``: the run records between_runs at all."""

    recorded_any: bool
    source: str
    relative_sd: float | None
    relative_halfwidth: float | None
    earlier_runs: int
    host_setups: int
    own_missing: str | None
    why_none: str | None
    history: str | None
    runs_read: int | None
    recorded: bool | None


def between_runs(run: RunResult) -> BetweenRuns:
    """The spread between runs the intervals hold (``sweep.between_runs``), with its
    ``source`` (one of SOURCES: earlier runs of this setup, those pooled with the host's
    other setups, the host's other setups only, none); a run that records none, or
    written before the source was recorded, gets it inferred from what it has."""
    facts = jsonvalue.section(run.sweep, "between_runs")
    sd, source = jsonvalue.number(facts, "relative_sd"), jsonvalue.text(facts, "source")
    host = jsonvalue.integer(facts, "host_setups") or 0
    if source not in SOURCES:
        added = bool(facts.get("added_to_intervals")) and sd is not None
        own = facts.get("own_relative_sd")
        source = ("none" if not added else "host" if own is None else
                  "own" if not host else "own+host")
    recorded = facts.get("recorded")
    return BetweenRuns(
        recorded_any=bool(facts), source=source, relative_sd=sd,
        relative_halfwidth=jsonvalue.number(facts, "relative_halfwidth"),
        earlier_runs=jsonvalue.integer(facts, "earlier_runs") or 0, host_setups=host,
        own_missing=jsonvalue.text(facts, "own_missing"),
        why_none=jsonvalue.text(facts, "why_none"), history=jsonvalue.text(facts, "history"),
        runs_read=jsonvalue.integer(facts, "runs_read"),
        recorded=recorded if isinstance(recorded, bool) else None)


def derived(run: RunResult) -> JsonObject:
    """{"summary", "analysis"} for the body; an analysis that fails is an error entry."""
    try:
        analysis = analyze_run(run)
        found: JsonObject | None = analysis.to_dict() if analysis else None
    except Exception as exc:  # noqa: BLE001 - the analysis must never cost the measured data
        found = {"error": f"{type(exc).__name__}: {exc}"}
    return {"summary": jsonvalue.as_object(summary(run)), "analysis": found}


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
    shown = intervals.precision_text(worst.time_us.get("median"), worst.ci95_us,
                                     worst.trials, pm="±") or (
        f"±{worst.ci95_relative * 100:.3g}%" if worst.ci95_relative is not None else None)
    widest = f": widest {shown} at {size_text(worst.size)}" if shown else ""
    return (f"{len(late)} of {len(sizes)} size{'s' if len(sizes) != 1 else ''} did not "
            f"reach {goal}{widest}")


def size_text(n: int) -> str:
    """A message size as a reader checks it against the table: '48 KiB' when exact, else
    its bytes ('1048579 B', not a rounded '1 MiB')."""
    return format_size(n) if n < 1024 or not size_tick(n).isdigit() else f"{n} B"

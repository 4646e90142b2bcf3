"""The measured tuning procedure: one change at a time, kept only when it helps.

The published cluster-tuning procedure measures the small-message latency of the
default configuration, then applies one change at a time and measures again, and
finally measures all the changes combined.  Here every step can be undone:

1. baseline: ``repeats`` short ping-pong measurements at 16 bytes against the
   peer's ``beoperf serve``; each repeat's figure is its median one-way time (us);
2. a rollback snapshot of every value the plan touches is written (by the caller),
   then each change is applied (and read back), measured the same way, and kept
   only when the improvement over the current kept state is significant: two-sided
   Mann-Whitney U p < 0.05 on the repeat figures *and* a mean improvement of more
   than 2%; otherwise it is restored (and read back);
3. the combined final state is measured, when at least one change was kept; when none
   was, the final state *is* the default configuration, so the Combined row says so and
   shows the Default figures instead of a second measurement of the same configuration
   (whose difference would only be drift and noise).

Any failure halfway restores everything applied, in reverse order.

The measurement itself is the caller's (``beoperf.suites.tune`` measures against the
peer): here it is any function that returns one repeat's figure, or raises a
``beoperf.errors`` error (an unreachable or refusing peer) or a TuneError.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from beoperf import errors
from beoperf.analysis.compare import mann_whitney_u
from beoperf.audit import tune
from beoperf.audit.tune import Change, TuneError

SIZE = 16  # bytes: small-message latency
REPEAT_TIME = 0.3  # seconds one repeat lasts at most
ALPHA = 0.05
MIN_IMPROVEMENT = 0.02
MIN_REPEATS = 4  # with fewer, two-sided p never reaches 0.05 (6 or more recommended)
NOTHING_KEPT = "no change kept: same as Default"

Measure = Callable[[], float]
Report = Callable[[str], None]


class ProcedureFailed(TuneError):
    """A step failed; what was applied has been restored (``restore_errors`` if not)."""

    def __init__(self, reason: str, rolled_back: int, restore_errors: list[str],
                 cause: errors.BeoperfError | None = None) -> None:
        self.rolled_back, self.restore_errors, self.cause = rolled_back, restore_errors, cause
        super().__init__(reason)


# --------------------------------------------------------------------------- measuring


def repeat(measure: Measure, repeats: int) -> list[float]:
    return [measure() for _ in range(repeats)]


# --------------------------------------------------------------------------- deciding


@dataclass
class Decision:
    """Whether a change is kept: its figures against the current kept state's."""

    keep: bool
    p: float
    improvement_pct: float  # of the means, + = faster than the current kept state
    significant: bool

    def text(self) -> str:
        verdict = "kept" if self.keep else "reverted"
        why = "significant" if self.significant else "not significant"
        return f"{verdict} ({why}: p={self.p:.3g}, {self.improvement_pct:+.2f}% vs current)"


def decide(candidate: Sequence[float], current: Sequence[float],
           keep_all: bool = False) -> Decision:
    """Keep when p < 0.05 and the mean is more than 2% lower (or ``keep_all``)."""
    _u, p = mann_whitney_u(candidate, current)
    base = statistics.fmean(current)
    improvement = (base - statistics.fmean(candidate)) / base if base else 0.0
    significant = p < ALPHA and improvement > MIN_IMPROVEMENT
    return Decision(keep_all or significant, p, 100.0 * improvement, significant)


# --------------------------------------------------------------------------- the rows


@dataclass
class Row:
    label: str
    repeats_us: list[float]
    mean_us: float = 0.0
    variance_us2: float = 0.0
    impact_pct: float | None = None  # (default mean - mean) / default mean, in %
    key: str | None = None
    previous: str | None = None
    target: str | None = None
    verdict: str = "baseline"  # baseline | kept | reverted | combined
    p: float | None = None
    change_pct: float | None = None  # improvement over the current kept state, in %
    decision: str | None = None
    same_as: str | None = None  # "Default": this configuration is Default's, not re-measured

    def __post_init__(self) -> None:
        self.mean_us = statistics.fmean(self.repeats_us)
        self.variance_us2 = statistics.variance(self.repeats_us)


def change_row(change: Change, figures: list[float], decision: Decision) -> Row:
    return Row(f"{change.key}={change.target}", figures, key=change.key,
               previous=change.current, target=change.target,
               verdict="kept" if decision.keep else "reverted", p=decision.p,
               change_pct=decision.improvement_pct, decision=decision.text())


def with_impact(rows: list[Row]) -> list[Row]:
    """Each measured row's impact against Default (none for a row that is Default)."""
    base = rows[0].mean_us
    for row in rows[1:]:
        if row.same_as is None:
            row.impact_pct = 100.0 * (base - row.mean_us) / base if base else None
    return rows


def unchanged_row(default: Row) -> Row:
    """The Combined row when no change was kept: the Default configuration, not measured
    again, with no impact (there is nothing to compare)."""
    return Row("Combined", list(default.repeats_us), verdict="combined",
               decision=NOTHING_KEPT, same_as=default.label)


@dataclass
class Outcome:
    rows: list[Row] = field(default_factory=list)
    kept: list[Change] = field(default_factory=list)

    @property
    def combined(self) -> Row:
        return self.rows[-1]


# --------------------------------------------------------------------------- the procedure


def _undo(applied: list[Change], reason: str,
          cause: errors.BeoperfError | None = None) -> ProcedureFailed:
    failures = tune.restore(reversed(applied))
    return ProcedureFailed(reason, len(applied), failures, cause)


def _try_one(change: Change, current: list[float], measure: Measure, repeats: int,
             keep_all: bool) -> tuple[Row, bool]:
    """Apply, measure, decide, and restore when not kept; a BeoperfError (TuneError or the
    measurement's) on any failure."""
    tune.set_checked(change, change.target)
    figures = repeat(measure, repeats)
    decision = decide(figures, current, keep_all)
    if not decision.keep:
        tune.set_checked(change, change.current)
    return change_row(change, figures, decision), decision.keep


def baseline(measure: Measure, repeats: int) -> Row:
    """The Default row; the measurement's error if the peer cannot be measured (nothing
    applied yet)."""
    return Row("Default", repeat(measure, repeats))


def measure_combined(kept: list[Change], measure: Measure, repeats: int) -> Row:
    """The Combined row: the kept changes together; ProcedureFailed after restoring."""
    try:
        return Row("Combined", repeat(measure, repeats), verdict="combined")
    except errors.BeoperfError as exc:
        raise _undo(kept, f"measuring the combined state: {exc}", exc) from None
    except BaseException:
        tune.restore(reversed(kept))
        raise


def run_changes(changes: list[Change], default: Row, measure: Measure, repeats: int,
                keep_all: bool = False, report: Report | None = None) -> Outcome:
    """Steps 2 and 3 (the snapshot must exist already); ProcedureFailed after restoring."""
    out = Outcome(rows=[default])
    current = default.repeats_us
    for change in changes:
        try:
            row, kept = _try_one(change, current, measure, repeats, keep_all)
        except errors.BeoperfError as exc:
            raise _undo([*out.kept, change], f"{change.key}: {exc}", exc) from None
        except BaseException:  # Ctrl-C or anything unexpected: undo, then let it go on
            tune.restore(reversed([*out.kept, change]))
            raise
        out.rows.append(row)
        if kept:
            out.kept.append(change)
            current = row.repeats_us
        if report:
            report(f"{row.label}: {row.mean_us:.2f} us; {row.decision}")
    out.rows.append(measure_combined(out.kept, measure, repeats) if out.kept
                    else unchanged_row(default))
    with_impact(out.rows)
    return out


# --------------------------------------------------------------------------- the document


def body(out: Outcome, *, profile: str, interface: str | None, peer: str, port: int,
         repeats: int, keep_all: bool, rollback_file: str | None) -> dict[str, Any]:
    """The body of the "procedure" document (no rows: nothing was there to change)."""
    return {"profile": profile, "interface": interface, "peer": peer, "port": port,
            "size": SIZE, "repeats": repeats, "keep_all": keep_all,
            "test": {"name": "Mann-Whitney U, two-sided", "alpha": ALPHA,
                     "min_improvement_pct": 100 * MIN_IMPROVEMENT},
            "rows": [asdict(r) for r in out.rows],
            "kept": [c.key for c in out.kept], "rollback_file": rollback_file}

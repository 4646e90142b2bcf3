"""The measured tuning procedure: one change at a time, kept only when it is shown to help.

The published cluster-tuning procedure measures the small-message latency of the
default configuration, then applies one change at a time and measures again, and
finally measures all the changes combined.  Done naively (Default measured once, then each
change once) a cold first measurement or a machine that drifts makes a change that cannot
matter look like a gain.  Here it is measured like an experiment, and every step can be
undone:

1. warm-up: ``WARMUP`` measurements, discarded (they also show that the peer answers
   before anything is changed); a measurement is one short ping-pong at 16 bytes against
   the peer's ``beoperf serve``, its figure the median one-way time (us);
2. a rollback snapshot of every value the plan touches is written (by the caller);
3. each change in blocks between blocks of the state it is judged against (the baseline:
   Default, or Default plus the changes kept so far): A C A C ... C A, ``repeats`` blocks
   of the change, the change applied (and read back) before each and restored after;
4. the decision, the greedy design's rule that ``beoperf study --design greedy`` decides
   by too (``beoperf.analysis.greedy``, on ``effect.sandwiched``): each change block
   against the mean of its two neighbours on the log scale, Student's t interval of the
   mean ratio from those differences alone (so the spread is the blocks' own, never a
   history that mixes settings), widened for the number of changes in the plan
   (Bonferroni); kept only when the interval lies below no change and not within the
   margin ("better"; ``--margin``, default 10%), else restored;
5. the combined state against Default, the same way (all kept changes applied and
   restored around each block), when at least one change was kept; when none was, the
   final state *is* Default, so the Combined row says so instead of measuring it again.

Any failure halfway restores everything applied, in reverse order.

The measurement itself is the caller's (``beoperf.suites.tune`` measures against the
peer): here it is any function that returns one block's figure, or raises a
``beoperf.errors`` error (an unreachable or refusing peer) or a TuneError.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from beoperf import errors
from beoperf.analysis import effect, greedy
from beoperf.analysis.effect import BETTER, Effect
from beoperf.audit import tune
from beoperf.audit.tune import Change, TuneError
from beoperf.model.document import JsonObject
from beoperf.model.tune import Procedure, ProcedureRow

SIZE = 16  # bytes: small-message latency
REPEAT_TIME = 0.3  # seconds one block lasts at most
WARMUP = 2  # measurements before the first block, discarded
MIN_REPEATS = 4  # blocks of each change (with fewer, t's interval is too wide to decide)
NOTHING_KEPT = "no change kept: same as Default"

Measure = Callable[[], float]
Report = Callable[[str], None]


class ProcedureFailed(TuneError):
    """A step failed; what was applied has been restored (``restore_errors`` if not)."""

    def __init__(self, reason: str, rolled_back: int, restore_errors: list[str],
                 cause: errors.BeoperfError | None = None) -> None:
        self.rolled_back, self.restore_errors, self.cause = rolled_back, restore_errors, cause
        super().__init__(reason)


# --------------------------------------------------------------------------- deciding


def decide(candidate: Sequence[float], around: Sequence[float], family: int = 1,
           keep_all: bool = False, margin: float = effect.DEFAULT_MARGIN) -> tuple[bool, Effect]:
    """(keep, effect): kept when the change's blocks are shown to be faster than their
    neighbours by more than the margin (or ``keep_all``): the greedy design's rule
    (``analysis.greedy``), which ``beoperf study --design greedy`` decides by too."""
    found = rule(family, keep_all, margin).decide(greedy.Trial.of_blocks(candidate, around))
    return found.keep, found.effect


def rule(family: int, keep_all: bool = False,
         margin: float = effect.DEFAULT_MARGIN) -> greedy.Rule:
    """The procedure's decision rule: latency (lower is better), the plan's changes as
    the family."""
    return greedy.Rule(higher_is_better=False, family=family, margin=margin,
                       keep_all=keep_all)


def decision_text(keep: bool, found: Effect, against: str, keep_all: bool = False) -> str:
    """'kept (better: -12.3%, -20..-4.1% against Default, 4 blocks)'."""
    verb = "kept" if keep else "reverted"
    if keep and keep_all and found.verdict != BETTER:
        verb = "kept (--keep-all)"
    span = found.interval_pct()
    if found.change_pct is None or span is None:
        return f"{verb} ({found.verdict}: {found.reason})"
    return (f"{verb} ({found.verdict}: {found.change_pct:+.1f}%, "
            f"{span[0]:+.1f}..{span[1]:+.1f}% against {against}, {found.runs} blocks)")


# --------------------------------------------------------------------------- the rows


@dataclass
class Row(ProcedureRow):
    """A configuration as it is measured: its mean and variance computed from its
    blocks."""

    def __post_init__(self) -> None:
        self.mean_us = statistics.fmean(self.repeats_us)
        self.variance_us2 = statistics.variance(self.repeats_us) \
            if len(self.repeats_us) > 1 else 0.0


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


# --------------------------------------------------------------------------- measuring


def blocks_at_most(changes: int, repeats: int) -> int:
    """The measurements a plan takes at most: the warm-up, each change's blocks and its
    neighbours, and the combined state's (when something is kept)."""
    return WARMUP + (changes + 1) * (2 * repeats + 1) if changes else 0


def counted(measure: Measure, on_block: Callable[[], None]) -> Measure:
    """``measure``, calling ``on_block`` after each measurement (a progress display)."""
    def measured() -> float:
        figure = measure()
        on_block()
        return figure

    return measured


def warm_up(measure: Measure, count: int = WARMUP) -> None:
    """Measurements whose figures are dropped: the first connections and a cold peer are
    slower, and a baseline measured cold makes every later change look good.  The
    measurement's error if the peer cannot be measured (nothing applied yet)."""
    for _ in range(count):
        measure()


def _apply(changes: Sequence[Change]) -> None:
    for change in changes:
        tune.set_checked(change, change.target)


def _unapply(changes: Sequence[Change]) -> None:
    for change in reversed(changes):
        tune.set_checked(change, change.current)


def interleaved(on: Callable[[], None], off: Callable[[], None], measure: Measure,
                repeats: int) -> tuple[list[float], list[float]]:
    """(the blocks measured after ``on``, the blocks around them after ``off``):
    A C A C ... C A, starting and ending in the ``off`` state it is found in."""
    around = [measure()]
    changed: list[float] = []
    for _ in range(repeats):
        on()
        changed.append(measure())
        off()
        around.append(measure())
    return changed, around


# --------------------------------------------------------------------------- the procedure


def _undo(applied: list[Change], reason: str,
          cause: errors.BeoperfError | None = None) -> ProcedureFailed:
    failures = tune.restore(reversed(applied))
    return ProcedureFailed(reason, len(applied), failures, cause)


def _against(kept: Sequence[Change]) -> str:
    return "Default" if not kept else "Default + " + ", ".join(c.key for c in kept)


def _row(change: Change, changed: list[float], around: list[float], decision: greedy.Decision,
         kept: Sequence[Change], keep_all: bool) -> Row:
    """A change's row: its blocks, the decision, and the blocks of the state it was
    judged against."""
    against = _against(kept)
    found = decision.effect
    return Row(f"{change.key}={change.target}", changed, key=change.key,
               previous=change.current, target=change.target,
               verdict="kept" if decision.keep else "reverted", p=found.p,
               change_pct=found.change_pct,
               decision=decision_text(decision.keep, found, against, keep_all),
               against=against, against_us=around, effect=found.to_dict())


def _combined(kept: Sequence[Change], measure: Measure, repeats: int,
              margin: float = effect.DEFAULT_MARGIN) -> Row:
    """The kept changes together against Default: Default blocks (the kept changes
    restored) around blocks with them applied; applied again at the end."""
    _unapply(kept)
    changed, around = interleaved(lambda: _apply(kept), lambda: _unapply(kept), measure,
                                  repeats)
    _apply(kept)
    found = effect.blocks(changed, around, higher_is_better=False, margin=margin)
    span = found.interval_pct()
    decision = (f"{found.verdict}: {found.change_pct:+.1f}%, {span[0]:+.1f}..{span[1]:+.1f}% "
                f"against Default, {found.runs} blocks" if span and found.change_pct
                is not None else f"{found.verdict}: {found.reason}")
    return Row("Combined", changed, verdict="combined", p=found.p,
               change_pct=found.change_pct, decision=decision, against="Default",
               against_us=around, effect=found.to_dict())


@dataclass
class _Steps:
    """What the greedy loop has done so far: the changes applied now (to undo on a
    failure), those kept, the rows, the Default blocks, and the last change's blocks."""

    touched: list[Change] = field(default_factory=list)
    kept: list[Change] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    default_blocks: list[float] = field(default_factory=list)
    last: tuple[list[float], list[float]] = ([], [])


def run_changes(changes: list[Change], measure: Measure, repeats: int,
                keep_all: bool = False, report: Report | None = None,
                margin: float = effect.DEFAULT_MARGIN) -> Outcome:
    """Steps 3 to 5 (warm up first; the snapshot must exist already) through the greedy
    design's loop and rule (``analysis.greedy``, as ``beoperf study --design greedy``);
    ProcedureFailed after restoring every change touched (restoring one that is not
    applied is harmless)."""
    steps = _Steps()
    the_rule = rule(greedy.family_of(len(changes)), keep_all, margin)

    def trial(change: Change, kept: Sequence[Change]) -> greedy.Trial:
        steps.touched = [*kept, change]
        steps.last = interleaved(lambda: _apply([change]), lambda: _unapply([change]),
                                 measure, repeats)
        return greedy.Trial.of_blocks(*steps.last)

    def decided(change: Change, decision: greedy.Decision, kept: Sequence[Change]) -> None:
        if decision.keep:
            tune.set_checked(change, change.target)
            steps.kept.append(change)
        row = _row(change, *steps.last, decision, kept, keep_all)
        if not kept:
            steps.default_blocks += row.against_us or []
        steps.rows.append(row)
        steps.touched = list(steps.kept)
        if report:
            report(f"{row.label}: {row.mean_us:.2f} us; {row.decision}")

    try:
        kept = greedy.run(changes, trial, lambda: the_rule, decided)
        combined = _combined(kept, measure, repeats, margin) if kept else None
    except errors.BeoperfError as exc:
        touched = steps.touched
        where = touched[-1].key if touched and touched[-1] not in steps.kept \
            else "combined state"
        raise _undo(touched, f"{where}: {exc}", exc) from None
    except BaseException:  # Ctrl-C or anything unexpected: undo, then let it go on
        tune.restore(reversed(steps.touched))
        raise
    default_blocks = steps.default_blocks
    if combined is not None:
        default_blocks += combined.against_us or []
    default = Row("Default", default_blocks)
    out = Outcome(rows=[default, *steps.rows], kept=kept)
    out.rows.append(combined if combined is not None else unchanged_row(default))
    with_impact(out.rows)
    return out


# --------------------------------------------------------------------------- the document


def describe_test(changes: int, repeats: int | None = None,
                  margin: float = effect.DEFAULT_MARGIN) -> JsonObject:
    """The method as data, with the one line the renderers print (``{repeats}`` in it
    until the number of blocks is given)."""
    blocks = "{repeats}" if repeats is None else str(repeats)
    statement = (
        f"Each change in {blocks} blocks, each between two blocks of the state it is judged "
        "against (A C A C ... A); per block the log ratio to the mean of its neighbours; "
        "Student's t interval of the mean ratio from those blocks alone, "
        f"{1 - effect.ALPHA:.0%} widened for the {changes} change(s) of the plan "
        f"(Bonferroni); kept only when the interval lies below no change (better) and "
        f"not within ±{100 * margin:g}% (no difference shown); "
        f"{WARMUP} warm-up measurements first, dropped (the greedy design of "
        "'beoperf study', same rule).")
    return {"name": "interleaved blocks, Student's t on the log ratio to the neighbours",
            "alpha": effect.ALPHA, "correction": "Bonferroni over the plan's changes",
            "changes": changes, "warmup": WARMUP, "margin": margin, "statement": statement}


def body(out: Outcome, *, profile: str, interface: str | None, peer: str, port: int,
         repeats: int, keep_all: bool, rollback_file: str | None,
         margin: float = effect.DEFAULT_MARGIN) -> JsonObject:
    """The body of the "procedure" document (no rows: nothing was there to change)."""
    test = describe_test(max(0, len(out.rows) - 2), repeats, margin)
    return Procedure(profile, interface, peer, port, SIZE, repeats, keep_all, test,
                     list(out.rows), [c.key for c in out.kept], rollback_file).body()

"""The greedy design: one loop and one decision rule for ``beoperf tune --procedure`` and
``beoperf study --design greedy``, so that the two cannot disagree on the same blocks.

Each candidate in turn is measured in blocks, each between two blocks of the baseline of
the moment (Default plus the candidates kept so far): A C A C ... C A.  Its effect is
``effect.sandwiched`` of those (before, candidate, after) triples, widened for the
family (every candidate of the plan x every figure judged, from the first decision on,
so that a decision and the final effect of the same blocks agree) and judged with the
margin: an interval inside +-margin is "no difference shown" and is not kept, even when
it excludes no change (four blocks around a drift of a percent can give -0.9..-0.5%).
A candidate is kept only when it comes out "better" (or with ``keep_all``), and then
stays applied under the ones after it.

The measuring is the caller's: ``tune --procedure`` sets this node's values between
ping-pongs against the peer's ``beoperf serve`` (``audit/procedure.py``), a study moves
every host through its dead-man agent (``suites/study.py``).  Both hand their blocks to
:func:`run` through a ``measure`` function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from beoperf.analysis import effect
from beoperf.analysis.effect import ALPHA, BETTER, DEFAULT_MARGIN, Effect

Triple = tuple[float, float, float]  # (baseline block before, candidate block, after)
C = TypeVar("C")


@dataclass(frozen=True)
class Trial:
    """What measuring one candidate gave: its blocks, each with the baseline blocks just
    before and after it, and how many distinct baseline blocks those are (None: two per
    triple, none shared)."""

    triples: list[Triple]
    baseline_runs: int | None = None

    @classmethod
    def of_blocks(cls, candidate: Sequence[float], around: Sequence[float]) -> Trial:
        """A C A C ... C A as triples (``around`` one longer than ``candidate``; any other
        shape gives no triple, which is judged "cannot tell")."""
        if len(around) != len(candidate) + 1:
            return cls([], len(around))
        return cls([(around[i], c, around[i + 1]) for i, c in enumerate(candidate)],
                   len(around))


@dataclass(frozen=True)
class Decision:
    """Whether the candidate is kept, and the effect that decided it."""

    keep: bool
    effect: Effect


def family_of(candidates: int, figures: int = 1) -> int:
    """The Bonferroni family of a greedy plan: every candidate x every figure judged."""
    return max(1, candidates * figures)


@dataclass(frozen=True)
class Rule:
    """The decision rule: the direction of the deciding figure, the family, the margin
    within which a change counts as none, ``keep_all`` (keep whatever the verdict) and
    alpha."""

    higher_is_better: bool = False
    family: int = 1
    margin: float = DEFAULT_MARGIN
    keep_all: bool = False
    alpha: float = ALPHA

    def judge(self, trial: Trial) -> Effect:
        return effect.sandwiched(trial.triples, higher_is_better=self.higher_is_better,
                                 family=self.family, margin=self.margin, alpha=self.alpha,
                                 baseline_runs=trial.baseline_runs)

    def decide(self, trial: Trial) -> Decision:
        """Kept only when "better" (outside the margin, on the good side of no change),
        or with ``keep_all``."""
        found = self.judge(trial)
        return Decision(self.keep_all or found.verdict == BETTER, found)


Measure = Callable[[C, Sequence[C]], Trial | None]
Decided = Callable[[C, Decision, Sequence[C]], None]


def run(candidates: Sequence[C], measure: Measure[C], rule: Callable[[], Rule],
        decided: Decided[C] | None = None) -> list[C]:
    """The greedy loop: each candidate measured by ``measure(candidate, kept so far)``
    (None: not judged, e.g. a level its path does not carry), decided by the rule of the
    moment (``rule()``: a study's family shrinks when a level is skipped), told to
    ``decided(candidate, decision, kept before it)`` (which leaves a kept one applied, or
    puts it back), and kept or not.  The candidates kept, in order."""
    kept: list[C] = []
    for candidate in candidates:
        trial = measure(candidate, tuple(kept))
        if trial is None:
            continue
        decision = rule().decide(trial)
        if decided is not None:
            decided(candidate, decision, tuple(kept))
        if decision.keep:
            kept.append(candidate)
    return kept

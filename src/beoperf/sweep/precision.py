"""The precision loop: measure points of an axis until each is known well enough, within a
time budget for the whole run.  Generic over what is swept: message sizes today, loop
lengths, thread or process counts tomorrow.

How it runs (each step is what makes the numbers hold on a noisy, shared machine):

1. **Calibration**, in axis order: a warm-up and a first estimate of the cost of one
   repetition of each point, so that one trial of it lasts about ``trial_time``.
2. **Passes**, each over the points still needing trials, in a shuffled order: one trial of
   each point per pass.  A slow machine state lasting seconds (another tenant, frequency
   scaling, an interrupt storm) then hits every point alike and shows up in each point's
   spread, instead of biasing whichever points it happened to fall on.  Trials are the
   independent unit: the interval of a point's median is taken over its trial medians,
   which, spread over the whole run, sample the machine's states as a repeat run would.
3. **Stopping**: after ``min_trials`` passes, a point whose 95% interval is within
   ``precision`` of its median is done; the others get further passes while the budget
   lasts, the most uncertain first when not all fit.  A point that ends unconverged keeps
   the interval it reached and is flagged.  Points are judged again after every pass, as
   the inflation of the intervals (the machine's state lasting from pass to pass,
   ``PrecisionLoop.inflation``) may have grown: a flag agrees with the final interval.
   When that reopens a point, every precise point gets one trial more, so that none is
   left with trials of the machine's old state only (``PrecisionLoop.choose``).
4. **Drift**: a reference point (the first of the axis): its trial medians of the passes
   that measured it, in time order, say how much the machine itself moved while it was
   measured (reported as the relative range and as the slope of a line through them).
   Like any point it stops once precise: a change of the machine after that is not in
   the drift.

5. **The budget is a hard limit** (``hard_budget``, the default): no trial starts that is
   predicted to end after it (``Measurer.seconds``, else repetitions x the cost of one).
   The points' minimum trials come first, the cheapest first: before a trial of one point,
   the minimum still owed by the points that fit (in order of cost) is set aside, so a
   point that stalls (16 KiB socket buffers at megabyte messages on loopback: 10 s a
   round trip) cannot take the others' share; it gets the trials that fit in what is left
   and is ``cut`` (``Point.cut``: it may have fewer than ``min_trials``, or none).  A run
   then ends within its budget plus at most one trial that took longer than predicted (a
   point's first trial, whose cost is scaled from the point before it).  With
   ``hard_budget`` off, every point gets ``min_trials`` trials even if that takes longer
   (``over_budget``).  ``max_time`` optionally caps the time spent on one point.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from beoperf.analysis import intervals
from beoperf.analysis.stats import MIN_CI_SAMPLES, median_ci

PRECISION = 0.02  # the default target: the 95% interval's half-width, relative to the median
TRIAL_S = 0.002  # the default length of one trial (s): short, so that many points share a budget
MAX_REPS = 1 << 24
MAX_INFLATION = 3.0
MIN_AUTOCORRELATION_PASSES = 8


class Measurer(Protocol):
    """What the loop needs of a measurement: a cost estimate and a timed trial."""

    def calibrate(self, key: Any, estimate_ns: float | None
                  ) -> float | tuple[float, np.ndarray] | tuple[float, np.ndarray, int]:
        """Warm up ``key``; return the time of one repetition (ns), and optionally the
        samples of a full trial made while calibrating (then it counts as the first) and
        the repetitions that trial timed (if not one per sample: a stream trial times
        many messages as one sample)."""

    def trial(self, key: Any, reps: int) -> np.ndarray:
        """One trial of ``reps`` repetitions: its samples (ns; the trial's median is the
        observation).

    Optional: ``seconds(key, reps, unit_ns)``, how long a trial of ``reps`` repetitions
    at ``unit_ns`` each lasts (with any warm-up the measurer adds; default ``reps x
    unit_ns``), which the hard budget plans with; ``probe(key)``, the cost of one
    repetition (ns) from a single one, asked under the hard budget before a point's
    first trial (a cost scaled from the point before misses a jump); and ``cost``,
    ``warm``, ``start_pass``, ``check``, ``trial_seconds`` (see PrecisionLoop)."""


@dataclass
class LoopConfig:
    precision: float = PRECISION  # target 95% interval half-width of the median, relative
    trial_time: float = TRIAL_S  # seconds one trial should last
    min_trials: int = MIN_CI_SAMPLES  # the interval needs at least 6 trials
    time_budget: float | None = None  # seconds for the whole loop; None: no limit
    max_time: float | None = None  # seconds per point at most; None: no cap
    min_reps: int = 1  # repetitions of one trial at least
    seed: int | None = None  # of the shuffles (None: different every run)
    order: str = "axis"  # "axis": every pass in axis order; "shuffled": a new order each pass
    hard_budget: bool = True  # no trial starts that would end after the budget (see above)


@dataclass
class Point:
    """One point of the axis: its trials and where it stands."""

    key: Any  # hashable; each measurer has its own (a size, a (kernel, length) pair, ...)
    unit_ns: float = 0.0  # cost of one repetition, from calibration and trials
    pass_of: list[int] = field(default_factory=list)  # the pass of each trial (0: calibration)
    chunks: list[np.ndarray] = field(default_factory=list)
    trial_medians: list[float] = field(default_factory=list)
    reps: int = 0  # every timed repetition
    spent: float = 0.0  # seconds of trials
    converged: bool = False
    capped: bool = False  # stopped by max_time
    cut: bool = False  # stopped by the hard budget (trials may be fewer than min_trials)

    @property
    def trials(self) -> int:
        return len(self.trial_medians)

    def median_ci(self) -> tuple[float, float, float] | None:
        """(median, low, high): the median of the trial medians and its 95% interval
        (distribution-free, from order statistics); None with too few trials."""
        if self.trials < MIN_CI_SAMPLES:
            return None
        ordered = np.sort(np.asarray(self.trial_medians))
        ci = median_ci(ordered)
        return (float(np.median(ordered)), ci[0], ci[1]) if ci is not None else None

    def repeat_interval(self, inflation: float = 1.0) -> tuple[float, float] | None:
        """Where a repeat run's median is expected (95%): the median's interval, each side
        widened by sqrt(2) (the repeat has the same error as this run) and by
        ``inflation`` (the machine's state carried from pass to pass), on the log scale
        (beoperf.analysis.intervals: a time or a rate is positive, and so are both
        bounds, however wide); None without an interval or with a bound <= 0."""
        got = self.median_ci()
        if got is None:
            return None
        med, lo, hi = got
        return intervals.widened(med, lo, hi, math.sqrt(2.0) * inflation)

    def relative_ci(self, inflation: float = 1.0) -> float | None:
        """Half-width of the repeat interval, relative to the median."""
        got, interval = self.median_ci(), self.repeat_interval(inflation)
        if got is None or interval is None or got[0] <= 0:
            return None
        return (interval[1] - interval[0]) / 2.0 / got[0]


@dataclass
class LoopOutcome:
    points: list[Point]
    passes: int = 0
    elapsed_s: float = 0.0
    over_budget: bool = False  # it ran longer than the budget (see PrecisionLoop.run)
    drift: dict[str, float | int | None] = field(default_factory=dict)
    inflation: float = 1.0  # of the intervals, for the state carried between passes
    pass_autocorrelation: float | None = None
    stopped: BaseException | None = None  # what ended it early (interrupt, failure)


def reps_for(unit_ns: float, target_s: float, minimum: int = 1) -> int:
    """Repetitions so that one trial lasts about ``target_s``."""
    return max(minimum, min(MAX_REPS, int(target_s * 1e9 / max(unit_ns, 1.0))))


class PrecisionLoop:
    """Runs a :class:`Measurer` over ``keys`` (see the module docstring)."""

    def __init__(self, keys: Sequence[Hashable], measurer: Measurer, cfg: LoopConfig,
                 on_pass: Callable[[int, list[Point]], None] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 on_point: Callable[[Point], None] | None = None) -> None:
        self.points = [Point(k) for k in keys]
        self.measurer, self.cfg, self.on_pass, self.clock = measurer, cfg, on_pass, clock
        self.on_point = on_point  # after each point's calibration (or its cut): progress
        self.rng = random.Random(cfg.seed)
        self.started = 0.0
        self.passes = 0  # passes completed (trials during calibration belong to pass 0)
        self.reference: list[tuple[float, float]] = []  # (time, median) of point 0 per pass
        self.restate = False  # a precise point was reopened: see pending and choose

    # ------------------------------------------------------------------ steps

    def calibrate(self) -> None:
        """Each point's first estimate (and usually its first trial), in axis order; under
        the hard budget a point whose first trial would not fit beside the minimum trials
        still owed by the points before it is cut, untried."""
        estimate: float | None = None
        previous: Hashable | None = None
        probe = getattr(self.measurer, "probe", None)
        for point in self.points:
            guess = estimate
            if guess is not None and _scalable(previous, point.key):
                guess *= max(1.0, float(point.key) / float(previous))  # type: ignore[arg-type]
            fits = guess is None or self._fits(self.predict(point, guess))
            if guess is not None and probe is not None and self._may_probe(guess, fits):
                seen = float(probe(point.key))  # one repetition, untimed by the loop
                # a jump in cost shows here; and a cost scaled up from a smaller size (a
                # stream's 1 B is per-message work, not bytes) gives way to what it is
                guess = max(guess, seen) if fits else seen
                fits = self._fits(self.predict(point, guess))
            if not fits:
                point.cut = True
            else:
                began = self.clock()
                got = self.measurer.calibrate(point.key, guess)
                point.spent += self.clock() - began
                if isinstance(got, tuple):
                    point.unit_ns = got[0]
                    self._record(point, got[1], got[2] if len(got) > 2 else 0)
                else:
                    point.unit_ns = got
                estimate, previous = point.unit_ns, point.key
            if self.on_point:
                self.on_point(point)

    def _may_probe(self, guess_ns: float, fits: bool) -> bool:
        """Under the hard budget: probe a point's cost before its first trial when a trial
        at the guessed cost fits, or when one repetition at that cost fits beside the
        minimum trials owed (a guess scaled up from a smaller size may be far too high;
        a point whose one repetition would not fit is cut without trying)."""
        if self.deadline is None:
            return False
        if fits:
            return True
        left = self._left()
        return self._reserve(left)[1] + guess_ns * 1e-9 <= left

    def predict(self, point: Point, unit_ns: float | None = None) -> float:
        """Seconds the next trial of ``point`` is expected to take: at ``unit_ns`` a
        repetition, else at the point's own cost, and no less than its trials took on
        average, wall time (what a trial costs beyond its repetitions: the messages that
        start and end it, the interpreter, shows there)."""
        unit = point.unit_ns if unit_ns is None else unit_ns
        reps = reps_for(unit, self.trial_seconds(point), self.cfg.min_reps)
        own = getattr(self.measurer, "seconds", None)
        seconds = own(point.key, reps, unit) if own else reps * max(unit, 1.0) * 1e-9
        seen = point.spent / point.trials if point.trials and unit_ns is None else 0.0
        return max(self.trial_seconds(point), float(seconds), seen)

    @property
    def deadline(self) -> float | None:
        """When the hard budget ends (None: no budget, or a soft one)."""
        if not self.cfg.hard_budget or self.cfg.time_budget is None:
            return None
        return self.started + self.cfg.time_budget

    def _left(self) -> float:
        return math.inf if self.deadline is None else self.deadline - self.clock()

    def _reserve(self, left: float) -> tuple[set[int], float]:
        """The points still owed minimum trials whose owed trials fit in ``left``
        seconds, the cheapest first (their ids), and the seconds those trials take."""
        owed = sorted(((self.cfg.min_trials - p.trials) * self.predict(p), id(p))
                      for p in self.points  # those calibrated so far
                      if (p.trials or p.unit_ns) and p.trials < self.cfg.min_trials
                      and not p.cut)
        ids: set[int] = set()
        total = 0.0
        for cost, ident in owed:
            if total + cost > left:
                break
            ids.add(ident)
            total += cost
        return ids, total

    def _fits(self, seconds: float) -> bool:
        """Under the hard budget: a trial of ``seconds`` fits beside the minimum trials
        still owed by the points that fit (``_reserve``)."""
        if self.deadline is None:
            return True
        left = self._left()
        return self._reserve(left)[1] + seconds <= left

    def trial_seconds(self, point: Point) -> float:
        """How long one trial of this point should last (the measurer may ask for more,
        e.g. to outlast a shaper's burst)."""
        own = getattr(self.measurer, "trial_seconds", None)
        return max(self.cfg.trial_time, own(point.key)) if own else self.cfg.trial_time

    def trial(self, point: Point) -> None:
        reps = reps_for(point.unit_ns, self.trial_seconds(point), self.cfg.min_reps)
        began = self.clock()
        values = self.measurer.trial(point.key, reps)
        point.spent += self.clock() - began
        self._record(point, values, reps)

    def _record(self, point: Point, values: np.ndarray, reps: int) -> None:
        """Keep one trial's samples; then let the measurer stop the loop if that trial
        went wrong (``measurer.check``: e.g. corrupted messages), the trial kept."""
        point.chunks.append(values)
        point.trial_medians.append(float(np.median(values)))
        point.pass_of.append(self.passes)
        point.reps += reps or len(values)
        cost = getattr(self.measurer, "cost", None)  # a repetition's wall time, if not the median
        point.unit_ns = max(1.0, cost(values) if cost else float(np.median(values)))
        check = getattr(self.measurer, "check", None)
        if check is not None:
            check(point.key)

    def walk(self, order: list[Point]) -> None:
        """One pass: a trial of each chosen point.  In axis order, the points between two
        chosen ones are warmed up on the way (``measurer.warm``, if it has one), so that
        every trial follows its neighbour as in a plain ascending sweep: a transport
        carries state from one size to the next (TCP's congestion window shrinks while
        small messages do not use it), and a NetPIPE-equivalent figure needs the state a
        NetPIPE sweep gives."""
        warm = getattr(self.measurer, "warm", None)
        start = getattr(self.measurer, "start_pass", None)
        if start is not None and order:
            start()
        if self.cfg.order == "shuffled" or warm is None or not order:
            for point in order:
                self.trial(point)
            return
        chosen = {id(p) for p in order}
        last = max(self.points.index(p) for p in order)
        ahead = sum(self.predict(p) for p in order)  # the chosen trials not yet run
        for point in self.points[:last + 1]:
            if id(point) in chosen:
                ahead -= self.predict(point)
                self.trial(point)
            elif not point.cut and self._warm_fits(point, ahead):
                warm(point.key)

    def _warm_fits(self, point: Point, ahead: float) -> bool:
        """A warm-up (one repetition) fits in the hard budget beside the pass's trials
        still to run: near the end, and for a point that stalls, it is left out."""
        if self.deadline is None:
            return True
        own = getattr(self.measurer, "seconds", None)
        cost = float(own(point.key, 1, point.unit_ns)) if own else point.unit_ns * 1e-9
        return ahead + cost <= self._left()

    def pending(self) -> list[Point]:
        """Points that want another trial: too few, or not precise yet (and not capped).

        Every point is judged afresh, with the inflation as of now: one found precise in
        the first passes, before they showed the machine's state lasting from pass to
        pass, may not be once they do; its reported interval uses the final inflation,
        and its flag must agree with that interval."""
        out = []
        inflation = self.inflation()
        for p in self.points:
            if p.cut:
                continue
            if p.trials < self.cfg.min_trials:
                out.append(p)
                continue
            rel = p.relative_ci(inflation)
            was = p.converged
            p.converged = rel is not None and rel <= self.cfg.precision
            self.restate |= was and not p.converged
            if not p.converged and self.cfg.max_time is not None and p.spent >= self.cfg.max_time:
                p.capped = True
            if not (p.converged or p.capped):
                out.append(p)
        return out

    def choose(self, pending: list[Point]) -> list[Point]:
        """This pass's points, shuffled: all that need their minimum trials; once more,
        the precise ones, if a grown inflation reopened one of them (``_again``); of the
        rest, the most uncertain that fit in the budget left (at least one while any is
        left)."""
        must = [p for p in pending if p.trials < self.cfg.min_trials]
        extra = [p for p in pending if p.trials >= self.cfg.min_trials]
        budget = self.cfg.time_budget
        room = math.inf
        if self.deadline is not None:
            must, room = self._must_within(must)
        elif budget is not None:
            room = budget - (self.clock() - self.started) - sum(self.predict(p) for p in must)
        again = self._again(pending)
        fit = []
        for p in again:
            if self.predict(p) <= room:
                fit.append(p)
                room -= self.predict(p)
        if budget is not None and extra:
            k = self.inflation()
            extra.sort(key=lambda p: -(p.relative_ci(k) or math.inf))
            chosen = []
            for p in extra:
                if self.predict(p) > room:
                    continue
                chosen.append(p)
                room -= self.predict(p)
            extra = chosen
        order = must + fit + extra
        if self.cfg.order == "shuffled":
            self.rng.shuffle(order)
        else:
            rank = {id(p): i for i, p in enumerate(self.points)}
            order.sort(key=lambda p: rank[id(p)])
        return order

    def _again(self, pending: list[Point]) -> list[Point]:
        """The precise points to measure once more, after a grown inflation reopened one
        of them (``restate``): the machine's state moved from pass to pass, and a point
        left with trials of the old state only would mix two states into one curve.  On
        a shared-memory MPI sweep the round trips tripled from pass 20: 1 and 2 KiB,
        reopened, took 19-21 trials of the new state, 1.5 KiB (tighter) stayed precise
        on 6 of the old, and read 0.19 us between 0.65 and 0.69 us.  One trial each,
        before the most uncertain others; their own intervals decide after it."""
        if not self.restate:
            return []
        self.restate = False
        waiting = {id(p) for p in pending}
        return [p for p in self.points if p.converged and not p.cut and id(p) not in waiting]

    def _must_within(self, must: list[Point]) -> tuple[list[Point], float]:
        """Under the hard budget: of the points owed minimum trials, those whose owed
        trials fit (``_reserve``) get one now; the others, the cheapest first, one each
        while it fits in what those leave; a point whose one trial does not fit is cut.
        With the seconds left over for further trials of precise-enough points."""
        left = self._left()
        admitted, reserved = self._reserve(left)
        chosen = [p for p in must if id(p) in admitted]
        spare = left - reserved
        for p in sorted((p for p in must if id(p) not in admitted), key=self.predict):
            cost = self.predict(p)
            if cost <= spare:
                chosen.append(p)
                spare -= cost
            else:
                p.cut = True
        return chosen, spare

    # ------------------------------------------------------------------ the loop

    def run(self) -> LoopOutcome:
        out = LoopOutcome(self.points)
        self.started = self.clock()
        try:
            self.calibrate()
            while True:
                order = self.choose(self.pending())
                if not order:
                    break
                self.passes += 1
                self.walk(order)
                self._note_reference()
                out.passes += 1
                self.pending()  # convergence flags as of this pass
                if self.on_pass:
                    self.on_pass(out.passes, self.points)
        except BaseException as exc:  # noqa: BLE001 - the caller decides; trials are kept
            out.stopped = exc
        out.elapsed_s = self.clock() - self.started
        out.over_budget = self._over_budget(out.elapsed_s)
        self.pending()  # final convergence flags
        out.drift = drift(self.reference)
        out.inflation = self.inflation()
        out.pass_autocorrelation = pass_autocorrelation(self.points)
        return out

    def _over_budget(self, elapsed: float) -> bool:
        """Soft budget: the minimum trials alone took longer than the budget.  Hard
        budget: a trial took longer than predicted and the run ended after it."""
        budget = self.cfg.time_budget
        if budget is None or elapsed <= budget:
            return False
        if self.deadline is not None:
            return True
        return (all(p.trials >= self.cfg.min_trials for p in self.points)
                and not any(p.trials > self.cfg.min_trials for p in self.points))

    def inflation(self) -> float:
        """How much wider a median's interval must be because the machine's state lasts
        from one pass into the next: sqrt((1 + r) / (1 - r)) for the lag-1
        autocorrelation r of the passes' common factor (1 until enough passes)."""
        r = pass_autocorrelation(self.points)
        if r is None or r <= 0:
            return 1.0
        return min(MAX_INFLATION, math.sqrt((1 + r) / (1 - min(r, 0.9))))

    def _note_reference(self) -> None:
        """The reference point's trial of the pass just run, if it had one: a point once
        precise is not measured again, and repeating its last median for the passes
        after that would show a steady machine that nothing watched."""
        ref = self.points[0]
        if ref.pass_of and ref.pass_of[-1] == self.passes:
            self.reference.append((self.clock() - self.started, ref.trial_medians[-1]))


def pass_autocorrelation(points: Sequence[Point]) -> float | None:
    """Lag-1 autocorrelation of the passes' common factor: per pass, the median over the
    points measured in it of (that trial's median / the point's median).  A machine whose
    slow and fast states last longer than a pass makes consecutive factors alike (r > 0),
    so that fewer passes are independent than there are passes."""
    by_pass: dict[int, list[float]] = {}
    for p in points:
        if not p.trial_medians:
            continue
        med = float(np.median(p.trial_medians))
        if med <= 0:
            continue
        for k, value in zip(p.pass_of, p.trial_medians, strict=True):
            by_pass.setdefault(k, []).append(value / med)
    factors = np.array([float(np.median(v)) for k, v in sorted(by_pass.items())
                        if len(v) >= min(3, len(points))])
    if len(factors) < MIN_AUTOCORRELATION_PASSES:
        return None
    centred = factors - factors.mean()
    denom = float(centred @ centred)
    return float(centred[:-1] @ centred[1:] / denom) if denom > 0 else 0.0


def _scalable(previous: Hashable | None, key: Hashable) -> bool:
    return isinstance(previous, int | float) and isinstance(key, int | float) and previous > 0


def drift(series: Sequence[tuple[float, float]]) -> dict[str, float | int | None]:
    """How the reference point moved over the run: its per-pass medians' relative range
    ((max - min) / median) and the slope of a least-squares line through them, in
    fraction of the median per minute."""
    if len(series) < 2:
        return {"passes": len(series), "relative_range": None, "slope_per_min": None}
    t = np.array([s[0] for s in series])
    y = np.array([s[1] for s in series])
    med = float(np.median(y))
    slope = float(np.polyfit(t, y, 1)[0]) if np.ptp(t) > 0 else 0.0
    return {"passes": len(series), "relative_range": float(np.ptp(y) / med) if med else None,
            "slope_per_min": slope * 60.0 / med if med else None}

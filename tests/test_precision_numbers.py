"""The precision loop's figures, pinned: intervals, repetitions, budget choices, drift,
the passes' autocorrelation and the inflation it gives, on a scripted measurer and a
virtual clock.  Every expected value is worked out by hand in the test's docstring or
comments (order statistics, least squares, lag-1 autocorrelation), not by running the
loop's own code a second time."""

from __future__ import annotations

import math

import numpy as np
import pytest

from beoperf.sweep.precision import (
    LoopConfig,
    Point,
    PrecisionLoop,
    drift,
    pass_autocorrelation,
    reps_for,
)

SQRT2 = math.sqrt(2.0)
EXACT = 1e-12  # relative tolerance: as good as the float arithmetic allows


class Clock:
    """A monotonic clock that moves only when a trial says so (start: like a real one,
    far from zero, so that times must be taken relative to the loop's start)."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def runaway(calls: list) -> None:
    """No test here needs 5000 calls: a loop that makes them will not stop by itself."""
    if len(calls) > 5000:
        raise RuntimeError("runaway loop")


class Bare:
    """A measurer with only what the protocol requires (no warm, start_pass, cost or
    trial_seconds): each key's trial medians come from a list (cycled), ``samples``
    samples per trial; every trial moves the clock by ``cost_s``; calls are recorded."""

    def __init__(self, clock: Clock, medians: dict, *, cost_s: float = 0.25,
                 unit_ns: float | tuple = 1000.0, samples: int = 4) -> None:
        self.clock, self.medians, self.cost_s = clock, medians, cost_s
        self.unit_ns, self.samples = unit_ns, samples
        self.calls: list[tuple] = []
        self.count: dict = {}

    def calibrate(self, key, estimate):
        self.calls.append(("calibrate", key, estimate))
        return self.unit_ns

    def trial(self, key, reps):
        self.calls.append(("trial", key, reps))
        runaway(self.calls)
        i = self.count.get(key, 0)
        self.count[key] = i + 1
        self.clock.now += self.cost_s
        values = self.medians[key]
        return np.full(self.samples, values[i % len(values)])


class Warming(Bare):
    """... with the optional warm-up and start-of-pass hooks."""

    def warm(self, key):
        self.calls.append(("warm", key))
        runaway(self.calls)

    def start_pass(self):
        self.calls.append(("pass",))


def passes_of(calls: list[tuple]) -> list[list[tuple]]:
    """The calls of a Warming measurer cut at each start_pass."""
    out: list[list[tuple]] = []
    for call in calls:
        if call == ("pass",):
            out.append([])
        elif out:
            out.append(out.pop() + [call[:2]])
    return out


def point(medians: list[float], key=1, passes: list[int] | None = None) -> Point:
    p = Point(key)
    p.trial_medians = [float(m) for m in medians]
    p.pass_of = list(passes) if passes is not None else list(range(1, len(medians) + 1))
    p.chunks = [np.array([m]) for m in p.trial_medians]
    return p


# ---------------------------------------------------------------- repetitions of a trial

def test_reps_fill_the_trial_rounded_down_and_within_bounds():
    assert reps_for(1000.0, 0.001) == 1000  # 1 ms of 1 us repetitions
    assert reps_for(1000.0000001, 0.001) == 999  # a hair over 1 us: 999 fit, not 1000
    assert reps_for(1e9, 0.001) == 1  # one repetition outlasts the trial: the minimum, 1
    assert reps_for(1e9, 0.001, 5) == 5
    assert reps_for(1.0, 0.001) == 1_000_000
    assert reps_for(0.25, 0.001) == 1_000_000  # under 1 ns counts as 1 ns
    assert reps_for(1.0, 1.0) == 1 << 24  # MAX_REPS


# ---------------------------------------------------------------- a point's interval

def test_a_points_interval_is_the_order_statistics_of_its_trial_medians():
    """Six trials: ranks 0 and 5 bracket the median at 95% (P(B <= 0) = 1/64 <= 0.025 <
    P(B <= 1) = 7/64).  Sorted 90 100 110 120 130 200: median 115, interval [90, 200];
    a repeat run's median: each side's log half-width widened by sqrt(2) (and by the
    inflation): 115 (90 / 115)^k .. 115 (200 / 115)^k."""
    p = point([130, 100, 200, 110, 90, 120])
    assert p.median_ci() == (115.0, 90.0, 200.0)

    def repeat(k):
        return 115 * (90 / 115) ** k, 115 * (200 / 115) ** k

    assert p.repeat_interval() == pytest.approx(repeat(SQRT2), rel=EXACT)
    assert p.repeat_interval(2.0) == pytest.approx(repeat(2 * SQRT2), rel=EXACT)
    low, high = repeat(SQRT2)
    assert p.relative_ci() == pytest.approx((high - low) / 2 / 115, rel=EXACT)
    low, high = repeat(3 * SQRT2)
    assert p.relative_ci(3.0) == pytest.approx((high - low) / 2 / 115, rel=EXACT)
    few = point([100, 100, 100, 100, 100])
    assert few.median_ci() is None and few.repeat_interval() is None
    assert few.relative_ci() is None


def test_a_relative_interval_needs_a_positive_median_and_only_that():
    assert point([0] * 6).relative_ci() is None
    assert point([-5] * 6).relative_ci() is None
    assert point([0.5] * 6).relative_ci() == 0.0  # a median under 1 is still a median
    # a low end at 0 is no interval of a positive quantity: none (no clock gives 0 ns)
    assert point([0, 100, 100, 100, 100, 100]).relative_ci() is None
    assert point([0, 100, 100, 100, 100, 100]).repeat_interval() is None
    assert point([1, 100, 100, 100, 100, 100]).relative_ci() == pytest.approx(
        (100 - 100 * 0.01 ** SQRT2) / 2 / 100, rel=EXACT)


# ---------------------------------------------------------------- calibration

def test_calibration_scales_each_estimate_by_the_size_ratio_never_down():
    """Each point's calibration gets the previous point's cost times key / previous key
    (times 1 when the key is smaller): units key x 100 ns."""

    class Units(Bare):
        def calibrate(self, key, estimate):
            self.calls.append(("calibrate", key, estimate))
            return key * 100.0

    clock = Clock()
    m = Units(clock, {k: [100.0] for k in (1, 4, 2, 8)})
    PrecisionLoop([1, 4, 2, 8], m, LoopConfig(precision=0.5, trial_time=0.001),
                  clock=clock).calibrate()
    assert m.calls == [("calibrate", 1, None), ("calibrate", 4, 400.0),
                       ("calibrate", 2, 400.0), ("calibrate", 8, 800.0)]
    m = Bare(clock, {}, unit_ns=50.0)
    PrecisionLoop(["a", "b"], m, LoopConfig(), clock=clock).calibrate()
    # keys that are not numbers: the previous cost as it is
    assert m.calls == [("calibrate", "a", None), ("calibrate", "b", 50.0)]


@pytest.mark.parametrize("got,reps", [
    ((2000.0, np.full(5, 1000.0)), 5),  # one repetition per sample
    ((2000.0, np.array([1000.0]), 512), 512),  # a stream trial: 512 messages, one sample
])
def test_a_calibration_trial_counts_as_the_first_of_pass_0(got, reps):
    clock = Clock()
    m = Bare(clock, {7: [1000.0]}, unit_ns=got)
    loop = PrecisionLoop([7], m, LoopConfig(precision=0.5, trial_time=0.001), clock=clock)
    loop.calibrate()
    (p,) = loop.points
    assert (p.trials, p.pass_of, p.reps, p.trial_medians) == (1, [0], reps, [1000.0])
    assert p.unit_ns == 1000.0  # the trial's median: the cost of the next trial's reps


# ---------------------------------------------------------------- trials

def run_one(measurer_cls=Bare, **kw):
    clock = Clock()
    cfg = {"precision": 0.5, "trial_time": 0.001, "time_budget": None}
    cfg.update(kw.pop("cfg", {}))
    m = measurer_cls(clock, kw.pop("medians", {1: [2000.0]}), **kw)
    loop = PrecisionLoop(list(m.medians), m, LoopConfig(**cfg), clock=clock)
    return loop.run(), m


def test_each_trials_reps_come_from_the_last_trials_cost_and_all_are_counted():
    """Calibration says 1 us: the first trial has 1000 reps of the 1 ms; it measures 2 us,
    so the five others have 500.  Each trial returns 4 samples: reps are what was asked."""
    out, m = run_one()
    assert [c[2] for c in m.calls if c[0] == "trial"] == [1000, 500, 500, 500, 500, 500]
    (p,) = out.points
    assert p.reps == 3500 and p.trials == 6 and p.converged
    assert p.spent == 1.5  # six trials of 0.25 s on the clock


def test_a_measurers_cost_says_what_one_repetition_costs():
    """A cost of 4 x the median (as a round trip of one-way samples would be 2 x): the
    trials after the first have 0.001 s / 8 us = 125 reps."""

    class Costly(Bare):
        def cost(self, values):
            return 4.0 * float(np.median(values))

    out, m = run_one(Costly)
    assert [c[2] for c in m.calls if c[0] == "trial"] == [1000] + [125] * 5
    assert out.points[0].reps == 1000 + 5 * 125


def test_min_reps_and_the_one_ns_floor_of_a_repetitions_cost():
    _, m = run_one(unit_ns=1e6, cfg={"min_reps": 3})  # 1 ms a repetition: 3 at least
    assert m.calls[1] == ("trial", 1, 3)
    _, m = run_one(medians={1: [0.5]}, cfg={"trial_time": 1e-5})
    # calibration: 1 us, so 10 reps; then 0.5 ns a repetition counts as 1 ns: 10,000
    assert [c[2] for c in m.calls if c[0] == "trial"] == [10] + [10_000] * 5


def test_a_measurer_may_ask_for_longer_trials_per_key_never_shorter():
    class Lengths(Bare):
        def trial_seconds(self, key):
            return {1: 0.0005, 2: 0.004}[key]

    _, m = run_one(Lengths, medians={1: [1000.0], 2: [1000.0]})
    first = [c for c in m.calls if c[0] == "trial"][:2]
    assert first == [("trial", 1, 1000), ("trial", 2, 4000)]  # 1 ms (not 0.5), then 4 ms


# ---------------------------------------------------------------- passes

SETTLING = [100.0, 120.0, 100.0, 120.0, 100.0, 120.0] + [110.0] * 20
"""Trial medians that settle: with 15 trials the 95% ranks are 3 and 11 (P(B <= 3) =
576/32768 = 0.0176 <= 0.025 < P(B <= 4) = 0.059), both 110: converged at the 15th trial;
with 14 the ranks are 2 and 11 (P(B <= 3) = 470/16384 = 0.0287): 100 to 110, not."""


def test_a_measurer_without_hooks_gets_its_passes_in_axis_order():
    """Key 1 converges after 6 trials, keys 2-5 after 15; no warm-up to make: every pass
    is the pending keys, ascending."""
    medians = {1: [100.0], 2: SETTLING, 3: SETTLING, 4: SETTLING, 5: SETTLING}
    out, m = run_one(medians=medians, cfg={"precision": 0.01, "seed": 3})
    assert out.stopped is None
    keys = [c[1] for c in m.calls if c[0] == "trial"]
    assert keys == [1, 2, 3, 4, 5] * 6 + [2, 3, 4, 5] * 9
    assert [p.trials for p in out.points] == [6, 15, 15, 15, 15]
    assert all(p.converged for p in out.points)


def test_a_pass_warms_the_skipped_points_up_to_its_last_trial_and_no_further():
    medians = {1: [100.0], 2: SETTLING, 3: SETTLING, 4: [100.0]}
    out, m = run_one(Warming, medians=medians, cfg={"precision": 0.01})
    passes = passes_of(m.calls)
    assert len(passes) == out.passes == 15
    trials = [("trial", 1), ("trial", 2), ("trial", 3), ("trial", 4)]
    assert passes[:6] == [trials] * 6
    assert passes[6:] == [[("warm", 1), ("trial", 2), ("trial", 3)]] * 9


def test_shuffled_passes_follow_the_seed_and_warm_nothing():
    def calls(seed):
        medians = {k: SETTLING for k in range(1, 6)}
        out, m = run_one(Warming, medians=medians,
                         cfg={"precision": 0.01, "order": "shuffled", "seed": seed})
        assert out.stopped is None
        return passes_of(m.calls)

    first = calls(11)
    assert len(first) == 15 and not any(c[0] == "warm" for p in first for c in p)
    orders = [[c[1] for c in p] for p in first]
    assert all(sorted(o) == [1, 2, 3, 4, 5] for o in orders)
    assert sum(o != sorted(o) for o in orders) >= 10  # sorted by chance: 1 pass in 120
    assert calls(11) == first and calls(12) != first


# ---------------------------------------------------------------- stopping

def loop_of(points: list[Point], clock: Clock | None = None, measurer=None,
            **cfg) -> PrecisionLoop:
    clock = clock or Clock()
    loop = PrecisionLoop([p.key for p in points], measurer or Bare(clock, {}),
                         LoopConfig(**cfg), clock=clock)
    loop.points = points
    return loop


def test_pending_flags_a_point_as_soon_as_it_is_precise_even_at_precision_0():
    for precision in (0.01, 0.0):
        p = point([100] * 6)
        loop = loop_of([p], precision=precision)
        assert loop.pending() == [] and p.converged


def test_a_precision_of_0_spends_the_budget():
    """Nothing is ever precise enough: pass after pass until the budget is spent.  The
    trials take 0.25 s on the clock where 1 ms is predicted: under the hard budget of
    0.1 s the first one overruns it and the point is cut there, flagged; with a soft
    budget the minimum six trials take 1.5 s, then no trial fits."""
    out, _ = run_one(medians={1: [100.0, 120.0]}, cfg={"precision": 0.0, "time_budget": 0.1})
    assert out.stopped is None and out.points[0].trials == 1 and out.points[0].cut
    assert out.over_budget and out.elapsed_s == 0.25
    out, _ = run_one(medians={1: [100.0, 120.0]},
                     cfg={"precision": 0.0, "time_budget": 0.1, "hard_budget": False})
    assert out.stopped is None and out.points[0].trials == 6 and not out.points[0].converged
    out, _ = run_one(medians={1: [100.0, 120.0]}, cfg={"precision": 0.0, "time_budget": 2.5})
    assert out.stopped is None and out.points[0].trials == 10  # 2.5 s / 0.25 s


def test_max_time_caps_a_point_that_has_spent_exactly_that_long():
    p = point([100, 200] * 3)  # +-47%: not precise
    p.spent = 0.5
    loop = loop_of([p], precision=0.1, max_time=0.5)
    assert loop.pending() == [] and p.capped and not p.converged
    p = point([100, 200] * 3)
    p.spent = 0.49
    loop = loop_of([p], precision=0.1, max_time=0.5)
    assert loop.pending() == [p] and not p.capped


SPELL = [1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0]
"""Eight passes, a slow spell in the second half.  Centred on their mean 1.5: -0.5 four
times, +0.5 four times; sum of squares 2; lag-1 products 3 x 0.25 - 0.25 + 3 x 0.25 =
1.25: autocorrelation 1.25 / 2 = 0.625, inflation sqrt(1.625 / 0.375) = sqrt(13/3)."""


def spell_points() -> list[Point]:
    return [point([v * scale for v in SPELL], key=i + 1) for i, scale in enumerate((1, 10, 100))]


def test_a_slow_spell_over_passes_gives_the_autocorrelation_and_inflation_by_hand():
    points = spell_points()
    assert pass_autocorrelation(points) == pytest.approx(0.625, rel=EXACT)
    assert loop_of(points).inflation() == pytest.approx(math.sqrt(13 / 3), rel=EXACT)


def test_a_point_found_precise_earlier_is_judged_again_with_the_inflation_of_now():
    """The first point's eight trials give +-47% (1 to 2 around 1.5: with 8 trials the
    95% ranks are 0 and 7, as P(B <= 1) = 9/256 > 0.025; widened by sqrt 2) and it was
    flagged converged at precision 0.5 before the spell showed; with the passes'
    inflation of 2.08 its interval is +-98%: it needs trials again."""
    points = spell_points()
    points[0].converged = True
    loop = loop_of(points, precision=0.5)
    assert points[0] in loop.pending() and not points[0].converged


def test_every_convergence_flag_agrees_with_the_interval_reported():
    """Two steady keys converge in the first passes, while the inflation is still 1; the
    slow spells of the passes that follow inflate every interval (x 2).  A point flagged
    converged must have its final interval (the one a result reports) within precision."""
    def spells(lo, hi):
        return [lo] * 5 + [hi] * 5

    medians = {1: spells(100.0, 101.0), 2: spells(100.0, 101.0), 3: spells(100.0, 130.0),
               4: spells(100.0, 130.0), 5: spells(100.0, 130.0)}
    clock = Clock()
    out = PrecisionLoop(list(medians), Warming(clock, medians, cost_s=0.01),
                        LoopConfig(precision=0.01, time_budget=1.0), clock=clock).run()
    assert out.inflation > 1.5
    for p in out.points:
        assert p.converged == (p.relative_ci(out.inflation) <= 0.01), p.key


# ---------------------------------------------------------------- the budget

def uncertain_points() -> list[Point]:
    """Keys 1-4 at +-sqrt2 x 10%, 20%, 30%, 40% (100 -+ d, four times 100, 100 + d)."""
    return [point([100 - d, 100, 100, 100, 100, 100 + d], key=k)
            for k, d in zip((1, 2, 3, 4), (10, 20, 30, 40), strict=True)]


class Priced(Bare):
    def trial_seconds(self, key):
        return {1: 0.25, 2: 0.25, 3: 0.25, 4: 0.25, 5: 0.25}[key]


def choose(points: list[Point], min_reps: int = 1, hard_budget: bool = True) -> list:
    """What the loop chooses with 0.75 s of a 1 s budget left (its clock, like a real
    one, far from zero), every trial 0.25 s."""
    clock = Clock(100.0)
    loop = loop_of(points, clock, Priced(clock, {}), precision=0.01, trial_time=0.1,
                   time_budget=1.0, min_reps=min_reps, hard_budget=hard_budget)
    loop.started, clock.now = 100.0, 100.25
    return [p.key for p in loop.choose(loop.pending())]


def test_the_budget_goes_to_the_most_uncertain_points_that_fit():
    assert choose(uncertain_points()) == [2, 3, 4]  # 0.25 + 0.25 + 0.25 = 0.75 fits exactly


def test_the_minimum_trials_are_paid_for_first():
    """Key 5 has 3 trials and must have its minimum: under the hard budget its three
    owed trials (0.75 s) are set aside whole, and no further trial of another key fits
    beside them; with a soft budget only this pass's trial is, and 0.5 s go to the two
    most uncertain keys."""
    late = point([100, 100, 100], key=5)
    assert choose(uncertain_points() + [late]) == [5]
    late = point([100, 100, 100], key=5)
    assert choose(uncertain_points() + [late], hard_budget=False) == [3, 4, 5]


def test_a_point_too_dear_for_the_budget_is_passed_over_for_cheaper_ones():
    points = uncertain_points()
    points[3].unit_ns = 3e8  # 0.3 s a repetition, 3 repetitions at least: 0.9 s
    assert choose(points, min_reps=3) == [1, 2, 3]


# ---------------------------------------------------------------- a whole run

def test_a_run_on_a_clock_far_from_zero_states_its_time_drift_and_passes():
    """Keys 1 and 2, 0.25 s a trial, a 3 s budget: six passes of 0.5 s use exactly the
    budget (not over it).  Key 1 (the reference) moves 100, 102 ... 110, one per pass,
    noted at the end of each pass: 0.5 s, 1 s ... 3 s into the run; a line through them
    rises 4 a second, 240 a minute, 240 / 105 of the median 105 a minute; range 10/105.
    Key 1 is within 10% (sqrt2 x 5 / 105 = 6.7%); key 2 (100, 120: 12.9%) is not."""
    clock = Clock(1000.0)
    m = Bare(clock, {1: [100.0, 102.0, 104.0, 106.0, 108.0, 110.0], 2: [100.0, 120.0]})
    seen = []
    loop = PrecisionLoop([1, 2], m, LoopConfig(precision=0.1, time_budget=3.0), clock=clock,
                         on_pass=lambda n, points: seen.append((n, points)))
    out = loop.run()
    assert (out.passes, out.elapsed_s, out.over_budget, out.stopped) == (6, 3.0, False, None)
    assert [n for n, _ in seen] == [1, 2, 3, 4, 5, 6]
    assert all(points is loop.points for _, points in seen)
    assert loop.reference == [(0.5, 100.0), (1.0, 102.0), (1.5, 104.0), (2.0, 106.0),
                              (2.5, 108.0), (3.0, 110.0)]
    assert out.drift == {"passes": 6, "relative_range": pytest.approx(10 / 105, rel=EXACT),
                         "slope_per_min": pytest.approx(240 / 105, rel=1e-9)}
    assert [p.pass_of for p in out.points] == [[1, 2, 3, 4, 5, 6]] * 2
    assert [p.converged for p in out.points] == [True, False]
    assert (out.inflation, out.pass_autocorrelation) == (1.0, None)  # 6 passes: too few


# ---------------------------------------------------------------- autocorrelation

def test_the_common_factor_is_the_median_of_each_points_own_ratio():
    """Key 2 alternates (1, 2, 1, 2 ...) where keys 1 and 3 have the slow spell: the
    middle of the three ratios is the spell's, whatever the keys' scales (1, 10, 100).
    Empty points and points with a median of 0 or less are left out."""
    spell = spell_points()
    spell[1] = point([10.0 * v for v in (1, 2, 1, 2, 1, 2, 1, 2)], key=2)
    assert pass_autocorrelation(spell) == pytest.approx(0.625, rel=EXACT)
    assert pass_autocorrelation([Point(0), point([0.0] * 8, key=9)] + spell) == \
        pytest.approx(0.625, rel=EXACT)
    small = [point([v / 1000 for v in p.trial_medians], key=p.key) for p in spell]
    assert pass_autocorrelation(small) == pytest.approx(0.625, rel=EXACT)


def test_a_pass_counts_with_three_points_measured_however_many_there_are():
    """A fourth key measured in passes 1 and 5 only (ratios 2/3 and 4/3, the spell's):
    every pass still has three, and the factors do not change."""
    extra = point([1.0, 2.0], key=4, passes=[1, 5])
    assert pass_autocorrelation(spell_points() + [extra]) == pytest.approx(0.625, rel=EXACT)


def test_autocorrelation_needs_eight_passes_and_is_0_for_a_steady_machine():
    assert pass_autocorrelation([point(SPELL[:7], key=k) for k in (1, 2, 3)]) is None
    assert pass_autocorrelation([point([5.0] * 8, key=k) for k in (1, 2, 3)]) == 0.0


# ---------------------------------------------------------------- drift

def test_drift_by_hand():
    empty = {"passes": 0, "relative_range": None, "slope_per_min": None}
    assert drift([]) == empty
    assert drift([(3.0, 5.0)]) == {**empty, "passes": 1}
    # two passes half a second apart, 100 then 110: 20 a second, 1200 a minute, of 105
    assert drift([(0.0, 100.0), (0.5, 110.0)]) == {
        "passes": 2, "relative_range": pytest.approx(10 / 105, rel=EXACT),
        "slope_per_min": pytest.approx(1200 / 105, rel=1e-9)}
    # no time between them: no slope
    assert drift([(1.0, 100.0), (1.0, 110.0)]) == {
        "passes": 2, "relative_range": pytest.approx(10 / 105, rel=EXACT), "slope_per_min": 0.0}
    # a median of 0: nothing relative to it
    assert drift([(0.0, 0.0), (1.0, 0.0)]) == {"passes": 2, "relative_range": None,
                                                "slope_per_min": None}


def test_the_drift_counts_only_the_passes_that_measured_the_reference():
    """Key 1 (the reference) is precise after its six minimum trials (100 each) and is not
    measured again; key 2 (100, 120, ...) never is, and takes the budget's remaining
    passes alone (3 s of minimum passes at 0.5 s, then 0.25 s each: passes 7 to 14).  The
    drift is of key 1's six real trials: a pass without one adds no (stale) value, which
    would claim 14 passes of a steady reference while the machine went unwatched."""
    clock = Clock(50.0)
    m = Bare(clock, {1: [100.0], 2: [100.0, 120.0]})
    loop = PrecisionLoop([1, 2], m, LoopConfig(precision=0.1, time_budget=5.0), clock=clock)
    out = loop.run()
    assert out.passes == 14
    assert out.points[0].pass_of == [1, 2, 3, 4, 5, 6]
    assert out.points[1].pass_of == list(range(1, 15))
    assert loop.reference == [(0.5 * k, 100.0) for k in range(1, 7)]
    assert out.drift["passes"] == 6


class Shifting(Bare):
    """... whose machine triples every time from pass 7 on (``loop`` set after)."""

    loop: PrecisionLoop

    def trial(self, key, reps):
        values = super().trial(key, reps)
        return values * (3.0 if self.loop.passes >= 7 else 1.0)


def test_a_reopened_point_sends_every_precise_point_back_for_a_trial():
    """Keys 1 (100, 101, 102 ...: +-1.4% at inflation 1, 2.8% at 2) and 2 (100 always) are
    precise (2%) after their six minimum trials; key 3 (100, 150) never is.  From pass 7
    the machine triples every time and the inflation is 2: key 1 is reopened after pass
    7 and measured in the new state.  Key 2, precise however wide the inflation, gets a
    trial in pass 8 too; its 300 then keeps it measured like key 1, until each is capped
    at 3 s (12 trials of 0.25 s), six of each state: two points of one curve share the
    machine's states (key 2 alone on its six old trials read 100 against key 1's 202)."""
    clock = Clock(10.0)
    m = Shifting(clock, {1: [100.0, 101.0, 102.0], 2: [100.0], 3: [100.0, 150.0]})
    loop = PrecisionLoop([1, 2, 3], m, LoopConfig(precision=0.02, max_time=3.0), clock=clock)
    m.loop = loop
    loop.inflation = lambda: 1.0 if loop.passes < 7 else 2.0  # type: ignore[method-assign]
    out = loop.run()
    one, two, three = out.points
    assert three.pass_of == list(range(1, 13))
    assert one.pass_of == [*range(1, 7), *range(8, 14)]
    assert two.pass_of == [*range(1, 7), *range(8, 14)]
    assert two.trial_medians == [100.0] * 6 + [300.0] * 6
    assert (one.capped, two.capped, one.converged, two.converged) == (True, True, False, False)

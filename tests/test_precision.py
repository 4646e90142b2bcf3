"""The precision loop with a scripted measurer and a scripted clock: what gets trials,
in what order, and when it stops."""

from __future__ import annotations

import numpy as np
import pytest

from beoperf.sweep.precision import LoopConfig, PrecisionLoop, drift


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Scripted:
    """Each key's trial medians come from a list (cycled); every trial costs 10 ms of the
    scripted clock; the order of calls is kept."""

    def __init__(self, clock: Clock, medians: dict[int, list[float]]) -> None:
        self.clock, self.medians = clock, medians
        self.calls: list[tuple[str, int]] = []
        self.count: dict[int, int] = {}

    def calibrate(self, key, estimate):
        self.calls.append(("calibrate", key))
        return 1000.0

    def trial(self, key, reps):
        self.calls.append(("trial", key))
        i = self.count.get(key, 0)
        self.count[key] = i + 1
        self.clock.now += 0.01
        values = self.medians[key]
        return np.full(5, values[i % len(values)])

    def warm(self, key):
        self.calls.append(("warm", key))

    def start_pass(self):
        self.calls.append(("pass", 0))


def run(medians, **cfg):
    clock = Clock()
    m = Scripted(clock, medians)
    out = PrecisionLoop(list(medians), m, LoopConfig(**cfg), clock=clock).run()
    return out, m


def test_a_steady_point_stops_at_the_minimum_and_an_unsteady_one_uses_the_budget():
    out, m = run({1: [100.0], 2: [100.0, 150.0]}, precision=0.02, time_budget=0.5)
    steady, unsteady = out.points
    assert steady.trials == 6 and steady.converged
    assert unsteady.trials > 6 and not unsteady.converged
    assert out.elapsed_s <= 0.5 + 0.02  # at most the pass under way when it ran out


def test_passes_go_in_axis_order_and_warm_the_points_on_the_way():
    """A pass that measures only the last point walks the first ones as warm-ups, on a
    fresh start (start_pass), so every trial follows its neighbour."""
    out, m = run({1: [100.0], 2: [100.0], 3: [100.0, 200.0]}, precision=0.02,
                 time_budget=0.2)
    passes, current = [], []
    for call in m.calls:
        if call == ("pass", 0):
            passes.append(current := [])
        else:
            current.append(call)
    assert passes[0] == [("trial", 1), ("trial", 2), ("trial", 3)]
    late = [p for p in passes if ("trial", 1) not in p]
    assert late and all(p == [("warm", 1), ("warm", 2), ("trial", 3)] for p in late)


def test_no_budget_means_until_precise_and_max_time_caps_a_point():
    out, _ = run({1: [100.0, 101.0]}, precision=0.05, time_budget=None)
    assert out.points[0].converged and out.points[0].trials == 6
    out, _ = run({1: [100.0, 300.0]}, precision=0.05, time_budget=None, max_time=0.095)
    point = out.points[0]
    assert point.capped and not point.converged and point.trials == 10


def test_the_interval_is_over_trial_medians_not_samples():
    """Six trials whose medians differ widely: the interval is wide even though each trial
    holds thousands of identical samples."""
    out, _ = run({1: [100.0, 140.0, 100.0, 140.0, 100.0, 140.0]}, precision=0.02,
                 time_budget=0.065)
    point = out.points[0]
    assert point.median_ci() == (120.0, 100.0, 140.0)
    # a repeat run's median: sqrt(2) wider, as the repeat has this run's error too, on the
    # log scale (a time is positive): each side's log half-width times sqrt(2)
    k = 2**0.5
    low, high = 120 * (100 / 120) ** k, 120 * (140 / 120) ** k
    assert point.relative_ci() == pytest.approx((high - low) / 2 / 120)
    assert point.relative_ci() == pytest.approx(2**0.5 * 20 / 120, rel=0.01)  # ~ linear
    assert point.repeat_interval(1.5) == pytest.approx((120 * (100 / 120) ** (1.5 * k),
                                                        120 * (140 / 120) ** (1.5 * k)))


def test_a_repeat_interval_never_reaches_zero_however_wide():
    """Trial medians from 1 to 1000 with the largest inflation: a linear widening
    (median - k (median - low)) went below zero; on the log scale the low bound stays
    above zero and the interval is still around the median."""
    out, _ = run({1: [1.0, 1000.0, 2.0, 900.0, 3.0, 800.0, 500.0]}, precision=0.02,
                 time_budget=0.07)
    point = out.points[0]
    med, lo, hi = point.median_ci()
    assert med - 2**0.5 * 3 * (med - lo) < 0  # what the linear widening gave
    low, high = point.repeat_interval(3.0)
    assert 0 < low < lo <= med <= hi < high


def test_state_lasting_across_passes_widens_the_intervals():
    """A machine slow for several passes in a row (factors alike from pass to pass) makes
    fewer passes independent: the interval is inflated; alternating states are not."""
    slow_spells = [100.0] * 5 + [130.0] * 5 + [100.0] * 5 + [130.0] * 5
    out, _ = run({1: slow_spells, 2: slow_spells}, precision=0.001, time_budget=0.39)
    assert out.pass_autocorrelation > 0.5 and out.inflation > 1.5
    out, _ = run({1: [100.0, 130.0], 2: [100.0, 130.0]}, precision=0.001, time_budget=0.39)
    assert out.pass_autocorrelation < 0 and out.inflation == 1.0


def test_over_budget_when_the_minimum_trials_take_longer_with_a_soft_budget():
    out, _ = run({k: [100.0] for k in range(10)}, precision=0.5, time_budget=0.1,
                 hard_budget=False)
    assert out.over_budget and all(p.trials == 6 for p in out.points)


class Stalling(Scripted):
    """Keys are message sizes: a trial of key k lasts k ms on the scripted clock (one
    repetition, its sample k ms), and the measurer says so (``seconds``), as the ping-pong
    driver does; keys from ``stall`` on
    take 40 times longer than their size says (16 KiB socket buffers at large messages)."""

    def __init__(self, clock, medians, stall):
        super().__init__(clock, medians)
        self.stall = stall

    def _ms(self, key):
        return key * (40 if key >= self.stall else 1)

    def calibrate(self, key, estimate):
        self.calls.append(("calibrate", key))
        return self._ms(key) * 1e6  # ns of one repetition (one per trial)

    def trial(self, key, reps):
        super().trial(key, reps)
        self.clock.now += self._ms(key) * 1e-3 - 0.01
        return np.full(5, self._ms(key) * 1e6)  # ns: the cost of a repetition, as measured

    def seconds(self, key, reps, unit_ns):
        return unit_ns * 1e-9


def test_a_hard_budget_cuts_the_points_that_stall_and_keeps_the_minimum_of_the_rest():
    """Keys 1-10 (1-10 ms a trial) and 11-12, which stall (440 and 480 ms): six trials of
    every cheap key take 0.33 s of the 1 s budget, set aside first.  The stalled keys get
    what is left, a trial at a time, the cheaper first: key 11 one trial, key 12 none;
    both are cut.  The run ends within the budget; with a soft budget it takes 5.9 s."""
    keys = {k: [100.0] for k in range(1, 13)}
    clock = Clock()
    out = PrecisionLoop(list(keys), Stalling(clock, keys, stall=11),
                        LoopConfig(precision=0.5, time_budget=1.0, min_reps=1,
                                   trial_time=0.001), clock=clock).run()
    by_key = {p.key: p for p in out.points}
    assert all(by_key[k].trials == 6 and not by_key[k].cut for k in range(1, 11))
    assert by_key[11].cut and by_key[12].cut
    assert (by_key[11].trials, by_key[12].trials) == (1, 0)
    assert out.elapsed_s == pytest.approx(0.33 + 0.44) and not out.over_budget
    clock = Clock()
    soft = PrecisionLoop(list(keys), Stalling(clock, keys, stall=11),
                         LoopConfig(precision=0.5, time_budget=1.0, min_reps=1,
                                    trial_time=0.001, hard_budget=False), clock=clock).run()
    assert soft.over_budget and soft.elapsed_s == pytest.approx(6 * (0.055 + 0.92))


def test_drift_is_relative_range_and_slope():
    d = drift([(0.0, 100.0), (30.0, 110.0), (60.0, 120.0)])
    assert d["relative_range"] == pytest.approx(0.2 / 1.1)
    assert d["slope_per_min"] == pytest.approx(20.0 / 110.0)


def test_an_exception_keeps_the_trials_made():
    clock = Clock()

    class Failing(Scripted):
        def trial(self, key, reps):
            if self.count.get(key, 0) == 3:
                raise ConnectionResetError("gone")
            return super().trial(key, reps)

    m = Failing(clock, {1: [100.0, 200.0]})
    out = PrecisionLoop([1], m, LoopConfig(precision=0.01), clock=clock).run()
    assert isinstance(out.stopped, ConnectionResetError) and out.points[0].trials == 3


class PerMessage(Scripted):
    """A stream's cost: every key's repetition costs the same 10 us (per-message work, not
    bytes), and the measurer can probe one repetition; a cost scaled up from key 1 by the
    size ratio predicts 0.66 s a repetition at 64 KiB, 2 s a trial of three: over a 1.5 s
    budget."""

    UNIT_NS = 1e4

    def calibrate(self, key, estimate):
        self.calls.append(("calibrate", key))
        return self.UNIT_NS

    def trial(self, key, reps):
        super().trial(key, reps)
        self.clock.now += reps * self.UNIT_NS * 1e-9 - 0.01
        return np.full(5, self.UNIT_NS)

    def seconds(self, key, reps, unit_ns):
        return reps * unit_ns * 1e-9

    def probe(self, key):
        self.calls.append(("probe", key))
        self.clock.now += self.UNIT_NS * 1e-9
        return self.UNIT_NS


def test_a_cost_scaled_from_a_smaller_size_gives_way_to_the_probe():
    """The CI failure of issue 25: stream mode at 1, 64K and 1M in a 20 s budget measured
    1 B only, the larger sizes cut on a cost scaled by their size from 1 B's.  One
    repetition's probe says they cost what 1 B does: every size gets its trials."""
    keys = {1: [100.0], 65536: [100.0], 1048576: [100.0]}
    clock = Clock()
    m = PerMessage(clock, keys)
    out = PrecisionLoop(list(keys), m, LoopConfig(precision=0.5, time_budget=1.5, min_reps=3,
                                                  trial_time=0.001), clock=clock).run()
    assert [p.trials >= 6 and not p.cut for p in out.points] == [True, True, True]
    assert ("probe", 65536) in m.calls and ("probe", 1048576) in m.calls
    assert out.elapsed_s <= 1.5

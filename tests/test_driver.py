"""The sweep driver with a scripted transport: statistics, factors, and keeping data."""

from __future__ import annotations

import numpy as np
import pytest

from beoperf import _core, errors
from beoperf.engines import Peer, Transport, Trial
from beoperf.engines.tcp import count_corrupt
from beoperf.sweep.driver import SweepConfig, run_sweep, settle_stream


class Scripted(Transport):
    """Every round trip / exchange takes `unit_ns`; fails at `fail_size` if given."""

    def __init__(self, unit_ns: int, mode: str, fail_size: int | None = None,
                 error: BaseException | None = None, fail_after: int = 0) -> None:
        super().__init__(Peer("scripted", 0), {"mode": mode})
        self.unit_ns, self.mode, self.fail_size, self.error = unit_ns, mode, fail_size, error
        self.fail_after = fail_after  # calls of fail_size that succeed first
        self.calls: dict[int, int] = {}
        self.resets = 0

    def connect(self):
        return {}

    def trial(self, size: int, reps: int, pool: _core.Pool, seq0: int) -> Trial:
        self.calls[size] = self.calls.get(size, 0) + 1
        if size == self.fail_size and self.calls[size] > self.fail_after:
            raise self.error or RuntimeError("scripted failure")
        if self.mode == "stream":
            return Trial(None, reps * self.unit_ns, 0)
        return Trial(np.full(reps, self.unit_ns, dtype=np.uint64), reps * self.unit_ns, 0)

    def reset(self):
        self.resets += 1

    def close(self, abort: bool = False):
        pass

    def facts(self):
        return {}, {}


def sweep(mode: str, **kw):
    cfg = SweepConfig(sizes=[1000, 4000], mode=mode, trial_time=0.001, max_time=0.5,
                      time_budget=None)  # no budget, no probe of each size's cost
    return run_sweep(Scripted(2000, mode, **kw), cfg)


@pytest.mark.parametrize("mode,one_way_us,moved", [
    ("pingpong", 1.0, 1),   # a 2 us round trip is 1 us one way
    ("bidir", 2.0, 2),      # a 2 us exchange moves the message both ways
    ("stream", 2.0, 1),     # 2 us per message, as the receiver timed the trial
])
def test_times_and_throughput_per_mode(mode, one_way_us, moved):
    out = sweep(mode)
    assert out.status == "complete"
    for s in out.sizes:
        assert s.time_us["median"] == pytest.approx(one_way_us)
        expected_bps = moved * s.size * 8 / (one_way_us * 1e-6)
        assert s.throughput_bps["from_median"] == pytest.approx(expected_bps)
        assert s.converged and s.trials >= 6 and s.ci95_halfwidth_us == 0
        assert len(s.trial_medians_us) == s.trials
        assert s.time_us["best_trial_mean"] == pytest.approx(one_way_us)


def test_stream_reconnects_for_every_trial():
    transport = Scripted(2000, "stream")
    out = run_sweep(transport, SweepConfig(sizes=[1000], mode="stream", trial_time=0.001))
    assert transport.resets >= out.sizes[0].trials + 1  # warm-up trials too


def test_every_pass_starts_on_a_fresh_connection():
    transport = Scripted(2000, "pingpong")
    out = run_sweep(transport, SweepConfig(sizes=[1000, 4000], trial_time=0.001))
    assert transport.resets == out.facts["passes"] >= 5  # the calibration trial is the 1st


@pytest.mark.parametrize("error", [RuntimeError("boom"), MemoryError(), ValueError("odd"),
                                   ConnectionResetError("gone"), KeyboardInterrupt()])
def test_whatever_stops_the_sweep_the_measured_sizes_are_kept(error):
    """4000 B fails at its fifth call (its calibration trial and three more went well):
    every trial made before is kept, 1000 B's of that pass included."""
    out = sweep("pingpong", fail_size=4000, error=error, fail_after=4)
    assert [(s.size, s.trials) for s in out.sizes] == [(1000, 5), (4000, 4)]
    expected = "interrupted" if isinstance(error, KeyboardInterrupt) else "failed"
    assert out.status == expected and out.reason


@pytest.mark.parametrize("mode,here,there,total", [
    ("pingpong", 1, 1, 1),  # damaged on the way out, echoed as received: one message
    ("pingpong", 1, 0, 1),  # damaged on the way back
    ("stream", 0, 3, 3),
    ("bidir", 1, 2, 3),
])
def test_corrupted_messages_are_counted_once(mode, here, there, total):
    assert count_corrupt(mode, here, there) == total


def test_corruption_stops_the_sweep_with_the_integrity_error_of_beoperf_errors():
    class Corrupting(Scripted):
        def trial(self, size, reps, pool, seq0):
            trial = super().trial(size, reps, pool, seq0)
            trial.corrupt = int(size == 4000)
            return trial

    out = run_sweep(Corrupting(2000, "pingpong"), SweepConfig(sizes=[1000, 4000, 8000],
                                                                trial_time=0.001))
    assert out.status == "failed"  # found in 4000 B's first trial, which is kept
    # the probe of 4000 B's cost before that trial (hard budget) saw a corrupt message too
    assert [(s.size, s.trials, s.corrupt) for s in out.sizes] == [(1000, 1, 0), (4000, 1, 2)]
    assert isinstance(out.error, errors.IntegrityError) and "NICs" in out.error.hint
    assert out.reason == str(out.error) and "at 4000 bytes" in out.reason


class Varying(Scripted):
    """Round trips alternate within a trial (1 us / 3 us) but every trial's median is the
    same; or every trial is steady but trials alternate between 2 us and 3 us."""

    def __init__(self, mode_of_variance: str) -> None:
        super().__init__(2000, "pingpong")
        self.between = mode_of_variance == "between"
        self.n = 0

    def trial(self, size, reps, pool, seq0):
        self.n += 1
        if self.between:
            unit = 2000 if self.n % 2 else 3000
            return Trial(np.full(reps, unit, dtype=np.uint64), reps * unit, 0)
        values = np.where(np.arange(reps) % 2 == 0, 1000, 3000).astype(np.uint64)
        values[: reps // 2 + 1] = 2000  # the median of every trial: 2 us
        return Trial(values, int(values.sum()), 0)


def test_the_interval_is_over_trials_not_round_trips():
    within = run_sweep(Varying("within"), SweepConfig(sizes=[1000], trial_time=0.001))
    between = run_sweep(Varying("between"), SweepConfig(sizes=[1000], trial_time=0.001,
                                                        time_budget=0.2))
    (w,), (b,) = within.sizes, between.sizes
    assert w.ci95_halfwidth_us == 0 and w.converged  # spread inside trials: no doubt
    assert b.ci95_halfwidth_us > 0.3 and not b.converged  # trials disagree: doubt
    assert b.ci95_median_us[0] <= b.time_us["median"] <= b.ci95_median_us[1]


class Bucket:
    """A stream through a token bucket of ``burst`` bytes at ``rate`` bit/s behind a
    ``line`` bit/s link: what settle_stream sees of a trial of ``reps`` messages."""

    def __init__(self, burst: int, rate: float, line: float) -> None:
        self.burst, self.rate, self.line = burst, rate, line
        self.trials: list[int] = []

    def trial(self, size: int, reps: int) -> np.ndarray:
        self.trials.append(reps)
        moved = size * reps
        fast = min(moved, self.burst)
        seconds = fast * 8 / self.line + (moved - fast) * 8 / self.rate
        return np.array([seconds * 1e9 / reps])

    def cost(self, values: np.ndarray) -> float:
        return float(np.median(values))


@pytest.mark.parametrize("first_unit_ns", [20_000, 50_000, 2_000_000])
def test_a_shapers_burst_is_seen_whatever_the_first_message_cost(first_unit_ns):
    """The first trial is a few messages, so a 256 KB burst holds it whether the
    estimate of one message was fast (a quick machine: a 2 ms first trial would move
    far more than the burst and the fall would go unseen) or slow; the rate it settles
    on is the bucket's, and the burst it reports is the bucket's."""
    link = Bucket(burst=256_000, rate=100e6, line=10e9)
    settled = settle_stream(link, 65536, first_unit_ns, 0.002)
    assert link.trials[0] <= 2
    shaper = settled.shaper(65536)
    assert shaper is not None
    assert shaper["sustained_bps"] == pytest.approx(100e6, rel=0.02)
    assert shaper["burst_bytes"] == pytest.approx(256_000, rel=0.3)
    assert settled.trial_s >= 0.002


def test_an_unshaped_stream_settles_without_a_shaper():
    link = Bucket(burst=0, rate=10e9, line=10e9)
    settled = settle_stream(link, 65536, 50_000, 0.002)
    assert settled.shaper(65536) is None
    assert settled.settled and settled.trial_s >= 0.002


"""The sweep driver with a scripted transport: statistics, factors, and keeping data."""

from __future__ import annotations

import numpy as np
import pytest

from beoperf import _core
from beoperf.engines.base import Transport, Trial
from beoperf.engines.tcp import count_corrupt
from beoperf.sweep.driver import SweepConfig, run_sweep


class Scripted(Transport):
    """Every round trip / exchange takes `unit_ns`; fails at `fail_size` if given."""

    def __init__(self, unit_ns: int, mode: str, fail_size: int | None = None,
                 error: BaseException | None = None) -> None:
        self.unit_ns, self.mode, self.fail_size, self.error = unit_ns, mode, fail_size, error
        self.resets = 0

    def setup(self):
        return {}

    def open_data(self):
        pass

    def trial(self, size: int, reps: int, pool: _core.Pool, seq0: int) -> Trial:
        if size == self.fail_size:
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
    cfg = SweepConfig(sizes=[1000, 4000], mode=mode, trial_time=0.001, max_time=0.5)
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


@pytest.mark.parametrize("error", [RuntimeError("boom"), MemoryError(), ValueError("odd"),
                                   ConnectionResetError("gone"), KeyboardInterrupt()])
def test_whatever_stops_the_sweep_the_measured_sizes_are_kept(error):
    out = sweep("pingpong", fail_size=4000, error=error)
    assert [s.size for s in out.sizes] == [1000]
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

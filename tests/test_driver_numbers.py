"""The ping-pong sweep's figures, pinned: what each trial asks of the transport, every
statistic of a size, the stream's settled trial length, a shaper's burst and rate, the
sweep's facts and why it stopped.  Scripted transports and links (no network); every
expected value is worked out by hand in a docstring or comment, not by running the
driver's own code a second time."""

from __future__ import annotations

import dataclasses
import math
import signal
import socket
from types import SimpleNamespace

import numpy as np
import pytest

from beoperf import engines, errors, interrupts, sysinfo
from beoperf.analysis import tails
from beoperf.engines import Peer, Transport, TransportError, Trial
from beoperf.sweep.driver import (
    PingPongMeasurer,
    Settled,
    SweepConfig,
    loop_config,
    make_pool,
    no_fall_cap,
    open_transport,
    run_sweep,
    settle_confirmed,
    settle_stream,
    shaper_probe,
    size_result,
    sweep_facts,
)
from beoperf.sweep.precision import LoopConfig, LoopOutcome, Point
from test_driver import Scripted

SQRT2 = math.sqrt(2.0)
EXACT = 1e-12


def close(got, want) -> None:
    """``got == want`` with floats to 1e-12 (relative), through dicts and lists."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), (got, want)
        for k in want:
            close(got[k], want[k])
    elif isinstance(want, list | tuple):
        assert isinstance(got, list | tuple) and len(got) == len(want), (got, want)
        for g, w in zip(got, want, strict=True):
            close(g, w)
    elif isinstance(want, float):
        assert got == pytest.approx(want, rel=EXACT, abs=0.0), (got, want)
    else:
        assert got == want and type(got) is type(want), (got, want)


def runaway(calls: list, reps: int = 1) -> None:
    """No test here needs 5000 trials or a million repetitions in one: a sweep that asks
    for them is broken (and would not end, or not soon)."""
    if len(calls) > 5000 or reps > 1_000_000:
        raise RuntimeError(f"runaway: trial {len(calls)} of {reps} repetitions")


class Wire(Scripted):
    """A scripted transport (test_driver's, with more to say): a message of ``size``
    bytes takes ``unit(size, n, resets)`` ns (a round trip, an exchange, or one message of
    a stream), n counting that size's calls from 0; every call is recorded as (size,
    reps, seq0)."""

    def __init__(self, mode: str, unit, corrupt_size: int | None = None,
                 fail: BaseException | None = None) -> None:
        super().__init__(0, mode)
        self.unit, self.corrupt_size, self.fail = unit, corrupt_size, fail
        self.calls: list[tuple[int, int, int]] = []
        self.pools: list = []
        self.count: dict[int, int] = {}

    def trial(self, size, reps, pool, seq0):
        if self.fail is not None:
            raise self.fail
        runaway(self.calls, reps)
        self.calls.append((size, reps, seq0))
        self.pools.append(pool)
        n = self.count.get(size, 0)
        self.count[size] = n + 1
        unit = self.unit(size, n, self.resets)
        corrupt = int(size == self.corrupt_size)
        if self.mode == "stream":
            return Trial(None, reps * unit, corrupt)
        return Trial(np.full(reps, unit, dtype=np.uint64), reps * unit, corrupt)


def constant(**units):
    return lambda size, n, resets: units[f"s{size}"]


# ---------------------------------------------------------------- what a trial asks for

@pytest.mark.parametrize("mode,one_way_us", [("pingpong", (1.0, 4.0)), ("bidir", (2.0, 8.0))])
def test_every_trial_of_a_sweep_as_asked_of_the_transport(mode, one_way_us):
    """1000 B takes 2 us (a round trip, or an exchange), 4000 B 8 us; trials of 1 ms.

    Calibration of 1000 B: a 1-repetition estimate (1 + 1 warm-up), 2 us a repetition;
    then 1 ms / 2 us = 500 reps + 50 warm-up (a tenth).  4000 B: estimated 2 us x 4 = 8
    us, 125 reps + 12.  Five passes more, each on a fresh connection, the same.  The
    sequence numbers run on: 0, 2, 552, 689, then 687 a pass.  One pool for the sweep,
    made for 4000 B: two buffers (4032 + 4000 bytes)."""
    wire = Wire(mode, constant(s1000=2000, s4000=8000))
    out = run_sweep(wire, SweepConfig(sizes=[1000, 4000], mode=mode, trial_time=0.001,
                                      time_budget=None))
    expected = [(1000, 2, 0), (1000, 550, 2), (4000, 137, 552)]
    for k in range(5):
        expected += [(1000, 550, 689 + 687 * k), (4000, 137, 689 + 687 * k + 550)]
    assert wire.calls == expected
    assert wire.resets == 5 and out.facts["passes"] == 5
    assert all(p is wire.pools[0] for p in wire.pools)
    assert (wire.pools[0].size, wire.pools[0].total) == (4000, 8032)
    a, b = out.sizes
    assert (a.size, a.trials, a.reps, a.samples, a.converged) == (1000, 6, 3000, 3000, True)
    assert (b.size, b.trials, b.reps, b.samples, b.converged) == (4000, 6, 750, 750, True)
    assert (a.time_us["median"], b.time_us["median"]) == one_way_us
    assert a.ci95_us == [one_way_us[0]] * 2 and a.ci95_relative == 0.0


def test_a_slow_message_still_gets_min_reps_per_trial():
    """A 2 ms round trip in 1 ms trials: 3 repetitions (min_reps) + 1 warm-up, from the
    calibration trial on."""
    wire = Wire("pingpong", constant(s1000=2_000_000))
    run_sweep(wire, SweepConfig(sizes=[1000], trial_time=0.001, time_budget=None))
    assert [c[1] for c in wire.calls] == [2] + [4] * 6


def test_the_sizes_a_pass_skips_are_warmed_up_on_the_way():
    """4000 B's round trips go 8, 9.6, 8, 9.6, 8, 9.6 us, then 8.8 us: with 15 trials
    the 95% ranks are 3 and 11 (P(B <= 3) = 576/32768 = 0.018), both 8.8 us: converged at
    its 15th trial, nine passes after 1000 B (constant, done at 6).  Each of those nine
    passes warms 1000 B up with one untimed repetition (+ 1 warm-up) before 4000 B."""
    rtts = [8000, 9600, 8000, 9600, 8000, 9600] + [8800] * 20
    wire = Wire("pingpong", lambda size, n, resets: 2000 if size == 1000 else rtts[n])
    out = run_sweep(wire, SweepConfig(sizes=[1000, 4000], trial_time=0.001, time_budget=None))
    sizes = [c[0] for c in wire.calls]
    assert sizes == [1000, 1000, 4000] + [1000, 4000] * 14
    assert [c[1] for c in wire.calls[13::2]] == [2] * 9  # the warm-ups of passes 6-14
    assert wire.resets == 14
    a, b = out.sizes
    assert (a.trials, a.reps) == (6, 3000)
    assert b.trials == 15 and b.converged
    assert b.trial_medians_us == [4.0, 4.8, 4.0, 4.8, 4.0, 4.8] + [4.4] * 9
    assert b.time_us["median"] == 4.4 and b.ci95_median_us == [4.4, 4.4]
    # which pass each trial ran in: the calibration's (0), then one a pass
    assert (a.trial_passes, b.trial_passes) == ([0, 1, 2, 3, 4, 5], list(range(15)))


def test_corrupted_messages_of_every_trial_before_the_check_add_up():
    """The first size's calibration makes two trials (the estimate and the first), both
    corrupted: two messages, in the count and in the error."""
    wire = Wire("pingpong", constant(s1000=2000), corrupt_size=1000)
    out = run_sweep(wire, SweepConfig(sizes=[1000, 4000], trial_time=0.001, time_budget=None))
    assert [(s.size, s.trials, s.corrupt) for s in out.sizes] == [(1000, 1, 2)]
    assert out.reason == "2 corrupted message(s) at 1000 bytes"


def test_a_stream_sweep_settles_its_trial_length_first():
    """Stream mode, a message of S bytes takes S ns (8 Gbit/s, no shaper), trials of 1 ms.

    1000 B's estimate: 1 message, 1 us.  Then the trial length is settled with 64 KiB
    messages (estimated 1 us x 65.536 = 65.536 us): 2 messages (131 us), 4, 8, 16
    (1.049 ms: at least the 1 ms asked, and as fast as 8 before): trials of 1.048576 ms,
    8 Gbit/s throughout.  1000 B: 1048 messages a trial; 100000 B (estimated 100 us): 10.
    Every stream trial on a fresh connection, none more."""
    wire = Wire("stream", lambda size, n, resets: size)
    out = run_sweep(wire, SweepConfig(sizes=[1000, 100000], mode="stream", trial_time=0.001,
                                      time_budget=None))
    assert [c[:2] for c in wire.calls] == [
        (1000, 1), (65536, 2), (65536, 4), (65536, 8), (65536, 16), (1000, 1048),
        (100000, 10)] + [(1000, 1048), (100000, 10)] * 5
    assert wire.resets == len(wire.calls)
    facts = out.facts
    close(facts["stream_trial_s"], 16 * 65536e-9)
    close(facts["stream_rates"], [[n * 65536e-9, 8e9] for n in (2, 4, 8, 16)])
    assert facts["shaper"] is None
    a, b = out.sizes
    assert (a.trials, a.reps, a.samples) == (6, 6 * 1048, 6)
    assert (b.trials, b.reps, b.samples) == (6, 6 * 10, 6)
    close(a.time_us["median"], 1.0)
    close(a.throughput_bps["from_median"], 8e9)


def test_the_passes_inflation_widens_every_sizes_interval():
    """Three sizes, nine trials each (min_trials 9, calibration's included), a round trip
    25% slower from the fifth pass on (passes 0-3: 1, 4-8: 1.25).  The passes' common
    factor has 4 lows and 5 highs: centred -5/9 and +4/9 (x 0.25), lag-1 sum (3 x 25 - 20
    + 4 x 16) / 81 over 180 / 81: r = 119/180, inflation sqrt(299/61) = 2.214.  1000 B:
    trial medians 1 us x 4, 1.25 us x 5; 9 trials: ranks 1 and 7 (P(B <= 1) = 10/512
    <= 0.025 < P(B <= 2) = 46/512): [1, 1.25] around 1.25; a repeat run's, on the log
    scale: 1.25 (1 / 1.25)^(sqrt2 x 2.214) to 1.25."""
    spell = [1.0] * 4 + [1.25] * 5
    wire = Wire("pingpong", lambda size, n, resets: int(2 * size * spell[resets]))
    passes, seen = [], []
    out = run_sweep(wire, SweepConfig(sizes=[1000, 2000, 4000], trial_time=0.001, time_budget=None,
                                      min_trials=9, precision=5.0),
                    on_size=seen.append, on_pass=lambda n, points: passes.append(n))
    inflation = math.sqrt(299 / 61)
    assert passes == list(range(1, 9)) and seen == out.sizes
    close(out.facts["pass_autocorrelation"], 119 / 180)
    assert out.facts["interval_inflation"] == 2.214
    assert out.facts["drift"]["passes"] == 8
    close(out.facts["drift"]["relative_range"], 0.25 / 1.25)  # 1 us x 3, 1.25 us x 5
    for s, scale in zip(out.sizes, (1, 2, 4), strict=True):
        assert s.trials == 9 and s.converged
        close(s.trial_medians_us, [scale * f for f in spell])
        close(s.ci95_median_us, [scale * 1.0, scale * 1.25])
        close(s.ci95_us, [scale * 1.25 * 0.8 ** (SQRT2 * inflation), scale * 1.25])
        assert s.ci95_within_run_us == s.ci95_us  # this run's own part: all of it here


# ---------------------------------------------------------------- why a sweep stopped

@pytest.mark.parametrize("error,status,reason", [
    (RuntimeError("boom"), "failed", "RuntimeError: boom"),
    (MemoryError(), "failed", "MemoryError"),
    (errors.PeerError("the server refused"), "failed", "the server refused"),
    (TransportError("bad frame"), "failed", "bad frame"),
    (ConnectionResetError("gone"), "failed", "gone"),
    (KeyboardInterrupt(), "interrupted", "interrupted by the user"),
    (interrupts.Terminated(signal.SIGTERM), "interrupted", "terminated by SIGTERM"),
])
def test_what_stopped_a_sweep_is_said_in_its_reason(error, status, reason):
    out = run_sweep(Wire("pingpong", constant(s1000=2000), fail=error),
                    SweepConfig(sizes=[1000]))
    assert (out.status, out.reason, out.error, out.sizes) == (status, reason, error, [])


def test_an_exit_is_not_a_failure_to_report():
    with pytest.raises(SystemExit):
        run_sweep(Wire("pingpong", constant(s1000=2000), fail=SystemExit(3)),
                  SweepConfig(sizes=[1000]))


# ---------------------------------------------------------------- one size's statistics

def chunky_point() -> Point:
    """Six trials of three samples (us x 1000): medians 2 3 4 4 2 6, means 4 3 4 4 2 6."""
    p = Point(1000)
    for chunk in ([1, 2, 9], [1, 3, 5], [2, 4, 6], [3, 5, 4], [2, 2, 2], [5, 6, 7]):
        values = np.array(chunk, dtype=np.float64) * 1000.0
        p.chunks.append(values)
        p.trial_medians.append(float(np.median(values)))
    p.pass_of, p.reps, p.converged = [0, 1, 2, 3, 4, 5], 300, True
    return p


def test_a_sizes_statistics_by_hand():
    """18 samples sorted (us): 1 1 2 2 2 2 2 3 3 4 4 5 5 5 6 6 7 9.  Sum 69: mean 3.8333;
    median (3 + 4) / 2; p90 at rank 0.9 x 17 = 15.3: 6 + 0.3 x 1; p99 at 16.83: 7 + 0.83
    x 2; sum of squares 349, so 349 - 69^2/18 = 84.5 about the mean: stddev
    sqrt(84.5/17); deviations from 3.5: 0.5 x 4, 1.5 x 8, 2.5 x 4, 3.5, 5.5: MAD 1.5.
    Trial medians sorted 2 2 3 4 4 6: median 3.5, 95% ranks 0 and 5: [2, 6]; a repeat
    run's, inflated 1.5, on the log scale: 3.5 (2 / 3.5)^(1.5 sqrt2) to 3.5 (6 /
    3.5)^(1.5 sqrt2), and the same as this run's own part (no spread between runs yet).
    Best trial: the mean of [2, 2, 2].  8000 bits a message."""

    def repeat(k):
        return [3.5 * (2 / 3.5) ** k, 3.5 * (6 / 3.5) ** k]

    low, high = repeat(1.5 * SQRT2)
    want = {
        "size": 1000, "samples": 18, "trials": 6, "reps": 300,
        "time_us": {"min": 1.0, "median": 3.5, "mean": 69 / 18, "p90": 6.3, "p99": 8.66,
                    "max": 9.0, "stddev": math.sqrt(84.5 / 17), "mad": 1.5,
                    "best_trial_mean": 2.0, "sample_median": 3.5},
        "ci95_halfwidth_us": (high - low) / 2, "ci95_relative": (high - low) / 2 / 3.5,
        "converged": True,
        "throughput_bps": {"from_median": 8000 / 3.5e-6, "from_min": 8000 / 1e-6,
                           "from_best_trial": 8000 / 2e-6},
        "corrupt": 3, "trial_medians_us": [2.0, 3.0, 4.0, 4.0, 2.0, 6.0],
        "ci95_us": [low, high], "ci95_median_us": [2.0, 6.0],
        "ci95_within_run_us": [low, high], "trial_passes": [0, 1, 2, 3, 4, 5],
        "interval_note": None, "streams_bps": None, "udp": None,
        # 18 samples: below the 20 (10 / (1 - 0.5)) that even p50 needs; bucket k holds
        # [1.01^k, 1.01^(k+1)) ns: 1 us in 694 (ln 1000 / ln 1.01 = 694.2), 2 us in 763, 3 in
        # 804, 4 in 833, 5 in 855, 6 in 874, 7 in 889, 9 in 915
        "tail": {"samples": 18, "percentiles_us": dict.fromkeys(
                     ("p50", "p90", "p99", "p99.9", "p99.99")),
                 "histogram": {"ratio": 1.01, "unit": "ns", "buckets": [
                     [694, 2], [763, 5], [804, 2], [833, 2], [855, 3], [874, 2], [889, 1],
                     [915, 1]]},
                 "rule": tails.RULE}}
    close(vars(size_result(chunky_point(), "pingpong", 3, 1.5)), want)
    # by default: no corruption, no inflation (sqrt2 alone); bidir moves the message twice
    low, high = repeat(SQRT2)
    close(vars(size_result(chunky_point(), "bidir")), {
        **want, "corrupt": 0, "ci95_halfwidth_us": (high - low) / 2,
        "ci95_relative": (high - low) / 2 / 3.5, "ci95_us": [low, high],
        "ci95_within_run_us": [low, high],
        "throughput_bps": {"from_median": 16000 / 3.5e-6, "from_min": 16000 / 1e-6,
                           "from_best_trial": 16000 / 2e-6}})


def test_a_size_with_too_few_trials_for_an_interval_says_so():
    p = chunky_point()
    p.chunks, p.trial_medians = p.chunks[:5], p.trial_medians[:5]
    s = size_result(p, "pingpong")
    assert (s.ci95_us, s.ci95_median_us, s.ci95_halfwidth_us, s.ci95_relative,
            s.ci95_within_run_us) == (None, None, None, None, None)
    assert s.time_us["median"] == 3.0  # of 2 3 4 4 2


# ---------------------------------------------------------------- settling a stream

class Link:
    """A stream of ``size``-byte messages: a trial of n messages takes ``ns(n, i)`` per
    message (i: the trial's index)."""

    def __init__(self, ns) -> None:
        self.ns = ns
        self.trials: list[int] = []

    def trial(self, size: int, reps: int) -> np.ndarray:
        runaway(self.trials, reps)
        self.trials.append(reps)
        return np.array([float(self.ns(reps, len(self.trials) - 1))])

    def cost(self, values: np.ndarray) -> float:
        return float(np.median(values))


def bucket(n: int, i: int = 0) -> float:
    """A token bucket of 4 messages: 1 us each from the bucket, 10 us each after it."""
    return (min(n, 4) * 1000 + max(0, n - 4) * 10000) / n


BUCKET_UNITS = {2: 1000.0, 4: 1000.0, 8: 5500.0, 16: 7750.0, 32: 8875.0, 64: 9437.5,
                128: 9718.75, 256: 9859.375, 512: 9929.6875, 1024: 9964.84375}
"""What the bucket gives trials of 2 ... 1024 messages ((4 x 1 + (n - 4) x 10) / n us)."""


def test_a_shaped_stream_settles_where_doubling_changes_its_rate_under_1_percent():
    """1000-byte messages, 1 us estimated, 100 us asked.  Trials of 2 and 4 messages
    fit in the bucket (8 Gbit/s); from 8 on the rate falls: 1.45, 1.03, 0.901, 0.848,
    0.823, 0.8114 Gbit/s, then 0.8057 at 512 messages, 0.7% under the one before, and
    0.8028 at 1024 (10.2 ms), 0.35% under that: two steps in the band, settled.  The
    burst: bytes beyond the sustained rate, largest for the 4 messages
    (4000 x (1 - 1 / 9.96484375) = 3599 bytes)."""
    link = Link(bucket)
    got = settle_stream(link, 1000, 1000.0, 1e-4)
    assert link.trials == list(BUCKET_UNITS)
    rates = [(n * u * 1e-9, 8e12 / u) for n, u in BUCKET_UNITS.items()]
    close(vars(got), {"trial_s": 1024 * 9964.84375e-9, "unit_ns": 9964.84375,
                      "rates_bps": rates, "settled": True, "confirmed": None,
                      "repeat_bps": None})
    close(got.shaper(1000), {"sustained_bps": 8e12 / 9964.84375, "short_trial_bps": 8e9,
                             "short_trial_s": 2e-6, "burst_bytes": 3599,
                             "trial_s": 1024 * 9964.84375e-9, "settled": True,
                             "message_size": 1000, "confirmed": None})


def test_a_stream_whose_first_trial_outlasts_the_start_settles_at_the_third():
    """2 ms a message, 1 ms asked: the first trial is one message (2 ms); the second, of
    2 messages (4 ms), and the third, of 4 (8 ms), as fast: two steps in the band,
    settled there.  1000 B in 2 ms: 4 Mbit/s."""
    link = Link(lambda n, i: 2e6)
    got = settle_stream(link, 1000, 2e6, 0.001)
    assert link.trials == [1, 2, 4]
    close(vars(got), {"trial_s": 0.008, "unit_ns": 2e6,
                      "rates_bps": [(0.002, 4e6), (0.004, 4e6), (0.008, 4e6)], "settled": True,
                      "confirmed": None, "repeat_bps": None})


def test_a_trial_exactly_as_long_as_asked_is_long_enough():
    start = 8 * 1000.0 * 1e-9  # what an 8-message trial of 1 us messages lasts
    link = Link(lambda n, i: 1000.0)
    got = settle_stream(link, 1000, 1000.0, start)
    assert link.trials == [2, 4, 8] and got.trial_s == start and got.settled


@pytest.mark.parametrize("second_rate,trials", [
    (4e6 * (1 - 0.01), [1, 2, 4]),  # 1% slower, then the same: two steps in the band
    (4e6 * (1 + 0.05), [1, 2, 4]),  # 5% faster, then the same: settled
    (4e6 * 1.1, [1, 2, 4, 8]),  # 10% faster: still rising (slow start), not settled
    (4e6 * 0.98, [1, 2, 4, 8]),  # 2% slower: still falling
])
def test_the_settling_bounds_are_1_percent_down_and_5_up_inclusive(second_rate, trials):
    """Messages of 2 ms (4 Mbit/s), then from the second trial on at a rate exactly
    1% lower, 5% higher ... (the message time chosen so that 8e12 / time is that rate)."""
    unit = 8e12 / second_rate
    assert 1000 * 8e9 / unit == second_rate
    link = Link(lambda n, i: 2e6 if i == 0 else unit)
    got = settle_stream(link, 1000, 2e6, 0.001)
    assert link.trials == trials and got.settled


def test_a_stream_that_never_settles_stops_before_a_trial_of_more_than_4_s():
    """Message time growing as sqrt(n) (61035.15625 ns x sqrt n): the rate falls by
    sqrt 2 at each doubling, never settles.  Trials of 2, 4 ... 1024 messages, the last
    exactly 2 s long (1024 x 1953125 ns): another doubling (4 s) is allowed; 2048
    messages last 5.66 s, and doubling that would pass 4 s: stop there, unsettled."""
    k = 2e9 / 32768
    link = Link(lambda n, i: k * math.sqrt(n))
    got = settle_stream(link, 1000, k, 0.001)
    ns = [2 ** j for j in range(1, 12)]
    assert link.trials == ns
    assert 1024 * k * 32 * 1e-9 == 2.0  # the trial at the edge
    close(vars(got), {"trial_s": 2048 * k * math.sqrt(2048) * 1e-9,
                      "unit_ns": k * math.sqrt(2048),
                      "rates_bps": [(n * k * math.sqrt(n) * 1e-9, 8e12 / (k * math.sqrt(n)))
                                    for n in ns],
                      "settled": False, "confirmed": None, "repeat_bps": None})


# ---------------------------------------------------------------- a shaper's signature

def settled(rates, trial_s=0.008, done=True) -> Settled:
    return Settled(trial_s, 50_000.0, rates, done)


def test_a_shapers_burst_is_what_the_longest_trial_carried_beyond_the_rate():
    """Rates 1, 0.8, 0.5 Gbit/s, then 0.1 sustained: beyond 0.1 Gbit/s the trials of 1, 2
    and 4 ms carried 0.9e9 x 0.001 / 8 = 112,500, 0.7e9 x 0.002 / 8 = 175,000 and 0.4e9 x
    0.004 / 8 = 200,000 bytes: the burst is 200,000 bytes."""
    rates = [(0.001, 1e9), (0.002, 8e8), (0.004, 5e8), (0.008, 1e8)]
    close(settled(rates, done=False).shaper(65536), {
        "sustained_bps": 1e8, "short_trial_bps": 1e9, "short_trial_s": 0.001,
        "burst_bytes": 200_000, "trial_s": 0.008, "settled": False, "message_size": 65536,
        "confirmed": None})


def test_a_fall_to_half_is_noise_and_a_burst_under_a_byte_is_0():
    assert settled([(0.001, 100.0), (0.002, 50.0)]).shaper(1000) is None
    assert settled([(0.001, 100.0), (0.002, 49.0)]).shaper(1000) is not None
    tiny = settled([(1e-9, 1000.0), (1.0, 100.0)]).shaper(1000)  # 900 x 1e-9 / 8 bytes
    assert tiny["burst_bytes"] == 0


class BucketWire(Transport):
    """A stream session through the bucket above (4 messages, 1 us then 10 us each),
    the bucket full again on every fresh connection (every stream trial has one)."""

    made: list[BucketWire] = []

    def __init__(self, peer, params, *, timeout=10.0, fail_at: int | None = None) -> None:
        super().__init__(peer, params, timeout=timeout)
        self.calls: list[tuple[int, int]] = []
        self.resets, self.connected, self.closed, self.fail_at = 0, 0, False, fail_at
        BucketWire.made.append(self)

    def connect(self):
        self.connected += 1
        return {}

    def trial(self, size, reps, pool, seq0):
        assert self.connected == 1 and not self.closed and pool.size == size
        runaway(self.calls, reps)
        if len(self.calls) == self.fail_at:
            raise ConnectionResetError("gone")
        self.calls.append((size, reps))
        return Trial(None, min(reps, 4) * 1000 + max(0, reps - 4) * 10000, 0)

    def reset(self):
        self.resets += 1

    def facts(self):
        return {}, {}

    def close(self, abort: bool = False):
        self.closed = True


@pytest.fixture
def bucket_engine(monkeypatch):
    BucketWire.made = []
    monkeypatch.setitem(engines.TRANSPORTS, "test-bucket", BucketWire)
    return BucketWire.made


def test_the_shaper_probe_settles_a_stream_session_of_its_own(bucket_engine):
    """After a ping-pong sweep of up to 4096 B: a stream session (integrity off) of 4096
    B messages, a first message to estimate (1 us), then the bucket's trials as above:
    4096 B a message, the rates 4.096 x those of 1000 B; the burst 4 x 4096 x (1 - 1 /
    9.96484375) = 14,740 bytes.  The fall is confirmed by the same trials again."""
    params = {"transport": "test-bucket", "mode": "pingpong", "max_size": 4096,
              "integrity": True, "rcvbuf": 65536}
    peer = Peer("scripted", 0)
    got = shaper_probe(peer, params, [1000, 4096], timeout=3.0, trial_time=1e-4)
    (wire,) = bucket_engine
    assert wire.peer is peer
    assert wire.params == {**params, "mode": "stream", "max_size": 4096, "integrity": False}
    assert wire.timeout == 3.0 and wire.closed
    assert wire.calls == [(4096, 1)] + [(4096, n) for n in BUCKET_UNITS] * 2
    assert wire.resets == len(wire.calls)
    bits = 4096 * 8e9
    close(got, {
        "shaper": {"sustained_bps": bits / 9964.84375, "short_trial_bps": bits / 1000,
                   "short_trial_s": 2e-6, "burst_bytes": 14740,
                   "trial_s": 1024 * 9964.84375e-9, "settled": True, "message_size": 4096,
                   "confirmed": True},
        "stream_rates": [[n * u * 1e-9, bits / u] for n, u in BUCKET_UNITS.items()],
        "stream_rates_repeat": [[n * u * 1e-9, bits / u] for n, u in BUCKET_UNITS.items()]})


def test_the_shaper_probe_closes_its_session_when_a_trial_fails(bucket_engine, monkeypatch):
    monkeypatch.setitem(engines.TRANSPORTS, "test-bucket",
                        lambda peer, params, timeout: BucketWire(peer, params, timeout=timeout,
                                                                 fail_at=3))
    with pytest.raises(ConnectionResetError):
        shaper_probe(Peer("scripted", 0), {"transport": "test-bucket"}, [1000], timeout=1.0,
                     trial_time=1e-4)
    assert bucket_engine[0].closed and len(bucket_engine[0].calls) == 3


def test_a_transport_is_opened_by_name_and_tcp_by_default(bucket_engine):
    t = open_transport(Peer("scripted", 0), {"transport": "test-bucket"}, timeout=2.5)
    assert t is bucket_engine[0] and t.connected == 1 and t.timeout == 2.5
    assert open_transport(Peer("scripted", 0), {"transport": "test-bucket"}).timeout == 10.0
    with socket.socket() as s:  # a loopback port nothing listens on: tcp's own refusal
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(errors.ConnectError, match="Connection refused"):
        open_transport(Peer("127.0.0.1", port), {}, timeout=2.0)


# ---------------------------------------------------------------- configuration and facts

def test_a_pool_is_two_buffers_or_the_no_cache_span(monkeypatch):
    """4096 B: two buffers of 4096 (already 64-byte multiples).  No-cache, with a 1 MiB
    last-level cache: 1.5 x 1 MiB + the largest message, 1,576,960 bytes, which slots of
    4096 fill exactly."""
    monkeypatch.setattr(sysinfo, "llc_bytes", lambda: 1 << 20)
    pool = make_pool(4096, SweepConfig(sizes=[1000, 4096]))
    assert (pool.size, pool.total) == (4096, 8192)
    pool = make_pool(4096, SweepConfig(sizes=[1000, 4096], nocache=True))
    assert (pool.size, pool.total) == (4096, 1_576_960)
    m = PingPongMeasurer(Wire("pingpong", constant()), SweepConfig(sizes=[4096, 1000]))
    assert (m.pool.size, m.seq, m.corrupt, m.stream) == (4096, 0, {}, None)


def test_the_loop_gets_every_setting_of_the_sweep():
    cfg = SweepConfig(sizes=[1], precision=0.03, trial_time=0.004, min_reps=5, max_time=1.5,
                      min_trials=7, time_budget=9.0, seed=17)
    assert loop_config(cfg) == LoopConfig(precision=0.03, trial_time=0.004, min_trials=7,
                                           time_budget=9.0, max_time=1.5, min_reps=5, seed=17)


INTERVAL = ("ci95_us: where a repeat run's median falls (95%): the median's order-statistic "
            "interval over trial medians (ci95_median_us), widened by sqrt(2) and by "
            "interval_inflation on the log scale (ci95_within_run_us: this run's own part, "
            "always), then (ping-pong over TCP, between_runs) with the spread between runs "
            "of the setup added on the log scale, when it is known")


def test_the_sweeps_facts():
    cfg = SweepConfig(sizes=[1000, 100000], mode="stream", precision=0.01, trial_time=0.003,
                      min_reps=4, max_time=2.5, min_trials=7, time_budget=12.5, seed=42)
    drifted = {"passes": 9, "relative_range": 0.1, "slope_per_min": -0.2}
    result = LoopOutcome([], passes=9, elapsed_s=3.14159, over_budget=True, drift=drifted,
                         inflation=1.23456, pass_autocorrelation=0.25)
    rates = [(0.001, 1e9), (0.002, 8e8), (0.004, 5e8), (0.008, 1e8)]
    stream = SimpleNamespace(stream=settled(rates))
    want = {"stream_trial_s": 0.008,
            "shaper": {"sustained_bps": 1e8, "short_trial_bps": 1e9, "short_trial_s": 0.001,
                       "burst_bytes": 200_000, "trial_s": 0.008, "settled": True,
                       "message_size": 65536, "confirmed": None},
            "stream_rates": [[0.001, 1e9], [0.002, 8e8], [0.004, 5e8], [0.008, 1e8]],
            "stream_rates_repeat": None,
            "passes": 9, "elapsed_s": 3.142, "time_budget_s": 12.5, "over_budget": True,
            "hard_budget": True, "short_of_minimum": [], "not_measured": [],
            "max_time_s": 2.5, "trial_time_s": 0.003, "min_trials": 7, "min_reps": 4,
            "seed": 42, "order": "ascending passes, each on a fresh data connection",
            "drift": drifted, "interval_inflation": 1.235, "pass_autocorrelation": 0.25,
            "interval": INTERVAL}
    close(sweep_facts(cfg, result, stream), want)
    close(sweep_facts(cfg, result, SimpleNamespace(stream=None)),
          {**want, "stream_trial_s": None, "shaper": None, "stream_rates": None})


@pytest.mark.parametrize("rates", [
    [(0.001, 100.0), (0.002, 30.0), (0.004, 40.0), (0.008, 30.0)],  # rose 33% on the way
    [(0.001, 30.0), (0.002, 100.0), (0.004, 40.0), (0.008, 46.5)],  # rose 16% after the top
])
def test_a_fall_that_rises_again_on_the_way_is_a_busy_machine_not_a_bucket(rates):
    """A token bucket's rate only falls as trials grow; a machine whose load comes and
    goes makes the rate fall and rise (seen on a plain veth under load: 32.5, 11.2,
    13.8, 7.9 Gbit/s)."""
    assert settled(rates).shaper(1000) is None
    assert not settled(rates).falls()


def test_a_long_trial_a_little_above_the_rate_is_not_counted_as_burst():
    """0.11 Gbit/s over 1 s against 0.1 sustained would be 1.25 MB "beyond the rate":
    noise times length.  Only trials at least 1.5 x the sustained rate count: the
    burst is the first trial's (1e9 - 1e8) x 0.001 / 8 = 112,500 bytes."""
    rates = [(0.001, 1e9), (1.0, 1.1e8), (2.0, 1e8)]
    assert settled(rates).shaper(1000)["burst_bytes"] == 112_500


def test_a_bucket_may_wobble_up_to_15_percent_on_its_way_down():
    """Long trials through a 1 Gbit/s bucket on a busy machine: 947 then 960 Mbit/s."""
    assert settled([(0.001, 100.0), (0.002, 40.0), (0.004, 45.9)]).falls()
    assert not settled([(0.001, 100.0), (0.002, 40.0), (0.004, 46.1)]).falls()


def test_a_fall_a_second_settling_does_not_find_again_is_not_a_shaper():
    """First settling: 8 Gbit/s falling to 0.8 (a bucket); after the wait for the bucket
    to refill, the second falls to only 0.4: the rates differ by 50% > CONFIRM: no
    shaper, and both settlings' rates are kept."""
    first = {2: 1000.0, 4: 10000.0, 8: 10000.0, 16: 10000.0}
    second = {2: 1000.0, 4: 20000.0, 8: 20000.0, 16: 20000.0}

    def ns(n, i):
        return (first if i < 4 else second)[n]

    slept = []
    got = settle_confirmed(Link(ns), 1000, 1000.0, 1e-5, sleep=slept.append)
    assert got.confirmed is False and got.shaper(1000) is None
    close(got.repeat_bps, [(2e-6, 8e9), (4 * 20000e-9, 4e8), (8 * 20000e-9, 4e8),
                           (16 * 20000e-9, 4e8)])
    # refill: burst (8e9 - 8e8) x 2e-6 / 8 = 1800 B at 0.8 Gbit/s: 18 us x 1.5 + 10 ms
    assert slept == [pytest.approx(1.5 * 1800 * 8 / 8e8 + 0.01)]


def test_a_bucket_found_twice_is_confirmed():
    link = Link(bucket)
    got = settle_confirmed(link, 1000, 1000.0, 1e-4, sleep=lambda s: None)
    assert link.trials == list(BUCKET_UNITS) * 2
    assert got.confirmed is True and got.shaper(1000)["confirmed"] is True


def test_no_second_settling_without_a_fall():
    link = Link(lambda n, i: 1000.0)
    got = settle_confirmed(link, 1000, 1000.0, 1e-5, sleep=lambda s: pytest.fail("slept"))
    assert got.confirmed is None and link.trials == [2, 4, 8, 16]


def test_a_wandering_stream_without_a_fall_stops_at_the_cap():
    """A busy machine: the rate alternates 10% up and down around 8 Gbit/s (never two
    steps inside the 1%-down/5%-up band, never a fall to half): the trials grow to the
    cap and no longer.  1 us messages, cap 10 ms: trials of 2 ... 8192 messages
    (8.192 ms); doubling to 16.4 ms would pass the cap: stop there, unsettled."""
    link = Link(lambda n, i: 1000.0 * (1.1 if i % 2 else 1.0))
    got = settle_stream(link, 1000, 1000.0, 1e-4, cap_s=0.01)
    assert link.trials == [2 ** j for j in range(1, 14)]
    assert not got.settled and got.shaper(1000) is None
    assert 0.005 < got.trial_s <= 0.01


def test_a_bucket_is_followed_past_the_cap_until_it_settles():
    """The 4-message bucket falls to under half its burst rate by the third trial: the
    cap for a rate without a fall does not hold it; it settles at 1024 messages as
    without a cap."""
    link = Link(bucket)
    got = settle_stream(link, 1000, 1000.0, 1e-4, cap_s=1e-5)
    assert link.trials == list(BUCKET_UNITS) and got.settled


def test_the_cap_without_a_fall_is_the_budgets_share_of_one_trial():
    """Half of 20 s over 15 sizes of 6 trials: 0.111 s (the other half for the settling,
    the connections and a slower machine); never under the trial time asked, never over
    4 s; no budget: 4 s."""
    cfg = SweepConfig(sizes=[1] * 15, mode="stream", time_budget=20.0, min_trials=6)
    assert no_fall_cap(cfg) == pytest.approx(0.5 * 20.0 / 90)
    assert no_fall_cap(SweepConfig(sizes=[1] * 15, time_budget=0.01, trial_time=0.002)) \
        == 0.002
    assert no_fall_cap(SweepConfig(sizes=[1], time_budget=1000.0)) == 4.0
    assert no_fall_cap(SweepConfig(sizes=[1], time_budget=None)) == 4.0


def test_one_default_per_ping_pong_setting():
    """The sweep's, the suite's, the loop's and the CLI's defaults are one set."""
    from beoperf.cli import build_parser
    from beoperf.suites.pingpong import Spec

    sweep, spec, loop = SweepConfig(sizes=[1]), Spec(sizes=(1,)), LoopConfig()
    args = build_parser("pingpong").parse_args(["pingpong"])
    for name in ("precision", "trial_time", "time_budget", "max_time"):
        assert getattr(spec, name) == getattr(sweep, name), name
    for name in ("precision", "trial_time", "min_trials", "max_time"):
        assert getattr(loop, name) == getattr(sweep, name), name
    assert (args.precision, float(args.time_budget), args.max_time, args.timeout) == \
        (spec.precision, spec.time_budget, spec.max_time, spec.timeout)
    handed = loop_config(spec.sweep())
    assert handed == dataclasses.replace(LoopConfig(), time_budget=spec.time_budget,
                                         min_reps=sweep.min_reps, seed=handed.seed)

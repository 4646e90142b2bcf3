"""The curve analysis: Hockney fit, protocol thresholds, saturation, n1/2, latency."""

from __future__ import annotations

import numpy as np
import pytest

from beoperf.analysis.curve import (
    analyze,
    hockney,
    local_slopes,
    n_half,
    saturation,
    segment,
)
from beoperf.sweep.schedule import netpipe_schedule

SIZES = np.array(netpipe_schedule(), dtype=float)


def model(sizes: np.ndarray, alpha_us: float, bandwidth_bps: float) -> np.ndarray:
    return alpha_us + sizes * 8e6 / bandwidth_bps


def noisy(times: np.ndarray, rel: float = 0.005, seed: int = 7) -> np.ndarray:
    return times * (1.0 + np.random.default_rng(seed).normal(0.0, rel, times.size))


def throughput(sizes: np.ndarray, times_us: np.ndarray) -> np.ndarray:
    return sizes * 8.0 / (times_us * 1e-6)


@pytest.mark.parametrize("alpha,bw", [(5.0, 10e9), (50.0, 1e9), (1.5, 100e9)])
def test_hockney_recovers_alpha_and_beta(alpha, bw):
    fit = hockney(SIZES, noisy(model(SIZES, alpha, bw)))
    assert fit.alpha_us == pytest.approx(alpha, rel=0.02)
    assert fit.bandwidth_bps == pytest.approx(bw, rel=0.02)
    assert fit.r2 > 0.99


@pytest.mark.parametrize("seed", range(5))
def test_one_break_is_found_within_one_schedule_step(seed):
    """An eager/rendezvous-like switch at 64 KiB: latency jumps, bandwidth changes."""
    brk = 65536
    t = np.where(SIZES < brk, model(SIZES, 5.0, 10e9), model(SIZES, 25.0, 20e9))
    res = analyze(SIZES.tolist(), noisy(t, seed=seed).tolist(), [None] * SIZES.size,
                  throughput(SIZES, t).tolist())
    assert len(res.thresholds) == 1
    found = int(np.searchsorted(SIZES, res.thresholds[0]))
    assert abs(found - int(np.searchsorted(SIZES, brk))) <= 1
    first, second = res.pieces
    assert first.alpha_us == pytest.approx(5.0, rel=0.02)
    assert first.bandwidth_bps == pytest.approx(10e9, rel=0.02)
    assert second.alpha_us == pytest.approx(25.0, rel=0.02)
    assert second.bandwidth_bps == pytest.approx(20e9, rel=0.02)


def test_no_break_in_a_clean_line():
    t = noisy(model(SIZES, 10.0, 5e9))
    assert segment(SIZES, t) == []


def test_saturation_point_and_interval_follow_the_slope():
    t = model(SIZES, 10.0, 8e9)  # 1 byte per ns: time = 10 us + n/1000 us
    slopes = local_slopes(SIZES, t)
    point, (low, high) = saturation(SIZES, slopes)
    assert high == point
    assert np.all(slopes[SIZES >= point] >= 0.9)
    assert slopes[SIZES < point][-1] < 0.9
    # for this model the slope is n/(n + 10000): 0.9 is reached near n = 90000
    assert 60000 <= point <= 140000
    assert low <= 1500  # slope <= 0.1 up to about n = 1111


def test_no_saturation_when_time_never_grows_linearly():
    t = np.full(SIZES.size, 10.0)
    assert saturation(SIZES, local_slopes(SIZES, t)) == (None, None)


def test_n_half_is_interpolated_between_neighbours():
    sizes = np.array([1.0, 10.0, 100.0, 1000.0])
    bps = np.array([1.0, 2.0, 6.0, 10.0])
    assert n_half(sizes, bps) == pytest.approx(10 ** 1.75)  # half-way from 2 to 6 in log size


def test_latency_method_is_named_and_uses_small_sizes():
    t = model(SIZES, 12.0, 10e9)
    res = analyze(SIZES.tolist(), t.tolist(), (t * 2).tolist(), throughput(SIZES, t).tolist())
    assert res.latency_us == pytest.approx(12.0, rel=0.001)
    assert res.latency_p99_us == pytest.approx(24.0, rel=0.001)
    assert "1..16 B" in res.latency_method
    assert res.peak_size == int(SIZES[-1])


def test_unknown_p99_stays_unknown():
    t = model(SIZES, 12.0, 10e9)
    res = analyze(SIZES.tolist(), t.tolist(), [None] * SIZES.size, throughput(SIZES, t).tolist())
    assert res.latency_p99_us is None


def test_bidir_bandwidth_counts_both_directions():
    """In bidir a sample moves the message both ways: 1/beta must match the throughput."""
    t = model(SIZES, 5.0, 10e9)  # one direction at 10 Gbit/s
    res = analyze(SIZES.tolist(), t.tolist(), [None] * SIZES.size,
                  (2 * throughput(SIZES, t)).tolist())
    assert res.hockney.bandwidth_bps == pytest.approx(20e9, rel=0.01)


def test_very_long_sweeps_skip_the_piecewise_fit():
    """The segmentation needs (m+1)^2 floats: above MAX_SEGMENT_POINTS it is skipped."""
    from beoperf.analysis.curve import MAX_SEGMENT_POINTS

    sizes = np.arange(1, MAX_SEGMENT_POINTS + 50, dtype=float) * 1024
    t = model(sizes, 5.0, 10e9)
    res = analyze(sizes.tolist(), t.tolist(), [None] * sizes.size, throughput(sizes, t).tolist())
    assert res.pieces == [] and res.thresholds == []
    assert res.hockney.alpha_us == pytest.approx(5.0, rel=0.01)

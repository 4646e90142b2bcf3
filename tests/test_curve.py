"""The curve analysis: Hockney fit, protocol thresholds, saturation, n1/2, latency."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from beoperf.analysis.curve import (
    COLLAPSE_FACTOR,
    Collapse,
    analyze,
    analyze_run,
    collapses,
    hockney,
    local_slopes,
    n_half,
    saturation,
    segment,
)
from beoperf.model.importers import load_any
from beoperf.model.pingpong import RunResult, SizeResult
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


# --- the latency figure is one size's own median (6.2) -------------------------------------

def test_latency_is_the_middle_small_size_with_its_own_p99_and_ci():
    """The figure, its p99 and its CI all belong to one size: the middle one by median
    (the lower middle for an even count), never the first size by default."""
    sizes = [1, 2, 4, 8, 16, 1024]
    times = [3.36, 23.0, 23.42, 24.0, 25.0, 40.0]  # the first size is an outlier
    p99 = [t * 2 for t in times]
    ci = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    res = analyze(sizes, times, p99, throughput(np.array(sizes, float), np.array(times)).tolist(),
                  ci)
    assert (res.latency_size, res.latency_us) == (4, 23.42)
    assert res.latency_p99_us == 2 * 23.42 and res.latency_ci95_halfwidth_us == 0.3
    assert res.latency_us == float(np.median(times[:5]))  # the median of the per-size medians
    assert "at 4 B, the middle of the per-size medians over the 5 sizes 1..16 B" in \
        res.latency_method
    even = analyze(sizes[1:], times[1:], p99[1:], [1.0] * 5, ci[1:])  # 2, 4, 8, 16: lower middle
    assert (even.latency_size, even.latency_us) == (4, 23.42) and "lower middle" in \
        even.latency_method
    assert "latency_ci95_halfwidth_us" in res.to_dict() and res.to_dict()["latency_size"] == 4


def test_latency_without_small_sizes_is_the_first_size():
    res = analyze([1024, 4096], [30.0, 40.0], [None, None], [1.0, 2.0])
    assert (res.latency_size, res.latency_us, res.latency_ci95_halfwidth_us) == (1024, 30.0, None)
    assert "smallest size, 1024 B" in res.latency_method


# --- throughput collapses (6.3) ------------------------------------------------------------

def buffer_stall(sizes: np.ndarray, stall_from: int = 65533) -> np.ndarray:
    """Shaped like the 16K-socket-buffer sweep: healthy (5 us + n at 60 Gbit/s) up to
    stall_from, then 44..385 ms per message (delayed-ACK stalls), growing with size."""
    t = model(sizes, 5.0, 60e9)
    stalled = sizes >= stall_from
    t[stalled] = np.geomspace(44e3, 385e3, int(stalled.sum()))
    return t


def analyze_times(sizes: np.ndarray, t: np.ndarray):
    return analyze(sizes.tolist(), t.tolist(), [None] * sizes.size, throughput(sizes, t).tolist())


def test_buffer_stall_is_one_collapse_left_out_of_every_figure():
    sizes = SIZES[SIZES <= 8 * 2**20]
    t = noisy(buffer_stall(sizes))
    res = analyze_times(sizes, t)
    (c,) = res.collapses
    assert (c.first_size, c.last_size) == (65533, int(sizes[-1]))
    assert c.points == int((sizes >= 65533).sum())
    healthy = sizes < 65533
    bps = throughput(sizes, t)
    assert c.reference_size == int(sizes[healthy][np.argmax(bps[healthy])])
    assert c.factor == pytest.approx(bps[healthy].max() / bps[~healthy].min())
    assert c.factor > 1000
    assert res.peak_size < 65533 and res.peak_bps == pytest.approx(bps[healthy].max())
    assert res.saturation_size is None or res.saturation_size < 65533
    assert res.n_half is not None and res.n_half < 65533
    assert res.hockney.last_size < 65533
    assert res.hockney.bandwidth_bps == pytest.approx(60e9, rel=0.05)
    assert all(p.last_size < 65533 for p in res.pieces)
    assert all((s is None) == (n >= 65533) for s, n in zip(res.slopes, sizes, strict=True))
    assert f"65533..{int(sizes[-1])} B (44 sizes): down to 1/" in c.text()


def test_the_figures_without_a_collapse_equal_those_of_the_healthy_part_alone():
    sizes = SIZES
    t = noisy(buffer_stall(sizes))
    whole, healthy = analyze_times(sizes, t), analyze_times(sizes[sizes < 65533],
                                                           t[sizes < 65533])
    for name in ("latency_us", "peak_bps", "saturation_size", "n_half", "thresholds"):
        assert getattr(whole, name) == getattr(healthy, name), name
    assert whole.hockney == healthy.hockney and healthy.collapses == []


def test_collapse_factor_rule_and_recovery():
    """Below 1/10 of the best at a smaller size is a collapse, 1/9 is not; sizes where
    throughput recovers are healthy again and stay in the figures."""
    sizes = np.array([2.0**k for k in range(21)])
    bps = throughput(sizes, model(sizes, 5.0, 10e9))
    assert collapses(sizes, bps) == []
    dip = bps.copy()
    best = bps[:12].max()
    dip[12] = best / 9.0
    assert collapses(sizes, dip) == []
    dip[12:15] = best / 11.0
    (c,) = collapses(sizes, dip)
    assert (c.first_size, c.last_size, c.points) == (4096, 16384, 3)
    assert c.factor == pytest.approx(11.0) and c.reference_size == 2048
    t = sizes * 8 / dip * 1e6
    res = analyze_times(sizes, t)
    assert res.peak_size == 2**20 and res.hockney.last_size == 2**20
    assert res.slopes[13] is None and res.slopes[15] is not None
    assert collapses(sizes[:1], bps[:1]) == []


ALL_FIXTURES = ["nptcp-loopback.out", "netpipe5-mpi.out", "imb-2021-pingpong.txt",
                "imb-3.2-pingpong-windows.txt", "osu_latency-5.6.3.txt",
                "osu_latency-7.4-tail.txt", "osu_bw-7.4.txt"]


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_no_real_fixture_has_a_collapse(name):
    """Healthy curves from NetPIPE, IMB and OSU (protocol switches included) are never
    flagged, and with a margin: their worst drop is far above 1/COLLAPSE_FACTOR."""
    run = load_any(Path(__file__).parent / "fixtures" / name)
    assert analyze_run(run).collapses == []
    bps = np.array([s.central_bps() for s in run.sizes])
    worst = float((np.maximum.accumulate(bps)[:-1] / bps[1:]).max())
    assert worst < COLLAPSE_FACTOR / 4


# --- found by mutation testing (docs/TESTING.md) -------------------------------------------


def test_collapse_text_and_note_say_where_how_deep_and_against_what():
    sizes = np.array([2.0**k for k in range(12)])
    bps = throughput(sizes, model(sizes, 5.0, 10e9))
    one = bps.copy()
    one[8] = bps[:8].max() / 20.0
    (c,) = collapses(sizes, one)
    assert c.text() == (f"throughput collapse at 256 B: down to 1/20 of the "
                        f"{bps[7] / 1e6:.0f} Mbit/s reached at 128 B")
    # 128 B in 5 us + 1024 bit at 10 Gbit/s = 5.1024 us: 200.7 Mbit/s
    assert c.text() == ("throughput collapse at 256 B: down to 1/20 of the 201 Mbit/s reached "
                        "at 128 B")
    exact = Collapse(first_size=1, last_size=1, points=1, factor=20.0, reference_size=2,
                     reference_bps=1_000_500_400.0, lowest_size=1, lowest_bps=5e7)
    assert "of the 1001 Mbit/s reached at 2 B" in exact.text()  # 1000.5004 Mbit/s
    two = one.copy()
    two[9] = bps[:8].max() / 30.0
    (c,) = collapses(sizes, two)
    assert c.text().startswith("throughput collapse at 256..512 B (2 sizes): down to 1/30 ")
    res = analyze_times(sizes, sizes * 8 / one * 1e6)
    assert res.collapse_note() == ("latency, peak, saturation, n1/2 and the fits use the sizes "
                                   "outside the collapse")
    twice = one.copy()
    twice[10] = bps[:10].max() / 20.0
    res = analyze_times(sizes, sizes * 8 / twice * 1e6)
    assert len(res.collapses) == 2
    assert res.collapse_note() == ("latency, peak, saturation, n1/2 and the fits use the sizes "
                                   "outside the collapses")
    assert analyze_times(sizes, sizes * 8 / bps * 1e6).collapse_note() is None


def test_every_collapse_is_left_out_of_the_figures():
    """Two collapses: neither's sizes count (the peak of the second range is high, so a
    figure computed with it would show)."""
    sizes = np.array([2.0**k for k in range(14)])
    bps = throughput(sizes, model(sizes, 5.0, 10e9))
    dipped = bps.copy()
    dipped[6] = bps[:6].max() / 20.0
    dipped[10] = bps[:10].max() / 20.0
    res = analyze_times(sizes, sizes * 8 / dipped * 1e6)
    assert [(c.first_size, c.last_size) for c in res.collapses] == [(64, 64), (1024, 1024)]
    assert res.hockney.points == len(sizes) - 2
    assert res.slopes[6] is None and res.slopes[10] is None


def test_collapse_rule_at_exactly_a_tenth_and_its_lowest_point():
    sizes = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0])
    assert collapses(sizes, np.array([1000.0, 100.0, 1000.0, 1000.0, 1000.0, 1000.0])) == []
    (c,) = collapses(sizes, np.array([1000.0, 90.0, 80.0, 70.0, 60.0, 2000.0]))
    assert (c.first_size, c.last_size, c.points) == (2, 16, 4)
    assert (c.lowest_size, c.lowest_bps, c.reference_size) == (16, 60.0, 1)
    assert c.factor == pytest.approx(1000.0 / 60.0)
    # tiny throughputs are throughputs too: nothing before the first size to fall from
    assert collapses(sizes[:3], np.array([0.05, 0.06, 0.07])) == []


def test_latency_ties_are_broken_by_size():
    """Equal medians: the smaller size first, so the pick does not depend on how numpy
    sorts (the default sort is not stable with AVX-512)."""
    sizes = [1, 2, 4, 8, 16]
    res = analyze(sizes, [2.0, 2.0, 0.5, 2.0, 1.0], [None] * 5, [1.0, 2.0, 3.0, 4.0, 5.0])
    assert (res.latency_size, res.latency_us) == (1, 2.0)
    even = analyze(sizes[1:], [2.0, 2.0, 0.5, 1.0], [None] * 4, [1.0, 2.0, 3.0, 4.0])
    assert even.latency_method == ("median one-way time at 16 B, the lower middle of the "
                                   "per-size medians over the 4 sizes 2..16 B")


def test_a_size_alone_in_its_octave_has_slope_zero():
    sizes = np.array([1.0, 8.0, 64.0, 512.0])
    assert local_slopes(sizes, sizes * 3.0).tolist() == [0.0, 0.0, 0.0, 0.0]


def test_saturation_boundaries():
    sizes = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    # exactly 0.9 is saturated, exactly 0.1 is latency-bound
    assert saturation(sizes, np.array([0.0, 0.1, 0.5, 0.9, 1.0])) == (8, (2, 8))
    assert saturation(sizes, np.array([0.95, 0.9, 1.0, 1.0, 1.0])) == (1, (1, 1))
    assert saturation(sizes, np.array([0.5, 0.3, 0.2, 0.95, 1.0])) == (8, (1, 8))


def test_n_half_edges():
    sizes = np.array([1.0, 10.0, 100.0, 1000.0])
    assert n_half(sizes, np.array([6.0, 8.0, 9.0, 10.0])) == 1.0  # already there
    assert n_half(sizes, np.array([5.0, 8.0, 9.0, 10.0])) == 1.0  # exactly half
    assert n_half(sizes, np.array([6.0, 2.0, 9.0, 10.0])) == 1.0  # a dip after it
    assert n_half(sizes, np.array([1.0, 6.0, 9.0, 10.0])) == pytest.approx(10 ** 0.8)
    assert n_half(sizes, np.array([1.0, 5.0, 4.0, 10.0])) == pytest.approx(10.0)  # the first


def test_a_flat_curve_is_fitted_exactly():
    fit = hockney(np.array([1.0, 2.0, 4.0]), np.array([1.0, 1.0, 1.0]))
    assert (fit.alpha_us, fit.beta_us_per_byte, fit.bandwidth_bps, fit.r2) == (1.0, 0.0, None,
                                                                               1.0)


def test_short_sweeps():
    """One size: no fit; two: the line through them; three: slopes and saturation."""
    one = analyze([1024], [10.0], [None], [1e9])
    assert one.hockney is None and one.saturation_size is None
    two = analyze([1024, 2048], [10.0, 12.0], [None] * 2, [1e9, 2e9])
    assert two.hockney.alpha_us == pytest.approx(8.0)
    assert two.hockney.beta_us_per_byte == pytest.approx(2.0 / 1024)
    assert two.slopes == [0.0, 0.0] and two.saturation_size is None  # as written in JSON
    sizes = [1024, 2048, 4096]
    three = analyze(sizes, [1.0, 2.0, 4.0], [None] * 3, [8.192e9] * 3)
    assert three.slopes == pytest.approx([1.0, 1.0, 1.0])
    assert (three.saturation_size, three.saturation_interval) == (1024, (1024, 1024))


def step_curve(m: int, at: int) -> tuple[np.ndarray, np.ndarray]:
    """m sizes from 1 KiB to 4 MiB, evenly in log size; an eager/rendezvous-like step (5 ->
    40 us) at index `at`."""
    sizes = np.round(np.geomspace(1024, 4 * 2**20, m))
    return sizes, np.where(np.arange(m) < at, model(sizes, 5.0, 10e9), model(sizes, 40.0, 10e9))


@pytest.mark.parametrize("m, at", [(8, 4), (10, 5), (12, 8), (600, 300)])
def test_the_smallest_and_largest_segmentable_sweeps(m, at):
    """Breaks are sought from 2 x MIN_PIECE_POINTS sizes (a piece of 4 sizes is a piece) up
    to MAX_SEGMENT_POINTS included."""
    sizes, t = step_curve(m, at)
    res = analyze_times(sizes, t)
    assert res.thresholds == [int(sizes[at])]


def test_steps_far_below_any_precision_are_no_thresholds():
    """A noise-free line with a step of 3e-7 (relative): below the SSE floor of 1e-12 per
    point (an rms error of 1e-6), so no break; without the floor, BIC would split it."""
    sizes = SIZES[:100]
    t = model(sizes, 5.0, 10e9) * np.where(np.arange(100) < 50, 1.0, 1.0 + 3e-7)
    assert analyze_times(sizes, t).thresholds == []


def test_bic_charges_three_parameters_per_break():
    """m ln(SSE/m) + (3k + 2) ln m: a break that lowers m ln SSE by 13 (more than 3 ln 40 =
    11.1, less than 4 ln 40 = 14.8) is kept."""
    from beoperf.analysis.curve import _choose_by_bic

    m = 40
    sse0 = 1.0
    sse1 = sse0 * math.exp(-13.0 / m)
    assert _choose_by_bic({0: (sse0, []), 1: (sse1, [20])}, m) == [20]
    assert _choose_by_bic({0: (sse0, []), 1: (sse0 * math.exp(-10.0 / m), [20])}, m) == []


def test_bidir_pieces_count_both_directions():
    sizes, t = step_curve(40, 20)
    res = analyze(sizes.tolist(), t.tolist(), [None] * 40, (2 * throughput(sizes, t)).tolist())
    assert len(res.pieces) == 2
    assert all(p.bandwidth_bps == pytest.approx(20e9, rel=1e-6) for p in res.pieces)


def test_very_long_sweeps_skip_the_piecewise_fit_even_with_a_step():
    from beoperf.analysis.curve import MAX_SEGMENT_POINTS

    sizes, t = step_curve(MAX_SEGMENT_POINTS + 1, 300)
    res = analyze_times(sizes, t)
    assert res.thresholds == [] and res.pieces == []


def run_of(sizes: list[int], times: list[float], ci: list[float | None]) -> RunResult:
    return RunResult(parameters={}, local={}, remote={}, meta={}, sizes=[
        SizeResult(size=n, samples=10, trials=10, reps=10, time_us={"median": t, "p99": 2 * t},
                   ci95_halfwidth_us=c, ci95_relative=None, converged=True,
                   throughput_bps={"from_median": n * 8 / (t * 1e-6)})
        for n, t, c in zip(sizes, times, ci, strict=True)])


def test_analyze_run_carries_each_sizes_ci_and_is_kept_until_sizes_change():
    run = run_of([1, 2, 4, 1024], [3.0, 2.0, 4.0, 9.0], [0.1, 0.2, 0.3, 0.4])
    first = analyze_run(run)
    assert (first.latency_size, first.latency_ci95_halfwidth_us, first.latency_p99_us) == \
        (1, 0.1, 6.0)
    assert analyze_run(run) is first
    run.sizes.append(run_of([2048], [12.0], [None]).sizes[0])
    again = analyze_run(run)
    assert again is not first and again.peak_size == 2048
    assert analyze_run(run) is again
    assert analyze_run(run_of([], [], [])) is None


# --------------------------------------------------------------------------- no model


def test_a_fit_with_a_latency_at_or_below_zero_is_no_model_with_the_reason():
    """Times on an exact line whose intercept is below zero (t = 0.01 n - 0.0005 us, all
    positive at n >= 1): R^2 is 1, but alpha < 0 is no latency, so the analysis gives no
    Hockney model and says why; the fit is kept aside (``rejected``), its figures as
    they were."""
    sizes = np.array([2.0**k for k in range(0, 21)])
    times = 0.01 * sizes - 0.0005
    res = analyze(list(sizes), list(times), [None] * len(sizes), list(throughput(sizes, times)))
    fit = hockney(sizes, times)
    assert fit.alpha_us == pytest.approx(-0.0005) and fit.r2 == pytest.approx(1.0)
    assert res.hockney is None and res.rejected == fit
    assert res.model_problem.startswith("its latency alpha is not positive (")
    assert f"{fit.alpha_us:.3g} us" in res.model_problem


def test_a_fit_that_explains_less_than_r2_0_9_is_no_model():
    """Times that alternate 10 and 100 us from size to size: the weighted R^2 of a line
    is near 0: no model (the threshold, 0.9, is the issue's), and no pieces either."""
    sizes = np.array([2.0**k for k in range(0, 16)])
    times = np.where(np.arange(16) % 2 == 0, 100.0, 10.0)
    res = analyze(list(sizes), list(times), [None] * 16, list(throughput(sizes, times)))
    assert res.hockney is None and res.pieces == [] and res.thresholds == []
    assert "weighted R^2 " in res.model_problem and "below 0.9" in res.model_problem
    assert res.to_dict()["model_problem"] == res.model_problem
    clean = analyze(list(SIZES), list(model(SIZES, 5.0, 1e9)), [None] * len(SIZES),
                    list(throughput(SIZES, model(SIZES, 5.0, 1e9))))
    assert clean.hockney is not None and clean.model_problem is None and clean.rejected is None


def test_pieces_that_give_a_time_at_or_below_zero_are_no_model():
    """pieces_problem: a first piece with alpha <= 0, a piece whose time reaches zero within
    its own sizes, or pieces that explain less than R^2 0.9 over their points."""
    from beoperf.analysis.curve import Fit, pieces_problem

    n = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0])
    t = 10.0 + n / 10
    good = [Fit(1, 8, 4, 10.0, 0.1, 8e7, 1.0), Fit(16, 128, 4, 10.0, 0.1, 8e7, 1.0)]
    assert pieces_problem(n, t, good) is None
    first = [Fit(1, 8, 4, -1.0, 0.1, 8e7, 1.0), good[1]]
    assert "first piece's latency alpha is not positive (-1 us)" in pieces_problem(n, t, first)
    sinking = [good[0], Fit(16, 128, 4, 10.0, -0.1, None, 1.0)]
    assert "16..128 B gives a time <= 0" in pieces_problem(n, t, sinking)
    far = [good[0], Fit(16, 128, 4, 1.0, 0.001, 8e9, 1.0)]  # positive, but far off
    assert "weighted R^2" in pieces_problem(n, t, far)


def test_one_pingpong_run_analyses_its_curve_once(monkeypatch, tmp_path):
    """The document's summary and analysis, the text and its answer lines share one."""
    from beoperf.analysis import curve
    from helpers import cli

    calls = []

    def counted(*args, **kwargs):
        calls.append(args[0])
        return analyze(*args, **kwargs)

    monkeypatch.setattr(curve, "analyze", counted)
    res = cli("pingpong", "--sizes", "1,1K,64K", "--time-budget", "0.3", "--history", "off",
              "-o", str(tmp_path / "run"))
    assert res.status == 0, res.stderr
    assert "model " in res.stdout and len(calls) == 1

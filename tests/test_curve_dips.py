"""Throughput dips: a size range whose throughput falls below its neighbours by more than
the intervals allow (beoperf.analysis.curve, "throughput dip"), on the bonding study's
curve shape: two Fast Ethernet NICs in balance-rr, about 80% of 200 Mbit/s, dipping at 6,
16, 24, 64 and 256 KB."""

from __future__ import annotations

import numpy as np
import pytest

from beoperf.analysis.curve import analyze, analyze_run, dips, throughput_interval
from beoperf.model.pingpong import RunResult, SizeResult

KB = 1024
# powers of two and the 1.5x sizes between them, 1 B .. 1 MiB
SIZES = np.array(sorted({2**k for k in range(21)} | {3 * 2**k for k in range(19)}), float)
BOND_DIPS = (6 * KB, 16 * KB, 24 * KB, 64 * KB, 256 * KB)
FIRSTS = [6 * KB, 16 * KB, 64 * KB, 256 * KB]  # 16 and 24 KB: one range
LATENCY_US, BOND_BPS = 60.0, 0.8 * 200e6  # the bond's peak: about 80% of 2 x 100 Mbit/s


def bond_times(dip_depth: float = 0.7, seed: int = 3, noise: float = 0.01) -> np.ndarray:
    """One-way times of the bond's Hockney curve, the dip sizes slowed so that their
    throughput is ``dip_depth`` of the curve's, with relative noise ``noise``."""
    t = LATENCY_US + SIZES * 8e6 / BOND_BPS
    t = np.where(np.isin(SIZES, BOND_DIPS), t / dip_depth, t)
    return t * (1.0 + np.random.default_rng(seed).uniform(-noise, noise, SIZES.size))


def bands(t: np.ndarray, rel: float) -> list[tuple[float, float] | None]:
    """Each size's 95% interval of its median time, +-rel around it."""
    return [(x * (1 - rel), x * (1 + rel)) for x in t]


def rates(t: np.ndarray) -> np.ndarray:
    return SIZES * 8.0 / (t * 1e-6)


def found(t: np.ndarray, rel: float) -> list[int]:
    a = analyze(SIZES.astype(int).tolist(), t.tolist(), [None] * SIZES.size,
                rates(t).tolist(), None, "one-way time", bands(t, rel))
    assert a.collapses == []  # a dip to 70% is no collapse
    return [d.first_size for d in a.dips]


def test_the_bonding_curves_dips_are_flagged_each_on_its_own():
    t = bond_times()
    a = analyze(SIZES.astype(int).tolist(), t.tolist(), [None] * SIZES.size, rates(t).tolist(),
                None, "one-way time", bands(t, 0.03))
    # 16 and 24 KB are neighbours in this schedule: one range of two sizes
    assert [(d.first_size, d.last_size) for d in a.dips] == [
        (6 * KB, 6 * KB), (16 * KB, 24 * KB), (64 * KB, 64 * KB), (256 * KB, 256 * KB)]
    for d in a.dips:
        assert d.before_size < d.first_size and d.after_size > d.last_size
        assert 0.6 < d.depth < 0.8  # the 70% put in, up to the noise and the curve's rise
    assert a.peak_bps == pytest.approx(BOND_BPS, rel=0.05)


def test_the_same_curve_without_dips_flags_none_whatever_its_noise():
    """Noise up to the intervals' width is never a dip (each size's value anywhere in
    +-3%, each interval +-3%)."""
    for seed in range(20):
        assert found(bond_times(dip_depth=1.0, seed=seed, noise=0.03), 0.03) == []


def test_the_intervals_decide_not_a_fixed_percent():
    """The same 10% dips: flagged with +-0.3% intervals, none with +-6% intervals."""
    t = bond_times(dip_depth=0.9, noise=0.0)
    assert found(t, 0.003) == FIRSTS
    assert found(t, 0.06) == []


def test_a_dip_over_several_sizes_is_one_range_and_a_fall_that_stays_is_none():
    sizes = np.array([1.0, 2, 4, 8, 16, 32, 64])
    bps = np.array([10.0, 20, 40, 25, 24, 45, 46])
    low, high = bps * 0.98, bps * 1.02
    (d,) = dips(sizes, bps, low, high)
    assert (d.first_size, d.last_size, d.points, d.lowest_size) == (8, 16, 2, 16)
    assert (d.before_size, d.after_size) == (4, 32)  # the nearest clearly above it
    assert d.depth == pytest.approx(24 / 40)
    assert "throughput dip at 8..16 B (2 sizes)" in d.text()
    fall = np.array([10.0, 20, 40, 25, 24, 23, 22])  # never comes back: no dip
    assert dips(sizes, fall, fall * 0.98, fall * 1.02) == []


def test_sizes_without_an_interval_are_not_judged():
    sizes = np.array([1.0, 2, 4, 8, 16])
    bps = np.array([10.0, 20, 5, 20, 21])
    nan = np.full(5, np.nan)
    assert dips(sizes, bps, nan, nan) == []
    low, high = throughput_interval(bps, np.ones(5), [(0.9, 1.1), None, None, (0.9, 1.1),
                                                      (0.9, 1.1)])
    assert np.isnan(low[1]) and low[0] == pytest.approx(10 / 1.1)
    assert dips(sizes, bps, low, high) == []  # 4 B has no interval: nothing to judge


def run_of(t: np.ndarray, rel: float, inflation: float | None) -> RunResult:
    return RunResult(parameters={"mode": "pingpong"}, local={}, remote={}, meta={},
                     sweep={"interval_inflation": inflation} if inflation else None, sizes=[
        SizeResult(size=int(n), samples=30, trials=10, reps=30,
                   time_us={"median": float(x), "p99": float(x) * 1.2},
                   ci95_halfwidth_us=None, ci95_relative=None, converged=True,
                   throughput_bps={"from_median": float(r)},
                   ci95_median_us=[float(x) * (1 - rel), float(x) * (1 + rel)])
        for n, x, r in zip(SIZES, t, rates(t), strict=True)])


def test_a_runs_own_intervals_judge_it_widened_by_its_pass_autocorrelation():
    """analyze_run reads each size's ci95_median_us; a run whose passes carried the
    machine's state (interval_inflation 20) has 20x wider intervals on the log scale."""
    t = bond_times(dip_depth=0.9, noise=0.0)
    assert [d.first_size for d in analyze_run(run_of(t, 0.003, None)).dips] == FIRSTS
    assert analyze_run(run_of(t, 0.003, 20.0)).dips == []


def test_the_summary_and_its_answer_name_each_dip():
    """The text a sweep prints (and the report's answer, from the same lines) warns of
    each dip with where, how deep and against which sizes; the curve without dips has
    no such line."""
    from beoperf.report.pingpong import text

    dipped = text(run_of(bond_times(noise=0.0), 0.01, None))
    warned = [line for line in dipped.splitlines() if "throughput dip" in line]
    assert len(warned) == 4 and all(line.lstrip().startswith("WARN") for line in warned)
    assert "throughput dip at 16384..24576 B (2 sizes): down to" in dipped
    assert "at 6144 B: down to" in dipped and "beyond the 95% intervals" in dipped
    assert "throughput dip" not in text(run_of(bond_times(dip_depth=1.0, noise=0.0), 0.01,
                                               None))


def test_the_html_report_shades_each_dip_on_the_curves(tmp_path):
    """`beoperf report` shows the dips among its answers and shades them (orange, labelled
    with their depth) on the throughput, signature and saturation graphs."""
    from helpers import cli

    run = run_of(bond_times(noise=0.0), 0.01, None)
    run.meta = {"peer": "crafted bond"}
    run.to_document().save(tmp_path / "bond.json")
    res = cli("report", str(tmp_path / "bond.json"), "-o", str(tmp_path / "r.html"))
    assert res.status == 0, res.stderr
    page = (tmp_path / "r.html").read_text()
    assert page.count("<title>dip ") == 3 * 4  # four dips on each of the three graphs
    assert "throughput dip (beyond the intervals)" in page
    assert "throughput dip at 16384..24576 B (2 sizes)" in page

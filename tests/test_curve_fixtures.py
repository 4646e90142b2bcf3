"""The analysis of every real fixture, written down once and computed again independently.

Each fixture in tests/fixtures (NetPIPE 3 and 5, IMB 2021 and 3.2, OSU latency and
bandwidth) has its expected figures in ``EXPECTED``: latency and its size, the peak and
its size, the saturation point and interval, n1/2, the Hockney fit (alpha, 1/beta, R^2)
and the protocol thresholds.  They were reviewed against the data (the notes beside each
row say how), and each is also recomputed here by a second method that shares no code
with ``beoperf.analysis.curve`` (numpy.polyfit with weights, an exhaustive search over
break points, the definitions read literally).  The tolerances are far tighter than any
of the bugs these tests pin: R^2 with an unweighted total sum of squares (0.803 becomes
0.99997 on NPtcp), the saturation point taken as the first size with slope >= 0.9 instead
of "from there on" (it moves on three fixtures), a latency that is not the middle size.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from beoperf.analysis.curve import (
    LATENCY_MAX_SIZE,
    LATENCY_SLOPE,
    MAX_BREAKS,
    MIN_PIECE_POINTS,
    SATURATED_SLOPE,
    analyze_run,
)
from beoperf.model.importers import load_any

FIXTURES = Path(__file__).parent / "fixtures"
WRITTEN = 1e-6  # relative: the written-down figures carry 7 significant digits
SAME = 1e-9  # relative: the code against the second method, same arithmetic in doubles


@dataclass(frozen=True)
class Expected:
    latency: tuple[float, int]  # us, and the size whose median it is
    p99: float | None
    peak: tuple[float, int]  # bit/s, size
    saturation: int | None
    interval: tuple[int, int] | None
    n_half: float  # bytes
    alpha: float  # us
    bandwidth: float  # bit/s, 1/beta
    r2: float
    thresholds: list[int]
    model: bool = True  # the Hockney fit is given as a model (physical: alpha > 0, R^2 >= 0.9)


EXPECTED = {
    # Real NPtcp 3.7 on loopback: noisy (times jump 8.4 <-> 13 us between neighbours), so
    # the relative-error fit explains only 80% (R^2 0.803); the last size's slope is 0.84:
    # never saturated.  Latency: the middle of the nine medians 8.42..11.18 us (<= 16 B).
    # Since issue 25 a fit with R^2 below 0.9 is no model (model False): the fit's figures
    # are unchanged and kept in `rejected`; the piecewise fit explains 0.945 and stays.
    "nptcp-loopback.out": Expected(
        latency=(8.89, 6), p99=None, peak=(6.802603e10, 786432), saturation=None,
        interval=None, n_half=123170.3, alpha=11.6004, bandwidth=4.922859e10, r2=0.8030812,
        thresholds=[24, 16387, 786429], model=False),
    # NetPIPE 5: 1.34-1.36 us up to 16 B (the fifth of nine is 12 B's 1.35); a rendezvous
    # step at 32 KiB; slopes >= 0.9 from 512 KiB - 3 on (first >= 0.9 is 24 KiB + 3).
    "netpipe5-mpi.out": Expected(
        latency=(1.35, 12), p99=None, peak=(9.179075e10, 6291453), saturation=524285,
        interval=(1536, 524285), n_half=15327.06, alpha=1.350067, bandwidth=8.513397e10,
        r2=0.9819134, thresholds=[32768]),
    # IMB 2021: 1.61-1.64 us; eager -> rendezvous at 64 KiB (7466 -> 6475 MB/s); the slope
    # dips to 0.70 at 128 KiB and 0.88 at 512 KiB, so saturated from 1 MiB (not 64 KiB).
    "imb-2021-pingpong.txt": Expected(
        latency=(1.63, 8), p99=None, peak=(9.379558e10, 4194304), saturation=1048576,
        interval=(1024, 1048576), n_half=18822.29, alpha=1.61708, bandwidth=8.80639e10,
        r2=0.985084, thresholds=[65536]),
    # IMB 3.2 (Windows, MB = 2^20 B): peak at 1 MiB (915.64 us), 2 and 4 MiB slightly slower.
    "imb-3.2-pingpong-windows.txt": Expected(
        latency=(14.95, 8), p99=None, peak=(9.16147e9, 1048576), saturation=262144,
        interval=(1024, 262144), n_half=17184.47, alpha=14.79267, bandwidth=9.002663e9,
        r2=0.9988321, thresholds=[65536]),
    # OSU 5.6.3: the 0-byte row is not a size; slope 0.92 at 16 KiB then 0.78 at 32 KiB:
    # saturated from 128 KiB (first >= 0.9 would say 16 KiB).
    "osu_latency-5.6.3.txt": Expected(
        latency=(2.3, 8), p99=None, peak=(1.12657e10, 2097152), saturation=131072,
        interval=(256, 131072), n_half=3321.067, alpha=2.304498, bandwidth=1.071637e10,
        r2=0.9941348, thresholds=[16384]),
    # OSU 7.4 with percentiles: 1.04 us at 1..16 B (the middle is 4 B, whose P99 is 2.03).
    "osu_latency-7.4-tail.txt": Expected(
        latency=(1.04, 4), p99=2.03, peak=(1.000759e11, 4194304), saturation=524288,
        interval=(1024, 524288), n_half=39416.38, alpha=1.046866, bandwidth=8.98981e10,
        r2=0.9524328, thresholds=[128, 16384]),
    # osu_bw: a windowed stream, so "time" is size / bandwidth: an almost exact line
    # (R^2 = 1 - 1.6e-8), 0.21 us per message and 97 Gbit/s.
    "osu_bw-7.4.txt": Expected(
        latency=(0.2103049, 4), p99=None, peak=(9.694112e10, 4194304), saturation=32768,
        interval=(256, 32768), n_half=2548.701, alpha=0.2099887, bandwidth=9.699923e10,
        r2=0.99999998, thresholds=[32]),
}


# --------------------------------------------------------------------------- second methods


def curve(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sizes, per-size central times (us) and throughputs (bit/s) of a fixture."""
    run = load_any(FIXTURES / name)
    return (np.array([s.size for s in run.sizes], dtype=float),
            np.array([s.central_time_us() for s in run.sizes]),
            np.array([s.central_bps() for s in run.sizes]))


def weighted_fit(n: np.ndarray, t: np.ndarray) -> tuple[float, float, float, float]:
    """(alpha, beta, sse, R^2) of t = alpha + beta*n by least squares on relative error,
    by numpy.polyfit with weights 1/t (it minimises sum((w * residual)^2)); R^2 with the
    total sum of squares in the same weighting, around the weighted mean of t (1 where
    every time is the same: the line fits exactly and both sums are rounding noise)."""
    beta, alpha = np.polyfit(n, t, 1, w=1.0 / t)
    sse = float((((t - (alpha + beta * n)) / t) ** 2).sum())
    mean = np.average(t, weights=1.0 / t**2)
    total = float((((t - mean) / t) ** 2).sum())
    return float(alpha), float(beta), sse, 1.0 - sse / total if total > 1e-24 else 1.0


def slopes_by_definition(n: np.ndarray, t: np.ndarray) -> np.ndarray:
    """d log t / d log n: a straight line through the points within one octave."""
    octaves = np.log2(n)
    out = []
    for x in octaves:
        near = np.abs(octaves - x) <= 1.0 + 1e-12
        out.append(np.polyfit(np.log(n[near]), np.log(t[near]), 1)[0] if near.sum() > 1
                   else 0.0)
    return np.array(out)


def saturation_by_definition(n: np.ndarray, s: np.ndarray):
    """The smallest size from which every slope is >= 0.9, and the interval from the last
    slope <= 0.1 below it."""
    start = next((i for i in range(len(n)) if all(s[i:] >= SATURATED_SLOPE)), None)
    if start is None:
        return None, None
    flat = [i for i in range(start) if s[i] <= LATENCY_SLOPE]
    return int(n[start]), (int(n[flat[-1]] if flat else n[0]), int(n[start]))


def latency_by_definition(n: np.ndarray, t: np.ndarray) -> tuple[float, int]:
    """The lower middle of the per-size medians at sizes <= 16 B, with its size."""
    small = sorted((t[i], i) for i in range(len(n)) if n[i] <= max(LATENCY_MAX_SIZE, n[0]))
    value, i = small[(len(small) - 1) // 2]
    return float(value), int(n[i])


def n_half_by_definition(n: np.ndarray, bps: np.ndarray) -> float:
    half = bps.max() / 2
    i = next(i for i in range(len(n)) if bps[i] >= half)
    frac = (half - bps[i - 1]) / (bps[i] - bps[i - 1])
    return float(math.exp(math.log(n[i - 1]) + frac * math.log(n[i] / n[i - 1])))


@functools.cache
def thresholds_by_search(name: str) -> list[int]:
    """Break points by exhaustive search over every split into 1..4 pieces of at least
    MIN_PIECE_POINTS sizes, each piece fitted on its own, the count chosen by the lowest
    BIC = m ln(SSE/m) + (3k + 2) ln m (k breaks: 2 parameters per piece plus each break)."""
    n, t, _bps = curve(name)
    m = len(n)
    cost = {(i, j): weighted_fit(n[i:j], t[i:j])[2]
            for i in range(m) for j in range(i + MIN_PIECE_POINTS, m + 1)}
    best: list[tuple[float, int, tuple[int, ...]]] = []
    for k in range(MAX_BREAKS + 1):
        options = [(sum(cost[a, b] for a, b in itertools.pairwise((0, *cut, m))), cut)
                   for cut in itertools.combinations(range(MIN_PIECE_POINTS,
                                                           m - MIN_PIECE_POINTS + 1), k)
                   if all(b - a >= MIN_PIECE_POINTS for a, b in itertools.pairwise((0, *cut, m)))]
        if options:
            sse, cut = min(options)
            bic = m * math.log(max(sse, 1e-12 * m) / m) + (3 * k + 2) * math.log(m)
            best.append((bic, k, cut))
    return [int(n[i]) for i in min(best)[2]]


# --------------------------------------------------------------------------- the tests


@pytest.fixture(params=sorted(EXPECTED))
def fixture(request):
    """(name, the analysis, the curve); analysed anew for every test (so that mutation
    testing sees which tests run which code)."""
    name = request.param
    return name, analyze_run(load_any(FIXTURES / name)), curve(name)


def test_the_written_down_figures(fixture):
    name, got, _ = fixture
    want = EXPECTED[name]
    assert got.collapses == [] and got.collapse_note() is None
    assert got.latency_us == pytest.approx(want.latency[0], rel=WRITTEN)
    assert got.latency_size == want.latency[1]
    assert got.latency_p99_us == want.p99 and got.latency_ci95_halfwidth_us is None
    assert (got.peak_bps, got.peak_size) == (pytest.approx(want.peak[0], rel=WRITTEN),
                                             want.peak[1])
    assert got.saturation_size == want.saturation
    assert got.saturation_interval == want.interval
    assert got.n_half == pytest.approx(want.n_half, rel=WRITTEN)
    fit = fitted(got)
    assert fit.alpha_us == pytest.approx(want.alpha, rel=WRITTEN)
    assert fit.bandwidth_bps == pytest.approx(want.bandwidth, rel=WRITTEN)
    assert fit.r2 == pytest.approx(want.r2, abs=WRITTEN)
    assert (got.hockney is fit, got.rejected is None) == (want.model, want.model)
    assert (got.model_problem is None) == want.model
    if not want.model:
        assert f"weighted R^2 {want.r2:.3f}, below 0.9" in got.model_problem
    assert got.pieces_problem is None
    assert got.thresholds == want.thresholds


def fitted(got):
    """The Hockney fit, given as a model or rejected (its figures are the same)."""
    return got.hockney if got.hockney is not None else got.rejected


def test_latency_and_peak_by_definition(fixture):
    _name, got, (n, t, bps) = fixture
    assert (got.latency_us, got.latency_size) == latency_by_definition(n, t)
    assert got.peak_bps == bps.max() and got.peak_size == int(n[np.argmax(bps)])
    assert got.n_half == pytest.approx(n_half_by_definition(n, bps), rel=SAME)


def test_hockney_fit_by_weighted_polyfit(fixture):
    _name, got, (n, t, _bps) = fixture
    alpha, beta, _sse, r2 = weighted_fit(n, t)
    fit = fitted(got)
    assert (fit.first_size, fit.last_size, fit.points) == (int(n[0]), int(n[-1]), len(n))
    assert fit.alpha_us == pytest.approx(alpha, rel=SAME)
    assert fit.beta_us_per_byte == pytest.approx(beta, rel=SAME)
    assert fit.bandwidth_bps == pytest.approx(8e6 / beta, rel=SAME)  # one message per sample
    assert fit.r2 == pytest.approx(r2, abs=SAME)


def test_slopes_and_saturation_by_definition(fixture):
    _name, got, (n, t, _bps) = fixture
    slopes = slopes_by_definition(n, t)
    assert np.allclose(got.slopes, slopes, rtol=0, atol=1e-9)
    assert (got.saturation_size, got.saturation_interval) == saturation_by_definition(n, slopes)


def test_thresholds_and_pieces_by_exhaustive_search(fixture):
    name, got, (n, t, _bps) = fixture
    assert got.thresholds == thresholds_by_search(name)
    bounds = [0, *(int(np.searchsorted(n, b)) for b in got.thresholds), len(n)]
    assert len(got.pieces) == len(bounds) - 1
    for piece, (a, b) in zip(got.pieces, itertools.pairwise(bounds), strict=True):
        alpha, beta, _sse, r2 = weighted_fit(n[a:b], t[a:b])
        assert (piece.first_size, piece.last_size, piece.points) == (int(n[a]), int(n[b - 1]),
                                                                     b - a)
        assert piece.alpha_us == pytest.approx(alpha, rel=1e-7, abs=1e-9)
        assert piece.beta_us_per_byte == pytest.approx(beta, rel=1e-7, abs=1e-12)
        assert piece.bandwidth_bps == (pytest.approx(8e6 / beta, rel=1e-7) if beta > 0 else None)
        assert piece.r2 == pytest.approx(r2, abs=1e-7)


def test_the_bugs_these_figures_pin_would_change_them():
    """The written-down figures tell the right analysis from the plausible wrong ones."""
    n, t, _bps = curve("nptcp-loopback.out")
    _alpha, _beta, sse, r2 = weighted_fit(n, t)
    unweighted_total = 1.0 - sse / float(((t - t.mean()) ** 2).sum())
    assert r2 == pytest.approx(0.8030812, abs=WRITTEN) and unweighted_total > 0.9999
    moved = 0
    for name, want in EXPECTED.items():
        n, t, _bps = curve(name)
        slopes = slopes_by_definition(n, t)
        first = next((int(x) for x, s in zip(n, slopes, strict=True) if s >= SATURATED_SLOPE),
                     None)
        moved += first != want.saturation
    assert moved == 3  # NetPIPE 5, IMB 2021 (1 MiB -> 64 KiB) and OSU 5.6.3

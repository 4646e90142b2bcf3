"""Statistics over timing samples: the median's distribution-free CI and summaries."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from beoperf.analysis.stats import (
    MIN_CI_SAMPLES,
    Summary,
    mad,
    median_ci,
    median_ci_ranks,
    relative_ci,
    summarize,
)


def binom_cdf(n: int, k: int) -> Fraction:
    """P(B <= k) for B ~ Binomial(n, 1/2), exactly."""
    if k < 0:
        return Fraction(0)
    return Fraction(sum(math.comb(n, j) for j in range(min(k, n) + 1)), 2**n)


def coverage(n: int, lo: int, hi: int) -> Fraction:
    """P(X(lo) <= median <= X(hi)) for 0-based order statistics of n samples."""
    return 1 - binom_cdf(n, lo) - (1 - binom_cdf(n, hi))


# --- exact ranks --------------------------------------------------------------------------

@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5])
def test_too_few_samples_for_95(n):
    assert median_ci_ranks(n) is None


def test_first_n_with_an_interval_is_six():
    first = next(n for n in range(100) if median_ci_ranks(n) is not None)
    assert first == 6 == MIN_CI_SAMPLES
    # independently: n = 6 is the first n where the extreme order statistics cover 95%
    assert 1 - 2 * binom_cdf(5, 0) < Fraction(95, 100)
    assert 1 - 2 * binom_cdf(6, 0) >= Fraction(95, 100)


@pytest.mark.parametrize("n, ranks", [
    (6, (0, 5)), (7, (0, 6)), (8, (0, 7)), (9, (1, 7)), (10, (1, 8)), (11, (1, 9)),
    (12, (2, 9)), (20, (5, 14)), (100, (39, 60)),
])
def test_exact_ranks(n, ranks):
    assert median_ci_ranks(n) == ranks


def test_lower_confidence_needs_fewer_samples():
    # P(B<=0) for n=3 is 1/8 <= 0.25/2
    assert median_ci_ranks(3, 0.75) == (0, 2)
    assert median_ci_ranks(2, 0.5) == (0, 1)
    assert median_ci_ranks(3, 0.9) is None


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_exact_coverage_and_tightness(confidence):
    level = Fraction(confidence).limit_denominator(1000)
    for n in range(2, 301):
        ranks = median_ci_ranks(n, confidence)
        if ranks is None:
            # not even the extreme order statistics reach the level
            assert coverage(n, 0, n - 1) < level, n
            continue
        lo, hi = ranks
        assert 0 <= lo <= hi <= n - 1
        assert hi == n - 1 - lo, "symmetric"
        assert 1 - 2 * binom_cdf(n, lo) >= level, n
        # tightest: moving one rank inwards loses the coverage
        assert 1 - 2 * binom_cdf(n, lo + 1) < level, n


@pytest.mark.parametrize("n", [500, 999, 1000])
def test_exact_coverage_large(n):
    lo, hi = median_ci_ranks(n)
    assert 1 - 2 * binom_cdf(n, lo) >= Fraction(95, 100)
    assert 1 - 2 * binom_cdf(n, lo + 1) < Fraction(95, 100)


# --- normal approximation (n > 1000) ------------------------------------------------------

@pytest.mark.parametrize("n", [1001, 1002, 1003, 1500, 2000, 4097, 10_000, 100_001])
def test_normal_branch_brackets_the_median(n):
    lo, hi = median_ci_ranks(n)
    assert 0 <= lo < (n - 1) / 2 < hi <= n - 1
    # the ranks are about z * sqrt(n) / 2 away from the middle
    half = 1.959963984540054 * math.sqrt(n) / 2
    assert abs((hi - lo) / 2 - half) <= 2


def test_normal_branch_close_to_exact_at_the_switch():
    lo0, hi0 = median_ci_ranks(1000)
    lo1, hi1 = median_ci_ranks(1001)
    assert (lo0, hi0) == (468, 531)
    assert abs(lo1 - lo0) <= 1 and abs(hi1 - (hi0 + 1)) <= 1
    # and close to what the exact rule would give at n = 1001
    k, total = -1, 0
    while Fraction(total + math.comb(1001, k + 1), 2**1001) <= Fraction(25, 1000):
        k += 1
        total += math.comb(1001, k)
    assert abs(lo1 - k) <= 1
    assert abs(hi1 - (1000 - k)) <= 1


@pytest.mark.parametrize("n", [1001, 1002, 1111, 1999, 2000, 3001])
def test_normal_branch_coverage(n):
    lo, hi = median_ci_ranks(n)
    assert coverage(n, lo, hi) >= Fraction(95, 100)


@pytest.mark.parametrize("n", [1001, 2000])
def test_normal_branch_honours_confidence(n):
    """The requested confidence must apply above 1000 samples too."""
    for confidence in (0.9, 0.99):
        lo, hi = median_ci_ranks(n, confidence)
        level = Fraction(confidence).limit_denominator(1000)
        assert coverage(n, lo, hi) >= level, (n, confidence, lo, hi)
    assert median_ci_ranks(n, 0.99) != median_ci_ranks(n, 0.95)


# --- median_ci, mad, summarize, relative_ci ------------------------------------------------

def test_median_ci_values():
    arr = np.arange(10, 110, dtype=np.float64)  # 100 sorted samples 10..109
    assert median_ci(arr) == (49.0, 70.0)
    assert median_ci(np.arange(5.0)) is None
    assert median_ci(np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])) == (1.0, 6.0)


def test_mad():
    assert mad(np.array([1.0, 1.0, 2.0, 2.0, 4.0, 6.0, 9.0])) == 1.0
    assert mad(np.array([5.0])) == 0.0


def test_summarize_1_to_100():
    data = list(range(100, 0, -1))  # unsorted on purpose
    s = summarize(data)
    arr = np.arange(1, 101, dtype=np.float64)
    assert isinstance(s, Summary)
    assert s.count == 100
    assert s.min == 1.0 and s.max == 100.0
    assert s.median == 50.5
    assert s.mean == 50.5
    assert s.p90 == pytest.approx(np.percentile(arr, 90, method="linear"))
    assert s.p90 == pytest.approx(90.1)
    assert s.p99 == pytest.approx(99.01)
    assert s.mad == 25.0
    assert s.stddev == pytest.approx(float(np.std(arr, ddof=1)))
    assert s.stddev == pytest.approx(29.011491975882016)
    assert (s.ci_low, s.ci_high) == (40.0, 61.0)
    assert s.ci_halfwidth == 10.5
    assert s.ci_relative == pytest.approx(10.5 / 50.5)


def test_summarize_small_sets():
    one = summarize([3.5])
    assert (one.count, one.min, one.median, one.max, one.stddev, one.mad) == (1, 3.5, 3.5, 3.5,
                                                                               0.0, 0.0)
    assert one.ci_low is None and one.ci_high is None
    assert one.ci_halfwidth is None and one.ci_relative is None
    five = summarize([5, 1, 4, 2, 3])
    assert five.median == 3.0 and five.ci_low is None
    six = summarize([6, 1, 5, 2, 4, 3])
    assert (six.ci_low, six.ci_high) == (1.0, 6.0)
    assert six.ci_halfwidth == 2.5


def test_summarize_accepts_numpy_ints():
    s = summarize(np.array([10, 20, 30], dtype=np.uint64))
    assert s.median == 20.0 and isinstance(s.median, float)
    assert s.stddev == 10.0


def test_ci_relative_none_for_non_positive_median():
    s = summarize([-3.0, -2.0, -1.0, 0.0, 0.0, 0.0, 0.0])
    assert s.median == 0.0
    assert s.ci_halfwidth is not None
    assert s.ci_relative is None


@pytest.mark.parametrize("empty", [[], np.array([])])
def test_summarize_empty_raises(empty):
    with pytest.raises(ValueError):
        summarize(empty)


def test_relative_ci():
    arr = np.arange(1, 101, dtype=np.float64)
    assert relative_ci(arr) == pytest.approx((61.0 - 40.0) / 2 / 50.5)
    assert relative_ci(np.full(50, 7.0)) == 0.0
    assert relative_ci(np.arange(1.0, 6.0)) is None  # 5 samples: no interval
    assert relative_ci(np.zeros(10)) is None  # median 0: no relative width
    assert relative_ci(np.arange(1, 101, dtype=np.float64)) == summarize(arr).ci_relative


# --- found by mutation testing (docs/TESTING.md) -------------------------------------------

def test_median_ci_honours_its_confidence():
    arr = np.arange(1, 101, dtype=np.float64)
    lo, hi = median_ci_ranks(100, 0.5)
    assert median_ci(arr, 0.5) == (arr[lo], arr[hi]) != median_ci(arr)


def test_two_samples_have_a_spread():
    """The standard deviation of two samples is |a - b| / sqrt(2), not 0."""
    assert summarize([1.0, 3.0]).stddev == pytest.approx(math.sqrt(2.0))


def test_relative_ci_of_medians_below_one():
    """Seconds, say: a median of 0.5 has a relative width like any other."""
    arr = np.arange(1, 101, dtype=np.float64) / 100.0
    assert relative_ci(arr) == pytest.approx((0.61 - 0.40) / 2 / 0.505)


def test_summarize_empty_says_why():
    with pytest.raises(ValueError, match="^no samples to summarize$"):
        summarize([])

"""Small named statistics over timing samples.

The median's confidence interval is distribution-free (order statistics of the
binomial distribution): timing samples are skewed and heavy-tailed, so a
normal-theory interval of the mean would lie about them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

import numpy as np

MIN_CI_SAMPLES = 6  # fewer samples cannot bracket the median at 95%


@dataclass(frozen=True)
class Summary:
    """Descriptive statistics of one set of samples (same unit as the input)."""

    count: int
    min: float
    median: float
    mean: float
    p90: float
    p99: float
    max: float
    stddev: float
    mad: float
    ci_low: float | None
    ci_high: float | None

    @property
    def ci_halfwidth(self) -> float | None:
        if self.ci_low is None or self.ci_high is None:
            return None
        return (self.ci_high - self.ci_low) / 2.0

    @property
    def ci_relative(self) -> float | None:
        """CI half-width as a fraction of the median (None when unknown)."""
        half = self.ci_halfwidth
        if half is None or self.median <= 0:
            return None
        return half / self.median


@lru_cache(maxsize=4096)
def median_ci_ranks(n: int, confidence: float = 0.95) -> tuple[int, int] | None:
    """0-based ranks (lo, hi) of the order statistics bracketing the median.

    Exact binomial for n <= 1000, normal approximation above; None when n is
    too small to reach the requested confidence.
    """
    if n < 2:
        return None
    alpha = 1.0 - confidence
    if n > 1000:
        half = NormalDist().inv_cdf(1.0 - alpha / 2.0) * math.sqrt(n) / 2.0
        lo = max(0, math.floor(n / 2.0 - half) - 1)
        hi = min(n - 1, math.ceil(n / 2.0 + half))
        return lo, hi
    cdf = 0.0
    k = -1
    for j in range(n + 1):  # largest k with P(B <= k) <= alpha / 2
        p = math.comb(n, j) * 0.5**n
        if cdf + p > alpha / 2.0:
            break
        cdf += p
        k = j
    if k < 0:
        return None
    return k, n - 1 - k


def median_ci(sorted_samples: np.ndarray, confidence: float = 0.95) -> tuple[float, float] | None:
    """Distribution-free confidence interval of the median of sorted samples."""
    ranks = median_ci_ranks(len(sorted_samples), confidence)
    if ranks is None:
        return None
    return float(sorted_samples[ranks[0]]), float(sorted_samples[ranks[1]])


def mad(samples: np.ndarray) -> float:
    """Median absolute deviation (unscaled)."""
    med = np.median(samples)
    return float(np.median(np.abs(samples - med)))


def summarize(samples: np.ndarray | list[float]) -> Summary:
    """All descriptive statistics of a non-empty sample set."""
    arr = np.sort(np.asarray(samples, dtype=np.float64))
    if arr.size == 0:
        raise ValueError("no samples to summarize")
    ci = median_ci(arr) if arr.size >= MIN_CI_SAMPLES else None
    return Summary(
        count=int(arr.size),
        min=float(arr[0]),
        median=float(np.median(arr)),
        mean=float(arr.mean()),
        p90=float(np.percentile(arr, 90)),
        p99=float(np.percentile(arr, 99)),
        max=float(arr[-1]),
        stddev=float(arr.std(ddof=1)) if arr.size > 1 else 0.0,
        mad=mad(arr),
        ci_low=ci[0] if ci else None,
        ci_high=ci[1] if ci else None,
    )


def relative_ci(sorted_samples: np.ndarray) -> float | None:
    """Half-width of the median's 95% CI relative to the median, cheaply."""
    ci = median_ci(sorted_samples)
    if ci is None:
        return None
    med = float(np.median(sorted_samples))
    return (ci[1] - ci[0]) / 2.0 / med if med > 0 else None

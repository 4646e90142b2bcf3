"""Deep tails of a size's samples: a log-bucketed histogram and the percentiles read
from it (p50 to p99.99), each reported only when enough samples stand behind it.

The histogram keeps memory and the document bounded however long a run is: bucket k
holds the samples in [RATIO**k, RATIO**(k+1)) ns, a fixed relative width of 1%
(HdrHistogram's idea, with a log scale instead of its sub-buckets), from 1 ns to
MAX_NS; at most MAX_BUCKETS buckets, of which the document stores only the non-empty
ones.  A percentile read from it is the geometric middle of the bucket that holds the
sample of its rank, so it is within half a bucket (+-0.5%) of that sample.

Enough samples: a percentile p is reported when at least MIN_BEYOND samples lie beyond
it, n >= MIN_BEYOND / (1 - p): 100 samples for p90, 1,000 for p99, 10,000 for p99.9,
100,000 for p99.99.  With fewer, the figure would be set by the one or two slowest
samples (below 1 / (1 - p) it is the maximum itself) and would move by their luck from
run to run; with 10 beyond it the count of samples beyond is known to about +-30%
(Poisson, 1 / sqrt(10)), so the rank's sample is a steady order statistic.  Below the
rule the percentile is "n/a (n samples)".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from beoperf.model import jsonvalue
from beoperf.model.document import JsonObject

RATIO = 1.01  # a bucket's upper edge over its lower: 1% relative resolution
MAX_NS = 1e12  # 1000 s: a slower sample counts in the last bucket
MAX_BUCKETS = math.floor(math.log(MAX_NS) / math.log(RATIO)) + 1  # 2777: MAX_NS in the last
MAX_COUNT = 10**15  # per bucket, as the schema allows: a sum of them all fits in 64 bits
MIN_BEYOND = 10  # samples beyond a percentile for it to be reported
PERCENTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999),
               ("p99.99", 0.9999))
RULE = (f"a percentile p is given when at least {MIN_BEYOND} samples lie beyond it "
        f"(n >= {MIN_BEYOND}/(1-p)); read from a log histogram of {RATIO - 1:.0%} buckets, "
        "within half a bucket of the sample of its rank")


def min_samples(p: float) -> int:
    """The fewest samples that report percentile ``p`` (MIN_BEYOND beyond it)."""
    return math.ceil(round(MIN_BEYOND / (1.0 - p), 6))  # 1 - 0.9999 is not exact


def bucket_of(values_ns: np.ndarray) -> np.ndarray:
    """Bucket index of each value (ns); values under 1 ns count in bucket 0, those over
    MAX_NS in the last."""
    clipped = np.clip(np.asarray(values_ns, dtype=np.float64), 1.0, MAX_NS)
    index = np.floor(np.log(clipped) / math.log(RATIO)).astype(np.int64)
    return np.clip(index, 0, MAX_BUCKETS - 1)


def bucket_middle_ns(index: int) -> float:
    """The geometric middle of bucket ``index`` (what a percentile in it reads as)."""
    return float(RATIO ** (index + 0.5))


@dataclass
class LogHistogram:
    """Counts per bucket (a fixed array of MAX_BUCKETS), filled trial by trial."""

    counts: np.ndarray

    @classmethod
    def empty(cls) -> LogHistogram:
        return cls(np.zeros(MAX_BUCKETS, dtype=np.int64))

    @classmethod
    def of(cls, chunks: list[np.ndarray]) -> LogHistogram:
        """The histogram of every sample (ns) of ``chunks`` (a size's trials)."""
        h = cls.empty()
        for chunk in chunks:
            h.add(chunk)
        return h

    def add(self, values_ns: np.ndarray) -> None:
        self.counts += np.bincount(bucket_of(values_ns), minlength=MAX_BUCKETS)

    def merge(self, other: LogHistogram) -> None:
        self.counts += other.counts

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def percentile_ns(self, p: float) -> float | None:
        """The nearest-rank p-th percentile (the sample of rank ceil(p n)), as its
        bucket's middle; None when the histogram is empty."""
        n = self.total
        if n == 0:
            return None
        rank = max(1, math.ceil(p * n - 1e-9))
        index = int(np.searchsorted(np.cumsum(self.counts), rank))
        return bucket_middle_ns(index)

    def sparse(self) -> list[list[int]]:
        """The non-empty buckets as [index, count] pairs (what the document stores)."""
        nonzero = np.flatnonzero(self.counts)
        return [[int(i), int(self.counts[i])] for i in nonzero]

    @classmethod
    def from_sparse(cls, pairs: list[list[int]]) -> LogHistogram:
        """The histogram a document stores (pairs out of range are ignored: an index
        past MAX_BUCKETS, a count of 0 or above MAX_COUNT)."""
        h = cls.empty()
        for index, count in pairs:
            if 0 <= index < MAX_BUCKETS and 0 < count <= MAX_COUNT:
                h.counts[index] += count
        return h


def tail_of(chunks: list[np.ndarray]) -> dict:
    """A size's tail section, times in us: the sample count, every percentile of
    PERCENTILES the rule allows (None otherwise), and the histogram."""
    h = LogHistogram.of(chunks)
    n = h.total
    percentiles: dict[str, float | None] = {}
    for name, p in PERCENTILES:
        value = h.percentile_ns(p) if n >= min_samples(p) else None
        # six digits: the bucket's middle stands for a span of 1% anyway
        percentiles[name] = float(f"{value / 1000.0:.6g}") if value is not None else None
    return {"samples": n, "percentiles_us": percentiles,
            "histogram": {"ratio": RATIO, "unit": "ns", "buckets": h.sparse()},
            "rule": RULE}


def samples_of(tail: JsonObject | None) -> int:
    """The sample count a stored tail gives (0 if none)."""
    return jsonvalue.integer(tail, "samples") or 0


def value_of(tail: JsonObject | None, name: str) -> float | None:
    """A stored percentile (us), None when the rule left it out."""
    value = jsonvalue.number(jsonvalue.section(tail, "percentiles_us"), name)
    return value if value is not None and value > 0 else None


def histogram_of(tail: JsonObject | None) -> LogHistogram:
    """The histogram a stored tail keeps (malformed pairs left out)."""
    pairs = jsonvalue.items(jsonvalue.section(tail, "histogram"), "buckets")
    return LogHistogram.from_sparse([[v for v in p if isinstance(v, int)] for p in pairs
                                     if isinstance(p, list) and len(p) == 2
                                     and all(isinstance(v, int) and not isinstance(v, bool)
                                             for v in p)])


def percentile_text(tail: JsonObject | None, name: str) -> str:
    """``"12.3 us"``, or ``"n/a (n samples)"`` below the rule (see the module)."""
    value = value_of(tail, name)
    if value is not None:
        return f"{value:.2f} us" if value >= 0.1 else f"{value:.3g} us"
    return f"n/a ({samples_of(tail):,} samples)"


def quantile_of(name: str) -> float:
    """The fraction of a percentile's name ("p99.9" -> 0.999)."""
    return dict(PERCENTILES)[name]

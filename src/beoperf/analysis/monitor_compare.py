"""Two monitor reports side by side: did the link's latency change between two periods
("class week 0.66 ms vs vacation week 0.28 ms, -58%")?

The unit of replication is the day: a link's level moves from one day to the next (load,
routes, the other tenants) by more than its probes within a day scatter, so a test over
the probes would call any two weeks different.  Each day's median one-way latency (and
p95) is one replicate, and analysis/effect.py judges the two sets of days as it judges
two sets of runs (ratios on the log scale, Student's t on the days' own spread,
Bonferroni over the figures compared, better / worse / no difference shown / cannot
tell).  Days monitored less than half of their length are left out (a few minutes of a
day, or the hour of a local day a period cut off, are not that day's level).

Pure computation on typed report bodies.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from beoperf.analysis import effect
from beoperf.model.monitor import MonitorReport, Period

MIN_COVERAGE_PCT = 50.0
FIGURES: tuple[tuple[str, Callable[[Period], float | None]], ...] = (
    ("median one-way latency", lambda d: d.one_way_ms.median),
    ("p95 one-way latency", lambda d: d.one_way_ms.p95),
)


@dataclass
class Row:
    """One figure of both reports: each side's geometric mean of its days' values (ms),
    how many days, and the verdict of the candidate against the baseline."""

    figure: str
    base_ms: float | None
    base_days: int
    cand_ms: float | None
    cand_days: int
    effect: effect.Effect


def days_of(doc: MonitorReport) -> list[Period]:
    """The days that count as replicates: monitored at least half of their length (a
    day's length is its own: 23 or 25 hours on a daylight-saving change)."""
    return [d for d in doc.days if (d.coverage_pct or 0.0) >= MIN_COVERAGE_PCT
            and d.monitored_s >= MIN_COVERAGE_PCT / 100.0 * (d.end_utc - d.start_utc)]


def _values(days: list[Period], pick: Callable[[Period], float | None]) -> list[float]:
    found = [pick(d) for d in days]
    return [v for v in found if v is not None and v > 0 and math.isfinite(v)]


def _geomean(values: list[float]) -> float | None:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def compare(base: MonitorReport, cand: MonitorReport,
            margin: float = effect.DEFAULT_MARGIN) -> list[Row]:
    """Each figure of ``cand`` against ``base``, days as replicates (lower is better)."""
    rows = []
    for name, pick in FIGURES:
        b, c = _values(days_of(base), pick), _values(days_of(cand), pick)
        found = effect.compare([effect.Replicate(v) for v in b],
                               [effect.Replicate(v) for v in c], higher_is_better=False,
                               family=len(FIGURES), margin=margin)
        if not b or not c:
            found.reason = (f"no day monitored at least {MIN_COVERAGE_PCT:g}% of its time "
                            "with a latency figure on one side")
        rows.append(Row(name, _geomean(b), len(b), _geomean(c), len(c), found))
    return rows

"""What a `beoperf cluster rma` series says: each one-sided point against the two-sided
one-way time of its size, and the answer's figures (the fastest synchronisation of each
operation at the smallest and the largest size)."""

from __future__ import annotations

from beoperf.model.cluster_mpi import RmaPoint

TWO_SIDED = "two-sided"


def two_sided_of(points: list[RmaPoint]) -> dict[int, RmaPoint]:
    """The two-sided point of each size."""
    return {p.size: p for p in points if p.op == TWO_SIDED}


def vs_two_sided(p: RmaPoint, points: list[RmaPoint]) -> float | None:
    """The one-sided time over the two-sided one-way time of its size (medians); None
    without a two-sided point of that size (or for a two-sided point)."""
    other = two_sided_of(points).get(p.size)
    if p.op == TWO_SIDED or other is None or other.time_s.median <= 0:
        return None
    return p.time_s.median / other.time_s.median


def fastest(points: list[RmaPoint], op: str, size: int) -> RmaPoint | None:
    """The synchronisation with the lowest median time for ``op`` at ``size``."""
    found = [p for p in points if p.op == op and p.size == size]
    return min(found, key=lambda p: p.time_s.median) if found else None

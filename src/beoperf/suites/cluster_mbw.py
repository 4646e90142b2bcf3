"""`beoperf cluster mbw`: the aggregate bandwidth and message rate of N pairs streaming at
once, as osu_mbw_mr measures them.

With N pairs, rank i sends to rank i + N (i < N; the other ranks only meet the others in
the barrier): windows of ``window`` non-blocking sends, each window acknowledged by a
4-byte message; one window of warm-up, then every rank in MPI_Barrier, then the timed
windows.  The aggregate bandwidth is N x size x messages / the senders' mean time, the
message rate N x messages / that time (osu_mbw_mr's: every pair sends as much, so a slow
pair weighs on it); each pair's own rate (its bytes over its own time), the slowest, the
fastest and their sum, shows how evenly they shared and what they reached together.
Each (N, size) is a point of the precision loop; figures are the median of the trials,
with its 95% interval.  Ranks are placed by node, so with one rank per node pair i runs
from node i to node i + N; with two per node, two pairs leave each sending node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from beoperf import errors
from beoperf.analysis.cluster_mpi import default_pair_counts, pairings, stat_of
from beoperf.model import narrow
from beoperf.model.cluster_mpi import MbwSettings, MpiRun, Pairing, Point, Series
from beoperf.model.document import JsonObject
from beoperf.model.mpi_options import DEFAULT_WINDOW
from beoperf.suites.cluster_mpi import (
    HINT,
    Common,
    Outcome,
    Plan,
    Progress,
    Stop,
    Test,
    loop_facts,
    rank_of_test,
    run_loop,
    run_series,
    status_of,
)
from beoperf.sweep.cluster_mpi import MbwMeasurer

KIND = "cluster-mbw"
DEFAULT_SIZES = (8, 1024, 65536, 1 << 20)
MAX_SIZE = 1 << 30
STATISTIC = ("Aggregate bandwidth = pairs x size x messages / the senders' mean time; "
             "message rate = pairs x messages / that time (osu_mbw_mr); the median of the "
             "trials with its 95% interval")


@dataclass(frozen=True)
class Spec:
    """``sizes``: message sizes; ``pairs``: the pair counts (None: 1, 2, 4 ... and all
    the ranks can make); ``window``: messages per acknowledged window."""

    common: Common = field(default_factory=Common)
    sizes: tuple[int, ...] = DEFAULT_SIZES
    pairs: tuple[int, ...] | None = None
    window: int = DEFAULT_WINDOW


def check(spec: Spec) -> None:
    if not spec.sizes or min(spec.sizes) < 1 or max(spec.sizes) > MAX_SIZE:
        raise errors.BadSpec("--sizes: from 1 B to 1 GiB", HINT)
    if not 1 <= spec.window <= 4096:
        raise errors.BadSpec(f"--window {spec.window}: from 1 to 4096 messages", HINT)
    if spec.pairs is not None and (not spec.pairs or min(spec.pairs) < 1):
        raise errors.BadSpec("--pairs: counts of 1 or more", HINT)
    if spec.common.integrity and spec.window > 2:
        raise errors.BadSpec("--integrity needs each message of a window in its own buffer",
                             "use --window 2")


@dataclass(frozen=True)
class Params:
    """What the ranks are told: the sizes, the window, the pair counts (None: 1, 2, 4 ...
    and all the ranks can make)."""

    sizes: list[int]
    window: int
    pairs: list[int] | None

    def to_dict(self) -> JsonObject:
        return {"sizes": list(self.sizes), "window": self.window,
                "pairs": list(self.pairs) if self.pairs is not None else None}

    @classmethod
    def from_dict(cls, d: JsonObject) -> Params:
        return cls(narrow.ints(d.get("sizes"), "params.sizes"),
                   narrow.integer(d.get("window"), "params.window"),
                   narrow.opt_ints(d.get("pairs"), "params.pairs"))


def params(spec: Spec) -> Params:
    return Params(sorted(set(spec.sizes)), spec.window,
                  sorted(set(spec.pairs)) if spec.pairs else None)


def body(given: JsonObject, label: str | None, series: list[Series]) -> MpiRun:
    p = Params.from_dict(given)
    return MpiRun(KIND, label or "mbw", series, MbwSettings(p.window, p.sizes, STATISTIC))


def run(spec: Spec, progress: Progress | None = None) -> Outcome | None:
    """Every series; None on a rank other than 0."""
    check(spec)
    return run_series(TEST, params(spec).to_dict(), spec.common, progress=progress)


# --------------------------------------------------------------------------- rank 0


def point(measurer: MbwMeasurer, count: int, size: int) -> Point | None:
    trials = measurer.log.get((count, size), [])
    if not trials:
        return None
    mean = [sum(t["elapsed_ns"]) / len(t["elapsed_ns"]) / 1e9 for t in trials]
    rates = [[size * t["reps"] / (e / 1e9) for e in t["elapsed_ns"]] for t in trials]
    per_pair = [r for trial in rates for r in trial]
    bandwidth = stat_of([count * size * t["reps"] / m for t, m in zip(trials, mean,
                                                                       strict=True)])
    rate = stat_of([count * t["reps"] / m for t, m in zip(trials, mean, strict=True)])
    assert bandwidth is not None and rate is not None  # (there are trials)
    return Point(pairs=count, size=size, trials=len(trials), messages=trials[-1]["reps"],
                 bandwidth_Bps=bandwidth, rate_per_s=rate,
                 pair_Bps={"min": min(per_pair), "max": max(per_pair),
                           "sum": float(np.median([sum(trial) for trial in rates]))})


def measure(leader: Any, plan: Plan, series: Series) -> Stop:
    """Rank 0: each pair count at each size."""
    p, n = Params.from_dict(plan.params), series.np
    counts = [c for c in (p.pairs or default_pair_counts(n)) if 2 * c <= n]
    if not counts:
        raise errors.BadSpec(f"--pairs {p.pairs}: {n} ranks make at most {n // 2} pairs",
                             HINT)
    measurer = MbwMeasurer(leader, p.window, plan.integrity)
    keys = [(c, s) for c in counts for s in p.sizes]
    out = run_loop(keys, measurer, plan, f"pairs at once, {n} ranks")
    node = [r.node for r in series.ranks]
    series.pairings = [Pairing(a, b, node[a], node[b]) for a, b in pairings(max(counts))]
    series.pair_counts = counts
    series.skipped_pair_counts = [c for c in (p.pairs or []) if 2 * c > n]
    series.points = [pt for c, s in keys if (pt := point(measurer, c, s)) is not None]
    series.loop = loop_facts(out)
    return status_of(out, series)


TEST = Test("mbw", KIND, body, measure)


def rank(plan: JsonObject) -> int:
    """A rank of the job `beoperf cluster mbw` launched (``python -m beoperf.cli.rank
    cluster-mbw PLAN``)."""
    return rank_of_test(plan, TEST)

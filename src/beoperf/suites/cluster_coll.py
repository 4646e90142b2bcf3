"""`beoperf cluster coll`: MPI collectives (allreduce, allgather, alltoall, bcast, reduce,
reduce_scatter, gather, scatter, barrier) over a size schedule, with beoperf's
statistics, as OSU's osu_allreduce ... and IMB-MPI1 measure them.

**What a size means**, as OSU and IMB use it: the vector for allreduce, reduce and bcast;
each rank's block for allgather, alltoall, gather and scatter; the whole vector for
reduce_scatter (MPI_Reduce_scatter_block: each rank gets 1/np of it).  The reductions
sum MPI_DOUBLEs (size / 8 of them, at least one), the others move MPI_BYTEs; the
document keeps each point's element count and bytes.

The non-blocking forms (``--ops iallreduce,...``: MPI_Iallreduce ...) are posted and
waited for at once (MPI_Wait), nothing overlapped: the time of the non-blocking path,
not OSU's overlap of computation.

**Synchronisation** (OSU's): MPI_Barrier before every call, warm-up or timed, and only
the call timed; a rank's figure is the mean of its timed calls.  **Reduction over the
ranks** (IMB's): t_min, t_avg and t_max of the ranks' means; the headline is t_avg (OSU's
"Avg Latency", IMB's t_avg[usec]).  Each (collective, size) is a point of the precision
loop, whose trial figure is t_avg: each reported figure is the median of the trials with
its 95% interval.  **Check**: the first trial of each point runs the collective once,
untimed, on known values and every rank compares what it got (the reduction's exact
sum, each block from the rank it must come from): ``corrupt`` counts the elements wrong.
``--nocache``: each call on other buffers (the no-cache pool of the other tests).
Ranks and launchers as the cluster's other MPI tests (suites/cluster_mpi.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from beoperf import errors
from beoperf.analysis.cluster_mpi import stat_of
from beoperf.engines.mpi_coll import (
    OPERATIONS,
    base,
    buffer_bytes,
    count_of,
    element_bytes,
)
from beoperf.model import narrow
from beoperf.model.cluster_mpi import COLL_KIND, CollPoint, CollSettings, MpiRun, Series
from beoperf.model.document import JsonObject
from beoperf.suites.cluster_mpi import (
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
from beoperf.sweep.cluster_coll import CollMeasurer

KIND = COLL_KIND
HINT = "see 'beoperf cluster coll --help'"
DEFAULT_OPERATIONS = ("allreduce", "allgather", "alltoall", "bcast", "reduce",
                      "reduce_scatter", "gather", "scatter", "barrier")
DEFAULT_SIZES = (8, 1024, 65536)
MAX_SIZE = 1 << 26  # per call and rank; alltoall's buffers are np times that
MAX_BUFFER = 1 << 30  # a rank's send or receive buffer
SYNC = ("MPI_Barrier before every call (warm-up or timed), only the call timed "
        "(OSU Micro-Benchmarks' way); one untimed call before each trial's timed ones")
STATISTIC = ("Each rank's mean time per call, reduced over the ranks as IMB does (t_min, "
             "t_avg, t_max); the headline t_avg (OSU's Avg Latency); each the median of "
             "the trials with its 95% interval")


@dataclass(frozen=True)
class Spec:
    """``operations``: the collectives; ``sizes``: bytes (see the module); ``root`` of
    bcast, reduce, gather and scatter; ``nocache``: buffers not reused."""

    common: Common = field(default_factory=Common)
    operations: tuple[str, ...] = DEFAULT_OPERATIONS
    sizes: tuple[int, ...] = DEFAULT_SIZES
    root: int = 0
    nocache: bool = False


def check(spec: Spec) -> None:
    unknown = [op for op in spec.operations if op not in OPERATIONS]
    if not spec.operations or unknown:
        raise errors.BadSpec(f"--ops {','.join(unknown) or '(none)'}: choose from "
                             f"{', '.join(OPERATIONS)}", HINT)
    if not spec.sizes or min(spec.sizes) < 1 or max(spec.sizes) > MAX_SIZE:
        raise errors.BadSpec(f"--sizes: from 1 B to {MAX_SIZE >> 20} MiB", HINT)
    if spec.root < 0:
        raise errors.BadSpec(f"--root {spec.root}: a rank, 0 or more", HINT)
    if spec.common.integrity:
        raise errors.BadSpec("--integrity: the collectives check their result once per size "
                             "already (see 'corrupt' in the document)", "leave it out")


@dataclass(frozen=True)
class Params:
    """What the ranks are told: the collectives, sizes, root and whether buffers are
    reused."""

    operations: list[str]
    sizes: list[int]
    root: int
    nocache: bool

    def to_dict(self) -> JsonObject:
        return {"operations": list(self.operations), "sizes": list(self.sizes),
                "root": self.root, "nocache": self.nocache}

    @classmethod
    def from_dict(cls, d: JsonObject) -> Params:
        return cls(narrow.texts(d.get("operations"), "params.operations"),
                   narrow.ints(d.get("sizes"), "params.sizes"),
                   narrow.integer(d.get("root"), "params.root"),
                   narrow.flag(d.get("nocache"), "params.nocache"))


def params(spec: Spec) -> Params:
    ops = [op for op in OPERATIONS if op in spec.operations]  # the table's order, once each
    return Params(ops, sorted(set(spec.sizes)), spec.root, spec.nocache)


def body(given: JsonObject, label: str | None, series: list[Series]) -> MpiRun:
    p = Params.from_dict(given)
    return MpiRun(KIND, label or "coll", series,
                  CollSettings(p.operations, p.sizes, p.root, p.nocache, SYNC, STATISTIC))


def run(spec: Spec, progress: Progress | None = None) -> Outcome | None:
    """Every series; None on a rank other than 0."""
    check(spec)
    return run_series(TEST, params(spec).to_dict(), spec.common, progress=progress)


# --------------------------------------------------------------------------- rank 0


def point(measurer: CollMeasurer, op: str, size: int, np_: int) -> CollPoint | None:
    key = (op, size)
    trials = measurer.log.get(key, [])
    stats = [stat_of([t[name] for t in trials]) for name in ("t_avg_s", "t_min_s", "t_max_s")]
    avg, low, high = stats
    if avg is None or low is None or high is None:
        return None
    count = count_of(op, size, np_)
    longest = stat_of([t["longest_s"] for t in trials])
    return CollPoint(op=op, size=size, count=count, bytes=count * element_bytes(op),
                     trials=len(trials), calls=trials[-1]["reps"], t_avg_s=avg, t_min_s=low,
                     t_max_s=high, checked=measurer.checked.get(key, 0),
                     corrupt=measurer.wrong.get(key, 0), longest_s=longest)


def keys_of(p: Params, np_: int) -> tuple[list[tuple[str, int]], int]:
    """(collective, size) to measure: a barrier once (it moves no data), and no size whose
    buffers would pass MAX_BUFFER (BadSpec when none is left); how many were left out
    for that."""
    keys, dropped = [], 0
    for op in p.operations:
        for size in p.sizes[:1] if base(op) == "barrier" else p.sizes:
            if max(buffer_bytes(op, count_of(op, size, np_), np_)) <= MAX_BUFFER:
                keys.append((op, size))
            else:
                dropped += 1
    if not keys:
        raise errors.BadSpec(f"every size needs buffers over {MAX_BUFFER >> 20} MiB with "
                             f"{np_} ranks", HINT)
    return keys, dropped


def measure(leader: Any, plan: Plan, series: Series) -> Stop:
    """Rank 0: each collective at each size."""
    p, n = Params.from_dict(plan.params), series.np
    if p.root >= n:
        raise errors.BadSpec(f"--root {p.root}: the job has {n} ranks (0 to {n - 1})", HINT)
    keys, left = keys_of(p, n)
    measurer = CollMeasurer(leader, p.root, p.nocache)
    out = run_loop(keys, measurer, plan, f"collectives, {n} ranks")
    series.collectives = [pt for op, s in keys if (pt := point(measurer, op, s, n))
                          is not None]
    if left:
        series.warnings.append(f"{left} (collective, size) left out: their buffers would "
                               f"pass {MAX_BUFFER >> 20} MiB a rank with {n} ranks")
    series.loop = loop_facts(out)
    return status_of(out, series)


TEST = Test("coll", KIND, body, measure)


def rank(plan: JsonObject) -> int:
    """A rank of the job `beoperf cluster coll` launched (``python -m beoperf.cli.rank
    cluster-coll PLAN``)."""
    return rank_of_test(plan, TEST)

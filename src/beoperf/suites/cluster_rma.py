"""`beoperf cluster rma`: one-sided MPI between rank 0 and rank 1 of the job, MPI_Put
and MPI_Get with active-target (MPI_Win_fence) and passive-target synchronisation
(MPI_Win_lock/unlock, MPI_Win_lock_all/unlock_all, or MPI_Win_flush inside one lock), as
osu_put_latency and osu_get_latency time them, with the two-sided ping-pong's one-way
time of each size beside them (the comparison the course notes make).

It is a test of the cluster suite, beside ``mbw``: the same launchers, hosts and
``--ranks-per-node`` series (with one rank per node rank 0 and rank 1 are on two nodes;
with two, on one node, over shared memory), the same precision loop and document
envelope; the ranks other than 0 and 1 wait quietly.  The window is osu's default,
``MPI_Win_allocate``, one per synchronisation.  Each (op, sync, size) is a point of the
precision loop; a figure is the median of the trials with its 95% interval, a trial's
value the mean time of one operation over its timed repetitions (``sweep/cluster_rma``).
Every trial's data is checked outside the timed loop (``engines/mpi_rma``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from beoperf import errors
from beoperf.analysis.cluster_mpi import stat_of
from beoperf.engines.mpi_rma import OPS, SYNCS
from beoperf.model import narrow
from beoperf.model.cluster_mpi import RMA_KIND, MpiRun, Pairing, RmaPoint, RmaSettings, Series
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
from beoperf.sweep.cluster_rma import PINGPONG, TWO_SIDED, RmaMeasurer

KIND = RMA_KIND
HINT = "see 'beoperf cluster rma --help'"
DEFAULT_SIZES = (8, 1024, 65536, 1 << 20)
DEFAULT_OPS = ("put", "get")
DEFAULT_BURST = 32  # osu_put_bw's window
MAX_SPAN = 1 << 30  # a bandwidth loop's burst x size (the window and the buffer each)
DEFAULT_SYNCS = ("fence", "lock", "flush")
MAX_SIZE = 256 << 20
WINDOW = "allocate"
WINDOW_HINT = ("Open MPI takes ranks of hosts with one host name (containers, network "
               "namespaces) for one node and its shared-memory windows (osc sm) fail "
               "between them: --mpi-env OMPI_MCA_osc=pt2pt; or try --mpi mpich")
STATISTIC = ("Time of one operation with its synchronisation: the origin's timed loop / "
             "repetitions, halved for fence (a repetition is a put or get each way, as "
             "osu_put_latency -s fence) and for the two-sided ping-pong (a round trip), "
             "divided by the burst for put_bw and get_bw (as osu_put_bw: a burst of "
             "operations per synchronisation, fence one way); "
             "bandwidth = size / that time; the median of the trials with its 95% interval")


@dataclass(frozen=True)
class Spec:
    """``ops``: put, get, put_bw, get_bw; ``syncs``: fence, lock, flush, lock_all;
    ``sizes`` in bytes; ``bw_burst``: operations per synchronisation of put_bw and get_bw;
    ``two_sided``: the ping-pong of each size measured beside."""

    common: Common = field(default_factory=Common)
    ops: tuple[str, ...] = DEFAULT_OPS
    syncs: tuple[str, ...] = DEFAULT_SYNCS
    sizes: tuple[int, ...] = DEFAULT_SIZES
    two_sided: bool = True
    bw_burst: int = DEFAULT_BURST


def check(spec: Spec) -> None:
    if not spec.sizes or min(spec.sizes) < 1 or max(spec.sizes) > MAX_SIZE:
        raise errors.BadSpec("--sizes: from 1 B to 256 MiB", HINT)
    bad = [o for o in spec.ops if o not in OPS]
    if not spec.ops or bad:
        raise errors.BadSpec(f"--op {','.join(bad) or '(none)'}: choose from "
                             f"{', '.join(OPS)}", HINT)
    bad = [s for s in spec.syncs if s not in SYNCS]
    if not spec.syncs or bad:
        raise errors.BadSpec(f"--sync {','.join(bad) or '(none)'}: choose from "
                             f"{', '.join(SYNCS)}", HINT)
    if not 1 <= spec.bw_burst <= 4096:
        raise errors.BadSpec(f"--bw-burst {spec.bw_burst}: from 1 to 4096 operations", HINT)
    if any(o.endswith("_bw") for o in spec.ops) and max(spec.sizes) * spec.bw_burst > MAX_SPAN:
        raise errors.BadSpec(f"--bw-burst {spec.bw_burst} x the largest size: at most 1 GiB "
                             "(the window and the buffer each hold a burst)", HINT)
    if spec.common.integrity:
        raise errors.BadSpec("--integrity: the one-sided test checks every trial's data "
                             "already", "leave it out")


@dataclass(frozen=True)
class Params:
    """What the ranks are told: operations, synchronisations, sizes, two-sided or not,
    the bandwidth loops' burst."""

    ops: list[str]
    syncs: list[str]
    sizes: list[int]
    two_sided: bool
    bw_burst: int

    def to_dict(self) -> JsonObject:
        return {"ops": list(self.ops), "syncs": list(self.syncs), "sizes": list(self.sizes),
                "two_sided": self.two_sided, "bw_burst": self.bw_burst}

    @classmethod
    def from_dict(cls, d: JsonObject) -> Params:
        return cls(narrow.texts(d.get("ops"), "params.ops"),
                   narrow.texts(d.get("syncs"), "params.syncs"),
                   narrow.ints(d.get("sizes"), "params.sizes"),
                   narrow.flag(d.get("two_sided"), "params.two_sided"),
                   narrow.integer(d.get("bw_burst"), "params.bw_burst"))


def params(spec: Spec) -> Params:
    return Params([o for o in OPS if o in spec.ops], [s for s in SYNCS if s in spec.syncs],
                  sorted(set(spec.sizes)), spec.two_sided, spec.bw_burst)


def body(given: JsonObject, label: str | None, series: list[Series]) -> MpiRun:
    p = Params.from_dict(given)
    return MpiRun(KIND, label or "rma", series,
                  RmaSettings(p.ops, p.syncs, p.sizes, WINDOW, p.bw_burst, p.two_sided,
                              STATISTIC))


def run(spec: Spec, progress: Progress | None = None) -> Outcome | None:
    """Every series; None on a rank other than 0."""
    check(spec)
    return run_series(TEST, params(spec).to_dict(), spec.common, progress=progress)


# --------------------------------------------------------------------------- rank 0


def keys_of(p: Params) -> list[tuple[str, str, int]]:
    keys = [(op, sync, size) for op in p.ops for sync in p.syncs for size in p.sizes]
    if p.two_sided:
        keys += [(TWO_SIDED, PINGPONG, size) for size in p.sizes]
    return keys


def point(measurer: RmaMeasurer, key: tuple[str, str, int]) -> RmaPoint | None:
    trials = measurer.log.get(key, [])
    if not trials:
        return None
    op, sync, size = key
    time_s = stat_of([t["op_s"] for t in trials])
    bandwidth = stat_of([size / t["op_s"] for t in trials])
    assert time_s is not None and bandwidth is not None  # (there are trials)
    return RmaPoint(op, sync, size, len(trials), trials[-1]["reps"], time_s, bandwidth)


def measure(leader: Any, plan: Plan, series: Series) -> Stop:
    """Rank 0: every (op, sync, size) between rank 0 and rank 1."""
    p = Params.from_dict(plan.params)
    measurer = RmaMeasurer(leader, burst=p.bw_burst)
    keys = keys_of(p)
    node = [r.node for r in series.ranks]
    series.rma_pair = Pairing(0, 1, node[0], node[1])
    try:
        measurer.prepare(keys)
    except errors.BeoperfError as exc:
        failed = errors.Failed(f"the one-sided windows could not be made and used: {exc}",
                               WINDOW_HINT)
        series.rma_points, series.status, series.status_reason = [], "failed", str(failed)
        return failed, None
    out = run_loop(keys, measurer, plan, f"one-sided, rank 0 -> rank 1 ({node[0]} -> "
                                         f"{node[1]})")
    series.rma_points = [pt for k in keys if (pt := point(measurer, k)) is not None]
    series.loop = loop_facts(out)
    return status_of(out, series)


TEST = Test("rma", KIND, body, measure)


def rank(plan: JsonObject) -> int:
    """A rank of the job `beoperf cluster rma` launched (``python -m beoperf.cli.rank
    cluster-rma PLAN``)."""
    return rank_of_test(plan, TEST)

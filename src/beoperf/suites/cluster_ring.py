"""`beoperf cluster ring`: HPCC's ring latency and bandwidth, naturally and randomly
ordered, both directions, repeated with their spread.

The definitions are HPCC 1.5's (``bench_lat_bw``; see :mod:`beoperf.analysis.cluster_mpi`):
8-byte messages for latency and 2,000,000-byte ones for bandwidth; the naturally ordered
ring and 30 random rings for latency, 10 for bandwidth; per step each rank exchanges a
message with both neighbours, by two MPI_Sendrecv and by non-blocking calls, the faster
counting; a trial is the slowest rank's time per step halved; a ring's figure the
minimum over its trials; the random figure the geometric mean over the random rings.
Each ring at each size is a point of the precision loop: trials until the median's 95%
interval is within ``precision`` (or the time budget is spent), at least ``min_trials``.
As HPCC's measurements follow one another without a pause, a trial that follows one (the
run's start, rank 0's bookkeeping between passes) comes after untimed trials of its ring
(``RingMeasurer.rewarm``; counted in the document's ``loop`` as ``warm_trials``).
Each repeat draws new random rings (from ``seed`` + repeat); the document keeps every
ring's trials, HPCC's four figures per repeat (also from the trials' medians) and each
figure's mean and standard deviation over the repeats, per ranks-per-node series.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from beoperf import errors
from beoperf.analysis.cluster_mpi import (
    HPCC_KEYS,
    random_rings,
    ring_figures,
    ring_summary,
    ring_times,
)
from beoperf.model import narrow
from beoperf.model.cluster_mpi import (
    Loop,
    MpiRun,
    Repeat,
    Ring,
    RingDefinition,
    RingTrial,
    Series,
)
from beoperf.model.document import DocumentError, JsonObject
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
from beoperf.sweep.cluster_mpi import RingMeasurer

KIND = "cluster-ring"
LATENCY_BYTES = 8
BANDWIDTH_BYTES = 2_000_000
RANDOM_RINGS = (30, 10)  # HPCC: random rings for latency, for bandwidth
LOOP_LENGTH = {"latency": 5, "bandwidth": 2}  # HPCC's loop lengths: timed steps per trial
MEASUREMENTS = {"latency": 8, "bandwidth": 3}  # HPCC's: its figure is the least of these
MAX_SIZE = 1 << 30
STATISTIC = ("Per step each rank's faster variant (two MPI_Sendrecv, or non-blocking "
             "receives and sends), the slowest rank, halved; per ring the minimum over its "
             "first 8 trials at the latency size, 3 at the bandwidth size (HPCC's "
             "measurements; the median uses every trial); random rings by their geometric "
             "mean; bandwidth = message size / latency (each process's bytes per second); "
             "as HPCC 1.5")


@dataclass(frozen=True)
class Spec:
    """``latency_bytes``/``bandwidth_bytes``: the two message sizes; ``random_rings``:
    how many random rings at each (latency, bandwidth); ``repeat``: whole measurements,
    each with new random rings."""

    common: Common = field(default_factory=Common)
    latency_bytes: int = LATENCY_BYTES
    bandwidth_bytes: int = BANDWIDTH_BYTES
    random_rings: tuple[int, int] = RANDOM_RINGS
    repeat: int = 1


def check(spec: Spec) -> None:
    for name, size in (("--latency-size", spec.latency_bytes),
                       ("--bandwidth-size", spec.bandwidth_bytes)):
        if not 1 <= size <= MAX_SIZE:
            raise errors.BadSpec(f"{name} {size}: from 1 B to 1 GiB", HINT)
    if spec.latency_bytes == spec.bandwidth_bytes:
        raise errors.BadSpec("--latency-size and --bandwidth-size must differ", HINT)
    if min(spec.random_rings) < 0 or max(spec.random_rings) > 1000:
        raise errors.BadSpec("--random-rings: from 0 to 1000", HINT)
    if not 1 <= spec.repeat <= 100:
        raise errors.BadSpec(f"--repeat {spec.repeat}: from 1 to 100", HINT)


@dataclass(frozen=True)
class Params:
    """What the ranks are told of the rings: the two sizes, the random rings at each
    (latency, bandwidth), the repeats and the seed of the first."""

    latency_bytes: int
    bandwidth_bytes: int
    random_rings: tuple[int, int]
    repeat: int
    seed: int

    def to_dict(self) -> JsonObject:
        return {"latency_bytes": self.latency_bytes, "bandwidth_bytes": self.bandwidth_bytes,
                "random_rings": list(self.random_rings), "repeat": self.repeat,
                "seed": self.seed}

    @classmethod
    def from_dict(cls, d: JsonObject) -> Params:
        rings = narrow.ints(d.get("random_rings"), "params.random_rings")
        if len(rings) != 2:
            raise DocumentError("params.random_rings: expected two counts")
        return cls(narrow.integer(d.get("latency_bytes"), "params.latency_bytes"),
                   narrow.integer(d.get("bandwidth_bytes"), "params.bandwidth_bytes"),
                   (rings[0], rings[1]), narrow.integer(d.get("repeat"), "params.repeat"),
                   narrow.integer(d.get("seed"), "params.seed"))


def params(spec: Spec) -> Params:
    seed = spec.common.seed
    return Params(spec.latency_bytes, spec.bandwidth_bytes, spec.random_rings, spec.repeat,
                  seed if seed is not None else int.from_bytes(os.urandom(4), "big"))


def body(given: JsonObject, label: str | None, series: list[Series]) -> MpiRun:
    p = Params.from_dict(given)
    return MpiRun(KIND, label or "ring", series, RingDefinition(
        latency_bytes=p.latency_bytes, bandwidth_bytes=p.bandwidth_bytes,
        random_rings={"latency": p.random_rings[0], "bandwidth": p.random_rings[1]},
        loop_length=dict(LOOP_LENGTH), measurements=dict(MEASUREMENTS), directions="both",
        statistic=STATISTIC, keys=list(HPCC_KEYS), seed=p.seed, repeat=p.repeat))


def run(spec: Spec, progress: Progress | None = None) -> Outcome | None:
    """Every series (see the module's docstring); None on a rank other than 0."""
    check(spec)
    return run_series(TEST, params(spec).to_dict(), spec.common, spec.repeat, progress)


# --------------------------------------------------------------------------- rank 0


def parts_of(p: Params) -> list[tuple[str, int, list[tuple[int, int]]]]:
    """(latency or bandwidth, HPCC's measurements, its keys (ring, size)): the natural
    ring (0) and the random ones at each size, measured one size after the other as
    HPCC does."""
    lat, bw = p.latency_bytes, p.bandwidth_bytes
    n_lat, n_bw = p.random_rings
    return [("latency", MEASUREMENTS["latency"], [(i, lat) for i in range(n_lat + 1)]),
            ("bandwidth", MEASUREMENTS["bandwidth"], [(i, bw) for i in range(n_bw + 1)])]


def ring_entries(measurer: RingMeasurer, keys: list[tuple[int, int]], measurements: int
                 ) -> list[Ring]:
    out = []
    for index, size in keys:
        trials = measurer.log.get((index, size), [])
        if not trials:
            continue
        hpcc_s, median_s, ci = ring_times([t["latency_s"] for t in trials], measurements)
        out.append(Ring(name="natural" if index == 0 else f"random {index}",
                        kind="natural" if index == 0 else "random", size=size,
                        order=measurer.rings[index],
                        trials=[RingTrial(**t) for t in trials], hpcc_s=hpcc_s,
                        median_s=median_s, ci_s=list(ci) if ci is not None else None))
    return out


def _repeat(number: int, seed: int, entries: list[Ring], p: Params) -> Repeat:
    """A repeat's rings and HPCC's figures from them (from the trials' minimum, and from
    their median)."""
    stored = [r.to_dict() for r in entries]
    return Repeat(repeat=number, seed=seed, rings=entries,
                  figures=ring_figures(stored, p.latency_bytes, p.bandwidth_bytes),
                  median_figures=ring_figures(stored, p.latency_bytes, p.bandwidth_bytes,
                                              "median_s"))


def measure(leader: Any, plan: Plan, series: Series) -> Stop:
    """Rank 0: every repeat of every ring at both sizes (see the module's docstring)."""
    p, n = Params.from_dict(plan.params), series.np
    loop_length = {p.latency_bytes: LOOP_LENGTH["latency"],
                   p.bandwidth_bytes: LOOP_LENGTH["bandwidth"]}
    repeats: list[Repeat] = []
    loops: list[Loop] = []
    stop: Stop = (None, None)
    for r in range(p.repeat):
        seed = p.seed + r
        rings = [list(range(n)), *random_rings(n, max(p.random_rings), seed)]
        measurer = RingMeasurer(leader, rings, loop_length, plan.integrity)
        entries: list[Ring] = []
        for what, measurements, keys in parts_of(p):
            warm = measurer.warm_trials
            out = run_loop(keys, measurer, plan, f"rings at the {what} size, {n} ranks, "
                           f"repeat {r + 1}", min_trials=measurements)
            entries += ring_entries(measurer, keys, measurements)
            loops.append(loop_facts(out, measurer.warm_trials - warm))
            stop = status_of(out, series)
            if series.status != "complete":
                break
        repeats.append(_repeat(r + 1, seed, entries, p))
        if series.status != "complete":
            break
    series.repeats, series.summary, series.loop = repeats, ring_summary(repeats), loops
    return stop


TEST = Test("ring", KIND, body, measure)


def rank(plan: JsonObject) -> int:
    """A rank of the job `beoperf cluster ring` launched (``python -m beoperf.cli.rank
    cluster-ring PLAN``)."""
    return rank_of_test(plan, TEST)

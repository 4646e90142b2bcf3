"""`beoperf cluster pairs`: the all-pairs ping-pong matrix, with the slow nodes and links
named.

Every pair of ranks runs a ping-pong at the latency size (8 B) and the bandwidth size
(2,000,000 B), as HPCC's ping-pong does: latency = half the round trip, bandwidth = the
size over that.  By default one pair at a time, the other ranks waiting quietly (they
sleep between probes for their next order: no polling of theirs disturbs the pair); with
``concurrent`` the pairs go in rounds of disjoint pairs (every rank in one pair per round,
a round-robin schedule), each round's pairs at once after a barrier, so that each pair's
figure is what it reaches with the others running (a switch's or a node's shared
capacity shows).  Each pair at each size is a point of the precision loop; a figure is
the median of the trials' medians, with its 95% interval.

The matrix over the nodes (the median over the rank pairs between two nodes; with
several ranks per node the diagonal holds the pairs within a node) and the slow nodes and
links, robust outliers against the matrix (:func:`beoperf.analysis.cluster_mpi.findings`,
threshold stated in the document), are computed once the pairs are measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from beoperf import errors
from beoperf.analysis.cluster_mpi import RELATIVE, Z_LIMIT, findings, stat_of
from beoperf.model import narrow
from beoperf.model.cluster_mpi import Findings, MpiRun, Pair, PairsSettings, Series
from beoperf.model.document import JsonObject
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
from beoperf.sweep.cluster_mpi import PairsMeasurer

KIND = "cluster-pairs"
LATENCY_BYTES = 8
BANDWIDTH_BYTES = 2_000_000
MAX_SIZE = 1 << 30
STATISTIC = ("Latency = half the round trip at the latency size, bandwidth = the bandwidth "
             "size over half the round trip at that size (HPCC's ping-pong); per pair the "
             "median of the trials' medians, with its 95% interval")


@dataclass(frozen=True)
class Spec:
    """``concurrent``: rounds of disjoint pairs at once (default: one pair at a time);
    ``relative`` and ``z_limit``: the thresholds of a slow node or link."""

    common: Common = field(default_factory=Common)
    latency_bytes: int = LATENCY_BYTES
    bandwidth_bytes: int = BANDWIDTH_BYTES
    concurrent: bool = False
    relative: float = RELATIVE
    z_limit: float = Z_LIMIT


def check(spec: Spec) -> None:
    for name, size in (("--latency-size", spec.latency_bytes),
                       ("--bandwidth-size", spec.bandwidth_bytes)):
        if not 1 <= size <= MAX_SIZE:
            raise errors.BadSpec(f"{name} {size}: from 1 B to 1 GiB", HINT)
    if spec.latency_bytes == spec.bandwidth_bytes:
        raise errors.BadSpec("--latency-size and --bandwidth-size must differ", HINT)
    if not 0 < spec.relative < 1:
        raise errors.BadSpec(f"--threshold {spec.relative:g}: between 0 and 1 (e.g. 0.25)",
                             HINT)
    if not 0 < spec.z_limit <= 100:
        raise errors.BadSpec(f"--z-limit {spec.z_limit:g}: above 0, at most 100", HINT)


@dataclass(frozen=True)
class Params:
    """What the ranks are told of the pairs: the two sizes, serial or concurrent, and the
    thresholds that name slow nodes and links."""

    latency_bytes: int
    bandwidth_bytes: int
    mode: str  # serial | concurrent
    relative: float
    z_limit: float

    def to_dict(self) -> JsonObject:
        return {"latency_bytes": self.latency_bytes, "bandwidth_bytes": self.bandwidth_bytes,
                "mode": self.mode, "relative": self.relative, "z_limit": self.z_limit}

    @classmethod
    def from_dict(cls, d: JsonObject) -> Params:
        return cls(narrow.integer(d.get("latency_bytes"), "params.latency_bytes"),
                   narrow.integer(d.get("bandwidth_bytes"), "params.bandwidth_bytes"),
                   narrow.text(d.get("mode"), "params.mode"),
                   narrow.num(d.get("relative"), "params.relative"),
                   narrow.num(d.get("z_limit"), "params.z_limit"))


def params(spec: Spec) -> Params:
    return Params(spec.latency_bytes, spec.bandwidth_bytes,
                  "concurrent" if spec.concurrent else "serial", spec.relative, spec.z_limit)


def body(given: JsonObject, label: str | None, series: list[Series]) -> MpiRun:
    p = Params.from_dict(given)
    return MpiRun(KIND, label or "pairs", series,
                  PairsSettings(p.mode, p.latency_bytes, p.bandwidth_bytes, STATISTIC))


def run(spec: Spec, progress: Progress | None = None) -> Outcome | None:
    """Every series; None on a rank other than 0."""
    check(spec)
    return run_series(TEST, params(spec).to_dict(), spec.common, progress=progress)


# --------------------------------------------------------------------------- rank 0


def round_robin(n: int) -> list[list[tuple[int, int]]]:
    """Rounds in which every rank is in at most one pair, together every pair once (the
    circle method; with an odd count one rank rests each round)."""
    players: list[int | None] = [*range(n), None] if n % 2 else list(range(n))
    m = len(players)
    rounds = []
    for _ in range(m - 1):
        pairs = []
        for i in range(m // 2):
            a, b = players[i], players[m - 1 - i]
            if a is not None and b is not None:
                pairs.append((min(a, b), max(a, b)))
        rounds.append(sorted(pairs))
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


def rounds_of(n: int, mode: str) -> list[list[tuple[int, int]]]:
    if mode == "concurrent":
        return round_robin(n)
    return [[(a, b)] for a in range(n) for b in range(a + 1, n)]


def pair_entries(measurer: PairsMeasurer, p: Params, series: Series) -> list[Pair]:
    lat, bw = p.latency_bytes, p.bandwidth_bytes
    node = [r.node for r in series.ranks]
    out = []
    for index, pairs in enumerate(measurer.rounds):
        for a, b in pairs:
            half = {size: [e[(a, b)]["median_rtt_s"] / 2 for e in measurer.log.get(
                (index, size), [])] for size in (lat, bw)}
            out.append(Pair(a=a, b=b, node_a=node[a], node_b=node[b],
                            round=index if p.mode == "concurrent" else None,
                            latency_s=stat_of(half[lat]),
                            bandwidth_Bps=stat_of([bw / t for t in half[bw] if t > 0])))
    return sorted(out, key=lambda e: (e.a, e.b))


def measure(leader: Any, plan: Plan, series: Series) -> Stop:
    """Rank 0: every pair at both sizes, then the findings."""
    p = Params.from_dict(plan.params)
    rounds = rounds_of(series.np, p.mode)
    measurer = PairsMeasurer(leader, rounds, plan.integrity)
    keys = [(i, size) for size in (p.latency_bytes, p.bandwidth_bytes)
            for i in range(len(rounds))]
    out = run_loop(keys, measurer, plan, f"pairs of {series.np} ranks")
    series.pairs = pair_entries(measurer, p, series)
    series.findings = Findings.from_dict(findings([e.to_dict() for e in series.pairs],
                                                  series.nodes, p.relative, p.z_limit))
    series.loop = loop_facts(out)
    return status_of(out, series)


TEST = Test("pairs", KIND, body, measure)


def rank(plan: JsonObject) -> int:
    """A rank of the job `beoperf cluster pairs` launched (``python -m beoperf.cli.rank
    cluster-pairs PLAN``)."""
    return rank_of_test(plan, TEST)

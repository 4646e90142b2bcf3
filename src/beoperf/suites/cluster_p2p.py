"""`beoperf cluster bibw | incast | bisect`: the point-to-point patterns a switch's
oversubscription and a NIC's receive path show in, with the aggregate, every flow's own
rate and the slowest flow named.

* **bibw** (osu_bibw, N pairs at once as osu_mbw_mr places them): rank i and rank i + N
  (i < N) each post a window of receives from the other and send it a window, all
  waited for together; a pair's rate is both directions' bytes over its slower end's
  time, the aggregate the sum of the pairs' rates.
* **incast** (many to one): N senders stream to one receiver (rank 0, on the first
  host) at once, each as osu_bw does (windows of non-blocking sends, each acknowledged);
  the receiver keeps a window posted for every sender (at most 256) and, as each sender's
  window arrives, posts its next and acknowledges it: a slow sender holds back no other.
  The aggregate is the receiver's: every sender's bytes over the receiver's time; each
  sender's own rate is its bytes over its own time.  Senders are taken from the other
  nodes first (in rank order), then from the receiver's own node.
* **bisect** (half the nodes to the other half): every pair of the pairing at once, both
  ways, as bibw's pairs: by default rank i with rank i + n/2 (the first half of the hosts
  with the second), or the node pairs given (``--pairs A:B,C:D`` or a file of them, one
  pair a line; with K ranks per node, a node pair is K rank pairs, j-th with j-th).

Every rank meets in MPI_Barrier after a window of warm-up, before the timed windows.
Each (flow count, size) is a point of the precision loop (its figure: the flows' mean
time per message); figures are the median of the trials with its 95% interval, and the
slowest flow is the one whose median rate is lowest.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from beoperf import errors, safeio
from beoperf.analysis.cluster_mpi import default_pair_counts, pairings, stat_of
from beoperf.model import narrow
from beoperf.model.cluster_mpi import (
    P2P_KIND,
    Flow,
    FlowPoint,
    MpiRun,
    P2pSettings,
    RankPlace,
    Series,
)
from beoperf.model.document import JsonObject
from beoperf.model.mpi_options import DEFAULT_WINDOW
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
from beoperf.sweep.cluster_p2p import PATTERNS, FlowMeasurer

KIND = P2P_KIND
DEFAULT_SIZES = (8, 1024, 65536, 1 << 20)
MAX_SIZE = 1 << 30
MAX_PAIRS_FILE = 1 << 20
MAX_PAIRS = 4096
MAX_SENDERS = 256  # an incast's (csrc/beo_mpipat.h: BEO_MPIPAT_MAX_SENDERS)
NAME = re.compile(r"^[A-Za-z0-9_.\-\[\]]{1,255}$")
STATISTIC = {
    "bibw": "A pair's rate = 2 x size x messages / its slower end's time (osu_bibw); the "
            "aggregate = the sum of the pairs' rates; the median of the trials with its "
            "95% interval",
    "bisect": "A pair's rate = 2 x size x messages / its slower end's time (osu_bibw, every "
              "pair at once); the aggregate = the sum of the pairs' rates; the median of "
              "the trials with its 95% interval",
    "incast": "The aggregate = senders x size x messages / the receiver's time; a "
              "sender's rate = size x messages / its own time; the median of the trials "
              "with its 95% interval"}


def hint(pattern: str) -> str:
    return f"see 'beoperf cluster {pattern} --help'"


@dataclass(frozen=True)
class Spec:
    """``pattern``: bibw, incast or bisect; ``sizes``: message sizes; ``counts``: the
    pair counts (bibw) or sender counts (incast) (None: 1, 2, 4 ... and all there are);
    ``pairs``: bisect's node pairs (None: the first half of the nodes with the second);
    ``window``: messages per window."""

    common: Common = field(default_factory=Common)
    pattern: str = "bibw"
    sizes: tuple[int, ...] = DEFAULT_SIZES
    counts: tuple[int, ...] | None = None
    pairs: tuple[tuple[str, str], ...] | None = None
    window: int = DEFAULT_WINDOW


def check(spec: Spec) -> None:
    h = hint(spec.pattern)
    if spec.pattern not in PATTERNS:
        raise errors.BadSpec(f"pattern {spec.pattern!r}: choose {', '.join(PATTERNS)}")
    if not spec.sizes or min(spec.sizes) < 1 or max(spec.sizes) > MAX_SIZE:
        raise errors.BadSpec("--sizes: from 1 B to 1 GiB", h)
    if not 1 <= spec.window <= 4096:
        raise errors.BadSpec(f"--window {spec.window}: from 1 to 4096 messages", h)
    if spec.counts is not None and (not spec.counts or min(spec.counts) < 1):
        what = "--senders" if spec.pattern == "incast" else "--pairs"
        raise errors.BadSpec(f"{what}: counts of 1 or more", h)
    if spec.pairs is not None:
        check_pairs(spec.pairs, h)
    if spec.common.integrity and spec.pattern == "incast" and spec.window > 2:
        # the senders' stream loop (mbw's) keeps two messages' buffers
        raise errors.BadSpec("--integrity needs each message of a sender's window in its "
                             "own buffer", "use --window 2")


def check_pairs(pairs: tuple[tuple[str, str], ...], h: str) -> None:
    if not pairs:
        raise errors.BadSpec("--pairs: no pair given", h)
    if len(pairs) > MAX_PAIRS:
        raise errors.BadSpec(f"--pairs: {len(pairs)} pairs, at most {MAX_PAIRS}", h)
    seen: set[str] = set()
    for a, b in pairs:
        for name in (a, b):
            if not NAME.match(name):
                raise errors.BadSpec(f"--pairs: {name[:60]!r} is not a node name or index", h)
            if name in seen:
                raise errors.BadSpec(f"--pairs: node {name} is in two pairs", h)
            seen.add(name)


def parse_pairs(text: str) -> tuple[tuple[str, str], ...]:
    """``A:B,C:D`` (node names or indexes from 0), or the name of a file holding such
    pairs (``A B`` or ``A:B``, one a line; ``#`` starts a comment).  BadSpec when it is
    neither."""
    h = hint("bisect")
    if ":" not in text or "/" in text:
        if not os.path.lexists(text):
            raise errors.BadSpec(f"--pairs {text[:80]!r}: neither A:B pairs nor a file", h)
        try:
            text = safeio.read_text(text, MAX_PAIRS_FILE, "the --pairs file")
        except (OSError, safeio.FileInputError) as exc:
            raise errors.BadSpec(f"--pairs: {exc}", h) from None
        items = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    else:
        items = [item.strip() for item in text.split(",")]
    pairs = []
    for item in items:
        if not item:
            continue
        parts = item.replace(":", " ").split()
        if len(parts) != 2:
            raise errors.BadSpec(f"--pairs: {item[:60]!r} is not a pair A:B", h)
        pairs.append((parts[0], parts[1]))
    return tuple(pairs)


@dataclass(frozen=True)
class Params:
    """What the ranks are told: the pattern, sizes, window, counts and node pairs."""

    pattern: str
    sizes: list[int]
    window: int
    counts: list[int] | None
    pairs: list[tuple[str, str]] | None

    def to_dict(self) -> JsonObject:
        return {"pattern": self.pattern, "sizes": list(self.sizes), "window": self.window,
                "counts": list(self.counts) if self.counts is not None else None,
                "pairs": [f"{a}:{b}" for a, b in self.pairs] if self.pairs is not None
                else None}

    @classmethod
    def from_dict(cls, d: JsonObject) -> Params:
        raw = d.get("pairs")
        pairs = None if raw is None else [
            (a, b) for a, _, b in (t.partition(":") for t in narrow.texts(raw, "params.pairs"))]
        return cls(narrow.text(d.get("pattern"), "params.pattern"),
                   narrow.ints(d.get("sizes"), "params.sizes"),
                   narrow.integer(d.get("window"), "params.window"),
                   narrow.opt_ints(d.get("counts"), "params.counts"), pairs)


def params(spec: Spec) -> Params:
    return Params(spec.pattern, sorted(set(spec.sizes)), spec.window,
                  sorted(set(spec.counts)) if spec.counts else None,
                  list(spec.pairs) if spec.pairs is not None else None)


def flows_rule(p: Params) -> str:
    if p.pattern == "incast":
        return ("senders to rank 0 (the first host): ranks of the other nodes first, in "
                "rank order, then those of the receiver's node")
    if p.pattern == "bisect" and p.pairs is not None:
        return "the node pairs given: " + ", ".join(f"{a}:{b}" for a, b in p.pairs)
    if p.pattern == "bisect":
        return "rank i with rank i + np/2 (the first half of the hosts with the second)"
    return "with N pairs, rank i with rank i + N, for i < N (as osu_mbw_mr)"


def body(given: JsonObject, label: str | None, series: list[Series]) -> MpiRun:
    p = Params.from_dict(given)
    return MpiRun(KIND, label or p.pattern, series,
                  P2pSettings(p.pattern, p.window, p.sizes, STATISTIC[p.pattern],
                              flows_rule(p)))


def run(spec: Spec, progress: Progress | None = None) -> Outcome | None:
    """Every series; None on a rank other than 0."""
    check(spec)
    return run_series(TEST_OF[spec.pattern], params(spec).to_dict(), spec.common,
                      progress=progress)


# --------------------------------------------------------------------------- rank 0


def incast_senders(ranks: list[RankPlace]) -> list[int]:
    """Rank 0 receives; the others send, those on other nodes first."""
    home = ranks[0].node
    return sorted((r.rank for r in ranks[1:]), key=lambda r: (ranks[r].node == home, r))


def node_pairs(pairs: list[tuple[str, str]], series: Series) -> list[tuple[int, int]]:
    """Bisect's node pairs as rank pairs (the j-th rank of one node with the other's
    j-th).  BadSpec: an unknown node, a node in two pairs, different rank counts."""
    h = hint("bisect")
    by_node: dict[str, list[int]] = {n: [] for n in series.nodes}
    for r in series.ranks:
        by_node[r.node].append(r.rank)

    def node(token: str) -> str:
        if token in by_node:
            return token
        if token.isdigit() and int(token) < len(series.nodes):
            return series.nodes[int(token)]
        raise errors.BadSpec(f"--pairs: no node {token} (the nodes: "
                             f"{', '.join(series.nodes[:8])}"
                             f"{' ...' if len(series.nodes) > 8 else ''}; or 0 .. "
                             f"{len(series.nodes) - 1})", h)

    out, used = [], set[str]()
    for ta, tb in pairs:
        a, b = node(ta), node(tb)
        if a == b or a in used or b in used:
            raise errors.BadSpec(f"--pairs: node {a if a in used or a == b else b} is in "
                                 "two pairs (or paired with itself)", h)
        used |= {a, b}
        if len(by_node[a]) != len(by_node[b]):
            raise errors.BadSpec(f"--pairs {ta}:{tb}: {len(by_node[a])} and "
                                 f"{len(by_node[b])} ranks: a pair's nodes need as many", h)
        out += list(zip(by_node[a], by_node[b], strict=True))
    return out


def plan_flows(p: Params, series: Series) -> tuple[list[tuple[int, int]], list[int]]:
    """The pattern's flows in order and the flow counts to measure."""
    n, h = series.np, hint(p.pattern)
    if p.pattern == "incast":
        flows = [(s, 0) for s in incast_senders(series.ranks)][:MAX_SENDERS]
        wanted = list(p.counts or default_pair_counts(2 * (n - 1)))
        what = (f"--senders {p.counts}: {n} ranks make at most "
                f"{min(n - 1, MAX_SENDERS)} senders")
    elif p.pattern == "bisect":
        if p.pairs is not None:
            flows = node_pairs(p.pairs, series)
        elif n % 2:
            raise errors.BadSpec(f"{n} ranks: the halves of a bisection need an even count",
                                 "give an even number of hosts, or --pairs")
        else:
            flows = pairings(n // 2)
        wanted, what = [len(flows)], ""
    else:
        wanted = list(p.counts or default_pair_counts(n))
        flows = pairings(max(c for c in wanted if 2 * c <= n)) if \
            any(2 * c <= n for c in wanted) else []
        what = f"--pairs {p.counts}: {n} ranks make at most {n // 2} pairs"
    counts = [c for c in wanted if c <= len(flows)]
    if not counts:
        raise errors.BadSpec(what, h)
    return flows, counts


def point(m: FlowMeasurer, count: int, size: int) -> FlowPoint | None:
    trials = m.log.get((count, size), [])
    if not trials:
        return None
    each = 1 if m.pattern == "incast" else 2  # bytes each way of a pair
    per_flow = [[each * size * t["reps"] / (e / 1e9) for e in t["elapsed_ns"]]
                for t in trials]
    if m.pattern == "incast":
        aggregate = [count * size * t["reps"] / ((t["receiver_ns"] or 1) / 1e9)
                     for t in trials]
    else:
        aggregate = [sum(rates) for rates in per_flow]
    flow_stats = [stat_of([rates[i] for rates in per_flow]) for i in range(count)]
    agg = stat_of(aggregate)
    assert agg is not None and all(s is not None for s in flow_stats)  # (there are trials)
    stats = [s for s in flow_stats if s is not None]
    slowest = min(range(count), key=lambda i: stats[i].median)
    return FlowPoint(count=count, size=size, trials=len(trials),
                     messages=trials[-1]["reps"], aggregate_Bps=agg, flow_Bps=stats,
                     slowest=slowest)


def measure(leader: Any, plan: Plan, series: Series) -> Stop:
    """Rank 0: each flow count at each size."""
    p = Params.from_dict(plan.params)
    flows, counts = plan_flows(p, series)
    measurer = FlowMeasurer(leader, p.pattern, flows, p.window, plan.integrity)
    keys = [(c, s) for c in counts for s in p.sizes]
    out = run_loop(keys, measurer, plan, f"{p.pattern}, {series.np} ranks")
    node = [r.node for r in series.ranks]
    series.flows = [Flow(a, b, node[a], node[b]) for a, b in flows]
    series.flow_counts = counts
    series.flow_points = [pt for c, s in keys if (pt := point(measurer, c, s)) is not None]
    series.loop = loop_facts(out)
    return status_of(out, series)


TEST_OF = {name: Test(name, KIND, body, measure) for name in PATTERNS}


def rank(plan: JsonObject) -> int:
    """A rank of the job `beoperf cluster bibw | incast | bisect` launched (``python -m
    beoperf.cli.rank cluster-PATTERN PLAN``)."""
    name = plan.get("test")
    if not isinstance(name, str) or name not in TEST_OF:
        raise errors.BadSpec("not a plan of the cluster's point-to-point patterns")
    return rank_of_test(plan, TEST_OF[name])

"""The documents of the cluster's own MPI tests (``beoperf cluster ring | pairs | mbw``).

Each holds one *series* per ranks-per-node setting (one MPI job each): the ranks and the
node each ran on, the launch (the launcher's argv with the plan left out, the variables
it passed), the MPI library and what carried the messages, rank 0's MPI environment, how
the precision loop went, the status, and the test's own figures:

* ``cluster-ring``: per repeat, every ring (natural, random) at the latency and bandwidth
  sizes with its trials in seconds per message, and HPCC's four figures under HPCC's own
  keys and units (``NaturallyOrderedRingLatency_usec`` ... in us and 10^9 B/s) from the
  trials' minimum (HPCC's statistic) and from their median; each figure's mean and
  sample standard deviation over the repeats;
* ``cluster-pairs``: every pair of ranks' latency (s) and bandwidth (B/s), median of the
  trials with its 95% interval; the node x node matrices; the slow nodes and links with
  the rule that named them;
* ``cluster-mbw``: per pair count and message size, the aggregate bandwidth (B/s) and
  message rate (messages/s), and the slowest and fastest pair's own rate.
* ``cluster-rma``: one-sided, between rank 0 (origin) and rank 1 (target): per operation
  (put, get), synchronisation (fence, lock, flush, lock_all) and size, the time of an
  operation with its synchronisation (s) and the bandwidth it gives (B/s), and beside
  them the two-sided one-way time of each size (a ping-pong's round trip halved).
  Version 1 (issue 29) was born with the positive intervals of the others' version 2.
* ``cluster-p2p`` (version 1): a point-to-point pattern (``pattern``: bibw, incast or
  bisect), its flows (a pair both ways, or a sender to the receiver) and, per flow count
  and message size, the aggregate rate (B/s), each flow's own, and the slowest flow.
* ``cluster-coll``: per collective and message size, each rank's mean time per call
  reduced over the ranks as IMB does (t_min, t_avg, t_max, seconds), each the median of
  the trials with its 95% interval, and the elements its check found wrong.

Version 2 of each: every 95% interval of a time or a rate has both bounds above 0 (the
schema says so); a version 1 file with a bound at or below zero loads with that interval
dropped and the reason in ``interval_note`` beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeGuard

from beoperf.model import document, narrow
from beoperf.model.cluster import Summary
from beoperf.model.document import Document, DocumentError, JsonObject, JsonValue

RING_KIND = "cluster-ring"
PAIRS_KIND = "cluster-pairs"
MBW_KIND = "cluster-mbw"
RMA_KIND = "cluster-rma"
COLL_KIND = "cluster-coll"
KINDS: tuple[str, ...] = (RING_KIND, PAIRS_KIND, MBW_KIND, RMA_KIND, COLL_KIND)
VERSION = 2  # 1: intervals whose bounds were not checked to be above 0
RMA_VERSION = 1


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _positive_intervals(node: Any) -> None:
    """Drop, everywhere in ``node``, an interval with a bound at or below zero: a ring's
    ``ci_s`` [low, high], a statistic's ``ci_low``/``ci_high``; ``interval_note`` says so.
    (The order statistics of positive trials never give one; a version 1 file that holds
    one was made by hand or by a bug, and its interval is no interval of a time.)"""
    if isinstance(node, list):
        for item in node:
            _positive_intervals(item)
        return
    if not isinstance(node, dict):
        return
    ci = node.get("ci_s")
    if isinstance(ci, list) and len(ci) == 2 and all(map(_number, ci)) and min(ci) <= 0:
        node["ci_s"] = None
        node["interval_note"] = f"interval [{ci[0]:.4g}, {ci[1]:.4g}] s reached zero or below"
    low, high = node.get("ci_low"), node.get("ci_high")
    if "ci_low" in node and _number(low) and _number(high) and min(low, high) <= 0:
        node["ci_low"] = node["ci_high"] = None
        node["interval_note"] = f"interval [{low:.4g}, {high:.4g}] reached zero or below"
    for value in node.values():
        _positive_intervals(value)


def _v1_to_v2(doc: dict) -> dict:
    """Version 2: every interval's bounds above 0 (see the module docstring)."""
    _positive_intervals(doc["body"])
    return doc


for _kind in (RING_KIND, PAIRS_KIND, MBW_KIND, COLL_KIND):
    document.register(_kind, VERSION, upgrades={1: _v1_to_v2})
document.register(RMA_KIND, RMA_VERSION)

P2P_KIND = "cluster-p2p"
P2P_VERSION = 1
document.register(P2P_KIND, P2P_VERSION)
KINDS = (*KINDS, P2P_KIND)


# --------------------------------------------------------------------------- typed bodies
# Readers (the renderers and the answer) read fields of these, not dict paths; body()
# gives the stored body back (keys that are absent stay absent).  from_dict narrows each
# value it takes (beoperf.model.narrow): a value of the wrong type is a DocumentError.
# A series' launch and MPI facts stay the JSON objects the MPI layer reports (their
# shape is beoperf.launch.mpi_job's and the MPI library's); Series reads them through
# small typed accessors.


def _optional(d: JsonObject, name: str, value: JsonValue) -> None:
    if value is not None:
        d[name] = value


@dataclass
class Stat:
    """A pair's (or a point's) trials: the median, its 95% interval (None: no interval,
    ``interval_note`` says why), the extremes and the count."""

    median: float
    ci_low: float | None
    ci_high: float | None
    min: float
    max: float
    trials: int
    interval_note: str | None = None

    @classmethod
    def from_dict(cls, d: JsonObject | None, key: str = "stat") -> Stat | None:
        if d is None:
            return None
        return cls(median=narrow.num(d.get("median"), f"{key}.median"),
                   ci_low=narrow.opt_num(d.get("ci_low"), f"{key}.ci_low"),
                   ci_high=narrow.opt_num(d.get("ci_high"), f"{key}.ci_high"),
                   min=narrow.num(d.get("min"), f"{key}.min"),
                   max=narrow.num(d.get("max"), f"{key}.max"),
                   trials=narrow.integer(d.get("trials"), f"{key}.trials"),
                   interval_note=narrow.opt_text(d.get("interval_note"),
                                                 f"{key}.interval_note"))

    def to_dict(self) -> JsonObject:
        out: JsonObject = {"median": self.median, "ci_low": self.ci_low,
                           "ci_high": self.ci_high, "min": self.min, "max": self.max,
                           "trials": self.trials}
        _optional(out, "interval_note", self.interval_note)
        return out


def _stat(value: JsonValue, key: str) -> Stat | None:
    return Stat.from_dict(narrow.opt_obj(value, key), key)


@dataclass
class RingTrial:
    """One trial of a ring: the timed steps, the latency per message (the slowest rank's
    faster variant, halved), each variant's, and which rank was slowest."""

    reps: int
    latency_s: float
    sendrecv_s: float
    nonblocking_s: float
    slowest_rank: int

    def to_dict(self) -> JsonObject:
        return {"reps": self.reps, "latency_s": self.latency_s,
                "sendrecv_s": self.sendrecv_s, "nonblocking_s": self.nonblocking_s,
                "slowest_rank": self.slowest_rank}

    @classmethod
    def from_dict(cls, d: JsonObject) -> RingTrial:
        latency, sendrecv, nonblocking = (narrow.num(d.get(k), f"trials.{k}") for k in
                                          ("latency_s", "sendrecv_s", "nonblocking_s"))
        return cls(narrow.integer(d.get("reps"), "trials.reps"), latency, sendrecv,
                   nonblocking, narrow.integer(d.get("slowest_rank"), "trials.slowest_rank"))


@dataclass
class Ring:
    """One ring of a repeat: its trials (seconds per message), HPCC's figure (their
    minimum), their median and its 95% interval."""

    name: str
    kind: str
    size: int
    order: list[int]
    trials: list[RingTrial]
    hpcc_s: float
    median_s: float
    ci_s: list[float] | None
    interval_note: str | None = None

    def to_dict(self) -> JsonObject:
        out: JsonObject = {"name": self.name, "kind": self.kind, "size": self.size,
                           "order": list(self.order),
                           "trials": [t.to_dict() for t in self.trials],
                           "hpcc_s": self.hpcc_s, "median_s": self.median_s,
                           "ci_s": list(self.ci_s) if self.ci_s is not None else None}
        _optional(out, "interval_note", self.interval_note)
        return out

    @classmethod
    def from_dict(cls, d: JsonObject) -> Ring:
        ci = d.get("ci_s")
        return cls(name=narrow.text(d.get("name"), "rings.name"),
                   kind=narrow.text(d.get("kind"), "rings.kind"),
                   size=narrow.integer(d.get("size"), "rings.size"),
                   order=narrow.ints(d.get("order"), "rings.order"),
                   trials=[RingTrial.from_dict(t)
                           for t in narrow.objects(d.get("trials"), "rings.trials")],
                   hpcc_s=narrow.num(d.get("hpcc_s"), "rings.hpcc_s"),
                   median_s=narrow.num(d.get("median_s"), "rings.median_s"),
                   ci_s=None if ci is None else narrow.nums(ci, "rings.ci_s"),
                   interval_note=narrow.opt_text(d.get("interval_note"),
                                                 "rings.interval_note"))


@dataclass
class Repeat:
    repeat: int
    seed: int | None
    rings: list[Ring]
    figures: dict[str, float | None]  # HPCC's keys, from the trials' minimum
    median_figures: dict[str, float | None]  # the same from the trials' median

    @classmethod
    def from_dict(cls, d: JsonObject) -> Repeat:
        return cls(repeat=narrow.integer(d.get("repeat"), "repeats.repeat"),
                   seed=narrow.opt_int(d.get("seed"), "repeats.seed"),
                   rings=[Ring.from_dict(r) for r in narrow.objects(d.get("rings"),
                                                                    "repeats.rings")],
                   figures=narrow.opt_num_map(d.get("figures"), "repeats.figures"),
                   median_figures=narrow.opt_num_map(d.get("median_figures"),
                                                     "repeats.median_figures"))

    def to_dict(self) -> JsonObject:
        return {"repeat": self.repeat, "seed": self.seed,
                "rings": [r.to_dict() for r in self.rings], "figures": dict(self.figures),
                "median_figures": dict(self.median_figures)}


@dataclass
class Pair:
    """Two ranks' ping-pong: latency (s) and bandwidth (B/s), each None if not measured."""

    a: int
    b: int
    node_a: str
    node_b: str
    round: int | None
    latency_s: Stat | None
    bandwidth_Bps: Stat | None

    @classmethod
    def from_dict(cls, d: JsonObject) -> Pair:
        return cls(a=narrow.integer(d.get("a"), "pairs.a"),
                   b=narrow.integer(d.get("b"), "pairs.b"),
                   node_a=narrow.text(d.get("node_a"), "pairs.node_a"),
                   node_b=narrow.text(d.get("node_b"), "pairs.node_b"),
                   round=narrow.opt_int(d.get("round"), "pairs.round"),
                   latency_s=_stat(d.get("latency_s"), "pairs.latency_s"),
                   bandwidth_Bps=_stat(d.get("bandwidth_Bps"), "pairs.bandwidth_Bps"))

    def to_dict(self) -> JsonObject:
        return {"a": self.a, "b": self.b, "node_a": self.node_a, "node_b": self.node_b,
                "round": self.round,
                "latency_s": self.latency_s.to_dict() if self.latency_s else None,
                "bandwidth_Bps": self.bandwidth_Bps.to_dict() if self.bandwidth_Bps else None}


@dataclass
class SlowNode:
    """A node whose best pair is worse than the nodes' median (findings' rule)."""

    node: str
    metric: str  # latency | bandwidth
    value: float
    median: float
    ratio: float
    z: float | None

    def to_dict(self) -> JsonObject:
        return {"node": self.node, "metric": self.metric, "value": self.value,
                "median": self.median, "ratio": self.ratio, "z": self.z}

    @classmethod
    def from_dict(cls, d: JsonObject) -> SlowNode:
        k = "slow_nodes"
        value, median, ratio = (narrow.num(d.get(f), f"{k}.{f}")
                                for f in ("value", "median", "ratio"))
        return cls(narrow.text(d.get("node"), f"{k}.node"),
                   narrow.text(d.get("metric"), f"{k}.metric"), value, median, ratio,
                   narrow.opt_num(d.get("z"), f"{k}.z"))


@dataclass
class SlowLink:
    """A pair of nodes that falls short of what its two nodes reach (findings' rule)."""

    a: str
    b: str
    metric: str  # latency | bandwidth
    value: float
    expected: float
    ratio: float
    z: float | None

    def to_dict(self) -> JsonObject:
        return {"a": self.a, "b": self.b, "metric": self.metric, "value": self.value,
                "expected": self.expected, "ratio": self.ratio, "z": self.z}

    @classmethod
    def from_dict(cls, d: JsonObject) -> SlowLink:
        k = "slow_links"
        value, expected, ratio = (narrow.num(d.get(f), f"{k}.{f}")
                                  for f in ("value", "expected", "ratio"))
        return cls(narrow.text(d.get("a"), f"{k}.a"), narrow.text(d.get("b"), f"{k}.b"),
                   narrow.text(d.get("metric"), f"{k}.metric"), value, expected, ratio,
                   narrow.opt_num(d.get("z"), f"{k}.z"))


Matrix = list[list[float | None]]


@dataclass
class Findings:
    """A pairs series' verdict: the rule and its thresholds, the node x node matrices
    and each node's figures (per pair figure: "latency_s", "bandwidth_Bps"), the slow
    nodes and links, and a note when there are too few nodes to name any."""

    rule: str
    relative: float
    z_limit: float
    nodes: list[str]
    matrix: dict[str, Matrix]
    node_figures: dict[str, dict[str, float]]
    slow_nodes: list[SlowNode]
    slow_links: list[SlowLink]
    note: str | None

    def to_dict(self) -> JsonObject:
        return {"rule": self.rule, "relative": self.relative, "z_limit": self.z_limit,
                "nodes": list(self.nodes),
                "matrix": {k: [list(row) for row in m] for k, m in self.matrix.items()},
                "node_figures": {k: dict(v) for k, v in self.node_figures.items()},
                "slow_nodes": [s.to_dict() for s in self.slow_nodes],
                "slow_links": [s.to_dict() for s in self.slow_links], "note": self.note}

    @classmethod
    def from_dict(cls, d: JsonObject) -> Findings:
        k = "findings"
        matrix = {f: [narrow.opt_nums(row, f"{k}.matrix.{f}")
                      for row in narrow.values(m, f"{k}.matrix.{f}")]
                  for f, m in narrow.obj(d.get("matrix"), f"{k}.matrix").items()}
        return cls(
            rule=narrow.text(d.get("rule"), f"{k}.rule"),
            relative=narrow.num(d.get("relative"), f"{k}.relative"),
            z_limit=narrow.num(d.get("z_limit"), f"{k}.z_limit"),
            nodes=narrow.texts(d.get("nodes"), f"{k}.nodes"), matrix=matrix,
            node_figures={f: narrow.num_map(v, f"{k}.node_figures.{f}") for f, v in
                          narrow.obj(d.get("node_figures"), f"{k}.node_figures").items()},
            slow_nodes=[SlowNode.from_dict(s)
                        for s in narrow.objects(d.get("slow_nodes"), f"{k}.slow_nodes")],
            slow_links=[SlowLink.from_dict(s)
                        for s in narrow.objects(d.get("slow_links"), f"{k}.slow_links")],
            note=narrow.opt_text(d.get("note"), f"{k}.note"))


@dataclass
class Point:
    """N pairs at once at one size: the aggregate bandwidth and message rate, and the
    slowest, fastest and summed pair rates (B/s)."""

    pairs: int
    size: int
    trials: int
    messages: int
    bandwidth_Bps: Stat
    rate_per_s: Stat
    pair_Bps: dict[str, float]  # min max sum

    @classmethod
    def from_dict(cls, d: JsonObject) -> Point:
        bw, rate = (_stat(d.get(k), f"points.{k}") for k in ("bandwidth_Bps", "rate_per_s"))
        if bw is None or rate is None:
            raise DocumentError("a point of N pairs at once without its bandwidth or rate")
        pairs, size, trials, messages = (narrow.integer(d.get(k), f"points.{k}")
                                         for k in ("pairs", "size", "trials", "messages"))
        return cls(pairs=pairs, size=size, trials=trials, messages=messages,
                   bandwidth_Bps=bw, rate_per_s=rate,
                   pair_Bps=narrow.num_map(d.get("pair_Bps"), "points.pair_Bps"))

    def to_dict(self) -> JsonObject:
        return {"pairs": self.pairs, "size": self.size, "trials": self.trials,
                "messages": self.messages, "bandwidth_Bps": self.bandwidth_Bps.to_dict(),
                "rate_per_s": self.rate_per_s.to_dict(), "pair_Bps": dict(self.pair_Bps)}


@dataclass
class CollPoint:
    """A collective at one size: elements per call and the bytes that makes (meaning per
    collective: beoperf.engines.mpi_coll.count_of; an import: count 0 when the file does
    not say), each rank's mean time per call reduced over the ranks (t_min, t_avg, t_max:
    seconds, median of the trials with its 95% interval), the calls per trial (0: not
    known), the ranks' checks and the elements they found wrong; and per trial the
    longest single call of any rank (the rank that started a call first waits for all the
    data the others send it: what a link's rate bounds)."""

    op: str
    size: int
    count: int
    bytes: int
    trials: int
    calls: int
    t_avg_s: Stat
    t_min_s: Stat | None  # None: not known (an imported OSU table without -f)
    t_max_s: Stat | None
    checked: int
    corrupt: int
    longest_s: Stat | None = None  # per trial the longest call of any rank (not imported)

    @classmethod
    def from_dict(cls, d: JsonObject) -> CollPoint:
        k = "collectives"
        stats = [_stat(d.get(n), f"{k}.{n}") for n in ("t_avg_s", "t_min_s", "t_max_s")]
        avg, low, high = stats
        if avg is None:
            raise DocumentError("a collective's point without its t_avg")
        size, count, nbytes, trials, calls, checked, corrupt = (
            narrow.integer(d.get(n), f"{k}.{n}") for n in
            ("size", "count", "bytes", "trials", "calls", "checked", "corrupt"))
        return cls(op=narrow.text(d.get("op"), f"{k}.op"), size=size, count=count,
                   bytes=nbytes, trials=trials, calls=calls, t_avg_s=avg, t_min_s=low,
                   t_max_s=high, checked=checked, corrupt=corrupt,
                   longest_s=_stat(d.get("longest_s"), f"{k}.longest_s"))

    def to_dict(self) -> JsonObject:
        out: JsonObject = {
            "op": self.op, "size": self.size, "count": self.count, "bytes": self.bytes,
            "trials": self.trials, "calls": self.calls, "t_avg_s": self.t_avg_s.to_dict(),
            "t_min_s": None if self.t_min_s is None else self.t_min_s.to_dict(),
            "t_max_s": None if self.t_max_s is None else self.t_max_s.to_dict(),
            "checked": self.checked, "corrupt": self.corrupt}
        if self.longest_s is not None:
            out["longest_s"] = self.longest_s.to_dict()
        return out


@dataclass
class Pairing:
    """A sender and its receiver in N pairs at once, and their nodes."""

    sender: int
    receiver: int
    sender_node: str
    receiver_node: str

    def to_dict(self) -> JsonObject:
        return {"sender": self.sender, "receiver": self.receiver,
                "sender_node": self.sender_node, "receiver_node": self.receiver_node}

    @classmethod
    def from_dict(cls, d: JsonObject) -> Pairing:
        return cls(narrow.integer(d.get("sender"), "pairings.sender"),
                   narrow.integer(d.get("receiver"), "pairings.receiver"),
                   narrow.text(d.get("sender_node"), "pairings.sender_node"),
                   narrow.text(d.get("receiver_node"), "pairings.receiver_node"))


@dataclass
class RmaPoint:
    """One-sided (or, op "two-sided", its ping-pong) at one size: the time of one
    operation with its synchronisation (s; two-sided: half a round trip) and the
    bandwidth it gives (B/s), each the median of the trials with its 95% interval, and
    the operations of the last trial."""

    op: str  # put | get | put_bw | get_bw | two-sided
    sync: str  # fence | lock | flush | lock_all | pingpong
    size: int
    trials: int
    operations: int
    time_s: Stat
    bandwidth_Bps: Stat

    @classmethod
    def from_dict(cls, d: JsonObject) -> RmaPoint:
        k = "rma_points"
        t, bw = (_stat(d.get(f), f"{k}.{f}") for f in ("time_s", "bandwidth_Bps"))
        if t is None or bw is None:
            raise DocumentError("a one-sided point without its time or bandwidth")
        size, trials, ops = (narrow.integer(d.get(f), f"{k}.{f}")
                             for f in ("size", "trials", "operations"))
        return cls(narrow.text(d.get("op"), f"{k}.op"), narrow.text(d.get("sync"), f"{k}.sync"),
                   size, trials, ops, t, bw)

    def to_dict(self) -> JsonObject:
        return {"op": self.op, "sync": self.sync, "size": self.size, "trials": self.trials,
                "operations": self.operations, "time_s": self.time_s.to_dict(),
                "bandwidth_Bps": self.bandwidth_Bps.to_dict()}


@dataclass
class Flow:
    """A flow of a point-to-point pattern: ranks ``a`` and ``b`` and their nodes (bibw and
    bisect: a pair, both ways; incast: sender ``a`` to the receiver ``b``)."""

    a: int
    b: int
    node_a: str
    node_b: str

    def to_dict(self) -> JsonObject:
        return {"a": self.a, "b": self.b, "node_a": self.node_a, "node_b": self.node_b}

    @classmethod
    def from_dict(cls, d: JsonObject) -> Flow:
        return cls(narrow.integer(d.get("a"), "flows.a"), narrow.integer(d.get("b"), "flows.b"),
                   narrow.text(d.get("node_a"), "flows.node_a"),
                   narrow.text(d.get("node_b"), "flows.node_b"))

    def label(self, pattern: str) -> str:
        """'0<->2 (n1 <-> n3)', or '1->0 (n2 -> n1)' for an incast's sender."""
        arrow = "->" if pattern == "incast" else "<->"
        return f"{self.a}{arrow}{self.b} ({self.node_a} {arrow} {self.node_b})"


@dataclass
class FlowPoint:
    """A pattern's first ``count`` flows at once at one size: the aggregate rate (B/s),
    each flow's own rate (in the series' flow order), and the slowest flow (its index)."""

    count: int
    size: int
    trials: int
    messages: int
    aggregate_Bps: Stat
    flow_Bps: list[Stat]
    slowest: int

    @classmethod
    def from_dict(cls, d: JsonObject) -> FlowPoint:
        agg = _stat(d.get("aggregate_Bps"), "flow_points.aggregate_Bps")
        flows = [_stat(f, "flow_points.flow_Bps")
                 for f in narrow.objects(d.get("flow_Bps"), "flow_points.flow_Bps")]
        if agg is None or any(f is None for f in flows):
            raise DocumentError("a point of a pattern without its aggregate or a flow's rate")
        count, size, trials, messages, slowest = (
            narrow.integer(d.get(k), f"flow_points.{k}")
            for k in ("count", "size", "trials", "messages", "slowest"))
        return cls(count=count, size=size, trials=trials, messages=messages,
                   aggregate_Bps=agg, flow_Bps=[f for f in flows if f is not None],
                   slowest=slowest)

    def to_dict(self) -> JsonObject:
        return {"count": self.count, "size": self.size, "trials": self.trials,
                "messages": self.messages, "aggregate_Bps": self.aggregate_Bps.to_dict(),
                "flow_Bps": [f.to_dict() for f in self.flow_Bps], "slowest": self.slowest}


@dataclass
class RankPlace:
    """Where a rank ran: its host, MPI processor name, pid, CPUs, network namespace, and
    the node it is counted on."""

    rank: int
    host: str | None
    processor_name: str | None
    pid: int | None
    cpus: list[int] | None
    net_namespace: str | None
    node: str

    def to_dict(self) -> JsonObject:
        return {"rank": self.rank, "host": self.host, "processor_name": self.processor_name,
                "pid": self.pid, "cpus": list(self.cpus) if self.cpus is not None else None,
                "net_namespace": self.net_namespace, "node": self.node}

    @classmethod
    def from_dict(cls, d: JsonObject) -> RankPlace:
        return cls(rank=narrow.integer(d.get("rank"), "ranks.rank"),
                   host=narrow.opt_text(d.get("host"), "ranks.host"),
                   processor_name=narrow.opt_text(d.get("processor_name"),
                                                  "ranks.processor_name"),
                   pid=narrow.opt_int(d.get("pid"), "ranks.pid"),
                   cpus=narrow.opt_ints(d.get("cpus"), "ranks.cpus"),
                   net_namespace=narrow.opt_text(d.get("net_namespace"),
                                                 "ranks.net_namespace"),
                   node=narrow.text(d.get("node"), "ranks.node"))


@dataclass
class Loop:
    """How a precision loop went: passes, seconds, whether the minimum trials outran the
    budget, the drift over the passes and the inflation of the intervals (a ring test's
    loop also counts its untimed warm trials)."""

    passes: int
    elapsed_s: float
    over_budget: bool
    drift: dict[str, float | None]
    inflation: float
    warm_trials: int | None = None

    def to_dict(self) -> JsonObject:
        out: JsonObject = {"passes": self.passes, "elapsed_s": self.elapsed_s,
                           "over_budget": self.over_budget, "drift": dict(self.drift),
                           "inflation": self.inflation}
        _optional(out, "warm_trials", self.warm_trials)
        return out

    @classmethod
    def from_dict(cls, d: JsonObject) -> Loop:
        return cls(passes=narrow.integer(d.get("passes"), "loop.passes"),
                   elapsed_s=narrow.num(d.get("elapsed_s"), "loop.elapsed_s"),
                   over_budget=narrow.flag(d.get("over_budget"), "loop.over_budget"),
                   drift=narrow.opt_num_map(d.get("drift"), "loop.drift"),
                   inflation=narrow.num(d.get("inflation"), "loop.inflation"),
                   warm_trials=narrow.opt_int(d.get("warm_trials"), "loop.warm_trials"))


def _loop(value: JsonValue) -> Loop | list[Loop] | None:
    """A series' loop: one (pairs, N pairs at once), one per size and repeat (a ring)."""
    if value is None:
        return None
    if isinstance(value, list):
        return [Loop.from_dict(d) for d in narrow.objects(value, "loop")]
    return Loop.from_dict(narrow.obj(value, "loop"))


def _loop_json(loop: Loop | list[Loop] | None) -> JsonValue:
    if loop is None:
        return None
    return [d.to_dict() for d in loop] if isinstance(loop, list) else loop.to_dict()


@dataclass
class Series:
    """One ranks-per-node setting (one MPI job): where and how it ran, and the test's own
    figures (a ring test's repeats and summary, the pairs and their findings, or N pairs
    at once's pairings and points; the others' are None)."""

    ranks_per_node: int
    np: int
    nodes: list[str]
    ranks: list[RankPlace]
    launch: JsonObject  # beoperf.launch.mpi_job.launch_meta: started_by, argv ...
    mpi: JsonObject  # the MPI library's facts (implementation, library_version ...)
    transport: JsonObject | None
    environment: dict[str, str] | None
    warnings: list[str]
    status: str = "complete"  # complete | interrupted | failed
    status_reason: str | None = None
    loop: Loop | list[Loop] | None = None
    repeats: list[Repeat] | None = None  # cluster-ring
    summary: dict[str, Summary | None] | None = None
    pairs: list[Pair] | None = None  # cluster-pairs
    findings: Findings | None = None
    pairings: list[Pairing] | None = None  # cluster-mbw
    pair_counts: list[int] | None = None
    skipped_pair_counts: list[int] | None = None
    points: list[Point] | None = None
    rma_pair: Pairing | None = None  # cluster-rma: origin (sender) and target (receiver)
    rma_points: list[RmaPoint] | None = None
    flows: list[Flow] | None = None  # cluster-p2p
    flow_counts: list[int] | None = None
    flow_points: list[FlowPoint] | None = None
    collectives: list[CollPoint] | None = None  # cluster-coll

    @classmethod
    def from_dict(cls, d: JsonObject) -> Series:
        env = d.get("environment")
        s = cls(ranks_per_node=narrow.integer(d.get("ranks_per_node"), "ranks_per_node"),
                np=narrow.integer(d.get("np"), "np"),
                nodes=narrow.texts(d.get("nodes"), "nodes"),
                ranks=[RankPlace.from_dict(r) for r in narrow.objects(d.get("ranks"), "ranks")],
                launch=narrow.obj(d.get("launch"), "launch"),
                mpi=narrow.obj(d.get("mpi"), "mpi"),
                transport=narrow.opt_obj(d.get("transport"), "transport"),
                environment=None if env is None else narrow.text_map(env, "environment"),
                warnings=narrow.texts(d.get("warnings"), "warnings"),
                status=narrow.text(d.get("status"), "status"),
                status_reason=narrow.opt_text(d.get("status_reason"), "status_reason"),
                loop=_loop(d.get("loop")))
        if "repeats" in d:
            s.repeats = [Repeat.from_dict(r) for r in narrow.objects(d["repeats"], "repeats")]
            s.summary = {k: Summary.from_dict(narrow.opt_obj(v, f"summary.{k}"),
                                              f"summary.{k}")
                         for k, v in narrow.obj(d.get("summary"), "summary").items()}
        if "pairs" in d:
            s.pairs = [Pair.from_dict(p) for p in narrow.objects(d["pairs"], "pairs")]
            s.findings = Findings.from_dict(narrow.obj(d.get("findings"), "findings"))
        if "points" in d:
            s.pairings = [Pairing.from_dict(p)
                          for p in narrow.objects(d.get("pairings"), "pairings")]
            s.pair_counts = narrow.ints(d.get("pair_counts"), "pair_counts")
            s.skipped_pair_counts = narrow.ints(d.get("skipped_pair_counts"),
                                                "skipped_pair_counts")
            s.points = [Point.from_dict(p) for p in narrow.objects(d["points"], "points")]
        if "rma_points" in d:
            s.rma_pair = Pairing.from_dict(narrow.obj(d.get("rma_pair"), "rma_pair"))
            s.rma_points = [RmaPoint.from_dict(p)
                            for p in narrow.objects(d["rma_points"], "rma_points")]
        if "flow_points" in d:
            s.flows = [Flow.from_dict(f) for f in narrow.objects(d.get("flows"), "flows")]
            s.flow_counts = narrow.ints(d.get("flow_counts"), "flow_counts")
            s.flow_points = [FlowPoint.from_dict(p)
                             for p in narrow.objects(d["flow_points"], "flow_points")]
        if "collectives" in d:
            s.collectives = [CollPoint.from_dict(p)
                             for p in narrow.objects(d["collectives"], "collectives")]
        return s

    def to_dict(self) -> JsonObject:
        """The stored series, in the order the suites write it: where and how it ran,
        the test's figures, then the loop and the status."""
        out: JsonObject = {
            "ranks_per_node": self.ranks_per_node, "np": self.np, "nodes": list(self.nodes),
            "ranks": [r.to_dict() for r in self.ranks], "launch": self.launch,
            "mpi": self.mpi, "transport": self.transport,
            "environment": dict(self.environment) if self.environment is not None else None,
            "warnings": list(self.warnings)}
        if self.repeats is not None:
            out["repeats"] = [r.to_dict() for r in self.repeats]
            out["summary"] = {k: None if v is None else v.to_dict()
                              for k, v in (self.summary or {}).items()}
        if self.pairs is not None:
            out["pairs"] = [p.to_dict() for p in self.pairs]
            out["findings"] = self.findings.to_dict() if self.findings else None
        if self.points is not None:
            out["pairings"] = [p.to_dict() for p in self.pairings or []]
            out["pair_counts"] = list(self.pair_counts or [])
            out["skipped_pair_counts"] = list(self.skipped_pair_counts or [])
            out["points"] = [p.to_dict() for p in self.points]
        if self.rma_points is not None and self.rma_pair is not None:
            out["rma_pair"] = self.rma_pair.to_dict()
            out["rma_points"] = [p.to_dict() for p in self.rma_points]
        if self.flow_points is not None:
            out["flows"] = [f.to_dict() for f in self.flows or []]
            out["flow_counts"] = list(self.flow_counts or [])
            out["flow_points"] = [p.to_dict() for p in self.flow_points]
        if self.collectives is not None:
            out["collectives"] = [p.to_dict() for p in self.collectives]
        out.update(loop=_loop_json(self.loop), status=self.status,
                   status_reason=self.status_reason)
        return out

    def name(self) -> str:
        """'2 ranks per node (8 ranks)'."""
        k = self.ranks_per_node
        return f"{k} rank{'s' if k != 1 else ''} per node ({self.np} ranks)"

    def pair_findings(self) -> Findings:
        """An all-pairs series' findings (DocumentError: not an all-pairs series)."""
        if self.findings is None:
            raise DocumentError("a series without the findings of its pairs")
        return self.findings

    def argv(self) -> list[str]:
        """The launcher's argv (empty: the ranks were started by the user's own job)."""
        argv = self.launch.get("argv")
        return [a for a in argv if isinstance(a, str)] if isinstance(argv, list) else []

    def started_by(self) -> str | None:
        found = self.launch.get("started_by")
        return found if isinstance(found, str) else None

    def launch_environment(self) -> dict[str, str]:
        """The variables the launcher passed to the ranks."""
        env = self.launch.get("environment")
        return ({k: v for k, v in env.items() if isinstance(v, str)}
                if isinstance(env, dict) else {})

    def mpi_library(self) -> str | None:
        """The MPI library's version string."""
        found = self.mpi.get("library_version")
        return found if isinstance(found, str) else None

    def loops(self) -> list[Loop]:
        """The loop's records (a ring test keeps one per size and repeat)."""
        if self.loop is None:
            return []
        return list(self.loop) if isinstance(self.loop, list) else [self.loop]


# --------------------------------------------------------------------------- settings


@dataclass
class RingDefinition:
    """The ring test as HPCC defines it: the sizes, the random rings at each, HPCC's loop
    lengths and measurements, the statistic, the figures' keys, the seed and repeats."""

    latency_bytes: int
    bandwidth_bytes: int
    random_rings: dict[str, int]  # latency bandwidth
    loop_length: dict[str, int]
    measurements: dict[str, int]
    directions: str
    statistic: str
    keys: list[str]
    seed: int
    repeat: int

    def to_dict(self) -> JsonObject:
        return {"definition": {
            "latency_bytes": self.latency_bytes, "bandwidth_bytes": self.bandwidth_bytes,
            "random_rings": dict(self.random_rings), "loop_length": dict(self.loop_length),
            "measurements": dict(self.measurements), "directions": self.directions,
            "statistic": self.statistic, "keys": list(self.keys), "seed": self.seed,
            "repeat": self.repeat}}

    @classmethod
    def from_dict(cls, b: JsonObject) -> RingDefinition:
        d, k = narrow.obj(b.get("definition"), "definition"), "definition"

        def counts(name: str) -> dict[str, int]:
            return {n: narrow.integer(v, f"{k}.{name}.{n}")
                    for n, v in narrow.obj(d.get(name), f"{k}.{name}").items()}

        return cls(narrow.integer(d.get("latency_bytes"), f"{k}.latency_bytes"),
                   narrow.integer(d.get("bandwidth_bytes"), f"{k}.bandwidth_bytes"),
                   counts("random_rings"), counts("loop_length"), counts("measurements"),
                   narrow.text(d.get("directions"), f"{k}.directions"),
                   narrow.text(d.get("statistic"), f"{k}.statistic"),
                   narrow.texts(d.get("keys"), f"{k}.keys"),
                   narrow.integer(d.get("seed"), f"{k}.seed"),
                   narrow.integer(d.get("repeat"), f"{k}.repeat"))


@dataclass
class PairsSettings:
    """All pairs: serial or concurrent rounds, the two sizes, the statistic."""

    mode: str
    latency_bytes: int
    bandwidth_bytes: int
    statistic: str

    def to_dict(self) -> JsonObject:
        return {"mode": self.mode, "latency_bytes": self.latency_bytes,
                "bandwidth_bytes": self.bandwidth_bytes, "statistic": self.statistic}

    @classmethod
    def from_dict(cls, b: JsonObject) -> PairsSettings:
        return cls(narrow.text(b.get("mode"), "mode"),
                   narrow.integer(b.get("latency_bytes"), "latency_bytes"),
                   narrow.integer(b.get("bandwidth_bytes"), "bandwidth_bytes"),
                   narrow.text(b.get("statistic"), "statistic"))


@dataclass
class MbwSettings:
    """N pairs at once: the window, the sizes, the statistic."""

    window: int
    sizes: list[int]
    statistic: str

    def to_dict(self) -> JsonObject:
        return {"window": self.window, "sizes": list(self.sizes), "statistic": self.statistic}

    @classmethod
    def from_dict(cls, b: JsonObject) -> MbwSettings:
        return cls(narrow.integer(b.get("window"), "window"),
                   narrow.ints(b.get("sizes"), "sizes"),
                   narrow.text(b.get("statistic"), "statistic"))


@dataclass
class RmaSettings:
    """One-sided: the operations, synchronisations and sizes asked, the window's flavour,
    the operations per synchronisation of put_bw and get_bw, whether the two-sided time
    was measured beside, and the statistic."""

    ops: list[str]
    syncs: list[str]
    sizes: list[int]
    window: str
    bw_burst: int
    two_sided: bool
    statistic: str

    def to_dict(self) -> JsonObject:
        return {"ops": list(self.ops), "syncs": list(self.syncs), "sizes": list(self.sizes),
                "window": self.window, "bw_burst": self.bw_burst,
                "two_sided": self.two_sided, "statistic": self.statistic}

    @classmethod
    def from_dict(cls, b: JsonObject) -> RmaSettings:
        return cls(narrow.texts(b.get("ops"), "ops"), narrow.texts(b.get("syncs"), "syncs"),
                   narrow.ints(b.get("sizes"), "sizes"), narrow.text(b.get("window"), "window"),
                   narrow.integer(b.get("bw_burst"), "bw_burst"),
                   narrow.flag(b.get("two_sided"), "two_sided"),
                   narrow.text(b.get("statistic"), "statistic"))


@dataclass
class P2pSettings:
    """A point-to-point pattern: which (bibw, incast, bisect), the window, the sizes,
    the statistic, and how the flows were chosen (the pairing given, or the rule)."""

    pattern: str
    window: int
    sizes: list[int]
    statistic: str
    flows_rule: str

    def to_dict(self) -> JsonObject:
        return {"pattern": self.pattern, "window": self.window, "sizes": list(self.sizes),
                "statistic": self.statistic, "flows_rule": self.flows_rule}

    @classmethod
    def from_dict(cls, b: JsonObject) -> P2pSettings:
        return cls(narrow.text(b.get("pattern"), "pattern"),
                   narrow.integer(b.get("window"), "window"),
                   narrow.ints(b.get("sizes"), "sizes"),
                   narrow.text(b.get("statistic"), "statistic"),
                   narrow.text(b.get("flows_rule"), "flows_rule"))


@dataclass
class CollSettings:
    """Collectives: which, the sizes, the root of the rooted ones, buffers reused or not,
    how the ranks were synchronised and the statistic."""

    operations: list[str]
    sizes: list[int]
    root: int
    nocache: bool
    sync: str
    statistic: str

    def to_dict(self) -> JsonObject:
        return {"operations": list(self.operations), "sizes": list(self.sizes),
                "root": self.root, "nocache": self.nocache, "sync": self.sync,
                "statistic": self.statistic}

    @classmethod
    def from_dict(cls, b: JsonObject) -> CollSettings:
        return cls(narrow.texts(b.get("operations"), "operations"),
                   narrow.ints(b.get("sizes"), "sizes"),
                   narrow.integer(b.get("root"), "root"),
                   narrow.flag(b.get("nocache"), "nocache"),
                   narrow.text(b.get("sync"), "sync"),
                   narrow.text(b.get("statistic"), "statistic"))


Settings = (RingDefinition | PairsSettings | MbwSettings | RmaSettings | P2pSettings
            | CollSettings)
SETTINGS: dict[str, type[RingDefinition] | type[PairsSettings] | type[MbwSettings]
               | type[RmaSettings] | type[P2pSettings] | type[CollSettings]] = {
    RING_KIND: RingDefinition, PAIRS_KIND: PairsSettings, MBW_KIND: MbwSettings,
    RMA_KIND: RmaSettings, P2P_KIND: P2pSettings, COLL_KIND: CollSettings}


@dataclass
class MpiRun:
    """A cluster-ring, cluster-pairs or cluster-mbw body: the label, the series, and the
    test's own settings (the ring definition; the pairs' mode, sizes and statistic; N
    pairs' window, sizes and statistic)."""

    kind: str
    label: str
    series: list[Series]
    settings: Settings

    def body(self) -> JsonObject:
        return {"label": self.label, **self.settings.to_dict(),
                "series": [s.to_dict() for s in self.series]}

    def to_document(self, meta: JsonObject) -> Document:
        return Document(self.kind, self.body(), meta)

    @classmethod
    def from_document(cls, doc: Document) -> MpiRun:
        """The typed body of a (schema-valid) cluster-ring, -pairs or -mbw document."""
        if doc.kind not in KINDS:
            raise DocumentError(f"a beoperf {doc.kind} document, not a cluster MPI test")
        return cls.from_body(doc.kind, doc.body)

    @classmethod
    def from_body(cls, kind: str, b: JsonObject) -> MpiRun:
        return cls(kind=kind, label=narrow.text(b.get("label"), "label"),
                   series=[Series.from_dict(s) for s in narrow.objects(b.get("series"),
                                                                        "series")],
                   settings=SETTINGS[kind].from_dict(b))

    def ring(self) -> RingDefinition:
        """The ring definition (DocumentError: not a ring test)."""
        if not isinstance(self.settings, RingDefinition):
            raise DocumentError(f"a beoperf {self.kind} document, not a ring test")
        return self.settings

    def pairs(self) -> PairsSettings:
        if not isinstance(self.settings, PairsSettings):
            raise DocumentError(f"a beoperf {self.kind} document, not an all-pairs test")
        return self.settings

    def mbw(self) -> MbwSettings:
        if not isinstance(self.settings, MbwSettings):
            raise DocumentError(f"a beoperf {self.kind} document, not N pairs at once")
        return self.settings

    def rma(self) -> RmaSettings:
        if not isinstance(self.settings, RmaSettings):
            raise DocumentError(f"a beoperf {self.kind} document, not a one-sided test")
        return self.settings

    def p2p(self) -> P2pSettings:
        if not isinstance(self.settings, P2pSettings):
            raise DocumentError(f"a beoperf {self.kind} document, not a point-to-point "
                                "pattern")
        return self.settings

    def coll(self) -> CollSettings:
        if not isinstance(self.settings, CollSettings):
            raise DocumentError(f"a beoperf {self.kind} document, not collectives")
        return self.settings

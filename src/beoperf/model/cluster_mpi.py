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

Version 2 of each: every 95% interval of a time or a rate has both bounds above 0 (the
schema says so); a version 1 file with a bound at or below zero loads with that interval
dropped and the reason in ``interval_note`` beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, TypeGuard

from beoperf.model import document
from beoperf.model.cluster import Summary
from beoperf.model.document import Document, DocumentError

RING_KIND = "cluster-ring"
PAIRS_KIND = "cluster-pairs"
MBW_KIND = "cluster-mbw"
KINDS = (RING_KIND, PAIRS_KIND, MBW_KIND)
VERSION = 2  # 1: intervals whose bounds were not checked to be above 0


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


for _kind in KINDS:
    document.register(_kind, VERSION, upgrades={1: _v1_to_v2})


# --------------------------------------------------------------------------- typed bodies
# Readers (the renderers and the answer) read fields of these, not dict paths; body()
# gives the stored body back (keys that are absent stay absent).  A pairs series' findings
# stay the dict the analysis made (beoperf.analysis.cluster_mpi.findings and named read it).


def _optional(d: dict[str, Any], name: str, value: Any) -> None:
    if value is not None:
        d[name] = value


def _fields_of(obj: Any) -> dict[str, Any]:
    """A dataclass's fields as stored: ``interval_note`` only when there is one."""
    out = {f.name: getattr(obj, f.name) for f in fields(obj)}
    if out.get("interval_note") is None:
        out.pop("interval_note", None)
    return out


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
    def from_dict(cls, d: dict[str, Any] | None) -> Stat | None:
        if d is None:
            return None
        return cls(median=d["median"], ci_low=d["ci_low"], ci_high=d["ci_high"], min=d["min"],
                   max=d["max"], trials=d["trials"], interval_note=d.get("interval_note"))

    def to_dict(self) -> dict[str, Any]:
        return _fields_of(self)


@dataclass
class Ring:
    """One ring of a repeat: its trials (seconds per message), HPCC's figure (their
    minimum), their median and its 95% interval."""

    name: str
    kind: str
    size: int
    order: list[int]
    trials: list[dict[str, Any]]
    hpcc_s: float
    median_s: float
    ci_s: list[float] | None
    interval_note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return _fields_of(self)


@dataclass
class Repeat:
    repeat: int
    seed: int | None
    rings: list[Ring]
    figures: dict[str, float | None]  # HPCC's keys, from the trials' minimum
    median_figures: dict[str, float | None]  # the same from the trials' median

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Repeat:
        return cls(repeat=d["repeat"], seed=d["seed"], rings=[
            Ring(**{f.name: r.get(f.name) for f in fields(Ring)}) for r in d["rings"]],
            figures=d["figures"], median_figures=d["median_figures"])

    def to_dict(self) -> dict[str, Any]:
        return {"repeat": self.repeat, "seed": self.seed,
                "rings": [r.to_dict() for r in self.rings], "figures": self.figures,
                "median_figures": self.median_figures}


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
    def from_dict(cls, d: dict[str, Any]) -> Pair:
        return cls(a=d["a"], b=d["b"], node_a=d["node_a"], node_b=d["node_b"],
                   round=d["round"], latency_s=Stat.from_dict(d["latency_s"]),
                   bandwidth_Bps=Stat.from_dict(d["bandwidth_Bps"]))

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "node_a": self.node_a, "node_b": self.node_b,
                "round": self.round,
                "latency_s": self.latency_s.to_dict() if self.latency_s else None,
                "bandwidth_Bps": self.bandwidth_Bps.to_dict() if self.bandwidth_Bps else None}


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
    def from_dict(cls, d: dict[str, Any]) -> Point:
        bw, rate = Stat.from_dict(d["bandwidth_Bps"]), Stat.from_dict(d["rate_per_s"])
        if bw is None or rate is None:
            raise DocumentError("a point of N pairs at once without its bandwidth or rate")
        return cls(pairs=d["pairs"], size=d["size"], trials=d["trials"],
                   messages=d["messages"], bandwidth_Bps=bw, rate_per_s=rate,
                   pair_Bps=d["pair_Bps"])

    def to_dict(self) -> dict[str, Any]:
        return {"pairs": self.pairs, "size": self.size, "trials": self.trials,
                "messages": self.messages, "bandwidth_Bps": self.bandwidth_Bps.to_dict(),
                "rate_per_s": self.rate_per_s.to_dict(), "pair_Bps": self.pair_Bps}


COMMON = ("ranks_per_node", "np", "nodes", "ranks", "launch", "mpi", "transport",
          "environment", "warnings", "status", "status_reason", "loop")


@dataclass
class Series:
    """One ranks-per-node setting (one MPI job): where and how it ran, and the test's own
    figures (a ring test's repeats and summary, the pairs and their findings, or N pairs
    at once's pairings and points; the others' are None)."""

    ranks_per_node: int
    np: int
    nodes: list[str]
    ranks: list[dict[str, Any]]
    launch: dict[str, Any]
    mpi: dict[str, Any]
    transport: Any
    environment: Any
    warnings: list[str]
    status: str
    status_reason: str | None
    loop: dict[str, Any] | None
    repeats: list[Repeat] | None = None  # cluster-ring
    summary: dict[str, Summary | None] | None = None
    pairs: list[Pair] | None = None  # cluster-pairs
    findings: dict[str, Any] | None = None
    pairings: list[dict[str, Any]] | None = None  # cluster-mbw
    pair_counts: list[int] | None = None
    skipped_pair_counts: list[int] | None = None
    points: list[Point] | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Series:
        s = cls(**{k: d[k] for k in COMMON})
        if "repeats" in d:
            s.repeats = [Repeat.from_dict(r) for r in d["repeats"]]
            s.summary = {k: Summary.from_dict(v) for k, v in d["summary"].items()}
        if "pairs" in d:
            s.pairs, s.findings = [Pair.from_dict(p) for p in d["pairs"]], d["findings"]
        if "points" in d:
            s.pairings, s.pair_counts = d["pairings"], d["pair_counts"]
            s.skipped_pair_counts = d["skipped_pair_counts"]
            s.points = [Point.from_dict(p) for p in d["points"]]
        return s

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in COMMON}
        if self.repeats is not None:
            out["repeats"] = [r.to_dict() for r in self.repeats]
            out["summary"] = {k: None if v is None else v.to_dict()
                              for k, v in (self.summary or {}).items()}
        if self.pairs is not None:
            out["pairs"] = [p.to_dict() for p in self.pairs]
            out["findings"] = self.findings
        if self.points is not None:
            for name in ("pairings", "pair_counts", "skipped_pair_counts"):
                out[name] = getattr(self, name)
            out["points"] = [p.to_dict() for p in self.points]
        return out

    def name(self) -> str:
        """'2 ranks per node (8 ranks)'."""
        k = self.ranks_per_node
        return f"{k} rank{'s' if k != 1 else ''} per node ({self.np} ranks)"


@dataclass
class MpiRun:
    """A cluster-ring, cluster-pairs or cluster-mbw body: the label, the series, and the
    test's own settings as stored (``settings``: the ring definition; the pairs' mode,
    sizes and statistic; N pairs' window, sizes and statistic)."""

    kind: str
    label: str
    series: list[Series]
    settings: dict[str, Any] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        return {"label": self.label, **self.settings,
                "series": [s.to_dict() for s in self.series]}

    def to_document(self, meta: dict[str, Any]) -> Document:
        return Document(self.kind, self.body(), meta)

    @classmethod
    def from_document(cls, doc: Document) -> MpiRun:
        """The typed body of a (schema-valid) cluster-ring, -pairs or -mbw document."""
        if doc.kind not in KINDS:
            raise DocumentError(f"a beoperf {doc.kind} document, not a cluster MPI test")
        b = doc.body
        return cls(kind=doc.kind, label=b["label"],
                   series=[Series.from_dict(s) for s in b["series"]],
                   settings={k: v for k, v in b.items() if k not in ("label", "series")})

"""`beoperf node -w NODES`: the node suite on every node at once, and the outliers.

Each node runs ``beoperf node --json`` with the same options (through the remote-host
layer, as the fleet audit does: ssh, or a local command per node with an exec template
such as ``ip netns exec %h``); each answer is read bounded, parsed once and validated as a
node document of this beoperf version, and a node without one is named with its reason.
Per metric, the nodes' means are judged against the fleet's median
(``beoperf.analysis.node.robust_z``): a node whose robust z-score is beyond the threshold
is an outlier (a bad DIMM in STREAM, a throttled CPU in the kernels, another BLAS in DGEMM,
a slow disk in I/O).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ClusterShell.NodeSet import NodeSet, NodeSetParseError

from beoperf import errors
from beoperf.analysis import node as analysis
from beoperf.launch import remote
from beoperf.launch.base import LaunchSpec
from beoperf.launch.remote import HostResult
from beoperf.model import fleet as fleet_doc
from beoperf.model import node as node_doc
from beoperf.model import nodeset
from beoperf.model.document import Document, DocumentError, JsonObject, make_meta, utc_now
from beoperf.model.node import NodeFleet, NodeRun
from beoperf.suites.fleet import DEFAULT_REMOTE, fleet_launch, parse_document, sort_documents

DEFAULT_TIMEOUT_S = 900.0
ANSWER_LIMIT = 16 << 20
CONDITION_KEYS = ("cpu_model", "cores_used", "memory", "llc_total")


@dataclass(frozen=True)
class Spec:
    """The nodes, the ``node`` options each runs (``args``, without --json), and how
    they are reached (as the fleet audit's Spec)."""

    nodes: str
    args: tuple[str, ...] = ()
    exec_template: str | None = None
    fanout: int = remote.DEFAULT_FANOUT
    timeout: float = DEFAULT_TIMEOUT_S
    remote_command: str = DEFAULT_REMOTE
    threshold: float = analysis.THRESHOLD
    limit: int = ANSWER_LIMIT
    command_line: tuple[str, ...] = field(default=())


def parse_answer(text: bytes, limit: int = ANSWER_LIMIT) -> Document:
    """One node's document; ValueError saying why not (OtherVersion: another beoperf)."""
    doc = parse_document(text, limit, "node", node_doc.is_node, node_doc.writer_version)
    try:
        NodeRun.from_document(doc)  # every field the fleet reads, checked
    except DocumentError as exc:
        raise ValueError(str(exc)) from None
    return doc


def launch_spec(spec: Spec, nodes: NodeSet) -> LaunchSpec:
    """The fan-out to run; BadSpec for values it cannot take."""
    return fleet_launch(nodes, spec.remote_command,
                        ["node", "--json", "--no-progress", *spec.args], spec.exec_template,
                        spec.fanout)


def sort_answers(results: Mapping[str, HostResult], limit: int) -> tuple[
        dict[str, Document], dict[str, NodeSet], dict[str, NodeSet]]:
    """node -> document; reason -> nodes without one; version -> nodes of another."""
    got = sort_documents(results, lambda text: parse_answer(text, limit))
    return got.docs, got.no_answer, got.other_version


def run(spec: Spec, progress: Callable[[str], None] | None = None) -> Document:
    """The node-fleet document of ``spec.nodes`` (nodes that did not answer included)."""
    started = utc_now()
    try:
        nodes = nodeset.parse(spec.nodes, "-w/--nodes")
    except nodeset.NodeSetSizeError as exc:
        raise errors.BadSpec(str(exc)) from None
    except NodeSetParseError as exc:
        raise errors.BadSpec(f"-w/--nodes {spec.nodes!r}: {exc}") from None
    if not spec.threshold > 0:
        raise errors.BadSpec(f"--threshold {spec.threshold}: give a positive z-score")
    if progress:
        progress(f"node suite on {len(nodes)} node(s), {spec.fanout} at a time")
    results = remote.run(launch_spec(spec, nodes), timeout=spec.timeout, fanout=spec.fanout,
                         limit=spec.limit)
    docs, no_answer, other = sort_answers(results, spec.limit)
    runs = {n: NodeRun.from_document(d) for n, d in sorted(docs.items())}
    metrics = analysis.fleet_metrics({n: node_doc.metrics_by_id(r) for n, r in runs.items()},
                                     spec.threshold)
    fleet = NodeFleet(
        nodes=str(nodes), answered=str(NodeSet.fromlist(list(docs))),
        no_answer=remote.group_reasons(no_answer), other_version=remote.group_reasons(other),
        method=analysis.method(spec.threshold), metrics=metrics,
        outliers=analysis.outlier_nodes(metrics),
        conditions={n: _conditions(r) for n, r in runs.items()})
    return fleet.to_document(make_meta(list(spec.command_line), utc_start=started,
                                       utc_end=utc_now()))


def _conditions(run: NodeRun) -> JsonObject:
    """What the fleet shows of a node's conditions, and how its run ended."""
    return {**{k: run.conditions.get(k) for k in CONDITION_KEYS}, "status": run.status}


def answer_counts(body: JsonObject) -> tuple[int, int]:
    """(nodes that answered, nodes asked), each node set counted before it is expanded."""
    return fleet_doc.answer_counts(body)

"""The fleet audit document (kind "fleet-audit"): many nodes' audits, grouped as `clubak -b`
groups identical outputs.

For each finding (check, key), nodes are grouped by value and verdict (pass, warn, fail,
unknown).  A key with one value and verdict on every node that answered is *consistent*
and listed once with its verdict; every other key is an *inconsistency*, listed with its
groups of nodes folded by ClusterShell's NodeSet, each with its verdict.  Groups are
ordered smallest first (the odd ones out first, the majority last); groups of the same
size by their folded node set.  A key missing from a node's answer counts as the value
``None`` there.  The body also says which nodes were asked, which answered, which did not
(reason -> nodes) and which run another beoperf version (version -> nodes).

Version 1 files (``"format": "beoperf.fleet-audit"``, before the envelope) are read
through :func:`_from_legacy_v1`.  ClusterShell is imported by the functions that fold node
sets, not with the module: every command imports the model, few build a fleet document.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from beoperf.model import document, narrow, nodeset
from beoperf.model.document import Document, DocumentError, JsonObject, JsonValue

KIND = "fleet-audit"
VERSION = 2  # 1: "format": "beoperf.fleet-audit", no envelope
LEGACY_FORMAT = "beoperf.fleet-audit"
BODY_KEYS = ("nodes", "answered", "no_answer", "other_version", "inconsistent", "consistent")

Ident = tuple[str, str]  # (check, key)

if TYPE_CHECKING:
    from ClusterShell.NodeSet import NodeSet


@dataclass
class Group:
    value: JsonValue
    nodes: NodeSet
    status: str | None = None


@dataclass
class KeyGroups:
    check: str
    key: str
    groups: list[Group] = field(default_factory=list)

    @property
    def label(self) -> str:
        """``interface.mtu`` for (interface, mtu); dotted keys stand alone (net.core.x)."""
        if "." in self.key or self.key == self.check:
            return self.key
        return f"{self.check}.{self.key}"


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _by_ident(findings: Sequence[Mapping]) -> dict[Ident, Mapping]:
    return {(f["check"], f["key"]): f for f in findings}


def _idents(per_node: Mapping[str, Mapping[Ident, Mapping]]) -> list[Ident]:
    """Every (check, key) seen on any node, in the order the first node reported them."""
    seen: dict[Ident, None] = {}
    for findings in per_node.values():
        seen.update(dict.fromkeys(findings))
    return list(seen)


def group_key(ident: Ident, per_node: Mapping[str, Mapping[Ident, Mapping]]) -> KeyGroups:
    """The nodes grouped by their value and verdict for one (check, key), smallest group
    first."""
    from ClusterShell.NodeSet import NodeSet

    by_value: dict[str, Group] = {}
    for node, findings in per_node.items():
        finding = findings.get(ident, {})
        value, status = finding.get("value"), finding.get("status")
        group = by_value.setdefault(_canon([value, status]), Group(value, NodeSet(), status))
        group.nodes.update(node)
    groups = sorted(by_value.values(), key=lambda g: (len(g.nodes), str(g.nodes)))
    return KeyGroups(ident[0], ident[1], groups)


def group_findings(answers: Mapping[str, Sequence[Mapping]]) -> list[KeyGroups]:
    """node -> that node's findings  =>  one KeyGroups per (check, key)."""
    per_node = {node: _by_ident(findings) for node, findings in answers.items()}
    return [group_key(ident, per_node) for ident in _idents(per_node)]


def answered_nodes(groups: list[KeyGroups]) -> NodeSet:
    """The nodes that answered (every one of them is in each key's groups)."""
    from ClusterShell.NodeSet import NodeSet

    answered = NodeSet()
    for g in groups[0].groups if groups else []:
        answered.update(g.nodes)
    return answered


def body(nodes: NodeSet, groups: list[KeyGroups], no_answer: Mapping[str, str],
         other_version: Mapping[str, str] | None = None,
         answered: NodeSet | None = None) -> JsonObject:
    """The document body (see :meth:`FleetAudit.of`)."""
    return FleetAudit.of(nodes, groups, no_answer, other_version, answered).body()


def make(body_: JsonObject, meta: JsonObject) -> Document:
    return Document(KIND, body_, meta)


def answer_counts(body_: Mapping[str, Any]) -> tuple[int, int]:
    """(nodes that answered, nodes asked) of a fleet audit body."""
    try:
        return (len(nodeset.parse(body_["answered"], "the document's answered nodes")),
                len(nodeset.parse(body_["nodes"], "the document's nodes")))
    except nodeset.NodeSetSizeError as exc:
        raise DocumentError(str(exc)) from None


# --------------------------------------------------------------------------- typed body


@dataclass
class NodeGroup:
    """Nodes (folded, ``node[01-04]``) that share one value and verdict of a key."""

    value: JsonValue
    nodes: str
    status: str | None

    def to_dict(self) -> JsonObject:
        return {"value": self.value, "nodes": self.nodes, "status": self.status}

    @classmethod
    def from_dict(cls, g: JsonObject) -> NodeGroup:
        return cls(g.get("value"), narrow.text(g.get("nodes"), "group nodes"),
                   narrow.opt_text(g.get("status"), "group status"))


@dataclass
class FleetKey:
    """One (check, key) across the fleet: its groups of nodes, the smallest first; a
    consistent key has one group (every node that answered)."""

    check: str
    key: str
    label: str
    groups: list[NodeGroup]

    def statuses(self) -> set[str | None]:
        return {g.status for g in self.groups}

    def to_dict(self, grouped: bool) -> JsonObject:
        """As stored: an inconsistent key with its groups (``grouped``), a consistent one
        flat (the value, verdict and nodes of its one group)."""
        head: JsonObject = {"check": self.check, "key": self.key, "label": self.label}
        if grouped:
            return {**head, "groups": [g.to_dict() for g in self.groups]}
        one = self.groups[0]
        return {**head, "value": one.value, "status": one.status, "nodes": one.nodes}

    @classmethod
    def from_dict(cls, k: JsonObject) -> FleetKey:
        where = f"key {k.get('label')!r}"
        groups = ([NodeGroup.from_dict(g) for g in narrow.objects(k.get("groups"), where)]
                  if "groups" in k else [NodeGroup.from_dict(k)])
        return cls(narrow.text(k.get("check"), where), narrow.text(k.get("key"), where),
                   narrow.text(k.get("label"), where), groups)

    @classmethod
    def of(cls, kg: KeyGroups) -> FleetKey:
        return cls(kg.check, kg.key, kg.label,
                   [NodeGroup(g.value, str(g.nodes), g.status) for g in kg.groups])


@dataclass
class FleetAudit:
    """A fleet-audit document's body, typed: the nodes asked and those that answered, why
    the others did not (reason -> nodes), which run another beoperf (version -> nodes),
    then each key that differs between nodes and each that is the same everywhere."""

    nodes: str
    answered: str
    no_answer: dict[str, str] = field(default_factory=dict)
    other_version: dict[str, str] = field(default_factory=dict)
    inconsistent: list[FleetKey] = field(default_factory=list)
    consistent: list[FleetKey] = field(default_factory=list)

    @classmethod
    def of(cls, nodes: NodeSet, groups: list[KeyGroups], no_answer: Mapping[str, str],
           other_version: Mapping[str, str] | None = None,
           answered: NodeSet | None = None) -> FleetAudit:
        """From the grouped findings (node sets folded): a key with more than one group
        is inconsistent."""
        keys = [FleetKey.of(kg) for kg in groups]
        return cls(str(nodes), str(answered if answered is not None
                                    else answered_nodes(groups)),
                   dict(no_answer), dict(other_version or {}),
                   [k for k in keys if len(k.groups) > 1],
                   [k for k in keys if len(k.groups) == 1])

    def body(self) -> JsonObject:
        return {"nodes": self.nodes, "answered": self.answered,
                "no_answer": dict(self.no_answer), "other_version": dict(self.other_version),
                "inconsistent": [k.to_dict(grouped=True) for k in self.inconsistent],
                "consistent": [k.to_dict(grouped=False) for k in self.consistent]}

    def to_document(self, meta: JsonObject) -> Document:
        return Document(KIND, self.body(), meta)

    def counts(self) -> tuple[int, int]:
        """(nodes that answered, nodes asked)."""
        return answer_counts({"answered": self.answered, "nodes": self.nodes})

    @classmethod
    def from_document(cls, doc: Document) -> FleetAudit:
        """The typed body of a (schema-valid) fleet-audit document."""
        if doc.kind != KIND:
            raise DocumentError(f"a beoperf {doc.kind} document, not a fleet audit")
        b: JsonObject = doc.body
        return cls(nodes=narrow.text(b.get("nodes"), "nodes"),
                   answered=narrow.text(b.get("answered"), "answered"),
                   no_answer=narrow.text_map(b.get("no_answer"), "no_answer"),
                   other_version=narrow.text_map(b.get("other_version"), "other_version"),
                   inconsistent=[FleetKey.from_dict(k)
                                 for k in narrow.objects(b.get("inconsistent"), "inconsistent")],
                   consistent=[FleetKey.from_dict(k)
                               for k in narrow.objects(b.get("consistent"), "consistent")])


def _from_legacy_v1(doc: dict) -> dict:
    """A version 1 file (everything at the top) as an envelope of version 2."""
    if doc.get("schema_version") != 1:
        raise DocumentError(f"{LEGACY_FORMAT} schema version {doc.get('schema_version')!r} "
                            "is not one this beoperf reads")
    meta = {"beoperf": doc["beoperf"]} if "beoperf" in doc else {}
    return {"format": document.FORMAT, "kind": KIND, "schema_version": VERSION, "meta": meta,
            "body": {k: doc[k] for k in BODY_KEYS if k in doc}}


document.register(KIND, VERSION, legacy={LEGACY_FORMAT: _from_legacy_v1})

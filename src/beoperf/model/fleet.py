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

from beoperf.model import document
from beoperf.model.document import Document, DocumentError

KIND = "fleet-audit"
VERSION = 2  # 1: "format": "beoperf.fleet-audit", no envelope
LEGACY_FORMAT = "beoperf.fleet-audit"
BODY_KEYS = ("nodes", "answered", "no_answer", "other_version", "inconsistent", "consistent")

Ident = tuple[str, str]  # (check, key)

if TYPE_CHECKING:
    from ClusterShell.NodeSet import NodeSet


@dataclass
class Group:
    value: Any
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
         answered: NodeSet | None = None) -> dict[str, Any]:
    """The document body: the nodes asked and those that answered, why the others did not,
    then each key, inconsistent or consistent (JSON-ready: node sets folded)."""
    bad = [kg for kg in groups if len(kg.groups) > 1]
    same = [kg for kg in groups if len(kg.groups) == 1]
    return {
        "nodes": str(nodes),
        "answered": str(answered if answered is not None else answered_nodes(groups)),
        "no_answer": dict(no_answer), "other_version": dict(other_version or {}),
        "inconsistent": [{"check": kg.check, "key": kg.key, "label": kg.label,
                          "groups": [{"value": g.value, "nodes": str(g.nodes),
                                      "status": g.status} for g in kg.groups]}
                         for kg in bad],
        "consistent": [{"check": kg.check, "key": kg.key, "label": kg.label,
                        "value": kg.groups[0].value, "status": kg.groups[0].status,
                        "nodes": str(kg.groups[0].nodes)} for kg in same],
    }


def make(body_: dict[str, Any], meta: dict[str, Any]) -> Document:
    return Document(KIND, body_, meta)


def answer_counts(body_: Mapping[str, Any]) -> tuple[int, int]:
    """(nodes that answered, nodes asked) of a fleet audit body."""
    from ClusterShell.NodeSet import NodeSet

    return len(NodeSet(body_["answered"])), len(NodeSet(body_["nodes"]))


def _from_legacy_v1(doc: dict) -> dict:
    """A version 1 file (everything at the top) as an envelope of version 2."""
    if doc.get("schema_version") != 1:
        raise DocumentError(f"{LEGACY_FORMAT} schema version {doc.get('schema_version')!r} "
                            "is not one this beoperf reads")
    meta = {"beoperf": doc["beoperf"]} if "beoperf" in doc else {}
    return {"format": document.FORMAT, "kind": KIND, "schema_version": VERSION, "meta": meta,
            "body": {k: doc[k] for k in BODY_KEYS if k in doc}}


document.register(KIND, VERSION, legacy={LEGACY_FORMAT: _from_legacy_v1})

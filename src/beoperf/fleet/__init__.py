"""Fleet audit: the per-node audit documents of many nodes, grouped the way `clubak -b` does.

For each finding (check, key), nodes are grouped by value.  A key whose value is the same
on every node that answered is *consistent* and printed once; every other key is an
*inconsistency*, listed with its groups of nodes folded by ClusterShell's NodeSet::

    interface.driver_version: 5.7.6 on node[03,07]; 6.0.54 on node[01-02,04-06,08-32]

Groups are ordered smallest first (the odd ones out first, the majority last); groups of
the same size by their folded node set.  A key missing from a node's answer counts as the
value ``None`` ("-") there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ClusterShell.NodeSet import NodeSet

from beoperf.audit.base import show_value

FORMAT = "beoperf.fleet-audit"
SCHEMA_VERSION = 1

Ident = tuple[str, str]  # (check, key)


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


def _findings_by_ident(doc: Mapping) -> dict[Ident, Mapping]:
    return {(f["check"], f["key"]): f for f in doc.get("findings", [])}


def _idents(per_node: Mapping[str, Mapping[Ident, Mapping]]) -> list[Ident]:
    """Every (check, key) seen on any node, in the order the first node reported them."""
    seen: dict[Ident, None] = {}
    for findings in per_node.values():
        seen.update(dict.fromkeys(findings))
    return list(seen)


def group_key(ident: Ident, per_node: Mapping[str, Mapping[Ident, Mapping]]) -> KeyGroups:
    """The nodes grouped by their value for one (check, key), smallest group first."""
    by_value: dict[str, Group] = {}
    for node, findings in per_node.items():
        finding = findings.get(ident, {})
        value = finding.get("value")
        group = by_value.setdefault(_canon(value), Group(value, NodeSet(), finding.get("status")))
        group.nodes.update(node)
    groups = sorted(by_value.values(), key=lambda g: (len(g.nodes), str(g.nodes)))
    return KeyGroups(ident[0], ident[1], groups)


def group_findings(answers: Mapping[str, Mapping]) -> list[KeyGroups]:
    """node -> audit document  =>  one KeyGroups per (check, key)."""
    per_node = {node: _findings_by_ident(doc) for node, doc in answers.items()}
    return [group_key(ident, per_node) for ident in _idents(per_node)]


def answered_nodes(groups: list[KeyGroups]) -> NodeSet:
    """The nodes that answered (every one of them is in each key's groups)."""
    answered = NodeSet()
    for g in groups[0].groups if groups else []:
        answered.update(g.nodes)
    return answered


def format_inconsistent(kg: KeyGroups) -> str:
    parts = "; ".join(f"{show_value(g.value)} on {g.nodes}" for g in kg.groups)
    return f"{kg.label}: {parts}"


def format_report(nodes: NodeSet, groups: list[KeyGroups],
                  no_answer: Mapping[str, str]) -> list[str]:
    """The text report: who did not answer, the inconsistencies, then what is the same."""
    answered = answered_nodes(groups)
    lines = [f"did not answer: {ns} ({reason})" for reason, ns in no_answer.items()]
    bad = [kg for kg in groups if len(kg.groups) > 1]
    same = [kg for kg in groups if len(kg.groups) == 1]
    lines.append(f"{len(answered)} of {len(nodes)} nodes answered: {answered or '-'}")
    if bad:
        lines += ["", f"inconsistent ({len(bad)}):"] + [f"  {format_inconsistent(kg)}"
                                                        for kg in bad]
    if same:
        lines += ["", f"same on {answered}:"]
        lines += [f"  {kg.label} = {show_value(kg.groups[0].value)}" for kg in same]
    return lines


def fleet_document(nodes: NodeSet, groups: list[KeyGroups],
                   no_answer: Mapping[str, str]) -> dict:
    """The --json document (format beoperf.fleet-audit)."""
    bad = [kg for kg in groups if len(kg.groups) > 1]
    same = [kg for kg in groups if len(kg.groups) == 1]
    return {
        "format": FORMAT, "schema_version": SCHEMA_VERSION, "nodes": str(nodes),
        "answered": str(answered_nodes(groups)), "no_answer": dict(no_answer),
        "inconsistent": [{"check": kg.check, "key": kg.key, "label": kg.label,
                          "groups": [{"value": g.value, "nodes": str(g.nodes),
                                      "status": g.status} for g in kg.groups]}
                         for kg in bad],
        "consistent": [{"check": kg.check, "key": kg.key, "label": kg.label,
                        "value": kg.groups[0].value, "status": kg.groups[0].status,
                        "nodes": str(kg.groups[0].nodes)} for kg in same],
    }

"""The fleet audit: `beoperf audit --json` on many nodes at once, the answers grouped.

``run(Spec(...))`` runs the audit on every node through the remote-host layer
(``beoperf.launch.remote``: ssh, or a local command per node with an exec template; at most
``limit`` bytes read from each node; one result per node, whatever happened to it), parses
each distinct answer once (bounded JSON, no NaN, no deep nesting; the audit document's
schema), sets apart nodes that run another beoperf version, and returns the "fleet-audit"
document.  The node fleet (``suites/node_fleet.py``) reads its answers the same way.
Whether every node answered is in the document (:func:`beoperf.model.fleet.answer_counts`):
the caller decides what a partial answer means (the CLI exits 6, or 7 when no node
answered).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ClusterShell.NodeSet import NodeSet, NodeSetParseError

from beoperf import __version__, errors, safeio
from beoperf.launch import clush, remote
from beoperf.launch.base import LaunchSpec
from beoperf.launch.remote import HostResult
from beoperf.model import audit as audit_doc
from beoperf.model import fleet as fleet_doc
from beoperf.model import nodeset
from beoperf.model.document import (
    Document,
    DocumentError,
    JsonObject,
    from_json,
    make_meta,
    utc_now,
)
from beoperf.model.fleet import answer_counts
from beoperf.suites.audit import check_profile_name

__all__ = ["Spec", "run", "parse_answer", "OtherVersion", "answer_counts", "DEFAULT_FANOUT",
           "DEFAULT_TIMEOUT_S", "DEFAULT_REMOTE", "ANSWER_LIMIT"]

DEFAULT_FANOUT = remote.DEFAULT_FANOUT
DEFAULT_TIMEOUT_S = remote.DEFAULT_TIMEOUT_S
DEFAULT_REMOTE = remote.DEFAULT_BEOPERF
ANSWER_LIMIT = safeio.LIMITS["answer"]

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Spec:
    """The nodes (a ClusterShell node set), the audit each runs (profile, interface,
    peer), and how: ``exec_template`` (a local command per node with %h, e.g.
    ``ip netns exec %h``; None: ssh), at most ``fanout`` nodes at a time, ``timeout``
    seconds per node, ``remote_command`` to start beoperf on a node, ``limit`` bytes of
    output read per node."""

    nodes: str
    profile: str = "latency"
    interface: str | None = None
    peer: str | None = None
    exec_template: str | None = None
    fanout: int = DEFAULT_FANOUT
    timeout: float = DEFAULT_TIMEOUT_S
    remote_command: str = DEFAULT_REMOTE
    limit: int = ANSWER_LIMIT
    command_line: tuple[str, ...] = field(default=())


class OtherVersion(ValueError):
    """A node answered with an audit document of another beoperf version."""

    def __init__(self, version: str) -> None:
        self.version = version
        super().__init__(f"beoperf {version} (this is {__version__})")


# --------------------------------------------------------------------------- the command


def audit_args(profile: str, interface: str | None = None,
               peer: str | None = None) -> list[str]:
    """``audit --json --profile P [--interface IF] [--peer HOST]``."""
    argv = ["audit", "--json", "--profile", profile]
    argv += ["--interface", interface] if interface else []
    return argv + (["--peer", peer] if peer else [])


def fleet_launch(nodes: NodeSet, remote_command: str, args: list[str],
                 exec_template: str | None, fanout: int) -> LaunchSpec:
    """beoperf ``args`` on every node; BadSpec for --fanout or --exec-template values the
    fan-out cannot take (the node fleet's too)."""
    if fanout < 1:
        raise errors.BadSpec(f"--fanout {fanout}: give at least 1")
    problem = None if exec_template is None else clush.template_problem(exec_template)
    if problem:
        raise errors.BadSpec(f"--exec-template {exec_template!r} {problem}",
                             "e.g. --exec-template 'ip netns exec %h'")
    return LaunchSpec(remote.node_argv(remote_command, args), hosts=tuple(nodes),
                      agent=exec_template)


def launch_spec(spec: Spec, nodes: NodeSet) -> LaunchSpec:
    """The fan-out to run; BadSpec for values it cannot take."""
    return fleet_launch(nodes, spec.remote_command,
                        audit_args(spec.profile, spec.interface, spec.peer),
                        spec.exec_template, spec.fanout)


# --------------------------------------------------------------------------- the answers


def parse_answer(text: str | bytes, limit: int = ANSWER_LIMIT) -> Document:
    """One node's audit document (current, schema-valid); ValueError saying why not
    (OtherVersion for a document of another beoperf version, which is not read further)."""
    doc = parse_document(text, limit, "audit", audit_doc.is_audit, audit_doc.writer_version)
    try:
        audit_doc.AuditRun.from_document(doc)  # every field the fleet reads, checked
    except DocumentError as exc:
        raise ValueError(str(exc)) from None
    return doc


def parse_document(text: str | bytes, limit: int, what: str, is_kind: Callable[[Any], bool],
                   version_of: Callable[[Any], str | None]) -> Document:
    """One node's document of a kind (``is_kind`` tells it, ``version_of`` gives the
    beoperf that wrote it), current and schema-valid; ValueError saying why not."""
    if len(text) > limit:
        raise ValueError(f"output over {limit:,} bytes")
    try:
        raw = safeio.parse_json(text, "output")
    except safeio.FileInputError as exc:
        raise ValueError(f"unparsable {exc}") from None
    if not is_kind(raw):
        raise ValueError(f"output is not a beoperf {what} document")
    version = version_of(raw)
    if version != __version__:
        raise OtherVersion(version if version is not None else "of unknown version")
    try:
        return from_json(raw, "output")
    except DocumentError as exc:
        raise ValueError(str(exc)) from None


@dataclass
class Sorted:
    """node -> findings of its answer; reason -> nodes without one; version -> nodes of
    another beoperf version."""

    answers: dict[str, list[JsonObject]] = field(default_factory=dict)
    no_answer: dict[str, NodeSet] = field(default_factory=dict)
    other_version: dict[str, NodeSet] = field(default_factory=dict)


@dataclass
class Answers:
    """node -> its document; reason -> nodes without one; version -> nodes of another
    beoperf version."""

    docs: dict[str, Document] = field(default_factory=dict)
    no_answer: dict[str, NodeSet] = field(default_factory=dict)
    other_version: dict[str, NodeSet] = field(default_factory=dict)


def sort_documents(results: Mapping[str, HostResult],
                   parse: Callable[[bytes], Document]) -> Answers:
    """Each node's result as a document (each distinct output parsed once by ``parse``)
    or a reason: the node's failure, or why its output is not an answer."""
    outcome = remote.group(results)
    out = Answers(no_answer=dict(outcome.failed))
    for message, nodes in outcome.outputs.items():
        try:
            if not message:
                raise ValueError("no output")
            doc = parse(message)
        except OtherVersion as exc:
            out.other_version.setdefault(exc.version, NodeSet()).update(nodes)
        except ValueError as exc:
            out.no_answer.setdefault(str(exc), NodeSet()).update(nodes)
        else:
            out.docs.update(dict.fromkeys(nodes, doc))
    return out


def sort_outcome(results: Mapping[str, HostResult], limit: int) -> Sorted:
    """Each node's findings, or why it has none."""
    got = sort_documents(results, lambda text: parse_answer(text, limit))
    answers = {node: [f.to_dict() for f in audit_doc.AuditRun.from_document(doc).findings]
               for node, doc in got.docs.items()}
    return Sorted(answers, got.no_answer, got.other_version)


# --------------------------------------------------------------------------- the suite


def run(spec: Spec, progress: Progress | None = None) -> Document:
    """The fleet-audit document of ``spec.nodes`` (nodes that did not answer included)."""
    started = utc_now()
    check_profile_name(spec.profile)
    try:
        nodes = nodeset.parse(spec.nodes, "-w/--nodes")
    except nodeset.NodeSetSizeError as exc:
        raise errors.BadSpec(str(exc)) from None
    except NodeSetParseError as exc:
        raise errors.BadSpec(f"-w/--nodes {spec.nodes!r}: {exc}") from None
    results = remote.run(launch_spec(spec, nodes), timeout=spec.timeout, fanout=spec.fanout,
                         limit=spec.limit)
    got = sort_outcome(results, spec.limit)
    groups = fleet_doc.group_findings(got.answers)
    fleet = fleet_doc.FleetAudit.of(nodes, groups, remote.group_reasons(got.no_answer),
                                    remote.group_reasons(got.other_version),
                                    answered=NodeSet.fromlist(list(got.answers)))
    return fleet.to_document(make_meta(list(spec.command_line), utc_start=started,
                                       utc_end=utc_now()))

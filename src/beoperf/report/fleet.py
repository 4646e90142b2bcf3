"""The fleet audit document as text: who did not answer or runs another beoperf, the
inconsistencies (each key's groups of nodes, odd ones out first), then what is the same
everywhere, each with its verdict::

    interface.driver_version: 5.7.6 [ok] on node[03,07]; 6.0.54 [ok] on node[01-02,04-32]

Everything a node sent is shown with control characters escaped: nodes may send
terminal escapes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from beoperf.model.document import Document
from beoperf.model.fleet import FleetAudit, answer_counts
from beoperf.report import renderer
from beoperf.report.answer import Level, Line, answer, lines_of, listed, plural, text_block
from beoperf.report.audit import mark, show_value


def printable(text: str) -> str:
    """``text`` with control characters escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def shown(value: Any) -> str:
    return printable(show_value(value))


def inconsistent_line(key: Mapping[str, Any]) -> str:
    parts = "; ".join(f"{shown(g['value'])} [{mark(g['status'])}] on {g['nodes']}"
                      for g in key["groups"])
    return f"{printable(key['label'])}: {parts}"


def consistent_line(key: Mapping[str, Any]) -> str:
    return f"{mark(key['status']):<4}  {printable(key['label'])} = {shown(key['value'])}"


def report_lines(body: Mapping[str, Any], version: str) -> list[str]:
    """The report of a fleet audit made by beoperf ``version``."""
    answered, asked = answer_counts(body)
    lines = [f"did not answer: {ns} ({printable(reason)})"
             for reason, ns in body["no_answer"].items()]
    lines += [f"another beoperf version, not used: {ns} (beoperf {printable(other)}; this "
              f"is {version})" for other, ns in body["other_version"].items()]
    lines.append(f"{answered} of {asked} nodes answered: {body['answered'] or '-'}")
    if body["inconsistent"]:
        lines += ["", f"inconsistent ({len(body['inconsistent'])}):"]
        lines += [f"  {inconsistent_line(k)}" for k in body["inconsistent"]]
    if body["consistent"]:
        lines += ["", f"same on {body['answered']}:"]
        lines += [f"  {consistent_line(k)}" for k in body["consistent"]]
    return lines


@renderer("fleet-audit", "text")
def text(doc: Document, **_options: Any) -> str:
    top = text_block(lines_of(doc))
    return "\n".join([*top, *([""] if top else []),
                      *report_lines(doc.body, str(doc.meta.get("beoperf", "?")))])


@answer("fleet-audit")
def what_is_wrong(doc: Document) -> list[Line]:
    """Nodes that did not answer or run another beoperf, the settings that fail or warn
    on some node, the settings that differ between nodes; all alike and passing: says
    so."""
    b = FleetAudit.from_document(doc)
    out = [Line(Level.FAIL, f"did not answer: {printable(nodes)} ({printable(reason)})",
                "check that beoperf runs there over ssh (or --exec-template), then audit again")
           for reason, nodes in b.no_answer.items()]
    out += [Line(Level.WARN, f"another beoperf version, not used: {printable(nodes)} "
                             f"(beoperf {printable(version)})",
                 "install the same beoperf on every node")
            for version, nodes in b.other_version.items()]
    keys = [*b.inconsistent, *b.consistent]
    for status, level, verb in (("fail", Level.FAIL, "fail{} the profile"),
                                ("warn", Level.WARN, "warn{} against the profile")):
        hit = [printable(k.label) for k in keys if k.statuses() & {status}]
        if hit:
            out.append(Line(level, f"{plural(len(hit), 'setting')} "
                                   f"{verb.format('s' if len(hit) == 1 else '')} on some or "
                                   f"all nodes: {listed(hit)}",
                            "beoperf audit on one of those nodes says why and how to change "
                            "them; beoperf tune plans it"))
    if b.inconsistent:
        out.append(Line(Level.WARN, f"{plural(len(b.inconsistent), 'setting')} "
                                    f"{'differs' if len(b.inconsistent) == 1 else 'differ'} "
                                    "between nodes: "
                                    f"{listed([printable(k.label) for k in b.inconsistent])}",
                        "the groups below name the odd nodes out"))
    if not out:
        out.append(Line(Level.OK, f"{b.answered or 'no node'} answered; "
                                  f"{plural(len(keys), 'setting')} the same on every node, "
                                  "none failing or warning"))
    return out

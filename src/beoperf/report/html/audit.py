"""Audits in the HTML report: one node's findings (kind "audit") and a fleet's
inconsistencies (kind "fleet-audit"), as `beoperf audit` prints them: the verdict
counts, every finding with its reason, what to run to change what warns or fails, the
socket-buffer arithmetic; for a fleet, who did not answer, each inconsistent key's
groups of nodes (odd ones out first) and what is the same everywhere."""

from __future__ import annotations

from collections import Counter
from typing import Any

from beoperf.model.audit import AuditRun, BufferAdvice, Finding
from beoperf.model.document import Document
from beoperf.model.fleet import FleetAudit
from beoperf.report import renderer
from beoperf.report.audit import show_value, sufficient_text, to_fix
from beoperf.report.html.markup import (
    Markup,
    bullet_list,
    code,
    details,
    heading,
    join,
    pairs,
    para,
    status_mark,
    table,
)

ROW_CLASS = {"fail": "bad", "warn": "warn"}


@renderer("audit", "title")
def title(doc: Document, **_options: Any) -> str:
    run = AuditRun.from_document(doc)
    host = (run.host or {}).get("hostname") or doc.meta.get("host", "?")
    return f"Audit of {host}, interface {run.interface or '(none)'}, profile {run.profile}"


def findings_table(findings: list[Finding]) -> Markup:
    rows = [[status_mark(f.status), f.check, f.key, show_value(f.value), f.reason]
            for f in findings]
    classes = [ROW_CLASS.get(f.status) for f in findings]
    return table(["verdict", "check", "key", "value", "reason"], rows, row_classes=classes,
                 caption="Findings")


def fixes(findings: list[Finding]) -> Markup:
    todo = to_fix(findings)
    if not todo:
        return Markup("")
    return join([heading("To change (as root)"),
                 bullet_list([code(f.command) for f in todo if f.command]),
                 heading("To make persistent"),
                 bullet_list([join([code(f.key), Markup(": "), code(f.persist)])
                              for f in todo if f.persist])])


def advice(a: BufferAdvice | None) -> Markup:
    if not a:
        return Markup("")
    rate = a.rate_bps
    rows = [[k, a.current.get(k), sufficient_text(ok)] for k, ok in a.sufficient.items()]
    return join([heading(f"Socket buffers for {rate / 1e9:g} Gbit/s" if rate else
                         "Socket buffers"),
                 bullet_list([str(line) for line in a.arithmetic]),
                 table(["limit", "current", "verdict"], rows),
                 bullet_list([code(c) for c in a.commands])])


@renderer("audit", "html")
def html(doc: Document, **_options: Any) -> str:
    run = AuditRun.from_document(doc)
    counts = Counter(f.status for f in run.findings)
    host = run.host or {}
    return join([
        pairs([("verdicts", ", ".join(f"{counts.get(s, 0)} {s}"
                                      for s in ("pass", "warn", "fail", "unknown"))),
               ("node", "; ".join(str(host.get(k)) for k in ("hostname", "kernel", "os",
                                                             "cpu_model") if host.get(k))),
               ("profile", run.profile), ("interface", run.interface or "(none)")]),
        findings_table(run.findings), fixes(run.findings), advice(run.buffer_advice)])


# --------------------------------------------------------------------------- fleet


@renderer("fleet-audit", "title")
def fleet_title(doc: Document, **_options: Any) -> str:
    fleet = FleetAudit.from_document(doc)
    answered, asked = fleet.counts()
    return f"Fleet audit of {fleet.nodes}: {answered} of {asked} nodes answered"


@renderer("fleet-audit", "html")
def fleet_html(doc: Document, **_options: Any) -> str:
    b = FleetAudit.from_document(doc)
    answered, asked = b.counts()
    rows: list[list[Any]] = []
    classes: list[str | None] = []
    for key in b.inconsistent:
        for k, g in enumerate(key.groups):
            rows.append([key.label if k == 0 else "", g.nodes, show_value(g.value),
                         status_mark(g.status)])
            classes.append("warn" if k == 0 else None)
    same = [[status_mark(k.groups[0].status), k.label, show_value(k.groups[0].value)]
            for k in b.consistent]
    return join([
        pairs([("nodes asked", b.nodes), ("answered", f"{answered} of {asked}: "
                                          f"{b.answered or '-'}")]),
        heading(f"Inconsistencies ({len(b.inconsistent)})"),
        table(["setting", "nodes", "value", "verdict"], rows, row_classes=classes)
        if rows else para("None: every node that answered has the same values.", "none"),
        details(f"Same on {b.answered or 'every node'} ({len(same)} settings)",
                table(["verdict", "setting", "value"], same))])

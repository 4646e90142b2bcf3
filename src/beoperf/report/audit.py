"""The audit document as text: a summary line, one row per finding, the commands that
change what warns or fails (and how to make them persistent), and the socket-buffer
advice when the RTT to a peer was measured."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from beoperf.model.audit import AuditRun, BufferAdvice, Finding
from beoperf.model.document import Document
from beoperf.report import renderer
from beoperf.report.answer import Level, Line, answer, lines_of, listed, plural, text_block

MARKS = {"pass": "ok", "warn": "WARN", "fail": "FAIL", "unknown": "?"}  # as tables show them
MAX_COLUMN = 40
# the checks of the hardware (the NIC's bus, the bond, the Ethernet link): changed by hand,
# never by beoperf tune, so each of their warnings is a line of its own with its reason
HARDWARE_CHECKS = ("pcie", "bond", "link")


def show_value(value: Any) -> str:
    """A fact's value for a table: "-" for none, lists space-separated."""
    if value is None:
        return "-"
    if isinstance(value, list):
        return " ".join(map(str, value))
    return str(value)


def mark(status: Any) -> str:
    """A verdict as the tables show it (ok, WARN, FAIL, ?)."""
    return MARKS.get(str(status), "?")


def summary_line(profile: str, interface: str | None, findings: Sequence[Finding]) -> str:
    counts = {s: sum(1 for f in findings if f.status == s) for s in MARKS}
    parts = ", ".join(f"{n} {s}" for s, n in counts.items())
    return f"profile {profile}, interface {interface or '(none)'}: {parts}"


def table_lines(findings: Sequence[Finding]) -> list[str]:
    rows = [(MARKS[f.status], f.check, f.key, show_value(f.value), f.reason) for f in findings]
    widths = [max(len(r[i]) for r in rows) for i in range(4)] if rows else [0] * 4
    widths = [min(w, MAX_COLUMN) for w in widths]
    return [" ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) + "  " + r[4]
            for r in rows]


def to_fix(findings: Sequence[Finding]) -> list[Finding]:
    """The findings that warn or fail and say how to change or persist them."""
    return [f for f in findings
            if f.status in ("warn", "fail") and (f.command or f.persist)]


def fix_lines(findings: Sequence[Finding]) -> list[str]:
    todo = to_fix(findings)
    if not todo:
        return []
    lines = ["", "To change (as root):"]
    lines += [f"  {f.command}" for f in todo if f.command]
    lines += ["", "To make persistent:"]
    lines += [f"  {f.key}: {f.persist}" for f in todo if f.persist]
    return lines


def sufficient_text(ok: bool | None) -> str:
    return "unknown" if ok is None else ("enough" if ok else "too small")


def advice_lines(advice: BufferAdvice) -> list[str]:
    out = ["", f"Socket buffers for {advice.rate_bps / 1e9:g} Gbit/s:"]
    out += [f"  {line}" for line in advice.arithmetic]
    for key, ok in advice.sufficient.items():
        out.append(f"  {key} = {advice.current.get(key)}: {sufficient_text(ok)}")
    return out + [f"  {line}" for line in advice.commands]


@renderer("audit", "text")
def text(doc: Document, **_options: Any) -> str:
    """The summary line, the table, the fixes and the buffer advice."""
    run = AuditRun.from_document(doc)
    findings = run.findings
    lines = table_lines(findings) + fix_lines(findings)
    if run.buffer_advice:
        lines += advice_lines(run.buffer_advice)
    top = text_block(lines_of(doc))
    return "\n".join([*top, *([""] if top else []),
                      summary_line(run.profile, run.interface, findings), *lines])


def _alone_line(level: Level, f: Finding) -> Line:
    """A failure with no single value to set, or a finding of the hardware: its value,
    reason and command."""
    if f.command:
        todo = f"{f.command} (by hand: beoperf tune does not change it)"
    elif f.check in HARDWARE_CHECKS:
        todo = "look at the hardware the reason names: beoperf tune does not change it"
    else:
        todo = "change it by hand: beoperf tune cannot set it and restore it exactly"
    return Line(level, f"{f.key} = {show_value(f.value)}: {f.reason}", todo)


def _group_line(status: str, level: Level, keys: list[str], profile: str, plan: str) -> Line:
    """The settings that fail (or warn) against the profile, on one line."""
    one = len(keys) == 1
    verb = (f"{'fails' if one else 'fail'} the" if status == "fail" else
            f"{'warns' if one else 'warn'} against the")
    return Line(level, f"{plural(len(keys), 'setting')} {verb} {profile} profile: "
                       f"{listed(keys)}", plan)


@answer("audit")
def what_is_wrong(doc: Document) -> list[Line]:
    """The settings that fail, then those that warn (each group one line, with what
    plans the changes), a failure with no single value to set (a path that does not carry
    the MTU, an interface down) and a warning or failure of the hardware (the NIC's bus, a
    bond, the Ethernet link) each on a line of its own with its reason and command, the
    settings not read; all pass: says so."""
    run = AuditRun.from_document(doc)
    findings = run.findings
    profile = run.profile
    plan = (f"beoperf tune --profile {profile}"
            + (f" --interface {run.interface}" if run.interface else "")
            + " plans the changes (nothing changes without --apply); the commands to "
              "change them are below")
    out = []
    for status, level in (("fail", Level.FAIL), ("warn", Level.WARN)):
        found = [f for f in findings if f.status == status]
        alone = [f for f in found if (f.target is None and status == "fail")
                 or f.check in HARDWARE_CHECKS]
        out += [_alone_line(level, f) for f in alone]
        grouped = [f.key for f in found if f not in alone]
        if grouped:
            out.append(_group_line(status, level, grouped, profile, plan))
    return out + _unread_or_passed(findings, profile)


def _unread_or_passed(findings: Sequence[Finding], profile: str) -> list[Line]:
    """The settings not read or judged; "all pass" when none fails or warns."""
    out = []
    unknown = [f.key for f in findings if f.status == "unknown"]
    if unknown:
        out.append(Line(Level.NOTE, f"{plural(len(unknown), 'setting')} could not be read or "
                                    f"judged: {listed(unknown)} (each finding says why)"))
    if not any(f.status in ("fail", "warn") for f in findings):
        passed = sum(f.status == "pass" for f in findings)
        out.append(Line(Level.OK, f"all {plural(passed, 'setting')} read pass the {profile} "
                                  "profile"))
    return out

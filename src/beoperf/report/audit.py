"""The audit document as text: a summary line, one row per finding, the commands that
change what warns or fails (and how to make them persistent), and the socket-buffer
advice when the RTT to a peer was measured."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from beoperf.model.document import Document
from beoperf.report import renderer

MARKS = {"pass": "ok", "warn": "WARN", "fail": "FAIL", "unknown": "?"}  # as tables show them
MAX_COLUMN = 40


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


def summary_line(profile: str, interface: str | None, findings: Sequence[Mapping]) -> str:
    counts = {s: sum(1 for f in findings if f["status"] == s) for s in MARKS}
    parts = ", ".join(f"{n} {s}" for s, n in counts.items())
    return f"profile {profile}, interface {interface or '(none)'}: {parts}"


def table_lines(findings: Sequence[Mapping]) -> list[str]:
    rows = [(MARKS[f["status"]], f["check"], f["key"], show_value(f["value"]), f["reason"])
            for f in findings]
    widths = [max(len(r[i]) for r in rows) for i in range(4)] if rows else [0] * 4
    widths = [min(w, MAX_COLUMN) for w in widths]
    return [" ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) + "  " + r[4]
            for r in rows]


def fix_lines(findings: Sequence[Mapping]) -> list[str]:
    todo = [f for f in findings
            if f["status"] in ("warn", "fail") and (f.get("command") or f.get("persist"))]
    if not todo:
        return []
    lines = ["", "To change (as root):"]
    lines += [f"  {f['command']}" for f in todo if f.get("command")]
    lines += ["", "To make persistent:"]
    lines += [f"  {f['key']}: {f['persist']}" for f in todo if f.get("persist")]
    return lines


def advice_lines(advice: Mapping[str, Any]) -> list[str]:
    out = ["", f"Socket buffers for {advice['rate_bps'] / 1e9:g} Gbit/s:"]
    out += [f"  {line}" for line in advice["arithmetic"]]
    for key, ok in advice["sufficient"].items():
        verdict = "unknown" if ok is None else ("enough" if ok else "too small")
        out.append(f"  {key} = {advice['current'].get(key)}: {verdict}")
    return out + [f"  {line}" for line in advice["commands"]]


@renderer("audit", "text")
def text(doc: Document, **_options: Any) -> str:
    """The summary line, the table, the fixes and the buffer advice."""
    body = doc.body
    findings = body["findings"]
    lines = table_lines(findings) + fix_lines(findings)
    if body.get("buffer_advice"):
        lines += advice_lines(body["buffer_advice"])
    return summary_line(body["profile"], body["interface"], findings) + "\n" + "\n".join(lines)

"""Text of a monitor session (kind "monitor-session"): what the schedule costs before it
starts, the line a running monitor prints, and the line it ends with.

A planned session (``--dry-run``) renders as its cost:

    probes: 20,396 bytes per cycle of 9 s with icmp and IP headers (path MTU 1500) = 2,266.2 B/s (18.13 kbit/s) each way
    share of the 10 Mbit/s link: 0.181%
    budget: 0.2% of 10 Mbit/s = 2,500.0 B/s (22,500 bytes per cycle)

a finished one as why it stopped and what it sent.  This module imports nothing heavy:
a running monitor uses it, and stays small.
"""  # noqa: E501 - the example lines are as printed

from __future__ import annotations

from typing import Any

from beoperf.model.document import Document
from beoperf.model.monitor import SESSION_KIND, MonitorSession, SessionTotals
from beoperf.report import renderer
from beoperf.report.answer import Level, Line, answer
from beoperf.units import format_rate


def cost_lines(found: MonitorSession) -> list[str]:
    """What the schedule costs on the link, with headers, and the budget it must fit."""
    period, per_cycle = found.period_s, found.bytes_per_cycle
    rate = per_cycle / period
    mtu = f"path MTU {found.path_mtu}" + (f" assumed: {found.path_mtu_unknown}"
                                           if found.path_mtu_unknown else "")
    lines = [f"probes: {per_cycle:,} bytes per cycle of {period:g} s with "
             f"{found.transport} and IP headers ({mtu}) = {rate:,.1f} B/s "
             f"({format_rate(rate * 8)}) each way"]
    link = found.link_bps
    if link:
        lines.append(f"share of the {format_rate(link)} link: {100 * rate * 8 / link:.3f}%")
    budget = found.budget
    if budget is not None:
        per_s = budget.bytes_per_s
        lines.append(f"budget: {budget.text} = {per_s:,.1f} B/s "
                     f"({per_s * period:,.0f} bytes per cycle)")
    return lines


def started_line(found: MonitorSession, pid: int) -> str:
    """What a monitor prints once its run is in the database and probing begins."""
    return (f"monitoring {found.host} ({found.address}) over {found.transport}, run "
            f"{found.run_id} in {found.db}; pid {pid}")


def stopped_line(found: MonitorSession) -> str:
    """Why a monitor stopped and what it did."""
    t = found.totals or SessionTotals(0, 0, 0, 0, 0, 0)
    skipped = (f", skipped (late) {t.skipped_cycles} cycle(s) and {t.skipped_probes} "
               "probe(s)") if t.skipped_cycles or t.skipped_probes else ""
    return (f"stopped ({found.stop_reason}): {t.cycles} cycle(s), {t.probes} probe(s), "
            f"{t.answered} answered, {t.bytes:,} bytes sent{skipped}")


@renderer(SESSION_KIND, "text")
def text(doc: Document, **_options: Any) -> str:
    """A planned session: its cost; a finished one: how it ended."""
    found = MonitorSession.from_document(doc)
    if found.status == "planned":
        return "\n".join(cost_lines(found)) + "\n"
    return stopped_line(found) + "\n"


@answer(SESSION_KIND)
def what_is_wrong(doc: Document) -> list[Line]:
    """A monitor that failed, and the share of its probes left unanswered."""
    b = MonitorSession.from_document(doc)
    out = []
    if b.status == "failed":
        out.append(Line(Level.FAIL, f"the monitor failed: {b.stop_reason}"))
    probes, answered = (b.totals.probes, b.totals.answered) if b.totals else (0, 0)
    if probes and answered < probes:
        out.append(Line(Level.WARN, f"{probes - answered:,} of {probes:,} probes were not "
                                    "answered", "beoperf monitor report on its database says "
                                                "when (outages, loss per day)"))
    if not out and b.status == "stopped":
        out.append(Line(Level.OK, f"stopped ({b.stop_reason}); {answered:,} of "
                                  f"{probes:,} probes answered"))
    return out

"""How a ping-pong document of a UDP run (``--udp --rate``) reads: its headline (goodput,
loss, jitter), one row per size, its CSV, and what its answer says about loss.  Used by
the text, CSV and HTML renderers of the ping-pong kind (report/pingpong.py,
report/html/pingpong.py)."""

from __future__ import annotations

import csv
import io

from beoperf.model import jsonvalue
from beoperf.model.pingpong import RunResult, SizeResult
from beoperf.report.answer import Level, Line

LOSS_WARN = 0.01  # a loss above this share of what was sent is a warning in the answer
HEADER = ("size_bytes", "rate_bps", "sent_bps", "goodput_bps", "sent", "received", "lost",
          "loss", "reordered", "duplicates", "jitter_us", "duration_s", "receiver_drops")
TABLE_HEADER = ("size", "rate Mbit/s", "sent Mbit/s", "goodput Mbit/s", "loss", "lost/sent",
                "rcv drops", "reordered", "dup", "jitter us")


def is_udp(run: RunResult) -> bool:
    return run.parameters.get("udp_rate") is not None


def udp_sizes(run: RunResult) -> list[SizeResult]:
    return [s for s in run.sizes if s.udp]


def _mbit(value: float | None) -> str:
    return f"{value / 1e6:.2f}" if value is not None else "n/a"


def loss_text(figures: dict) -> str:
    loss = jsonvalue.number(figures, "loss")
    return f"{loss * 100:.2f}%" if loss is not None else "n/a"


def drops_text(figures: dict) -> str:
    drops = figures.get("receiver_drops")
    return str(drops) if isinstance(drops, int) else "?"


def headline(run: RunResult) -> str:
    """The answer's figures: at the largest size, goodput, loss and jitter at the rate."""
    sizes = udp_sizes(run)
    rate = jsonvalue.number(run.parameters, "udp_rate")
    if not sizes:
        return f"UDP at {_mbit(rate)} Mbit/s: no size measured"
    s = sizes[-1]
    f = s.udp or {}
    return (f"UDP at {_mbit(rate)} Mbit/s, {s.size} B datagrams: goodput "
            f"{_mbit(jsonvalue.number(f, 'goodput_bps'))} Mbit/s, loss {loss_text(f)} "
            f"({f.get('lost')} of {f.get('sent')}), jitter "
            f"{jsonvalue.number(f, 'jitter_us') or 0.0:.1f} us (RFC 3550)")


def table_rows(run: RunResult) -> list[list[str]]:
    rows = []
    for s in udp_sizes(run):
        f = s.udp or {}
        rows.append([str(s.size), _mbit(jsonvalue.number(f, "rate_bps")),
                     _mbit(jsonvalue.number(f, "sent_bps")),
                     _mbit(jsonvalue.number(f, "goodput_bps")), loss_text(f),
                     f"{f.get('lost')}/{f.get('sent')}", drops_text(f), str(f.get("reordered")),
                     str(f.get("duplicates")), f"{jsonvalue.number(f, 'jitter_us') or 0.0:.1f}"])
    return rows


def text_lines(run: RunResult) -> list[str]:
    """The headline, then the table of sizes (aligned), indented as the summary is."""
    out = [f"  udp        {headline(run)}"]
    if not udp_sizes(run):
        return out
    rows = [list(TABLE_HEADER), *table_rows(run)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(TABLE_HEADER))]
    out += ["  " + "  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    out.append("  (loss: lost / sent from sequence numbers, rcv drops those the receiving "
               "socket dropped; goodput: the distinct datagrams' bytes over the receiver's "
               "first-to-last arrival)")
    return out


def csv_text(run: RunResult) -> str:
    """One row per size of the UDP figures."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(HEADER)
    for s in udp_sizes(run):
        f = s.udp or {}
        writer.writerow([s.size, *("" if f.get(k) is None else f.get(k) for k in HEADER[1:])])
    return buf.getvalue()


def answer_lines(run: RunResult) -> list[Line]:
    """A warning for each size that lost more than LOSS_WARN of what it sent, and for each
    whose receiving socket dropped datagrams (the receiver's loss, not the network's)."""
    out = []
    for s in udp_sizes(run):
        f = s.udp or {}
        drops = f.get("receiver_drops")
        if isinstance(drops, int) and drops > 0:
            out.append(Line(Level.WARN, f"UDP {s.size} B: {drops} of the {f.get('lost')} "
                                        "datagrams lost were dropped by the receiving socket "
                                        "(its buffer full: the server fell behind), not by "
                                        "the network",
                            "measure again on a quieter receiver, or at a lower rate"))
        loss = jsonvalue.number(f, "loss")
        if loss is not None and loss > LOSS_WARN:
            out.append(Line(Level.WARN, f"UDP loss {loss * 100:.1f}% at {s.size} B and "
                                        f"{_mbit(jsonvalue.number(f, 'rate_bps'))} Mbit/s "
                                        f"(goodput {_mbit(jsonvalue.number(f, 'goodput_bps'))})",
                            "the path or the receiver does not carry this rate: lower "
                            "--rate to find the rate it carries without loss"))
    return out

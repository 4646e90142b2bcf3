"""The HTML section of a UDP run (``--udp --rate``): the answer's figures first (goodput,
loss and jitter at the largest size), then every size's figures.  Called by the ping-pong
section (report/html/pingpong.py) for a run whose parameters have ``udp_rate``."""

from __future__ import annotations

from beoperf.model import jsonvalue
from beoperf.model.pingpong import RunResult
from beoperf.report.html.markup import Markup, num, table
from beoperf.report.udp import drops_text, loss_text, udp_sizes
from beoperf.units import format_rate


def _key(i: int, path: str) -> str:
    return f"body.sizes.{i}.udp.{path}"


def _rate(value: float | None, key: str) -> Markup:
    return num(value, format_rate(value) if value is not None else "n/a", key)


def headline(run: RunResult) -> Markup:
    """Goodput, loss and jitter at the largest size, and the rate asked and sent."""
    sizes = udp_sizes(run)
    if not sizes:
        return table(["figure"], [], caption="UDP at a rate", empty="No size was measured.")
    i = run.sizes.index(sizes[-1])
    s = sizes[-1]
    f = s.udp or {}
    jitter = jsonvalue.number(f, "jitter_us")
    rows = [("goodput", _rate(jsonvalue.number(f, "goodput_bps"), _key(i, "goodput_bps")),
             "the distinct datagrams' bytes over the receiver's first-to-last arrival"),
            ("loss", num(jsonvalue.number(f, "loss"), loss_text(f), _key(i, "loss")),
             f"{f.get('lost')} of {f.get('sent')} datagrams lost (sequence numbers), "
             f"{drops_text(f)} of them dropped by the receiving socket; "
             f"{f.get('reordered')} reordered, {f.get('duplicates')} duplicated"),
            ("jitter", num(jitter, f"{jitter or 0.0:.1f} µs", _key(i, "jitter_us")),
             "RFC 3550's estimator over the transit-time differences (as iperf3)"),
            ("rate", _rate(jsonvalue.number(f, "rate_bps"), _key(i, "rate_bps")),
             "asked for; sent: " + (format_rate(jsonvalue.number(f, "sent_bps") or 0.0))
             + f" for {jsonvalue.number(f, 'duration_s') or 0:g} s")]
    return table(["figure", "value", "how"], rows, cls="headline",
                 caption=f"UDP at a set rate, {s.size} B datagrams (the largest size)")


def size_table(run: RunResult) -> Markup:
    rows = []
    for i, s in enumerate(run.sizes):
        f = s.udp or {}
        rows.append([s.size, _rate(jsonvalue.number(f, "rate_bps"), _key(i, "rate_bps")),
                     _rate(jsonvalue.number(f, "sent_bps"), _key(i, "sent_bps")),
                     _rate(jsonvalue.number(f, "goodput_bps"), _key(i, "goodput_bps")),
                     num(jsonvalue.number(f, "loss"), loss_text(f), _key(i, "loss")),
                     f.get("sent"), f.get("lost"), drops_text(f), f.get("reordered"),
                     f.get("duplicates"),
                     f"{jsonvalue.number(f, 'jitter_us') or 0.0:.1f}"])
    return table(["size B", "rate", "sent", "goodput", "loss", "datagrams", "lost",
                  "receiver drops", "reordered", "duplicates", "jitter µs"], rows,
                 numeric=range(0, 11),
                 caption="Every size: one trial of datagrams at the rate")

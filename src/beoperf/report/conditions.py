"""The conditions around a run (``meta.conditions``, beoperf.sysinfo.around) as text lines:
the machine's load and busiest other processes, and what the network counters gained.

Read leniently: a document may be crafted or older than the block (no lines then)."""

from __future__ import annotations

from typing import Any

from beoperf.sysinfo import counters

NAME_CHARS = 32


def _load(moment: Any) -> str | None:
    loads = moment.get("load") if isinstance(moment, dict) else None
    if not (isinstance(loads, list) and loads and isinstance(loads[0], int | float)):
        return None
    return f"{loads[0]:.2f}"


def _busiest(moment: Any) -> str:
    found = moment.get("busiest") if isinstance(moment, dict) else None
    out = []
    for p in found if isinstance(found, list) else []:
        name, share = (p.get("name"), p.get("cpu_percent")) if isinstance(p, dict) else (0, 0)
        if isinstance(name, str) and isinstance(share, int | float) and share >= 1:
            clean = "".join(c if c.isprintable() else "?" for c in name)[:NAME_CHARS]
            out.append(f"{clean} {share:.0f}%")
    return ", ".join(out[:3]) or "none above 1% of a CPU"


def machine_line(block: dict[str, Any]) -> str | None:
    """'load 1.68 at the start, 1.70 at the end (2 CPUs); busiest others ...'."""
    start, end = block.get("start"), block.get("end")
    first, last = _load(start), _load(end)
    if first is None and last is None:
        return None
    cpus = end.get("cpus") if isinstance(end, dict) else None
    text = (f"load {first or '?'} at the start, {last or '?'} at the end"
            + (f" ({cpus} CPUs)" if isinstance(cpus, int) else "")
            + f"; busiest others at the start: {_busiest(start)}; at the end: {_busiest(end)}")
    if block.get("dedicated") is False:
        text += "; not dedicated"
    return text


def network_line(network: Any) -> str | None:
    """What the counters gained, or that nothing was lost (and what was watched)."""
    if not isinstance(network, dict):
        return None
    grown = counters.nonzero(network)
    if grown:
        return "; ".join(grown)
    watched = network.get("watched")
    nics = watched.get("interfaces") if isinstance(watched, dict) else None
    qdiscs = watched.get("qdiscs") if isinstance(watched, dict) else None
    sock, peer = network.get("socket_retransmissions"), network.get("peer_socket_retransmissions")
    parts = ["no retransmission on either end's data socket" if sock == 0 and peer == 0 else
             "no retransmission on this end's data socket" if sock == 0 else
             "the data sockets' retransmissions not known"]
    parts.append("no drops or errors" + (f" on {len(nics)} interface(s)"
                                         if isinstance(nics, list) else "")
                 + (f" and {qdiscs} qdisc(s)" if isinstance(qdiscs, int) else ""))
    return ", ".join(p for p in parts if p)


def text_lines(meta: dict[str, Any], indent: str = "  ") -> list[str]:
    """The lines of a document's conditions, each led by its label."""
    block = meta.get("conditions")
    if not isinstance(block, dict):
        return []
    out = []
    machine = machine_line(block)
    if machine:
        out.append(f"{indent}machine    {machine}")
    network = network_line(block.get("network"))
    if network:
        out.append(f"{indent}network    {network}")
    return out


def warnings_of(meta: dict[str, Any]) -> list[str]:
    """The warnings the conditions gave, as stored (for the WARN lines on stderr)."""
    block = meta.get("conditions")
    found = block.get("warnings") if isinstance(block, dict) else None
    return [w for w in found if isinstance(w, str)] if isinstance(found, list) else []


__all__ = ["machine_line", "network_line", "text_lines", "warnings_of"]

"""What the network lost around a run: TCP retransmissions, NIC drops and errors, qdisc drops.

A run during which the kernel retransmitted segments or something dropped packets measured
the recovery as well as the link (too much interrupt coalescing: drops, then
retransmissions), so every ping-pong, stream and MPI run records these counters before
and after and keeps the differences: the host's TCP counters (``/proc/net/snmp`` and
``/proc/net/netstat``), each interface's drop and error counters
(``/sys/class/net/*/statistics``), each qdisc's drops (``tc -s -j qdisc show``: a shaper
such as tbf or netem drops there, not in the NIC) and, where the engine has its data
socket, that socket's own retransmissions (``tcpi_total_retrans`` of TCP_INFO).

Every read is bounded; a counter that cannot be read, or a text that does not parse, is
left out, never an error: the counters must not cost the measurement.
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from beoperf import safeio, sysinfo

# the host's TCP counters kept, by (table, name) as /proc/net/snmp and netstat spell them
HOST_TCP = (("Tcp", "RetransSegs"), ("TcpExt", "TCPLostRetransmit"),
            ("TcpExt", "TCPTimeouts"), ("TcpExt", "TCPFastRetrans"))
NIC_COUNTERS = ("rx_dropped", "tx_dropped", "rx_errors", "tx_errors")
MAX_PROC_NET = 256 * 1024  # /proc/net/netstat is a few KB
MAX_SYSFS = 4096  # a sysfs attribute is at most a page
MAX_LINES = 512
MAX_FIELDS = 1024
MAX_INTERFACES = 64
MAX_QDISCS = 256
MAX_NAME = 64
TCP_INFO_LEN = 104  # through tcpi_total_retrans
TOTAL_RETRANS = struct.Struct("=I")  # struct tcp_info's tcpi_total_retrans, at byte 100
TOTAL_RETRANS_AT = 100


def _read(path: str, limit: int) -> str | None:
    """A small kernel file's text, or None when it cannot be read or is too long."""
    try:
        return safeio.read_text(path, limit, "a kernel counter file")
    except (safeio.FileInputError, UnicodeDecodeError, OSError):
        return None


def _count(text: str) -> int | None:
    """A non-negative integer counter, or None."""
    text = text.strip()
    return int(text) if text.isdigit() and len(text) <= 20 else None


def parse_proc_net(text: str) -> dict[tuple[str, str], int]:
    """The counters of a /proc/net/snmp or /proc/net/netstat text, by (table, name):
    each table is a header line ``Tcp: Name Name ...`` followed by a line of the same
    prefix holding the values.  Lines that do not pair up, or values that are not
    counters, are left out."""
    out: dict[tuple[str, str], int] = {}
    lines = text.splitlines()[:MAX_LINES]
    for head, values in zip(lines, lines[1:], strict=False):
        names, counts = head.split()[:MAX_FIELDS], values.split()[:MAX_FIELDS]
        if len(names) < 2 or len(names) != len(counts) or names[0] != counts[0] \
                or not names[0].endswith(":") or names[1].lstrip("-").isdigit():
            continue
        table = names[0][:-1]
        for name, value in zip(names[1:], counts[1:], strict=True):
            number = _count(value)
            if number is not None:
                out[(table, name)] = number
    return out


def host_tcp(proc: str = "/proc") -> dict[str, int]:
    """The host's TCP retransmission counters (of this network namespace)."""
    found: dict[tuple[str, str], int] = {}
    for name in ("snmp", "netstat"):
        text = _read(os.path.join(proc, "net", name), MAX_PROC_NET)
        if text is not None:
            found.update(parse_proc_net(text))
    return {name: found[(table, name)] for table, name in HOST_TCP if (table, name) in found}


def _interface_names(sys_root: str) -> list[str]:
    try:
        names = sorted(os.listdir(os.path.join(sys_root, "class", "net")))
    except OSError:
        return []
    return [n for n in names if 0 < len(n) <= 15 and "/" not in n and n.isprintable()
            ][:MAX_INTERFACES]


def interface_counters(sys_root: str = "/sys") -> dict[str, dict[str, int]]:
    """Each interface's drop and error counters (at most MAX_INTERFACES interfaces)."""
    out: dict[str, dict[str, int]] = {}
    for name in _interface_names(sys_root):
        stats = os.path.join(sys_root, "class", "net", name, "statistics")
        counters = {}
        for counter in NIC_COUNTERS:
            text = _read(os.path.join(stats, counter), MAX_SYSFS)
            value = _count(text) if text is not None else None
            if value is not None:
                counters[counter] = value
        if counters:
            out[name] = counters
    return out


def _name(value: Any) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= MAX_NAME \
        and value.isprintable() else None


def parse_qdiscs(text: str) -> dict[str, int]:
    """Each qdisc's drops from ``tc -s -j qdisc show``, keyed "DEV KIND HANDLE" (and
    "parent P" for a child: an mq's queues share a handle); entries without a device,
    kind or counter of the expected types are left out."""
    try:
        found = safeio.parse_json(text, "tc -s -j qdisc show", max_depth=16)
    except ValueError:
        return {}
    out: dict[str, int] = {}
    for entry in found[:MAX_QDISCS] if isinstance(found, list) else []:
        if not isinstance(entry, dict):
            continue
        dev, kind, handle, parent = (_name(entry.get(k))
                                     for k in ("dev", "kind", "handle", "parent"))
        drops = entry.get("drops")
        if dev and kind and isinstance(drops, int) and not isinstance(drops, bool) \
                and drops >= 0:
            key = f"{dev} {kind} {handle or '?'}" + (f" parent {parent}" if parent else "")
            out[key] = drops
    return out


def qdisc_drops() -> dict[str, int]:
    """Each qdisc's drops now (empty when tc is missing or fails)."""
    text = sysinfo.qdisc_stats_json()
    return parse_qdiscs(text) if text is not None else {}


def socket_retransmissions(sock: socket.socket | None) -> int | None:
    """The segments a TCP socket retransmitted over its life (TCP_INFO), or None."""
    if sock is None:
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_LEN)
    except (OSError, ValueError):
        return None
    if len(info) < TOTAL_RETRANS_AT + TOTAL_RETRANS.size:
        return None
    return int(TOTAL_RETRANS.unpack_from(info, TOTAL_RETRANS_AT)[0])


@dataclass
class Snapshot:
    """The counters at one moment."""

    tcp: dict[str, int] = field(default_factory=dict)
    interfaces: dict[str, dict[str, int]] = field(default_factory=dict)
    qdiscs: dict[str, int] = field(default_factory=dict)


def snapshot(proc: str = "/proc", sys_root: str = "/sys") -> Snapshot:
    """The host's TCP, interface and qdisc counters now."""
    return Snapshot(host_tcp(proc), interface_counters(sys_root), qdisc_drops())


def _grown(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """after - before for counters in both that did not go back (a reset or a new
    interface is not a difference)."""
    return {k: after[k] - before[k] for k in after if k in before and after[k] >= before[k]}


def delta(before: Snapshot, after: Snapshot, sockets: int | None = None,
          used: Collection[str] | None = None, peer: int | None = None) -> dict[str, Any]:
    """What grew between two snapshots: the host's TCP counters (every one, zeros too),
    the interfaces' and qdiscs' counters that grew (with what was watched, so that an
    absent entry reads as zero), the data sockets' retransmissions (``sockets`` this
    end's, ``peer`` the other end's as it said) and the interfaces the run used
    (``used``), each when known."""
    interfaces = {}
    for name, counters in after.interfaces.items():
        grown = {k: v for k, v in _grown(before.interfaces.get(name, {}), counters).items()
                 if v}
        if grown:
            interfaces[name] = grown
    return {"tcp": _grown(before.tcp, after.tcp),
            "socket_retransmissions": sockets,
            "peer_socket_retransmissions": peer,
            "interfaces": interfaces,
            "qdisc_drops": {k: v for k, v in _grown(before.qdiscs, after.qdiscs).items() if v},
            "used_interfaces": sorted(used) if used is not None else None,
            "watched": {"interfaces": sorted(set(before.interfaces) & set(after.interfaces)),
                        "qdiscs": len(set(before.qdiscs) & set(after.qdiscs))}}


def _items(network: dict[str, Any], key: str) -> list[tuple[str, Any]]:
    found = network.get(key)
    return list(found.items()) if isinstance(found, dict) else []


def split(network: Any) -> tuple[list[str], list[str]]:
    """The differences that are not zero, as short phrases ("3 TCP retransmission(s) on
    the data socket", "qdisc veth0 tbf 1: dropped 12"), from a stored block read
    leniently: (the run's own: its data socket, and the drops and errors of the
    interfaces it used, all of them when those are not known; the host's others)."""
    if not isinstance(network, dict):
        return [], []
    used = network.get("used_interfaces")
    ours = (lambda nic: True) if not isinstance(used, list) else (lambda nic: nic in used)
    own, other = [], []
    sock = network.get("socket_retransmissions")
    if _positive(sock):
        own.append(f"{sock} TCP retransmission(s) on the data socket")
    peer = network.get("peer_socket_retransmissions")
    if _positive(peer):
        own.append(f"{peer} TCP retransmission(s) on the peer's data socket")
    other += [f"host TCP {_safe(name)} +{value}" for name, value in _items(network, "tcp")
              if _positive(value)]
    for nic, counters in _items(network, "interfaces"):
        for name, value in counters.items() if isinstance(counters, dict) else ():
            if _positive(value):
                (own if ours(nic) else other).append(f"{_safe(nic)} {_safe(name)} +{value}")
    for key, value in _items(network, "qdisc_drops"):
        if _positive(value):
            (own if ours(str(key).split(" ")[0]) else other).append(
                f"qdisc {_safe(key)} dropped {value}")
    return own, other


def nonzero(network: Any) -> list[str]:
    """Every difference that is not zero, as a short phrase (``split``: the run's first)."""
    own, other = split(network)
    return own + other


def notes(network: Any) -> list[str]:
    """What a run's document says of the counters that grew: a warning when its data
    socket retransmitted, or an interface it used (any, when not known) or its qdisc
    dropped; a note when only counters of the host grew (the host's TCP counters count
    every connection, and an interface the run did not use is another's traffic)."""
    own, other = split(network)
    if own:
        return ["the network lost packets during the run: " + "; ".join(own)
                + (f" (also on the host: {'; '.join(other)})" if other else "")]
    if not other:
        return []
    whose = ("not on this run's data socket: other connections of the host"
             if network.get("socket_retransmissions") == 0 else
             "this run's connections or others of the host (the run's own sockets "
             "cannot be told apart)")
    return [f"note: counters of the host grew during the run ({'; '.join(other)}): {whose}"]


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _safe(text: Any) -> str:
    """A stored name as printable text (a document may be crafted)."""
    return "".join(c if c.isprintable() else "?" for c in str(text))[:MAX_NAME]


__all__ = ["Snapshot", "delta", "host_tcp", "interface_counters", "nonzero", "notes", "split",
           "parse_proc_net", "parse_qdiscs", "qdisc_drops", "snapshot", "socket_retransmissions"]

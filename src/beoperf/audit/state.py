"""The settings of this end that a tuning procedure or a study may change, read cheaply.

Two runs belong to one setup (``beoperf.sweep.history``: whose spread between runs
widens the other's intervals) only if nothing that ``tune`` or a study changes differs
between them; otherwise a before-and-after of a tuning change would land in one mixed
history.  So a run reads, through the audit's own read-only checks, the values those
change: the sysctls tune may write (socket buffer limits and defaults, tcp_rmem/wmem,
busy_read/busy_poll, congestion control, timestamps, SACK, backlog ...), the interface's
interrupt coalescing, offloads, rings and pause settings (ethtool), irqbalance's state,
the firewall (its backend and rule counts per table and chain, iptables and nftables),
the CPU frequency governor, C-states and transparent huge pages.  The MTU is in the
setup already (``suites.pingpong.history_setup``).

Left out, because they move by themselves and would make every run a new setup: the
connection-tracking count, the interrupts' CPU affinities (irqbalance rewrites them),
the kernel's cpufreq state.  A value that cannot be read counts as None (unprivileged,
or no ethtool): stable from run to run as long as the reason is.

Reading costs file reads and a few short commands (ethtool -c/-k/-g/-a, systemctl,
iptables-save, nft), each bounded by the audit's tool timeout; nothing here raises:
a check that fails counts as unread.
"""

from __future__ import annotations

import hashlib
import json

from beoperf.audit import checks
from beoperf.audit.base import Check, Unknown
from beoperf.model.document import JsonObject, JsonValue

# every check whose keys tune can set, and those a study may change by other means
CHECKS: tuple[type[Check], ...] = (checks.Sysctls, checks.Coalescing, checks.Offloads,
                                   checks.Rings, checks.Pause, checks.Irqbalance,
                                   checks.Firewall, checks.CpuFreq, checks.CStates,
                                   checks.Thp)
MOVING = frozenset({"conntrack.count"})  # counts that change without anyone changing them
MAX_KEYS = 4096  # a firewall of thousands of chains is summed, not listed
MAX_TEXT = 200  # characters of one value


def _value(value: object) -> JsonValue:
    """A fact as the digest takes it: unread -> None; text cut to MAX_TEXT."""
    if isinstance(value, Unknown):
        return None
    if isinstance(value, str):
        return value[:MAX_TEXT]
    if isinstance(value, bool | int | float) or value is None:
        return value
    if isinstance(value, list | tuple):
        return [_value(v) for v in value[:16]]
    return str(value)[:MAX_TEXT]


def settings(interface: str | None) -> JsonObject:
    """key -> value of every setting above (None where it could not be read), for the
    interface ``interface`` (None: the interface checks read nothing)."""
    out: JsonObject = {}
    for cls in CHECKS:
        try:
            facts = cls(interface).collect()
        except Exception:  # noqa: BLE001 - a check that fails counts as unread
            facts = {f"{cls.name}.unread": True}
        for key, value in facts.items():
            if key not in MOVING and len(out) < MAX_KEYS:
                out[key] = _value(value)
    return out


def digest(values: JsonObject) -> str:
    """16 hex digits of the sorted values: equal settings give equal digests."""
    text = json.dumps(values, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]

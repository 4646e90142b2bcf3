"""Factors by name: what a study may change, one file each (see ``factors/base.py``).

``BUILTIN`` is the literal table of every factor's module (tests/test_architecture.py reads
it, as it reads ``engines.BUILTIN``); a module is imported only when its factor is asked
for, so that the agent on a host loads only what its plan names.
"""

from __future__ import annotations

import importlib

from beoperf import errors
from beoperf.audit.base import quoted
from beoperf.factors.base import DEFAULT, Context, Factor, FactorError, Level
from beoperf.model.study_rollback import SavedFactor, StudyRollback

__all__ = ["BUILTIN", "Context", "DEFAULT", "Factor", "FactorError", "Level", "get", "names",
           "checked_entries", "from_change", "CHANGE_FACTORS"]

# the audit check that owns a change tune would make -> the factor that makes it in a study
CHANGE_FACTORS = {"sysctl": "sysctl", "interface": "mtu", "coalesce": "ethtool",
                  "offloads": "ethtool", "pause": "ethtool", "rings": "ethtool"}

# name -> module that defines it (its class has that name)
BUILTIN: dict[str, str] = {
    "mtu": "beoperf.factors.mtu",
    "sysctl": "beoperf.factors.sysctl",
    "buffers": "beoperf.factors.sockbuf",
    "sockbuf": "beoperf.factors.sockbuf",
    "sndbuf": "beoperf.factors.sockbuf",
    "rcvbuf": "beoperf.factors.sockbuf",
    "congestion": "beoperf.factors.congestion",
    "ethtool": "beoperf.factors.ethtool",
    "irqbalance": "beoperf.factors.irqbalance",
    "firewall": "beoperf.factors.firewall",
    "governor": "beoperf.factors.governor",
    "mpienv": "beoperf.factors.mpienv",
    "np": "beoperf.factors.np",
    "transport": "beoperf.factors.transport",
}


def names() -> list[str]:
    """Every factor's name, sorted."""
    return sorted(BUILTIN)


def get(name: str) -> Factor:
    """A factor by name; BadSpec naming the factors there are when it is unknown."""
    module = BUILTIN.get(name)
    if module is None:
        raise errors.BadSpec(f"no factor {name!r} (factors: {', '.join(names())})")
    found = importlib.import_module(module)
    for value in vars(found).values():
        if isinstance(value, type) and issubclass(value, Factor) and value.name == name \
                and value.__module__ == module:
            return value()
    raise FactorError(f"{module} defines no factor {name!r}")


def checked_entries(rollback: StudyRollback) -> list[tuple[Factor, SavedFactor]]:
    """Every entry of a study's rollback file with its factor, in restore order (the
    reverse of the apply order), each checked before anything is restored: a known host
    factor, its own apply order, a snapshot its ``check_saved`` accepts, and files listed
    in the rollback's ``files`` with the same sha256.  FactorError naming the first bad
    entry: a file that fails here restores nothing."""
    listed = {(f.name, f.sha256) for f in rollback.files}
    out = []
    for i, entry in enumerate(rollback.entries):
        where = f"entry {i + 1} ({quoted(entry.factor)})"
        try:
            factor = get(entry.factor)
        except errors.BadSpec as exc:
            raise FactorError(f"{where}: {exc}") from None
        if factor.scope != "host" or entry.order != factor.order:
            raise FactorError(f"{where}: not a host factor applied at order {entry.order}")
        try:
            factor.check_saved(entry.saved)
            files = factor.files(entry.saved)
        except FactorError as exc:
            raise FactorError(f"{where}: {exc}") from None
        missing = [f["name"] for f in files if (f["name"], f["sha256"]) not in listed]
        if missing:
            raise FactorError(f"{where}: {quoted(missing[0])} is not among the files listed "
                              "with their sha256")
        out.append((factor, entry))
    return sorted(out, key=lambda pair: pair[1].order, reverse=True)


def from_change(check: str, key: str, target: str) -> tuple[str, Level] | None:
    """A change the audit would make (``audit.tune.Change``'s check, key and target) as a
    study's factor and level, e.g. ("sysctl", "net.ipv4.tcp_sack", "0") -> ("sysctl",
    Level("net.ipv4.tcp_sack=0", ...)); None for a check no factor wraps.  BadSpec when
    the factor refuses the level (the same allow-list)."""
    name = CHANGE_FACTORS.get(check)
    if name is None:
        return None
    text = target if name == "mtu" else f"{key}={target}"
    return name, get(name).parse([text])[0]

"""Factors by name: what a study may change, one file each (see ``factors/base.py``).

``BUILTIN`` is the literal table of every factor's module (tests/test_architecture.py reads
it, as it reads ``engines.BUILTIN``); a module is imported only when its factor is asked
for, so that the agent on a host loads only what its plan names.
"""

from __future__ import annotations

import importlib

from beoperf import errors
from beoperf.factors.base import DEFAULT, Context, Factor, FactorError, Level

__all__ = ["BUILTIN", "Context", "DEFAULT", "Factor", "FactorError", "Level", "get", "names"]

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

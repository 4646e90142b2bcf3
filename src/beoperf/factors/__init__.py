"""STAND-IN registry until P2 lands (PLAN27 1.2)."""

from __future__ import annotations

import importlib

from beoperf import errors
from beoperf.factors.base import Factor

BUILTIN = {"noop": "beoperf.factors.noop"}


def names() -> list[str]:
    return sorted(BUILTIN)


def get(name: str) -> Factor:
    module = BUILTIN.get(name)
    if module is None:
        raise errors.BadSpec(f"unknown factor {name!r}: choose {', '.join(names())}")
    mod = importlib.import_module(module)
    cls = next(v for v in vars(mod).values()
               if isinstance(v, type) and issubclass(v, Factor) and v is not Factor
               and v.__module__ == module)
    return cls()

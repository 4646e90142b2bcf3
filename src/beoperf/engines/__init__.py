"""Transports by name: the registry `--transport` reads.

A transport is a class implementing ``engines.base.Transport``, registered under its
name with ``@register("name")``; suites and the sweep build one with
``get(name)(peer, params, timeout=...)``.  Importing this package registers the built-in
transports by name; the module of each is imported only when it is first asked for, so
that a process that needs only the echo code (``beoperf monitor``) does not load numpy and
the C loops.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from beoperf import errors
from beoperf.engines.base import MODES, Peer, Transport, TransportError, Trial

__all__ = ["MODES", "Peer", "Transport", "TransportError", "Trial", "get", "names", "register"]

# name -> module that registers it
BUILTIN: dict[str, str] = {"tcp": "beoperf.engines.tcp", "mpi": "beoperf.engines.mpi"}
TRANSPORTS: dict[str, type[Transport]] = {}


def register(name: str) -> Callable[[type[Transport]], type[Transport]]:
    """Class decorator: make the transport known as `name` (its `name` attribute too).
    A name taken by another class (a built-in's, say) is refused with ValueError."""

    def deco(cls: type[Transport]) -> type[Transport]:
        taken, owner = TRANSPORTS.get(name), BUILTIN.get(name)
        if (taken is not None and where(taken) != where(cls)) or (
                owner is not None and cls.__module__ != owner):
            raise ValueError(f"transport name {name!r} is already taken")
        cls.name = name
        TRANSPORTS[name] = cls
        return cls

    return deco


def where(cls: type) -> tuple[str, str]:
    return cls.__module__, cls.__qualname__


def names() -> list[str]:
    """The names of every known transport, built-in or registered, sorted."""
    return sorted(set(BUILTIN) | set(TRANSPORTS))


def get(name: str) -> type[Transport]:
    """The transport class registered as `name`; errors.BadSpec naming the known ones."""
    if name not in TRANSPORTS and name in BUILTIN:
        importlib.import_module(BUILTIN[name])
    try:
        return TRANSPORTS[name]
    except KeyError:
        raise errors.BadSpec(f"unknown transport {name!r}",
                             f"known transports: {', '.join(names())}") from None

"""Launchers: "run this command on these hosts, N ranks per host" as argv and environment.

A launcher is one small class registered by name (as ReFrame registers its launchers):
``available()`` says whether this machine can use it, ``command(spec)`` turns a
:class:`LaunchSpec` into a :class:`Launch` (the full argv to run here, and the variables
to add to its environment).  Nothing is run by ``command``: suites run the argv (or, for
the ClusterShell fan-out, call :func:`beoperf.launch.remote.run`).  A spec a launcher
cannot express (an agent for srun, several ranks for a fan-out ...) is a ValueError that
says why, never silently dropped.

A new launcher is one module in ``beoperf/launch/`` with a class decorated by
``@register("<name>")``; :func:`get` finds it.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar

BINDINGS = ("none", "core", "socket")  # process binding every launcher understands


@dataclass(frozen=True)
class LaunchSpec:
    """What to run and where.

    ``argv``: the command (a word list, never a shell string); ``hosts``: the hosts (empty:
    here, or the current allocation for srun); ``ranks_per_host``: processes per host;
    ``env``: variables every process gets; ``bind``: CPU binding (none, core, socket);
    ``agent``: how to reach a host (an ssh-like command, e.g. "ssh -p 2222"; for the
    ClusterShell fan-out also a template with %h, e.g. "ip netns exec %h");
    ``interface``: the network interface MPI traffic must use; ``extra``: options passed
    to the launcher as they are, before the command.
    """

    argv: tuple[str, ...]
    hosts: tuple[str, ...] = ()
    ranks_per_host: int = 1
    env: Mapping[str, str] = field(default_factory=dict)
    bind: str = "none"
    agent: str | None = None
    interface: str | None = None
    extra: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.argv or not all(isinstance(a, str) and a for a in self.argv):
            raise ValueError("a launch needs a command: argv of non-empty strings")
        if not isinstance(self.ranks_per_host, int) or self.ranks_per_host < 1:
            raise ValueError(f"ranks per host must be at least 1 (got {self.ranks_per_host!r})")
        if self.bind not in BINDINGS:
            raise ValueError(f"bind {self.bind!r}: choose {', '.join(BINDINGS)}")
        bad = [k for k in self.env if not k.isidentifier()]
        if bad:
            raise ValueError(f"environment variable name {bad[0]!r} is not a valid name")

    @property
    def ranks(self) -> int:
        """Processes in all: ranks per host times hosts (one host when none is named)."""
        return self.ranks_per_host * max(1, len(self.hosts))


@dataclass(frozen=True)
class Launch:
    """The argv to run on this machine, and the variables to add to its environment."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)


class Launcher(ABC):
    """One way of starting processes on hosts."""

    name: ClassVar[str] = "launcher"

    @abstractmethod
    def available(self) -> bool:
        """Whether this machine can launch this way (the tool is installed ...)."""

    @abstractmethod
    def command(self, spec: LaunchSpec) -> Launch:
        """The argv and environment that run ``spec``; ValueError if this launcher cannot
        express it."""


def refuse(spec: LaunchSpec, launcher: str, **allowed: object) -> None:
    """ValueError naming the first field of ``spec`` this launcher cannot honour: each
    keyword is a field and the only value it accepts."""
    for name, only in allowed.items():
        value = getattr(spec, name)
        if value != only:
            raise ValueError(f"the {launcher} launcher cannot honour {name}={value!r}")


LAUNCHERS: dict[str, type[Launcher]] = {}
BUILT_IN = ("beoperf.launch.local", "beoperf.launch.clush", "beoperf.launch.mpirun",
            "beoperf.launch.srun")


def register(name: str) -> Callable[[type[Launcher]], type[Launcher]]:
    """Class decorator: make a launcher known by ``name``."""

    def deco(cls: type[Launcher]) -> type[Launcher]:
        cls.name = name
        LAUNCHERS[name] = cls
        return cls

    return deco


def _load_built_in() -> None:
    for module in BUILT_IN:
        importlib.import_module(module)


def names() -> list[str]:
    """Every registered launcher's name."""
    _load_built_in()
    return sorted(LAUNCHERS)


def get(name: str) -> Launcher:
    """The launcher registered as ``name``; KeyError (listing the names) if there is none."""
    _load_built_in()
    try:
        return LAUNCHERS[name]()
    except KeyError:
        raise KeyError(f"no launcher {name!r} (there are {', '.join(sorted(LAUNCHERS))})") \
            from None

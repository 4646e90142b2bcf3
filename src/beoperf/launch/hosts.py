"""Which hosts to run on: a list, a ClusterShell node set, a hostfile, or the Slurm
allocation this process runs in.

Every name is checked before it reaches a launcher's argv: a host name is letters,
digits and ``. _ : -`` (at most 253 characters) and never starts with ``-`` (which
mpirun or srun would read as an option).  A hostfile is read bounded (it may be
crafted): Open MPI's ``host slots=N`` lines, MPICH's ``host:N`` lines and plain names,
``#`` comments; at most MAX_HOSTS hosts.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ClusterShell.NodeSet import NodeSet, NodeSetParseError

from beoperf import safeio
from beoperf.launch.srun import allocation
from beoperf.model import nodeset

MAX_HOSTS = nodeset.MAX_NODES
COMMA = frozenset(",")  # a host list's pieces: names and node sets between commas
MAX_HOSTFILE_BYTES = 4 * 1024 * 1024
_HOST = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._:-]{0,252}")
_NODESET = re.compile(r"[A-Za-z0-9._:\[\],-]+")  # what a node set may hold
_SLOTS = re.compile(r"(?:slots|max_slots|max-slots)=(\d{1,6})")


class HostError(ValueError):
    """Hosts that cannot be used; the message names the source and the name."""


@dataclass(frozen=True)
class Hosts:
    """The hosts, in order (the first gets rank 0), and where they came from."""

    names: tuple[str, ...]
    source: str  # "--hosts", "hostfile PATH", "Slurm allocation JOB", "this host"
    slots: tuple[int | None, ...] = ()


def check(name: str, source: str) -> str:
    """``name`` if it is a usable host name, else HostError."""
    if not _HOST.fullmatch(name):
        shown = name[:60].encode("unicode_escape").decode()
        raise HostError(f"{source}: {shown!r} is not a host name (letters, digits, . _ : -, "
                        "not starting with -)")
    return name


def _counted(pieces: list[str], source: str) -> None:
    """HostError unless the pieces are names and node sets of at most MAX_HOSTS names in
    all, counted from their ranges' ends before anything is expanded."""
    total = 0
    for piece in pieces:
        if not _NODESET.fullmatch(piece):
            check(piece, source)  # says which name is not one
        try:
            total += nodeset.piece_count(piece)
        except nodeset.NodeSetSizeError as exc:
            raise HostError(f"{source}: {piece[:60]!r} is not a node set ({exc})") from None
        if total > MAX_HOSTS:
            raise HostError(f"{source}: over the limit of {MAX_HOSTS} hosts in a node set "
                            f"({total} names counted)")


def expand(text: str, source: str = "--hosts") -> list[str]:
    """A list or ClusterShell node set, in the order given, each name once:
    'node[01-03],login' -> node01, node02, node03, login. Its ranges are counted before
    anything is expanded (n[1-100000000] is refused at once, naming the limit)."""
    pieces = nodeset.pieces(text, COMMA)
    _counted(pieces, source)
    names: list[str] = []
    seen: set[str] = set()
    for piece in pieces:
        try:
            nodes = list(NodeSet(piece)) if "[" in piece else [piece]
        except NodeSetParseError as exc:
            raise HostError(f"{source}: {piece[:60]!r} is not a node set ({exc})") from None
        for node in nodes:
            if node not in seen:
                seen.add(check(node, source))
                names.append(node)
    if not names:
        raise HostError(f"{source}: no host named")
    return names


def parse_hostfile(text: str, source: str) -> Hosts:
    """Open MPI ('host slots=N'), MPICH ('host:N') or plain hostfile lines."""
    names: list[str] = []
    seen: set[str] = set()
    slots: list[int | None] = []
    for number, line in enumerate(text.splitlines(), 1):
        body = line.split("#", 1)[0].strip()
        if not body:
            continue
        first, *rest = body.split()
        name, sep, count = first.partition(":")
        given = int(count) if sep and count.isdigit() else None
        if sep and given is None:
            raise HostError(f"{source}: line {number}: {first[:60]!r} is not host:N")
        for word in rest:
            found = _SLOTS.fullmatch(word)
            if not found:
                raise HostError(f"{source}: line {number}: {word[:40]!r} is not slots=N")
            if word.startswith("slots"):
                given = int(found.group(1))
        check(name, f"{source}: line {number}")
        if name in seen:  # a set: a list's "in" made 65,536 lines take 40 s
            continue
        seen.add(name)
        names.append(name)
        slots.append(given)
        if len(names) > MAX_HOSTS:
            raise HostError(f"{source}: line {number}: over the limit of {MAX_HOSTS} hosts")
    if not names:
        raise HostError(f"{source}: no host in it")
    return Hosts(tuple(names), f"hostfile {source}", tuple(slots))


def read_hostfile(path: str | os.PathLike[str]) -> Hosts:
    """A hostfile, read bounded."""
    text = safeio.read_text(path, MAX_HOSTFILE_BYTES, "a hostfile")
    return parse_hostfile(text, os.fspath(path))


def from_allocation(environ: Mapping[str, str] | None = None) -> Hosts | None:
    """The nodes of the Slurm allocation this process runs in (None outside one)."""
    job = allocation(environ)
    if job is None:
        return None
    names = expand(job.nodelist, f"Slurm allocation {job.job_id} (SLURM_JOB_NODELIST)")
    return Hosts(tuple(names), f"Slurm allocation {job.job_id}")


def resolve(hosts: str | None, hostfile: str | None,
            environ: Mapping[str, str] | None = None) -> Hosts | None:
    """The hosts the user named (--hosts or --hostfile), else the allocation's, else None
    (this host only)."""
    if hosts is not None and hostfile is not None:
        raise HostError("give --hosts or --hostfile, not both")
    if hosts is not None:
        return Hosts(tuple(expand(hosts)), "--hosts")
    if hostfile is not None:
        return read_hostfile(hostfile)
    return from_allocation(environ)

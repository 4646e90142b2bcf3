"""How many names a ClusterShell node set holds, counted from its text before anything
expands it.

ClusterShell's NodeSet holds every name of its ranges: ``n[1-100000000]`` grew to 2.9 GB
in 30 s before beoperf could refuse it. Every node set a user or a document names is
counted here first, arithmetically, and refused past MAX_NODES.  The count is an upper
bound: names given twice, and what ``!``, ``&`` and ``^`` take away, are counted too.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ClusterShell.NodeSet import NodeSet

MAX_NODES = 65536
_GROUP = re.compile(r"\[([^\[\]]*)\]")
_RANGE = re.compile(r"(\d{1,18})(?:-(\d{1,18})(?:/(\d{1,18}))?)?")
_CAP = 10**18  # counts stop growing here: a crafted set may multiply many ranges
_OPERATORS = frozenset(",!&^ \t\n")  # union, difference, intersection, xor; between pieces


class NodeSetSizeError(ValueError):
    """A node set over the limit, or ranges that cannot be counted; the message says which."""


def pieces(text: str, operators: frozenset[str] = _OPERATORS) -> list[str]:
    """Split at the operators outside brackets: 'a,n[1,3-4]!b' -> ['a', 'n[1,3-4]', 'b']
    (``launch.hosts`` splits a host list at its commas alone)."""
    found: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        depth += char == "["
        depth -= char == "]"
        if char in operators and depth == 0:
            found.append("".join(current))
            current = []
        else:
            current.append(char)
    found.append("".join(current))
    return [p.strip() for p in found if p.strip()]


def _range_count(group: str) -> int:
    total = 0
    for part in group.split(","):
        found = _RANGE.fullmatch(part.strip())
        if not found:
            raise NodeSetSizeError(f"[{group[:40]}]: {part.strip()[:20]!r} is not a range "
                                   "(N, N-M or N-M/STEP)")
        low, high, step = found.groups()
        if high is None:
            total += 1
        elif int(high) < int(low) or (step is not None and int(step) == 0):
            raise NodeSetSizeError(f"[{group[:40]}]: {part.strip()!r} is not a range")
        else:
            total += (int(high) - int(low)) // int(step or 1) + 1
    return min(total, _CAP)


def piece_count(piece: str) -> int:
    """Names in one pattern such as 'rack[1-4]-n[01-16]' (the product of its ranges)."""
    count = 1
    for group in _GROUP.findall(piece):
        count = min(count * _range_count(group), _CAP)
    if "[" in _GROUP.sub("", piece) or "]" in _GROUP.sub("", piece):
        raise NodeSetSizeError(f"{piece[:60]!r}: unbalanced brackets")
    return count


def count(text: str) -> int:
    """An upper bound of the names TEXT names, from its ranges' ends (nothing expanded);
    NodeSetSizeError if a range cannot be read."""
    return min(sum(piece_count(p) for p in pieces(text)), _CAP)


def check_size(text: str, source: str, limit: int = MAX_NODES) -> int:
    """count(TEXT) if it is at most LIMIT; NodeSetSizeError naming SOURCE and the limit."""
    try:
        found = count(text)
    except NodeSetSizeError as exc:
        raise NodeSetSizeError(f"{source}: {exc}") from None
    if found > limit:
        many = f"over {_CAP}" if found >= _CAP else str(found)
        raise NodeSetSizeError(f"{source}: {many} names, over the limit of {limit} hosts "
                               "in a node set")
    return found


def parse(text: str, source: str, limit: int = MAX_NODES) -> NodeSet:
    """ClusterShell's NodeSet of TEXT once check_size has counted it; NodeSetSizeError past
    LIMIT, ClusterShell's NodeSetParseError if it is not a node set."""
    from ClusterShell.NodeSet import NodeSet

    check_size(text, source, limit)
    return NodeSet(text)

"""Message buffer pools: how much memory a session's buffers take at each end.

Without ``--nocache`` a pool is two buffers (what is sent and what arrives never share
memory).  With it, consecutive messages walk through a span of memory larger than the
last-level cache (LLC), so that no message finds its cache lines warm.  One span serves
a whole session (every message size), so that it can be stated once per end in the
result.  The ideal span is 1.5 x the LLC plus the largest message (replacement is not
perfect LRU: a span just above the LLC still hits); an end with a memory limit (``serve
--max-memory``) spans at most that limit, and says so when the span then fails to exceed
its LLC, rather than refusing: a server with a 260 MiB LLC and the default 64 MiB limit
still serves no-cache sessions, with a warning that the cache was not defeated.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

MiB = 1024 * 1024
ASSUMED_LLC = 32 * MiB  # when the kernel does not say (containers, some VMs)


class PoolFacts(TypedDict):
    """What an end records about its pool (pool_facts); the span and the LLC it had to
    exceed for a no-cache pool only."""

    nocache: bool
    span_bytes: NotRequired[int]
    llc_bytes: NotRequired[int | None]
    llc_assumed: NotRequired[bool]
    exceeds_llc: NotRequired[bool]


def two_buffers(size: int) -> int:
    """Bytes of a plain pool: two buffers, the first padded to 64 bytes."""
    return (size + 63) // 64 * 64 + size


def ideal_span(max_size: int, llc: int | None) -> int:
    """The no-cache span that defeats a cache of `llc` bytes for messages up to `max_size`."""
    return max(two_buffers(max_size), (3 * (llc or ASSUMED_LLC) + 1) // 2 + max_size)


def nocache_span(max_size: int, llc: int | None, limit: int | None = None) -> int:
    """The span an end uses: the ideal one, or as much of it as `limit` allows
    (never less than two buffers; whether those fit is the caller's check)."""
    span = ideal_span(max_size, llc)
    return span if limit is None else max(two_buffers(max_size), min(span, limit))


def pool_facts(max_size: int, nocache: bool, llc: int | None,
               limit: int | None = None) -> PoolFacts:
    """What an end records about its pool: whether it is a no-cache one, the span it
    uses, the LLC it had to exceed, and whether it does."""
    if not nocache:
        return {"nocache": False}
    span = nocache_span(max_size, llc, limit)
    return {"nocache": True, "span_bytes": span, "llc_bytes": llc,
            "llc_assumed": llc is None, "exceeds_llc": span > (llc or ASSUMED_LLC)}


def span_warning(facts: PoolFacts, max_size: int, who: str) -> str | None:
    """A warning when a no-cache span does not exceed the LLC (None when it does)."""
    if not facts.get("nocache") or facts["exceeds_llc"]:
        return None
    llc = facts["llc_bytes"] or ASSUMED_LLC
    need = ideal_span(max_size, llc)
    return (f"no-cache pool of the {who} spans {mib(facts['span_bytes'])}, not more than its "
            f"{mib(llc)} last-level cache: messages may still be served from the cache; "
            f"'beoperf serve --max-memory {mib_option(need)}' lets it span {mib(need)}")


def mib(n: int) -> str:
    return f"{n / MiB:.1f} MiB" if n % MiB else f"{n // MiB} MiB"


def mib_option(n: int) -> str:
    """A --max-memory value of at least n bytes, in whole MiB."""
    return f"{-(-n // MiB)}M"

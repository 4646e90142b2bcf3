"""Message-size schedules: NetPIPE's rule with perturbation, or explicit sizes."""

from __future__ import annotations

from beoperf import units


def nominal_sizes(start: int, end: int) -> list[int]:
    """start, then every 2^k and 1.5*2^k up to end (NetPIPE's 1, 2, 3, 4, 6, 8, 12, ...)."""
    sizes = {start}
    power = 1
    while power <= end:
        for n in (power, power + power // 2):
            if start <= n <= end:
                sizes.add(n)
        power *= 2
    return sorted(sizes)


def netpipe_schedule(start: int = 1, end: int = 8 * 1024**2, perturbation: int = 3) -> list[int]:
    """NetPIPE's schedule: each nominal size above 4*perturbation also at +-perturbation.

    For the defaults this is exactly the 124 sizes NPtcp measures (1 ... 8388611).
    """
    if start < 0 or end < max(start, 1):
        raise ValueError(f"bad size range {start}..{end}: need 0 <= start <= end, end >= 1")
    if perturbation < 0:
        raise ValueError("perturbation must be >= 0")
    out: set[int] = set()
    for n in nominal_sizes(start, end):
        candidates = (n - perturbation, n, n + perturbation) if n > 4 * perturbation > 0 else (n,)
        out.update(s for s in candidates if s >= 1)
    if start == 0:
        out.add(0)  # an empty message, as IMB and OSU begin
    return sorted(out)


def explicit_schedule(text: str) -> list[int]:
    """'0,8,1024,64K' -> [0, 8, 1024, 65536], sorted, duplicates removed; 0 is an empty
    message (the minimum latency, NetPIPE's, IMB's and OSU's first row)."""
    sizes = sorted({units.parse_size(part, allow_zero=True) for part in text.split(",")
                    if part.strip()})
    if not sizes:
        raise ValueError(f"no usable sizes in {text!r}")
    return sizes

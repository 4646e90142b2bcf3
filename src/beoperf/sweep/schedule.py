"""Message-size schedules: NetPIPE's rule with perturbation, or explicit sizes."""

from __future__ import annotations

import re

_UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "KIB": 1024, "M": 1024**2, "MB": 1024**2,
          "MIB": 1024**2, "G": 1024**3, "GB": 1024**3, "GIB": 1024**3}


def parse_size(text: str) -> int:
    """'64K' -> 65536; binary multiples, as socket buffer and message sizes are quoted."""
    m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).upper() not in _UNITS:
        raise ValueError(f"not a size: {text!r} (use bytes or K/M/G, e.g. 65536 or 64K)")
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


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
    if start < 1 or end < start:
        raise ValueError(f"bad size range {start}..{end}: need 1 <= start <= end")
    if perturbation < 0:
        raise ValueError("perturbation must be >= 0")
    out: set[int] = set()
    for n in nominal_sizes(start, end):
        candidates = (n - perturbation, n, n + perturbation) if n > 4 * perturbation > 0 else (n,)
        out.update(s for s in candidates if s >= 1)
    return sorted(out)


def explicit_schedule(text: str) -> list[int]:
    """'8,1024,64K' -> [8, 1024, 65536], sorted, duplicates removed."""
    sizes = sorted({parse_size(part) for part in text.split(",") if part.strip()})
    if not sizes or sizes[0] < 1:
        raise ValueError(f"no usable sizes in {text!r} (sizes must be >= 1 byte)")
    return sizes

"""One grammar for sizes, rates, times and FLOP/s: every option parses with it, every
renderer formats with it.

Sizes (bytes) are binary, as message sizes, socket buffers and caches are quoted
(NetPIPE, the kernel, ``--sizes``): ``64K`` = ``64KB`` = ``64KiB`` = 65,536 bytes;
``M``/``G``/``T`` likewise (2^20, 2^30, 2^40).  A plain number is bytes.

Rates are SI, as links are sold: ``10G`` = ``10Gbit/s`` = ``10Gb/s`` = ``10gbps`` =
10^10 bit/s; a capital ``B`` means bytes: ``10GB/s`` = ``10GBps`` = 10^10 bytes/s =
8 x 10^10 bit/s.  ``Ki``/``Mi``/``Gi`` prefixes are binary (``1Gibit/s`` = 2^30 bit/s).
A plain number is bit/s.  Rates are returned in bit/s.

Times: a plain number is seconds; ``ns``, ``us`` (or ``µs``), ``ms``, ``s``, ``min``,
``h``, ``d`` suffixes.  Returned in seconds.

Everything parsed must be finite and positive (sizes: >= 0 with ``allow_zero``); every
failure is ValueError with a message that says what was expected.
"""

from __future__ import annotations

import math
import re

KIB = 1024

_SIZE = re.compile(r"\s*(\d+)\s*(?:([kKmMgGtT])(?:i?B)?|B)?\s*")
_SIZE_SCALE = {"": 1, "k": KIB, "m": KIB**2, "g": KIB**3, "t": KIB**4}

_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"
_RATE = re.compile(rf"\s*{_NUMBER}\s*([kKmMgGtT]i?)?(bit/s|bits/s|b/s|bps|bit|B/s|Bps)?\s*")
_SI = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_BINARY = {"ki": 2.0**10, "mi": 2.0**20, "gi": 2.0**30, "ti": 2.0**40}

_TIME = re.compile(rf"\s*{_NUMBER}\s*(ns|us|µs|ms|s|sec|min|m|h|d)?\s*")
_TIME_SCALE = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "": 1.0, "s": 1.0, "sec": 1.0,
               "min": 60.0, "m": 60.0, "h": 3600.0, "d": 86400.0}

MAX_SIZE = 2**62  # bytes: far beyond any memory, small enough for every C integer


def parse_size(text: str, *, allow_zero: bool = False) -> int:
    """'64K' -> 65536 (binary multiples); ValueError if not a size."""
    m = _SIZE.fullmatch(str(text))
    if not m:
        raise ValueError(f"not a size: {text!r} (bytes, or K/M/G/T = 2^10/2^20/2^30/2^40, "
                         "e.g. 65536 or 64K)")
    value = int(m.group(1)) * _SIZE_SCALE[(m.group(2) or "").lower()]
    if value > MAX_SIZE or (value == 0 and not allow_zero):
        raise ValueError(f"size {text!r} is out of range (1 byte .. 4 EiB)")
    return value


def parse_rate(text: str) -> float:
    """'10G', '10Gbit/s' -> 1e10; '10GB/s' -> 8e10 (bytes); bit/s; ValueError if not a rate."""
    m = _RATE.fullmatch(str(text))
    if not m:
        raise ValueError(f"not a rate: {text!r} (bit/s with SI prefixes, e.g. 100M, 10Gbit/s; "
                         "B/s for bytes, e.g. 1.25GB/s)")
    prefix = (m.group(2) or "").lower()
    scale = _BINARY[prefix] if prefix.endswith("i") else _SI[prefix]
    unit = m.group(3) or ""
    value = float(m.group(1)) * scale * (8.0 if unit in ("B/s", "Bps") else 1.0)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"rate {text!r} must be finite and greater than 0")
    return value


def parse_time(text: str) -> float:
    """'500ms' -> 0.5, '2' -> 2.0, '1h' -> 3600.0 (seconds); ValueError if not a time."""
    m = _TIME.fullmatch(str(text))
    if not m:
        raise ValueError(f"not a time: {text!r} (seconds, or with ns/us/ms/s/min/h/d, "
                         "e.g. 0.5 or 500ms)")
    value = float(m.group(1)) * _TIME_SCALE[m.group(2) or ""]
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"time {text!r} must be finite and greater than 0")
    return value


def parse_fraction(text: str) -> float:
    """'0.02' or '2%' -> 0.02; ValueError unless 0 <= value <= 1."""
    body = str(text).strip()
    try:
        value = float(body[:-1]) / 100.0 if body.endswith("%") else float(body)
    except ValueError:
        raise ValueError(f"not a fraction: {text!r} (e.g. 0.02 or 2%)") from None
    if not (math.isfinite(value) and 0 <= value <= 1):
        raise ValueError(f"fraction {text!r} must be between 0 and 1 (0% and 100%)")
    return value


# --------------------------------------------------------------------------- formatting


def _scaled(value: float, steps: tuple[tuple[str, float], ...], digits: int) -> str:
    for unit, scale in steps:
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g} {unit}".rstrip()
    unit, scale = steps[-1]
    return f"{value / scale:.{digits}g} {unit}".rstrip()


def format_size(n: float, digits: int = 4) -> str:
    """65536 -> '64 KiB', 1500 -> '1.465 KiB', 1000 -> '1000 B' (binary, as parsed)."""
    return _scaled(n, (("TiB", KIB**4), ("GiB", KIB**3), ("MiB", KIB**2), ("KiB", KIB),
                       ("B", 1)), digits)


def size_tick(n: float) -> str:
    """Short text for a size axis: 512, 1K, 64K, 8M (exact multiples only)."""
    for unit, scale in (("T", KIB**4), ("G", KIB**3), ("M", KIB**2), ("K", KIB)):
        if n >= scale and n % scale == 0:
            return f"{int(n // scale)}{unit}"
    return str(int(n)) if float(n).is_integer() else f"{n:g}"


RATE_STEPS = (("Tbit/s", 1e12), ("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3),
              ("bit/s", 1.0))


def rate_unit(bits_per_s: float) -> tuple[str, float]:
    """The unit that fits a rate (Gbit/s from 1e9 on ...): (name, bit/s per unit)."""
    for unit, scale in RATE_STEPS:
        if abs(bits_per_s) >= scale:
            return unit, scale
    return RATE_STEPS[-1]


def format_rate(bits_per_s: float, digits: int = 4) -> str:
    """1.25e10 -> '12.5 Gbit/s' (SI)."""
    unit, scale = rate_unit(bits_per_s)
    return f"{bits_per_s / scale:.{digits}g} {unit}"


def format_byte_rate(bytes_per_s: float, digits: int = 4) -> str:
    """2266.2 -> '2.266 kB/s' (SI bytes per second)."""
    return _scaled(bytes_per_s, (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3), ("B/s", 1.0)),
                   digits)


def format_time(seconds: float, digits: int = 4) -> str:
    """0.0000123 -> '12.3 us', 90 -> '90 s', 7200 -> '2 h'."""
    if seconds >= 3600:
        return f"{seconds / 3600:.{digits}g} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return _scaled(seconds, (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)), digits)


def format_flops(flops: float, digits: int = 4) -> str:
    """3.2e9 -> '3.2 GFLOP/s'."""
    return _scaled(flops, (("TFLOP/s", 1e12), ("GFLOP/s", 1e9), ("MFLOP/s", 1e6),
                           ("kFLOP/s", 1e3), ("FLOP/s", 1.0)), digits)


# --------------------------------------------------------------------------- named units

# The units benchmark tables print (HPCC's summary, published tables), each as a multiple
# of its base unit: FLOP/s, B/s (SI bytes: HPCC's GB/s is 10^9 bytes/s), UP/s (table
# updates per second: RandomAccess's GUP/s is 10^9 of them), s, B.  Spellings other
# tools use are read as the canonical name (ALIASES).
NAMED_UNITS: dict[str, tuple[str, float]] = {
    "TFLOP/s": ("FLOP/s", 1e12), "GFLOP/s": ("FLOP/s", 1e9), "MFLOP/s": ("FLOP/s", 1e6),
    "FLOP/s": ("FLOP/s", 1.0),
    "TB/s": ("B/s", 1e12), "GB/s": ("B/s", 1e9), "MB/s": ("B/s", 1e6), "kB/s": ("B/s", 1e3),
    "B/s": ("B/s", 1.0),
    "GUP/s": ("UP/s", 1e9), "MUP/s": ("UP/s", 1e6), "UP/s": ("UP/s", 1.0),
    "s": ("s", 1.0), "ms": ("s", 1e-3), "us": ("s", 1e-6), "ns": ("s", 1e-9),
    "B": ("B", 1.0),
}
UNIT_ALIASES = {
    "tflops": "TFLOP/s", "gflops": "GFLOP/s", "mflops": "MFLOP/s", "flops": "FLOP/s",
    "tflop/s": "TFLOP/s", "gflop/s": "GFLOP/s", "mflop/s": "MFLOP/s", "flop/s": "FLOP/s",
    "gups": "GUP/s", "gup/s": "GUP/s", "mups": "MUP/s", "mup/s": "MUP/s",
    "gb/s": "GB/s", "gbytes/s": "GB/s", "gbytes": "GB/s", "gbs": "GB/s", "mb/s": "MB/s",
    "mbytes/s": "MB/s", "tb/s": "TB/s", "kb/s": "kB/s", "b/s": "B/s",
    "usec": "us", "µs": "us", "microseconds": "us", "msec": "ms", "sec": "s",
    "seconds": "s", "nsec": "ns", "bytes": "B",
}


def canonical_unit(text: str) -> str:
    """'TFLOPS' -> 'TFLOP/s', 'usec' -> 'us'; ValueError for a unit not in NAMED_UNITS."""
    name = str(text).strip()
    if name in NAMED_UNITS:
        return name
    found = UNIT_ALIASES.get(name.lower())
    if found is None:
        raise ValueError(f"unknown unit {text!r} (known: {', '.join(NAMED_UNITS)})")
    return found


def convert(value: float, from_unit: str, to_unit: str) -> float:
    """``value`` in ``from_unit`` expressed in ``to_unit`` (both named units or aliases);
    ValueError if they measure different things (GB/s and GFLOP/s)."""
    base_from, scale_from = NAMED_UNITS[canonical_unit(from_unit)]
    base_to, scale_to = NAMED_UNITS[canonical_unit(to_unit)]
    if base_from != base_to:
        raise ValueError(f"cannot convert {from_unit} to {to_unit}")
    return value * scale_from / scale_to


def format_in(value: float, unit: str, digits: int = 4) -> str:
    """A figure in a unit chosen by the caller, as tables print them: '0.01839 TFLOP/s'."""
    text = f"{value:.{digits}g}"
    return f"{text} {unit}" if unit else text

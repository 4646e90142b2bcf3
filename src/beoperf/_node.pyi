"""Stubs for the node suite's C kernels (src/beoperf/_node.c over csrc/)."""

from typing import Any

def stream(
    n: int, threads: int, ntimes: int, reps: int = ..., nontemporal: bool = ...,
    warm_s: float = ...,
) -> tuple[Any, tuple[float, float, float], tuple[float, float, float], int]:
    """STREAM's four kernels: (times, errors, expected sums, warm-up repetitions)."""

def peak(
    kernel: str, a: Any, b: Any, reps: int, s: float = ..., narrow: bool = ...,
) -> tuple[int, float]:
    """One peak kernel over a and b: (elapsed ns, a checksum)."""

def gups(log2_size: int, threads: int = ..., verify: bool = ...) -> tuple[int, int, int]:
    """HPCC RandomAccess: (updates, elapsed ns, wrong entries)."""

def gups_starts(n: int, /) -> int:
    """HPCC_starts(n): the n-th random number."""

def io(
    fd: int, pattern: str, block: int, nblocks: int, seed: int = ..., sync: bool = ...,
) -> tuple[int, int]:
    """One I/O pattern over an open file: (elapsed ns, bytes moved)."""

def build() -> dict[str, Any]:
    """How this module was compiled (compiler, flags, OpenMP, streaming stores, ...)."""

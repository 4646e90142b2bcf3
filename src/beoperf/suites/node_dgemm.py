"""DGEMM through numpy's BLAS, run as its own process (``python -m beoperf.cli.rank dgemm
'{"n": N, "repeat": REPEAT, "seed": SEED}'``: :func:`rank`) so that the BLAS starts with
the thread count the parent sets in its environment (OPENBLAS_NUM_THREADS and its kin are
read once, when the library loads).  Sends one JSON object (launch/channel.py): the times
of ``REPEAT`` C = A B of N x N doubles after one warm-up, the scaled residual of a check
and what the BLAS says of itself (core type, threads).

Check: with a random x, ||C x - A (B x)||_inf / (eps N ||A||_inf ||B||_inf ||x||_inf) must
be below 16 (HPC Challenge's threshold for its DGEMM).
"""

from __future__ import annotations

import ctypes
import time
from typing import Any

import numpy as np

from beoperf import errors
from beoperf.launch import channel

THRESHOLD = 16.0
PREFIXES = ("openblas_", "scipy_openblas_")
SUFFIXES = ("", "64_")


def _blas_library() -> ctypes.CDLL | None:
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            paths = {line.split()[-1] for line in f if "blas" in line.lower() and "/" in line}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    return None


def _call(lib: ctypes.CDLL, name: str, restype: Any) -> Any:
    for prefix in PREFIXES:
        for suffix in SUFFIXES:
            fn = getattr(lib, f"{prefix}{name}{suffix}", None)
            if fn is not None:
                fn.restype = restype
                return fn()
    return None


def blas_self() -> dict[str, Any]:
    """The loaded BLAS's own word on its core type and threads (OpenBLAS only)."""
    lib = _blas_library()
    if lib is None:
        return {"corename": None, "threads": None}
    name = _call(lib, "get_corename", ctypes.c_char_p)
    return {"corename": name.decode() if isinstance(name, bytes) else None,
            "threads": _call(lib, "get_num_threads", ctypes.c_int)}


def residual(a: np.ndarray, b: np.ndarray, c: np.ndarray, rng: np.random.Generator) -> float:
    x = rng.random(a.shape[0])
    r = c @ x - a @ (b @ x)
    n = a.shape[0]
    scale = np.finfo(float).eps * n * np.abs(a).sum(1).max() * np.abs(b).sum(1).max() * \
        np.abs(x).max()
    return float(np.abs(r).max() / scale)


def measure(n: int, repeat: int, seed: int) -> dict[str, Any]:
    """The times of ``repeat`` C = A B after a warm-up, the residual, the BLAS."""
    rng = np.random.default_rng(seed)
    a, b = rng.random((n, n)), rng.random((n, n))
    c = np.empty((n, n))
    np.dot(a, b, out=c)  # warm-up: threads started, pages touched
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        np.dot(a, b, out=c)
        times.append(time.perf_counter() - t0)
    return {"n": n, "times": times, "residual": residual(a, b, c, rng),
            "threshold": THRESHOLD, "blas": blas_self()}


def rank(plan: dict[str, Any]) -> int:
    """The child's work (``python -m beoperf.cli.rank dgemm PLAN``): its result sent."""
    try:
        n, repeat, seed = int(plan["n"]), int(plan["repeat"]), int(plan["seed"])
    except (KeyError, TypeError, ValueError) as exc:
        raise errors.BadSpec(f"not a DGEMM plan: {exc}") from None
    channel.send(measure(n, repeat, seed))
    return 0

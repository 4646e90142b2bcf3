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
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from beoperf import errors
from beoperf.launch import channel
from beoperf.model.document import JsonObject

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


BlasSelf = dict[str, str | int | None]  # corename, threads


@dataclass
class DgemmResult:
    """What the DGEMM child sends back (its result line): the times of the repetitions,
    the scaled residual and its threshold, and the BLAS's own word on itself."""

    n: int
    times: list[float]
    residual: float
    threshold: float
    blas: BlasSelf = field(default_factory=dict)

    def to_dict(self) -> JsonObject:
        return {"n": self.n, "times": list(self.times), "residual": self.residual,
                "threshold": self.threshold, "blas": dict(self.blas)}

    @classmethod
    def from_dict(cls, got: JsonObject) -> DgemmResult:
        """The child's result line read back; ValueError naming what is missing or wrong."""
        n, times, res, limit, blas = (got.get(k) for k in ("n", "times", "residual",
                                                            "threshold", "blas"))
        if not (isinstance(n, int) and isinstance(times, list) and times
                and all(isinstance(t, int | float) for t in times)
                and isinstance(res, int | float) and isinstance(limit, int | float)
                and isinstance(blas, dict)):
            raise ValueError("not a DGEMM result (n, times, residual, threshold, blas)")
        return cls(n, [float(t) for t in times if isinstance(t, int | float)], res, limit,
                   {k: v for k, v in blas.items() if v is None or isinstance(v, str | int)})


def blas_self() -> BlasSelf:
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


def measure(n: int, repeat: int, seed: int) -> DgemmResult:
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
    return DgemmResult(n, times, residual(a, b, c, rng), THRESHOLD, blas_self())


def rank(plan: JsonObject) -> int:
    """The child's work (``python -m beoperf.cli.rank dgemm PLAN``): its result sent."""
    try:
        n, repeat, seed = (_whole(plan[k]) for k in ("n", "repeat", "seed"))
    except (KeyError, TypeError, ValueError) as exc:
        raise errors.BadSpec(f"not a DGEMM plan: {exc}") from None
    channel.send(measure(n, repeat, seed).to_dict())
    return 0


def _whole(value: object) -> int:
    """An integer of the plan (int() as the plan's numbers were always read)."""
    if not isinstance(value, int | float | str) or isinstance(value, bool):
        raise TypeError(f"{value!r} is not a number")
    return int(value)

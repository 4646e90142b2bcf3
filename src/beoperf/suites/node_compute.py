"""DGEMM (numpy's BLAS, one thread and all cores), RandomAccess (C, HPCC's rule) and FFT
(numpy, 1-D complex double), each repeated and checked.

- DGEMM: C = A B of N x N doubles in a child process per thread count
  (``suites/node_dgemm.py``, run by launch/job.py: the BLAS reads its thread variables
  when it loads); GFLOP/s = 2 N^3 / t / 1e9; the scaled residual must be below 16.
- RandomAccess: GUPS = 4 x table words / t / 1e9 (``csrc/gups.c``), on one thread and on
  all cores (threads share the table without locks, as HPCC's shared-memory variant;
  lost updates are counted by applying the updates again, on the last repetition, and
  may be at most 1% of the table).
- FFT: numpy.fft.fft of N complex doubles; GFLOP/s = 5 N log2 N / t / 1e9 (HPCC's
  count); the inverse must give the input back: max |ifft(fft(x)) - x| / (eps log2 N)
  below 16.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable

import numpy as np

from beoperf import _node, errors
from beoperf.launch import channel, job
from beoperf.model.document import JsonObject, JsonValue
from beoperf.model.node import metric
from beoperf.suites.node_dgemm import DgemmResult

THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                    "GOTO_NUM_THREADS", "BLIS_NUM_THREADS")
DEFAULT_DGEMM_N = 2000
GUPS_ERROR_FRACTION = 0.01
FFT_THRESHOLD = 16.0
DGEMM_TIMEOUT_S = 3600.0

Progress = Callable[[str], None]


def thread_counts(cores: int) -> list[int]:
    return [1, cores] if cores > 1 else [1]


def dgemm_once(n: int, threads: int, repeat: int) -> DgemmResult:
    """One DGEMM child (suites/node_dgemm.py) with ``threads`` BLAS threads."""
    env = {**os.environ, **dict.fromkeys(THREAD_VARIABLES, str(threads))}
    plan = json.dumps({"n": n, "repeat": repeat, "seed": 7})
    reader = channel.Reader()
    done = job.run([sys.executable, "-m", "beoperf.cli.rank", "dgemm", plan], DGEMM_TIMEOUT_S,
                   env=env, on_line=reader)
    got = reader.result("the DGEMM child's result") if not done.stopped else None
    if done.returncode != 0 or not isinstance(got, dict):
        last = (done.stderr_text().strip().splitlines() or ["no message"])[-1]
        if done.stopped:
            last = f"stopped after {DGEMM_TIMEOUT_S:g} s"
        raise errors.Failed(f"DGEMM with {threads} thread(s) failed: {last}")
    try:
        return DgemmResult.from_dict(got)
    except ValueError as exc:
        raise errors.Failed(f"DGEMM with {threads} thread(s): {exc}") from None


def dgemm(n: int, repeat: int, cores: int, progress: Progress, metrics: list[JsonObject],
          detail: JsonObject) -> None:
    runs: list[JsonValue] = []  # filled as measured: an interrupt keeps what was
    detail.update({"n": n, "flops": 2 * n**3, "threshold": 16.0, "runs": runs})
    for t in thread_counts(cores):
        progress(f"dgemm: N = {n}, {t} thread{'s' if t > 1 else ''}")
        got = dgemm_once(n, t, repeat)
        ok = got.residual < got.threshold
        rates = [2 * n**3 / s / 1e9 for s in got.times]
        metrics.append(metric("dgemm", "dgemm", "GFLOP/s", rates, params={"threads": t},
                              ok=ok, residual=got.residual))
        runs.append({"threads": t, "residual": got.residual, "ok": ok,
                     "blas": dict(got.blas)})


def log2_words(table_bytes: int) -> int:
    """The largest power-of-two table of 64-bit words that fits in ``table_bytes``."""
    return max(8, int(math.log2(max(table_bytes // 8, 1))))


def default_table(llc_total: int | None) -> int:
    """At least 4 x the last-level cache (a power of two of words), 64 MiB without it."""
    target = 4 * (llc_total or 16 << 20)
    return 8 << math.ceil(math.log2(target / 8))


def randomaccess(table_bytes: int, repeat: int, cores: int, progress: Progress,
                 metrics: list[JsonObject], detail: JsonObject) -> None:
    log2 = log2_words(table_bytes)
    runs: list[JsonValue] = []
    detail.update({"table_words": 1 << log2, "table_bytes": 8 << log2,
                   "updates": 4 << log2, "max_error_fraction": GUPS_ERROR_FRACTION,
                   "runs": runs})
    for t in thread_counts(cores):
        progress(f"randomaccess: table 2^{log2} words, {t} thread{'s' if t > 1 else ''}")
        rates, errors_found = [], 0
        for r in range(repeat):
            updates, ns, wrong = _node.gups(log2, t, r == repeat - 1)
            rates.append(updates / ns)
            errors_found += wrong
        ok = errors_found <= GUPS_ERROR_FRACTION * (1 << log2)
        metrics.append(metric("randomaccess", "gups", "GUPS", rates, params={"threads": t},
                              ok=ok, errors=errors_found))
        runs.append({"threads": t, "errors": errors_found, "ok": ok})


def default_fft(llc_total: int | None) -> int:
    """The smallest power of two whose vector (16 B an element) is the last-level cache
    or larger (2^20 without it)."""
    if not llc_total:
        return 1 << 20
    return 1 << max(10, math.ceil(math.log2(llc_total / 16)))


def fft(n: int, repeat: int, progress: Progress, metrics: list[JsonObject],
        detail: JsonObject) -> None:
    progress(f"fft: N = {n}")
    rng = np.random.default_rng(11)
    x = rng.random(n) + 1j * rng.random(n)
    y = np.fft.fft(x)  # warm-up (plan, pages)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        y = np.fft.fft(x)
        times.append(time.perf_counter() - t0)
    error = float(np.abs(np.fft.ifft(y) - x).max() / (np.finfo(float).eps * math.log2(n)))
    ok = error < FFT_THRESHOLD
    flops = 5 * n * math.log2(n)
    metrics.append(metric("fft", "fft", "GFLOP/s", [flops / t / 1e9 for t in times],
                          params={"n": n}, ok=ok, error=error))
    detail.update({"n": n, "flops": flops, "error": error, "threshold": FFT_THRESHOLD,
                   "ok": ok, "library": f"numpy {np.__version__} (pocketfft)"})

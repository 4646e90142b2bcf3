"""STREAM (McCalpin) in C: copy, scale, add and triad at each thread count.

Array size: each of the three arrays at least 4 times the last-level cache (all of its
instances together), STREAM's rule, rounded up to a whole MiB of elements; or the
``array_size`` asked for (in bytes per array).  A size whose three arrays do not fit in
the memory available now (MemAvailable, less a 10% margin) is refused with the figures.

Timing: first, untimed iterations of the four tests for ``WARM_S`` (1 s), the arrays set
to STREAM's starting values again after each: a memory system can take a while under
load to reach its sustained state (on the 2-vCPU VM of bench/RESULTS.md N10, some runs
began at half the bandwidth for their first 0.15 s, 9 iterations, then doubled; a
STREAM of 6 iterations, 0.26 s, never left that state, and likwid-bench's 6 s runs
did); then ``repeat + 1`` iterations of the four tests, the first dropped (it warms pages and
caches, as McCalpin drops it); each test of each iteration timed on its own, and long
enough against the clock: a test shorter than ``MIN_TIMING_S`` (small arrays) repeats
its loop inside the timing until it is not.  Bytes are counted as STREAM counts them
(copy and scale 16 B an element, add and triad 24 B; no write-allocate traffic); GB/s
is 10^9 B/s.  Each figure: best (STREAM's own figure), and mean, stdev, min and max
over the repetitions, with the average, min and max time.  Validation: the arrays'
average relative error against the same assignments replayed on scalars, at most 1e-13.
Arrays past the caches are written with streaming stores (as STREAM built for bandwidth
is), so that the memory traffic is the bytes counted; the document says which stores.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from beoperf import _core, _node, errors, units
from beoperf.model import jsonvalue
from beoperf.model.document import JsonObject, JsonValue
from beoperf.model.node import metric

TESTS = ("copy", "scale", "add", "triad")
BYTES_PER_ELEMENT = {"copy": 16, "scale": 16, "add": 24, "triad": 24}
FLOPS_PER_ELEMENT = {"copy": 0, "scale": 1, "add": 1, "triad": 2}
EPSILON = 1e-13
MIN_TIMING_S = 0.001
WARM_S = 1.0  # untimed iterations before the timed ones (see the module's docstring)
DEFAULT_ELEMENTS = 10_000_000  # when the cache size is unknown (HPCC's order of size)
MEMORY_MARGIN = 0.9


def default_elements(llc_total: int | None) -> tuple[int, str]:
    """Elements of each array, and why."""
    if not llc_total:
        return DEFAULT_ELEMENTS, "last-level cache size unknown: 10,000,000 elements"
    mib = 1 << 20
    n = math.ceil(4 * llc_total / 8 / mib) * mib
    return n, f"4 x the last-level cache ({units.format_size(llc_total)}), per array"


def check_fits(elements: int, available: int | None) -> None:
    """BadSpec when the three arrays cannot fit in the memory available."""
    need = 3 * elements * 8
    if available is not None and need > MEMORY_MARGIN * available:
        raise errors.BadSpec(
            f"--array-size {units.format_size(elements * 8)}: STREAM needs three arrays, "
            f"{units.format_size(need)} in all, but only {units.format_size(available)} of "
            "memory is available now (MemAvailable; 10% kept free)",
            "give a smaller --array-size")


def streaming(elements: int, llc_total: int | None) -> bool:
    """Streaming stores when the arrays are past every cache (at least the last level's
    size each) and the build has them."""
    return bool(_node.build()["streaming_stores"] and llc_total and elements * 8 >= llc_total)


def timed(elements: int, threads: int, ntimes: int, nontemporal: bool = False,
          warm_s: float = WARM_S
          ) -> tuple[list[list[int]], tuple[float, float, float], tuple[float, float, float],
                     int, int]:
    """One STREAM run, after ``warm_s`` of untimed iterations; inner passes added until
    every test lasts MIN_TIMING_S (the runs that find the passes follow the first at
    once, and are not warmed again).  The last element: the warm-up iterations."""
    reps, warm_iterations = 1, 0
    floor_ns = max(MIN_TIMING_S * 1e9, 10_000 * _core.clock_overhead_ns(100))
    while True:
        times, errs, expected, warmed = _node.stream(elements, threads, ntimes, reps,
                                                     nontemporal, warm_s)
        warm_iterations, warm_s = warm_iterations + warmed, 0.0
        shortest = min(min(row) for row in times)
        if shortest >= floor_ns or reps >= 1 << 20:
            return times, errs, expected, reps, warm_iterations
        reps = max(reps * 2, math.ceil(reps * floor_ns / shortest))


def run_threads(elements: int, threads: int, repeat: int,
                nontemporal: bool = False) -> tuple[list[JsonObject], JsonObject]:
    """The four metrics at one thread count, and the run's details."""
    times, errs, expected, reps, warmed = timed(elements, threads, repeat + 1, nontemporal)
    ok = all(e <= EPSILON for e in errs)
    metrics = []
    for name, row in zip(TESTS, times, strict=True):
        kept = [t / 1e9 for t in row[1:]]
        nbytes = BYTES_PER_ELEMENT[name] * elements * reps
        rates = [nbytes / t / 1e9 for t in kept]
        metrics.append(metric(
            "stream", name, "GB/s", rates, params={"threads": threads}, ok=ok,
            best=max(rates), per_core=max(rates) / threads,
            avg_time_s=sum(kept) / len(kept) / reps, min_time_s=min(kept) / reps,
            max_time_s=max(kept) / reps))
    detail: JsonObject = {"threads": threads, "inner_passes": reps, "warm_iterations": warmed,
              "errors": {"a": errs[0], "b": errs[1], "c": errs[2]},
              "expected": {"a": expected[0], "b": expected[1], "c": expected[2]}, "ok": ok}
    return metrics, detail


def run(elements: int | None, threads: list[int], repeat: int, conditions: JsonObject,
        progress: Callable[[str], None], metrics: list[JsonObject], detail: JsonObject
        ) -> None:
    """STREAM at each thread count; metrics appended and ``detail`` filled as they are
    measured."""
    llc = jsonvalue.integer(conditions, "llc_total")
    if elements is None:
        elements, why = default_elements(llc)
    else:
        why = "--array-size"
    check_fits(elements, jsonvalue.integer(conditions, "memory_available"))
    nontemporal = streaming(elements, llc)
    runs: list[JsonValue] = []  # filled as measured: an interrupt keeps what was
    passed: list[bool] = []
    detail.update({"stores": "streaming (non-temporal)" if nontemporal else "regular",
        "array_elements": elements, "array_bytes": elements * 8, "size_rule": why,
        "below_4x_cache": bool(llc and elements * 8 < 4 * llc), "epsilon": EPSILON,
        "bytes_per_element": dict(BYTES_PER_ELEMENT),
        "flops_per_element": dict(FLOPS_PER_ELEMENT),
        "dropped_iterations": 1, "warm_s": WARM_S, "gb": 1e9, "runs": runs})
    for t in threads:
        progress(f"stream: {t} thread{'s' if t > 1 else ''}, "
                 f"3 x {units.format_size(elements * 8)}")
        got, run_detail = run_threads(elements, t, repeat, nontemporal)
        metrics.extend(got)
        runs.append(run_detail)
        passed.append(run_detail["ok"] is True)
        detail["ok"] = all(passed)

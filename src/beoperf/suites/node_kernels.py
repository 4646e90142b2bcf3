"""PMAC PEAK's four kernels in C against loop length, through the precision loop.

Kernels and flops per element: division s = s / a(i) (1), daxpy a(i) = a(i) + s b(i) (2),
dot s = s + a(i) b(i) (2), Horner's degree-5 polynomial b(i) = p(a(i)) (10).  Each kernel
is one :class:`~beoperf.sweep.precision.PrecisionLoop` over the loop lengths (issue 11's
loop, generic over its axis): a calibration per length, then passes in length order with
one trial per length, ``repeat`` trials at least and more where the 95% interval of the
median is wider than ``PRECISION`` while the kernel's time budget lasts.  A trial runs the
kernel ``reps`` times over the same arrays (so a short loop is timed long enough against
the clock); its figure is MFLOP/s = flops x length x reps / time.

Every trial's result is checked against numpy, so a kernel the compiler had removed or
broken cannot pass: div and dot return the sum of every pass's result (reps x 1/prod(a),
reps x a.b), daxpy must have moved a by reps x s x b, and poly must have filled b (zeroed
before the trial) with p(a).

The level of each length is the smallest cache of cpu0 (sysfs) that holds its working set
(8 B an element for div, 16 B for the others), and the table states the drop of each
kernel's median MFLOP/s from one level to the next.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from beoperf import _node, errors
from beoperf.analysis.node import drops, level_of
from beoperf.model.node import metric
from beoperf.sweep.precision import LoopConfig, PrecisionLoop

KERNELS = ("div", "daxpy", "dot", "poly")
FLOPS = {"div": 1, "daxpy": 2, "dot": 2, "poly": 10}
BYTES = {"div": 8, "daxpy": 16, "dot": 16, "poly": 16}  # working set per element
DEFAULT_LENGTHS = (1024, 4096, 16384, 65536, 262144, 524288, 1048576, 4194304)
PRECISION = 0.02
TRIAL_S = 0.02
CALIBRATE_S = 0.002
DEFAULT_BUDGET_S = 3.0  # per kernel
DAXPY_S = 1e-9
ALIGNMENT = 64
COEF = np.array(_node.build()["poly_coefficients"])


def horner(x: np.ndarray) -> np.ndarray:
    y = np.full_like(x, COEF[5])
    for c in COEF[4::-1]:
        y = y * x + c
    return y


def aligned(n: int, alignment: int = ALIGNMENT) -> np.ndarray:
    """n float64 starting on an ``alignment``-byte boundary (numpy's own start 16 bytes
    past one: every 64-byte vector load would then straddle two cache lines)."""
    raw = np.empty(n + alignment // 8)
    skip = (-raw.ctypes.data % alignment) // 8
    return raw[skip:skip + n]


class KernelMeasurer:
    """One kernel over loop lengths: arrays per length, trials checked against numpy."""

    def __init__(self, kernel: str, seed: int = 13) -> None:
        self.kernel = kernel
        self.rng = np.random.default_rng(seed)
        self.arrays: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.failed: str | None = None

    def _arrays(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        if n not in self.arrays:
            a, b = aligned(n), aligned(n)
            a[:] = 1.0 + self.rng.random(n) * 1e-7  # products over a stay near 1 (div)
            b[:] = self.rng.random(n)
            self.arrays[n] = (a, b)
        return self.arrays[n]

    def run(self, n: int, reps: int) -> float:
        """ns per repetition of one checked run."""
        a, b = self._arrays(n)
        before = a.copy() if self.kernel == "daxpy" else None
        if self.kernel == "poly":
            b[:] = 0.0
        ns, result = _node.peak(self.kernel, a, b, reps, DAXPY_S)
        problem = self._verify(a, b, reps, result, before)
        if problem and self.failed is None:
            self.failed = f"{self.kernel} at length {n}: {problem}"
        return ns / reps

    def _verify(self, a: np.ndarray, b: np.ndarray, reps: int, result: float,
                before: np.ndarray | None) -> str | None:
        if self.kernel == "div":
            expected = reps * float(np.exp(-np.sum(np.log(a))))
            ok = abs(result - expected) <= 1e-8 * abs(expected)
        elif self.kernel == "dot":
            expected = reps * float(np.dot(a, b))
            ok = abs(result - expected) <= 1e-9 * abs(expected)
        elif self.kernel == "daxpy":
            assert before is not None
            expected_a = before + reps * DAXPY_S * b
            err = np.max(np.abs(a - expected_a))
            ok = bool(err <= reps * 4.5e-16 + 1e-6 * reps * DAXPY_S) and not \
                np.array_equal(a, before)
            expected, result = float(np.max(np.abs(expected_a - before))), float(err)
        else:
            expected_b = horner(a)
            ok = bool(np.allclose(b, expected_b, rtol=1e-12, atol=0))
            expected, result = float(expected_b[0]), float(b[0])
        return None if ok else f"result {result!r} where {expected!r} was due"

    def calibrate(self, key: int, estimate_ns: float | None) -> float:
        self.run(key, 1)  # first touch, warm caches
        reps = 1
        while True:
            per = self.run(key, reps)
            if per * reps >= CALIBRATE_S * 1e9 or reps >= 1 << 24:
                return per
            reps = min(1 << 24, max(reps * 2, int(CALIBRATE_S * 1e9 / max(per, 1.0)) + 1))

    def trial(self, key: int, reps: int) -> np.ndarray:
        return np.array([self.run(key, reps)])

    def check(self, key: int) -> None:
        if self.failed:
            raise errors.IntegrityError(f"PEAK kernel check failed: {self.failed}")


def measure(kernel: str, lengths: list[int], repeat: int, budget: float,
            progress: Callable[[str], None]) -> tuple[list[Any], BaseException | None]:
    """The loop's points for one kernel, and what stopped it early (None)."""
    cfg = LoopConfig(precision=PRECISION, trial_time=TRIAL_S, min_trials=repeat,
                     time_budget=budget, order="axis")
    measurer = KernelMeasurer(kernel)

    def on_pass(n: int, points: list[Any]) -> None:
        done = sum(1 for p in points if p.converged)
        progress(f"kernels: {kernel} pass {n}, {done}/{len(points)} lengths within "
                 f"{PRECISION:.0%}")

    out = PrecisionLoop(lengths, measurer, cfg, on_pass=on_pass).run()
    measurer.arrays.clear()
    return out.points, out.stopped


def run(lengths: list[int], repeat: int, budget: float, conditions: dict[str, Any],
        progress: Callable[[str], None], metrics: list[dict], detail: dict[str, Any]) -> None:
    """The four kernels; metrics appended and ``detail`` filled kernel by kernel (what was
    measured stays when a kernel is stopped)."""
    caches = conditions.get("caches") or []
    rows: list[dict[str, Any]] = []
    detail.update({"flops_per_element": FLOPS, "bytes_per_element": BYTES,
                   "precision": PRECISION, "budget_s": budget, "rows": rows, "drops": []})
    for kernel in KERNELS:
        progress(f"kernels: {kernel}")
        points, stopped = measure(kernel, lengths, repeat, budget, progress)
        for p in points:
            if not p.trial_medians:
                continue
            rates = [FLOPS[kernel] * p.key / ns * 1e3 for ns in p.trial_medians]
            level = level_of(BYTES[kernel] * p.key, caches)
            m = metric("kernels", kernel, "MFLOP/s", rates, params={"length": p.key},
                       ok=not isinstance(stopped, errors.IntegrityError), level=level,
                       working_set=BYTES[kernel] * p.key, converged=p.converged,
                       median=float(np.median(rates)))
            metrics.append(m)
            rows.append({"kernel": kernel, "length": p.key, "level": level,
                         "mflops": m["median"]})
        detail["drops"] = drops(rows)
        if stopped is not None:
            raise stopped

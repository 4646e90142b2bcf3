"""PMAC PEAK's four kernels in C against loop length, through the precision loop.

Kernels and flops per element: division s = s / a(i) (1), daxpy a(i) = a(i) + s b(i) (2),
dot s = s + a(i) b(i) (2), Horner's degree-5 polynomial b(i) = p(a(i)) (10).  Each kernel
is one :class:`~beoperf.sweep.precision.PrecisionLoop` over the loop lengths (issue 11's
loop, generic over its axis): a calibration per length, then passes in length order with
one trial per length, ``repeat`` trials at least and more where the 95% interval of the
median is wider than ``PRECISION`` while the kernel's time budget lasts.  A trial runs the
kernel ``reps`` times over the same arrays (so a short loop is timed long enough against
the clock); its figure is MFLOP/s = flops x length x reps / time.

Each loop is built twice where the compiler can: with the widest vectors the CPU has and
with at most 256-bit ones.  Neither wins everywhere (on an AMD EPYC the 512-bit dot was
twice the 256-bit one in L1 and 8-12% slower from L2), so the calibration of each length
times both and its trials use the faster; the figure says which (``vectors``).  The two
arrays of a length are one block, b 128 bytes after a's end, as likwid-bench lays out its
streams (apart, at 4,096 elements, dot and daxpy ran 12-13% slower from L2).

Out of the core's own caches (L3 and memory) each trial starts with an untimed run-up of
the same loop for about ``RUNUP_S``: on an AMD EPYC guest daxpy from memory ran 8-10%
slower (best of 48 trials) right after a trial of a length held in L3 than right after
one of its own length, and about 10 ms of the loop first brought it back (bench/RESULTS.md,
N19).  likwid-bench and STREAM get the same by running for a second and by dropping
their first pass.

Every trial's result is checked against numpy, so a kernel the compiler had removed or
broken cannot pass: div and dot return the sum of every pass's result (reps x 1/prod(a),
reps x a.b), daxpy must have moved a by reps x s x b, and poly must have filled b (zeroed
before the trial) with p(a).

The level of each length is the smallest cache of cpu0 (sysfs) that holds its working set
(8 B an element for div, 16 B for the others), and the table states the drop of each
kernel's median MFLOP/s from one level to the next.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from beoperf import _node, errors
from beoperf.analysis.node import drops, level_of
from beoperf.model.document import JsonObject, JsonValue
from beoperf.model.node import LevelRate, caches_of, metric
from beoperf.sweep.precision import LoopConfig, PrecisionLoop
from beoperf.sysinfo.node import Cache

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
GAP = 16  # float64 between a's end and b's start
VECTORS = {False: "widest", True: "256-bit at most"}
NARROW_MARGIN = 0.97  # the narrower build is kept when its best time is under 0.97x
# where the widths are compared: past L2 the wide build was never the slower, and a 2 ms
# run from L3 is noisy enough to pick the narrow one (daxpy at 1M elements: -12 to -20%)
IN_CORE = ("L1", "L2")
RUNUP_S = 0.01  # untimed, before each trial of a length past IN_CORE (see the docstring)
BUILD = _node.build()
COEF = np.array(BUILD["poly_coefficients"])
WIDTHS = BUILD["peak_widths"]  # 2: a widest and a 256-bit build of each loop


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

    def __init__(self, kernel: str, seed: int = 13,
                 caches: Sequence[Cache] = ()) -> None:
        self.kernel = kernel
        self.caches = caches
        self.rng = np.random.default_rng(seed)
        self.arrays: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.narrow: dict[int, bool] = {}
        self.runup: dict[int, int] = {}  # length: untimed reps before each trial
        self.failed: str | None = None

    def _arrays(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        if n not in self.arrays:
            block = aligned(2 * n + GAP)
            a, b = block[:n], block[n + GAP:]
            a[:] = 1.0 + self.rng.random(n) * 1e-7  # products over a stay near 1 (div)
            b[:] = self.rng.random(n)
            self.arrays[n] = (a, b)
        return self.arrays[n]

    def run(self, n: int, reps: int, narrow: bool | None = None) -> float:
        """ns per repetition of one checked run (in the width chosen for ``n``), after
        the length's untimed run-up if it has one."""
        a, b = self._arrays(n)
        before = a.copy() if self.kernel == "daxpy" else None
        if narrow is None:
            narrow = self.narrow.get(n, False)
        runup = self.runup.get(n, 0)
        if runup:
            _node.peak(self.kernel, a, b, runup, DAXPY_S, narrow)
        if self.kernel == "poly":
            b[:] = 0.0  # after the run-up: the timed run alone must fill it
        ns, result = _node.peak(self.kernel, a, b, reps, DAXPY_S, narrow)
        problem = self._verify(a, b, reps, result, before, runup)
        if problem and self.failed is None:
            self.failed = f"{self.kernel} at length {n}: {problem}"
        return ns / reps

    def _verify(self, a: np.ndarray, b: np.ndarray, reps: int, result: float,
                before: np.ndarray | None, runup: int = 0) -> str | None:
        if self.kernel == "div":
            expected = reps * float(np.exp(-np.sum(np.log(a))))
            ok = abs(result - expected) <= 1e-8 * abs(expected)
        elif self.kernel == "dot":
            expected = reps * float(np.dot(a, b))
            ok = abs(result - expected) <= 1e-9 * abs(expected)
        elif self.kernel == "daxpy":
            assert before is not None
            moved = runup + reps  # the run-up moved a too
            expected_a = before + moved * DAXPY_S * b
            err = np.max(np.abs(a - expected_a))
            ok = bool(err <= moved * 4.5e-16 + 1e-6 * reps * DAXPY_S) and not \
                np.array_equal(a, before)
            expected, result = float(np.max(np.abs(expected_a - before))), float(err)
        else:
            expected_b = horner(a)
            ok = bool(np.allclose(b, expected_b, rtol=1e-12, atol=0))
            expected, result = float(expected_b[0]), float(b[0])
        return None if ok else f"result {result!r} where {expected!r} was due"

    def calibrate(self, key: int, estimate_ns: float | None) -> float:
        self.run(key, 1, False)  # first touch, warm caches
        reps = 1
        while True:
            per = self.run(key, reps, False)
            if per * reps >= CALIBRATE_S * 1e9 or reps >= 1 << 24:
                break
            reps = min(1 << 24, max(reps * 2, int(CALIBRATE_S * 1e9 / max(per, 1.0)) + 1))
        if WIDTHS > 1 and level_of(BYTES[self.kernel] * key, self.caches) in IN_CORE:
            # both builds, alternating, three times each
            times: dict[bool, list[float]] = {False: [per], True: []}
            for _ in range(3):
                times[True].append(self.run(key, reps, True))
                times[False].append(self.run(key, reps, False))
            # the narrower only when clearly faster
            self.narrow[key] = min(times[True]) < NARROW_MARGIN * min(times[False])
            per = min(times[self.narrow[key]])
        elif level_of(BYTES[self.kernel] * key, self.caches) not in IN_CORE:
            self.runup[key] = max(1, round(RUNUP_S * 1e9 / max(per, 1.0)))
        return per

    def trial(self, key: int, reps: int) -> np.ndarray:
        return np.array([self.run(key, reps)])

    def check(self, key: int) -> None:
        if self.failed:
            raise errors.IntegrityError(f"PEAK kernel check failed: {self.failed}")


def measure(kernel: str, lengths: list[int], repeat: int, budget: float,
            progress: Callable[[str], None], caches: Sequence[Cache] = ()
            ) -> tuple[list[Any], BaseException | None, dict[int, bool]]:
    """The loop's points for one kernel, what stopped it early (None), and the lengths
    whose trials ran the narrower build."""
    cfg = LoopConfig(precision=PRECISION, trial_time=TRIAL_S, min_trials=repeat,
                     time_budget=budget, order="axis", hard_budget=False)  # --repeat holds
    measurer = KernelMeasurer(kernel, caches=caches)

    def on_pass(n: int, points: list[Any]) -> None:
        done = sum(1 for p in points if p.converged)
        progress(f"kernels: {kernel} pass {n}, {done}/{len(points)} lengths within "
                 f"{PRECISION:.0%}")

    out = PrecisionLoop(lengths, measurer, cfg, on_pass=on_pass).run()
    measurer.arrays.clear()
    return out.points, out.stopped, measurer.narrow


def run(lengths: list[int], repeat: int, budget: float, conditions: JsonObject,
        progress: Callable[[str], None], metrics: list[JsonObject], detail: JsonObject
        ) -> None:
    """The four kernels; metrics appended and ``detail`` filled kernel by kernel (what was
    measured stays when a kernel is stopped)."""
    caches = caches_of(conditions)
    rows: list[LevelRate] = []
    stored: list[JsonValue] = []  # the rows as the part keeps them
    detail.update({"flops_per_element": dict(FLOPS), "bytes_per_element": dict(BYTES),
                   "precision": PRECISION, "budget_s": budget, "rows": stored, "drops": [],
                   "runup_s": RUNUP_S, "runup_past": IN_CORE[-1]})
    for kernel in KERNELS:
        progress(f"kernels: {kernel}")
        points, stopped, narrow = measure(kernel, lengths, repeat, budget, progress, caches)
        for p in points:
            if not p.trial_medians:
                continue
            rates = [FLOPS[kernel] * p.key / ns * 1e3 for ns in p.trial_medians]
            level = level_of(BYTES[kernel] * p.key, caches)
            median = float(np.median(rates))
            metrics.append(metric("kernels", kernel, "MFLOP/s", rates, params={"length": p.key},
                                  ok=not isinstance(stopped, errors.IntegrityError),
                                  level=level, working_set=BYTES[kernel] * p.key,
                                  converged=p.converged, median=median,
                                  vectors=VECTORS[narrow.get(p.key, False)]))
            row: LevelRate = {"kernel": kernel, "length": p.key, "level": level,
                              "mflops": median}
            rows.append(row)
            stored.append({"kernel": kernel, "length": p.key, "level": level, "mflops": median})
        detail["drops"] = [dict(d) for d in drops(rows)]
        if stopped is not None:
            raise stopped

"""The sweep: for each message size, warm up, calibrate, repeat trials until
the median is known to the requested precision or the size's time cap is hit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from beoperf import _core, protocol, sysinfo
from beoperf.analysis.stats import MIN_CI_SAMPLES, median_ci, relative_ci, summarize
from beoperf.engines.base import Transport, Trial
from beoperf.results.model import SizeResult

MAX_REPS = 1 << 24


@dataclass
class SweepConfig:
    sizes: list[int]
    mode: str = "pingpong"
    precision: float = 0.02  # target 95% CI half-width of the median, relative
    trial_time: float = 0.01  # seconds one trial should last
    max_time: float = 2.0  # seconds per size at most (then reported as not converged)
    min_trials: int = MIN_CI_SAMPLES  # trials are the unit of the CI: at least 6
    nocache: bool = False


@dataclass
class SweepOutcome:
    sizes: list[SizeResult] = field(default_factory=list)
    status: str = "complete"
    reason: str | None = None
    error: BaseException | None = None


class IntegrityError(Exception):
    """Messages arrived with wrong content."""


def one_way_ns(mode: str, trial: Trial, reps: int) -> np.ndarray:
    """Per-message one-way times of a trial, as samples."""
    if mode == "stream":
        return np.array([trial.elapsed_ns / reps], dtype=np.float64)
    assert trial.samples_ns is not None
    values = trial.samples_ns.astype(np.float64)
    return values / 2.0 if mode == "pingpong" else values


def reps_for(estimate_ns: float, target_s: float) -> int:
    """Repetitions so that one trial lasts about target_s."""
    return max(1, min(MAX_REPS, int(target_s * 1e9 / max(estimate_ns, 1.0))))


class SizeMeasurement:
    """Trials of one message size until precise enough or out of time."""

    def __init__(self, transport: Transport, cfg: SweepConfig, size: int, seq: int) -> None:
        self.transport, self.cfg, self.size, self.seq = transport, cfg, size, seq
        self.chunks: list[np.ndarray] = []
        self.trial_medians: list[float] = []
        self.trials = 0
        self.corrupt = 0
        self.reps = 0  # all timed repetitions of this size
        self.converged = False
        self.pool = make_pool(size, cfg.nocache)

    def _trial(self, reps: int) -> np.ndarray:
        if self.cfg.mode == "stream":
            self.transport.reset()  # a fresh connection per trial, as NetPIPE's -r
        trial = self.transport.trial(self.size, reps, self.pool, self.seq)
        self.seq += reps
        self.corrupt += trial.corrupt
        return one_way_ns(self.cfg.mode, trial, reps)

    def _unit_ns(self, values: np.ndarray) -> float:
        """Wall time per repetition, from one-way samples."""
        return float(np.median(values)) * (2.0 if self.cfg.mode == "pingpong" else 1.0)

    def run(self, estimate_ns: float | None) -> float:
        """Measure; return the time per repetition for calibrating the next size."""
        if estimate_ns is None:
            estimate_ns = self._unit_ns(self._trial(1))
        warm = self._trial(reps_for(estimate_ns, self.cfg.trial_time / 4))
        reps = reps_for(self._unit_ns(warm), self.cfg.trial_time)
        started = time.monotonic()
        while True:
            values = self._trial(reps)
            self.chunks.append(values)
            self.trial_medians.append(float(np.median(values)))
            self.trials += 1
            self.reps += reps
            if self._precise_enough() or time.monotonic() - started >= self.cfg.max_time:
                break
            reps = reps_for(self._unit_ns(values), self.cfg.trial_time)
        return self._unit_ns(np.concatenate(self.chunks))

    def _precise_enough(self) -> bool:
        """The CI is taken over trial medians, not over round trips: consecutive
        round trips are correlated (a slow spell lasts many of them), so only
        trials are independent enough to say how well the median is known."""
        if self.trials < max(self.cfg.min_trials, MIN_CI_SAMPLES):
            return False
        rel = relative_ci(np.sort(np.array(self.trial_medians)))
        self.converged = rel is not None and rel <= self.cfg.precision
        return self.converged

    def result(self) -> SizeResult:
        s = summarize(np.concatenate(self.chunks) / 1000.0)  # ns -> us
        best_trial = min(float(c.mean()) for c in self.chunks) / 1000.0
        trials = np.sort(np.array(self.trial_medians)) / 1000.0
        ci = median_ci(trials) if trials.size >= MIN_CI_SAMPLES else None
        half = (ci[1] - ci[0]) / 2.0 if ci else None
        factor = 2.0 if self.cfg.mode == "bidir" else 1.0
        bits = factor * self.size * 8.0
        return SizeResult(
            size=self.size, samples=s.count, trials=self.trials, reps=self.reps,
            time_us={"min": s.min, "median": s.median, "mean": s.mean, "p90": s.p90,
                     "p99": s.p99, "max": s.max, "stddev": s.stddev, "mad": s.mad,
                     "best_trial_mean": best_trial},
            ci95_halfwidth_us=half,
            ci95_relative=half / float(np.median(trials)) if half is not None else None,
            converged=self.converged,
            throughput_bps={"from_median": bits / (s.median * 1e-6),
                            "from_min": bits / (s.min * 1e-6),
                            "from_best_trial": bits / (best_trial * 1e-6)},
            corrupt=self.corrupt,
            trial_medians_us=[float(t) for t in np.array(self.trial_medians) / 1000.0])


def make_pool(size: int, nocache: bool) -> _core.Pool:
    """One message buffer, or with nocache a pool spanning 1.5x the last-level cache."""
    if not nocache:
        return _core.Pool(size)
    llc = sysinfo.llc_bytes() or 32 * 1024 * 1024
    return _core.Pool(size, max(2 * size, math.ceil(1.5 * llc) + size))


def run_sweep(transport: Transport, cfg: SweepConfig,
              on_size: Callable[[SizeResult], None] | None = None) -> SweepOutcome:
    """Measure every size; keep what was measured whatever stops the sweep."""
    out = SweepOutcome()
    estimate: float | None = None
    seq, prev_size = 0, None
    try:
        for size in cfg.sizes:
            if estimate is not None and prev_size:
                estimate *= max(1.0, size / prev_size)  # conservative: never overshoot
            m = SizeMeasurement(transport, cfg, size, seq)
            estimate = m.run(estimate)
            seq, prev_size = m.seq, size
            out.sizes.append(m.result())
            if on_size:
                on_size(out.sizes[-1])
            if m.corrupt:
                raise IntegrityError(f"{m.corrupt} corrupted message(s) at {size} bytes")
    except KeyboardInterrupt:
        out.status, out.reason = "interrupted", "interrupted by the user"
    except (IntegrityError, ConnectionError, TimeoutError, OSError, protocol.ProtocolError,
            protocol.PeerRefused) as exc:
        out.status, out.reason, out.error = "failed", str(exc), exc
    except Exception as exc:  # noqa: BLE001 - whatever it is, the measured sizes are kept
        out.status, out.error = "failed", exc
        out.reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return out

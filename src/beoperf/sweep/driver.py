"""The ping-pong sweep: message sizes measured by the precision loop
(beoperf.sweep.precision: calibration in size order, then shuffled passes until every
size is known to the requested precision or the time budget is spent).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from beoperf import _core, engines, errors, interrupts, pools, sysinfo
from beoperf.analysis.stats import MIN_CI_SAMPLES, summarize
from beoperf.engines import Peer, Transport, TransportError, Trial
from beoperf.model.pingpong import SizeResult
from beoperf.sweep.precision import LoopConfig, LoopOutcome, Point, PrecisionLoop, reps_for

DEFAULT_TIME_BUDGET = 20.0  # seconds for a whole sweep (the minimum trials always run)


@dataclass
class SweepConfig:
    sizes: list[int]
    mode: str = "pingpong"
    precision: float = 0.02  # target 95% CI half-width of the median, relative
    trial_time: float = 0.002  # seconds one trial should last (at least min_reps)
    min_reps: int = 3  # repetitions per trial at least (large messages)
    max_time: float | None = None  # seconds per size at most (then not converged)
    min_trials: int = MIN_CI_SAMPLES  # trials are the unit of the CI: at least 6
    nocache: bool = False
    time_budget: float | None = DEFAULT_TIME_BUDGET  # the whole sweep; None: no limit
    seed: int | None = None  # of the shuffled order of the passes
    settle: bool = True  # stream mode: settle the trial length against a shaper first


@dataclass
class SweepOutcome:
    sizes: list[SizeResult] = field(default_factory=list)
    status: str = "complete"
    reason: str | None = None
    error: BaseException | None = None
    facts: dict[str, Any] = field(default_factory=dict)


INTEGRITY_HINT = "check the NICs, cables and offloads on this path"
WARM_FRACTION = 10  # a trial's first reps // 10 (at least one) are warm-up, not samples


def one_way_ns(mode: str, trial: Trial, reps: int) -> np.ndarray:
    """Per-message one-way times of a trial, as samples."""
    if mode == "stream":
        return np.array([trial.elapsed_ns / reps], dtype=np.float64)
    assert trial.samples_ns is not None
    values = trial.samples_ns.astype(np.float64)
    return values / 2.0 if mode == "pingpong" else values


class PingPongMeasurer:
    """Trials of any size against one transport, from one pool sized for the largest
    message (see beoperf.sweep.precision for the loop that drives it)."""

    def __init__(self, transport: Transport, cfg: SweepConfig) -> None:
        self.transport, self.cfg = transport, cfg
        self.pool = make_pool(max(cfg.sizes), cfg)
        self.seq = 0
        self.corrupt: dict[int, int] = {}
        self.stream: Settled | None = None

    def trial(self, size: int, reps: int) -> np.ndarray:
        """One trial: the one-way samples (ns); IntegrityError as soon as one is corrupt.

        The first repetitions after another size are slower (the other size's state in
        the caches and the TCP stacks: seen 1.2-2x on loopback), so a timed trial starts
        with warm-up repetitions (a tenth, at least one) whose samples are dropped."""
        if self.cfg.mode == "stream":
            self.transport.reset()  # a fresh connection per trial, as NetPIPE's -r
            warm = 0  # one sample per trial: the stream's own start is part of it
        else:
            warm = max(1, reps // WARM_FRACTION)
        trial = self.transport.trial(size, reps + warm, self.pool, self.seq)
        self.seq += reps + warm
        if trial.corrupt:
            self.corrupt[size] = self.corrupt.get(size, 0) + trial.corrupt
        return one_way_ns(self.cfg.mode, trial, reps + warm)[warm:]

    def check(self, size: int) -> None:
        """IntegrityError once a trial of ``size`` saw corrupted messages (the loop has
        kept that trial: its times are sound, its content was not)."""
        if self.corrupt.get(size):
            raise errors.IntegrityError(f"{self.corrupt[size]} corrupted message(s) at "
                                        f"{size} bytes", INTEGRITY_HINT)

    def start_pass(self) -> None:
        """Each pass on a fresh data connection, as one NetPIPE sweep runs on one: a
        connection that carried 8 MiB messages stays slow for 1 MiB ones (2x on
        loopback, measured), which an ascending sweep never asks of it."""
        if self.cfg.mode != "stream":  # stream mode opens one per trial anyway
            self.transport.reset()

    def warm(self, size: int) -> None:
        """A few untimed repetitions of ``size`` on the way to a size that is measured."""
        self.trial(size, 1)

    def cost(self, values: np.ndarray) -> float:
        """Wall time of one repetition, from one-way samples."""
        return float(np.median(values)) * (2.0 if self.cfg.mode == "pingpong" else 1.0)

    def calibrate(self, size: int,
                  estimate_ns: float | None) -> tuple[float, np.ndarray, int]:
        """The first trial of a size, which also measures the cost of one repetition (a
        1-repetition estimate first, if the previous size gave none); in stream mode
        first the trial length a shaper's burst cannot fill (see settle_stream).  With
        the trial's repetitions: a stream trial's one sample stands for all of them."""
        if estimate_ns is None:
            estimate_ns = self.cost(self.trial(size, 1))
        if self.cfg.mode == "stream" and self.stream is None and self.cfg.settle:
            probe = settle_size(self.cfg.sizes)
            self.stream = settle_stream(self, probe, estimate_ns * probe / size,
                                        self.cfg.trial_time)
        reps = reps_for(estimate_ns, self.trial_seconds(size), self.cfg.min_reps)
        first = self.trial(size, reps)
        return self.cost(first), first, reps

    def trial_seconds(self, size: int) -> float:
        """A trial's length: the configured one, or in stream mode the settled one."""
        return self.stream.trial_s if self.stream is not None else self.cfg.trial_time


SETTLE = 0.01  # a stream has settled when doubling its trial costs under 1% of its rate
RISE = 0.05  # ... and does not gain more than 5% either (slow start, noise)
MAX_STREAM_TRIAL = 4.0  # seconds: the longest trial settle_stream tries
SHAPER_DROP = 0.2  # a fall of more than 20% from the fastest trial: a burst, then a rate
FIRST_MESSAGES = 2  # settle_stream's first trial: so few messages that a burst holds them


@dataclass
class Settled:
    """What settle_stream found: the trial length to use and what the lengths showed."""

    trial_s: float
    unit_ns: float  # time per message at that length
    rates_bps: list[tuple[float, float]]  # (trial seconds, payload bit/s) as tried
    settled: bool  # False: still falling at MAX_STREAM_TRIAL

    def shaper(self, size: int) -> dict[str, Any] | None:
        """A token bucket's signature, if the rate fell as trials got longer: the burst
        that passed at line rate (bytes moved by the shortest trial beyond what the
        sustained rate explains) and the sustained rate."""
        (t0, r0), (_t1, r1) = max(self.rates_bps, key=lambda tr: tr[1]), self.rates_bps[-1]
        if r1 >= r0 * (1 - SHAPER_DROP):
            return None
        # bytes a trial moved beyond what the sustained rate explains: the burst, seen
        # whole by the longest trial that still carried all of it (a shorter trial that
        # fit in the burst shows only its own size)
        burst = max(max(0.0, (r - r1) * t / 8) for t, r in self.rates_bps[:-1])
        return {"sustained_bps": r1, "short_trial_bps": r0, "short_trial_s": t0,
                "burst_bytes": round(burst), "trial_s": self.trial_s,
                "settled": self.settled, "message_size": size}


SETTLE_SIZE = 64 * 1024


def settle_size(sizes: list[int]) -> int:
    """The message size to settle the stream trial's length with: small enough that the
    shortest trial fits in a shaper's burst (so that the fall shows), large enough to be
    cheap per byte: 64 KiB, or the largest size of a sweep of smaller ones."""
    return min(SETTLE_SIZE, max(sizes))


def settle_stream(m: PingPongMeasurer, size: int, unit_ns: float, start_s: float) -> Settled:
    """Double the stream trial's length until its rate stops changing.

    A shaper (tc tbf, a policed cloud or campus link) lets a burst through at line rate
    and then holds the stream to its rate; a trial that fits in the burst measures the
    line, not the link.  The rate of a trial of length L is about R + B/L (B the burst,
    R the rate): it falls as L grows and settles within 1% once L > 50 B/R (a rate that
    still rises by more than 5%, slow start or noise, is not settled either).  Every
    stream trial opens a fresh connection (the bucket refills in between), so each
    length is measured as a trial is.  The first trial is FIRST_MESSAGES messages, so
    that a burst holds it on any machine (a first trial of ``start_s`` overflows a
    256 KB burst on a fast one and the fall goes unseen); no length shorter than
    ``start_s`` counts as settled."""
    rates: list[tuple[float, float]] = []
    length = min(start_s, FIRST_MESSAGES * unit_ns * 1e-9)
    while True:
        reps = reps_for(unit_ns, length)
        unit_ns = m.cost(m.trial(size, reps))
        took = reps * unit_ns * 1e-9  # what the trial really lasted
        rates.append((took, size * 8e9 / unit_ns))
        if len(rates) > 1 and took >= start_s and (rates[-2][1] * (1 - SETTLE) <= rates[-1][1]
                                                   <= rates[-2][1] * (1 + RISE)):
            return Settled(took, unit_ns, rates, True)
        if took * 2 > MAX_STREAM_TRIAL:
            return Settled(took, unit_ns, rates, False)
        length = 2 * took


def shaper_probe(peer: Peer, params: dict[str, Any], sizes: list[int], *,
                 timeout: float, trial_time: float,
                 open_stream: Callable[[dict[str, Any]], Transport] | None = None,
                 ) -> dict[str, Any]:
    """A stream session of its own that only settles the trial length (settle_stream):
    for a ping-pong or bidir sweep, whether the path has a shaper whose burst its
    messages fit in.  {"shaper": ... or None, "stream_rates": [...]}."""
    size = settle_size(sizes)
    stream_params = {**params, "mode": "stream", "max_size": size, "integrity": False}
    cfg = SweepConfig(sizes=[size], mode="stream", trial_time=trial_time)
    transport = open_stream(stream_params) if open_stream else \
        open_transport(peer, stream_params, timeout=timeout)
    try:
        m = PingPongMeasurer(transport, cfg)
        unit = m.cost(m.trial(size, 1))
        settled = settle_stream(m, size, unit, trial_time)
    finally:
        transport.close()
    return {"shaper": settled.shaper(size),
            "stream_rates": [[t, r] for t, r in settled.rates_bps]}


def size_result(point: Point, mode: str, corrupt: int = 0,
                inflation: float = 1.0) -> SizeResult:
    """The statistics of one size (times one-way, microseconds).

    The median is the median of the trials' medians (trials, spread over the run, are the
    independent unit); ``ci95_median_us`` is its 95% interval (order statistics), and
    ``ci95_us`` (with its half-width and relative half-width) the interval a repeat run's
    median is expected in: the first widened by sqrt(2) and by ``inflation`` (the
    machine's state carried between passes; beoperf.sweep.precision).  The other
    statistics are of all samples (``sample_median`` too)."""
    s = summarize(np.concatenate(point.chunks) / 1000.0)  # ns -> us
    best_trial = min(float(c.mean()) for c in point.chunks) / 1000.0
    median = float(np.median(point.trial_medians)) / 1000.0
    plain, repeat = point.median_ci(), point.repeat_interval(inflation)
    half = (repeat[1] - repeat[0]) / 2000.0 if repeat else None
    bits = (2.0 if mode == "bidir" else 1.0) * int(point.key) * 8.0
    return SizeResult(
        size=int(point.key), samples=s.count, trials=point.trials, reps=point.reps,
        time_us={"min": s.min, "median": median, "mean": s.mean, "p90": s.p90,
                 "p99": s.p99, "max": s.max, "stddev": s.stddev, "mad": s.mad,
                 "best_trial_mean": best_trial, "sample_median": s.median},
        ci95_halfwidth_us=half,
        ci95_relative=half / median if half is not None else None,
        converged=point.converged,
        throughput_bps={"from_median": bits / (median * 1e-6),
                        "from_min": bits / (s.min * 1e-6),
                        "from_best_trial": bits / (best_trial * 1e-6)},
        corrupt=corrupt,
        trial_medians_us=[float(t) for t in np.array(point.trial_medians) / 1000.0],
        ci95_us=[repeat[0] / 1000.0, repeat[1] / 1000.0] if repeat else None,
        ci95_median_us=[plain[1] / 1000.0, plain[2] / 1000.0] if plain else None)


def open_transport(peer: Peer, params: dict[str, Any], *, timeout: float = 10.0) -> Transport:
    """The transport ``params["transport"]`` names (tcp if none), built through the
    registry and connected.  errors.BadSpec for an unknown name; errors.ConnectError or
    errors.PeerError when it cannot connect (then nothing is left open)."""
    cls = engines.get(params.get("transport", "tcp"))
    transport = cls(peer, params, timeout=timeout)
    transport.connect()
    return transport


def make_pool(size: int, cfg: SweepConfig) -> _core.Pool:
    """Two message buffers, or with nocache the session's one no-cache span
    (beoperf.pools: more than the last-level cache, the same for every size)."""
    if not cfg.nocache:
        return _core.Pool(size)
    return _core.Pool(size, pools.nocache_span(max(cfg.sizes), sysinfo.llc_bytes()))


def run_sweep(transport: Transport, cfg: SweepConfig,
              on_size: Callable[[SizeResult], None] | None = None,
              on_pass: Callable[[int, list[Point]], None] | None = None) -> SweepOutcome:
    """Measure every size with the precision loop; keep what was measured whatever stops
    the sweep (every size with at least one trial is in the outcome)."""
    measurer = PingPongMeasurer(transport, cfg)
    loop = PrecisionLoop(cfg.sizes, measurer, loop_config(cfg), on_pass=on_pass)
    result = loop.run()
    out = SweepOutcome(facts=sweep_facts(cfg, result, measurer))
    for point in result.points:
        if point.trials:
            out.sizes.append(size_result(point, cfg.mode, measurer.corrupt.get(point.key, 0),
                                         result.inflation))
            if on_size:
                on_size(out.sizes[-1])
    _classify(out, result.stopped)
    return out


def loop_config(cfg: SweepConfig) -> LoopConfig:
    return LoopConfig(precision=cfg.precision, trial_time=cfg.trial_time, min_reps=cfg.min_reps,
                      min_trials=cfg.min_trials, time_budget=cfg.time_budget,
                      max_time=cfg.max_time, seed=cfg.seed)


def sweep_facts(cfg: SweepConfig, result: LoopOutcome,
                measurer: PingPongMeasurer) -> dict[str, Any]:
    """How the sweep ran, for the result (its body's "sweep")."""
    stream = measurer.stream
    shaper = stream.shaper(settle_size(cfg.sizes)) if stream is not None else None
    return {"stream_trial_s": stream.trial_s if stream else None, "shaper": shaper,
            "stream_rates": [[t, r] for t, r in stream.rates_bps] if stream else None,
            "passes": result.passes, "elapsed_s": round(result.elapsed_s, 3),
            "time_budget_s": cfg.time_budget, "over_budget": result.over_budget,
            "max_time_s": cfg.max_time, "trial_time_s": cfg.trial_time,
            "min_trials": cfg.min_trials, "min_reps": cfg.min_reps, "seed": cfg.seed,
            "order": "ascending passes, each on a fresh data connection",
            "drift": result.drift, "interval_inflation": round(result.inflation, 3),
            "pass_autocorrelation": result.pass_autocorrelation,
            "interval": "ci95_us: where a repeat run's median falls (95%): the median's "
                        "order-statistic interval over trial medians (ci95_median_us), "
                        "widened by sqrt(2) and by interval_inflation"}


def _classify(out: SweepOutcome, stopped: BaseException | None) -> None:
    """Why the sweep stopped early, if it did (the measured sizes are kept)."""
    if stopped is None:
        return
    if isinstance(stopped, KeyboardInterrupt):  # Ctrl-C, or SIGTERM/SIGHUP
        out.status, out.reason, out.error = "interrupted", interrupts.reason(stopped), stopped
    elif isinstance(stopped, errors.BeoperfError | OSError | TransportError):
        out.status, out.reason, out.error = "failed", str(stopped), stopped
    elif isinstance(stopped, Exception):  # whatever it is, the measured sizes are kept
        out.status, out.error = "failed", stopped
        out.reason = f"{type(stopped).__name__}: {stopped}" if str(stopped) else \
            type(stopped).__name__
    else:
        raise stopped

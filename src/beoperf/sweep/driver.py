"""The ping-pong sweep: message sizes measured by the precision loop
(beoperf.sweep.precision: calibration in size order, then shuffled passes until every
size is known to the requested precision or the time budget is spent).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sized
from dataclasses import dataclass, field
from typing import TypedDict

import numpy as np

from beoperf import _core, engines, errors, interrupts, pools, sysinfo
from beoperf.analysis.stats import MIN_CI_SAMPLES, summarize
from beoperf.analysis.tails import tail_of
from beoperf.engines import Peer, Transport, TransportError, Trial
from beoperf.engines.base import SessionParams
from beoperf.model import jsonvalue
from beoperf.model.document import JsonObject, JsonValue
from beoperf.model.pingpong import SizeResult
from beoperf.sweep.precision import (
    PRECISION,
    TRIAL_S,
    LoopConfig,
    LoopOutcome,
    Point,
    PrecisionLoop,
    reps_for,
)

# The ping-pong settings' defaults, each given once: SweepConfig, the suite's Spec and the
# CLI's options take them from here (and the loop's own from beoperf.sweep.precision).
DEFAULT_TIME_BUDGET = 20.0  # seconds for a whole sweep (the minimum trials always run)
DEFAULT_TIMEOUT = 10.0  # seconds a silent peer is waited for


@dataclass
class SweepConfig:
    sizes: list[int]
    mode: str = "pingpong"
    precision: float = PRECISION  # target 95% CI half-width of the median, relative
    trial_time: float = TRIAL_S  # seconds one trial should last (at least min_reps)
    min_reps: int = 3  # repetitions per trial at least (large messages)
    max_time: float | None = None  # seconds per size at most (then not converged)
    min_trials: int = MIN_CI_SAMPLES  # trials are the unit of the CI: at least 6
    nocache: bool = False
    time_budget: float | None = DEFAULT_TIME_BUDGET  # the whole sweep; None: no limit
    seed: int | None = None  # of the shuffled order of the passes
    settle: bool = True  # stream mode: settle the trial length against a shaper first
    streams: int = 1  # stream mode: parallel data connections, each sending every message


@dataclass
class SweepOutcome:
    sizes: list[SizeResult] = field(default_factory=list)
    status: str = "complete"
    reason: str | None = None
    error: BaseException | None = None
    facts: JsonObject = field(default_factory=dict)  # the run's "sweep": how it ran
    # every size's samples (one-way ns), one array per trial in the order measured: for
    # --raw-samples; the same arrays the precision loop kept, not a copy
    samples: dict[int, list[np.ndarray]] = field(default_factory=dict)


INTEGRITY_HINT = "check the NICs, cables and offloads on this path"
WARM_FRACTION = 10  # a trial's first reps // 10 (at least one) are warm-up, not samples


def one_way_ns(mode: str, trial: Trial, reps: int) -> np.ndarray:
    """Per-message one-way times of a trial, as samples; with parallel streams a
    message is one of any stream's, so the rate they give is the streams' sum over their
    common window."""
    if mode == "stream":
        streams = len(trial.streams_ns) if trial.streams_ns else 1
        return np.array([trial.elapsed_ns / (reps * streams)], dtype=np.float64)
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
        # --streams: per size, each trial's sample (as the loop gets it) and its per-stream
        # goodputs (bit/s, each stream's bytes over its own loop time)
        self.per_stream: dict[int, list[tuple[float, list[float]]]] = {}
        self.streams = max(1, cfg.streams) if cfg.mode == "stream" else 1

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
        values = one_way_ns(self.cfg.mode, trial, reps + warm)[warm:]
        if trial.streams_ns and len(values):
            self.per_stream.setdefault(size, []).append(
                (float(values[0]), [size * 8.0 * (reps + warm) / (ns * 1e-9)
                                    for ns in trial.streams_ns]))
        return values

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

    def probe(self, size: int) -> float:
        """The cost of one repetition of ``size`` (ns), from a single untimed one (two
        in stream mode, whose trial is a fresh connection): before a size's first
        trial, so that the loop can tell whether that trial fits in the budget.  A cost
        scaled from the size before misses a jump: with 16 KiB socket buffers on
        loopback a repetition took 57 us at 48 KiB and 90-118 ms at 64 KiB, and the
        first trial, 38 repetitions for 2 ms, took 3.4 s of a 3 s budget."""
        if self.cfg.mode == "stream":
            return self.cost(self.trial(size, 1))
        trial = self.transport.trial(size, 1, self.pool, self.seq)
        self.seq += 1
        if trial.corrupt:  # counted; the trial that follows stops the sweep (check)
            self.corrupt[size] = self.corrupt.get(size, 0) + trial.corrupt
        return self.cost(one_way_ns(self.cfg.mode, trial, 1))

    def seconds(self, size: int, reps: int, unit_ns: float) -> float:
        """How long a trial of ``reps`` repetitions lasts at ``unit_ns`` a repetition,
        with its warm-up repetitions (see trial): what the hard budget plans with."""
        warm = 0 if self.cfg.mode == "stream" else max(1, reps // WARM_FRACTION)
        return (reps + warm) * max(unit_ns, 1.0) * 1e-9

    def cost(self, values: np.ndarray) -> float:
        """Wall time of one repetition (with parallel streams, one message on every
        stream), from one-way samples."""
        scale = 2.0 if self.cfg.mode == "pingpong" else float(self.streams)
        return float(np.median(values)) * scale

    def calibrate(self, size: int,
                  estimate_ns: float | None) -> tuple[float, np.ndarray, int]:
        """The first trial of a size, which also measures the cost of one repetition (a
        1-repetition estimate first, if the previous size gave none); in stream mode
        first the trial length a shaper's burst cannot fill (see settle_stream).  With
        the trial's repetitions: a stream trial's one sample stands for all of them."""
        if estimate_ns is None:
            estimate_ns = self.cost(self.trial(size, 1))
        if self.cfg.mode == "stream" and self.stream is None and self.cfg.settle:
            probe = parallel_settle_size(self.cfg)
            self.stream = settle_confirmed(self, probe, estimate_ns * probe / max(size, 1),
                                           self.cfg.trial_time, cap_s=no_fall_cap(self.cfg))
        reps = reps_for(estimate_ns, self.trial_seconds(size), self.cfg.min_reps)
        first = self.trial(size, reps)
        return self.cost(first), first, reps

    def trial_seconds(self, size: int) -> float:
        """A trial's length: the configured one, or in stream mode the settled one."""
        return self.stream.trial_s if self.stream is not None else self.cfg.trial_time


SETTLE = 0.01  # a stream has settled when doubling its trial costs under 1% of its rate
RISE = 0.05  # ... and does not gain more than 5% either (slow start, noise)
MAX_STREAM_TRIAL = 4.0  # seconds: the longest trial settle_stream tries
SHAPER_DROP = 0.5  # a fall to under half the fastest trial's rate: a burst, then a rate
CONFIRM = 0.1  # a second settling must find the same sustained rate, within 10%
BURST_RATE = 1.5  # trials this much faster than the sustained rate carried burst bytes
WANDER = 0.15  # a bucket's fall may wobble up this much between trials (a busy machine)
MAX_REFILL = 2.0  # seconds at most to wait for a bucket to refill before the second
FIRST_MESSAGES = 2  # settle_stream's first trial: so few messages that a burst holds them
NO_FALL_SHARE = 0.5  # of the budget: what the minimum trials of a stream sweep may fill
NO_FALL_TRIAL = 0.25  # seconds: a settling that shows no fall grows its trials no longer


def no_fall_cap(cfg: SweepConfig) -> float:
    """The longest stream trial a sweep's settling grows to while the rate shows no
    shaper's fall: the budget's share of one trial (every size runs min_trials of them),
    at least the configured trial time, at most MAX_STREAM_TRIAL.  A busy machine's rate
    wanders and never settles within 1%; growing the trials to MAX_STREAM_TRIAL then made
    a 15-size stream sweep on loopback take 2 minutes against a 20 s budget.  The trials
    of every size's minimum may fill NO_FALL_SHARE of the budget: the rest is the settling's
    own doublings (about two trials' worth), a connection per trial and a machine that
    slows down; at the whole budget, 4 sizes x 6 trials of 0.7-0.83 s filled 20 s and the
    hard budget cut the last size to one trial."""
    if cfg.time_budget is None:
        return MAX_STREAM_TRIAL
    share = NO_FALL_SHARE * cfg.time_budget / (max(1, len(cfg.sizes)) * max(1, cfg.min_trials))
    return min(MAX_STREAM_TRIAL, max(cfg.trial_time, share))


class Shaper(TypedDict):
    """A token bucket's signature in a stream's rates (Settled.shaper)."""

    sustained_bps: float
    short_trial_bps: float
    short_trial_s: float
    burst_bytes: int
    trial_s: float
    settled: bool
    message_size: int
    confirmed: bool | None


def shaper_of(sweep: JsonObject | None) -> Shaper | None:
    """The shaper a run's "sweep" records (sweep_facts, shaper_probe), each figure
    checked; None when there is none or it is not one."""
    found = jsonvalue.section(sweep, "shaper")
    numbers = {k: jsonvalue.number(found, k) for k in
               ("sustained_bps", "short_trial_bps", "short_trial_s", "trial_s")}
    burst, size = jsonvalue.integer(found, "burst_bytes"), jsonvalue.integer(found, "message_size")
    rate, short_rate = numbers["sustained_bps"], numbers["short_trial_bps"]
    short_s, trial_s = numbers["short_trial_s"], numbers["trial_s"]
    if rate is None or short_rate is None or short_s is None or trial_s is None \
            or burst is None or size is None:
        return None
    confirmed = found.get("confirmed")
    return {"sustained_bps": rate, "short_trial_bps": short_rate, "short_trial_s": short_s,
            "burst_bytes": burst, "trial_s": trial_s, "settled": bool(found.get("settled")),
            "message_size": size,
            "confirmed": confirmed if isinstance(confirmed, bool) else None}


@dataclass
class Settled:
    """What settle_stream found: the trial length to use and what the lengths showed."""

    trial_s: float
    unit_ns: float  # time per message at that length
    rates_bps: list[tuple[float, float]]  # (trial seconds, payload bit/s) as tried
    settled: bool  # False: still falling at MAX_STREAM_TRIAL
    confirmed: bool | None = None  # a second settling found the same (None: not tried)
    repeat_bps: list[tuple[float, float]] | None = None  # that second settling's rates

    def shaper(self, size: int) -> Shaper | None:
        """A token bucket's signature, if the rate fell as trials got longer: the burst
        that passed at line rate (bytes moved by the shortest trial beyond what the
        sustained rate explains) and the sustained rate.  None unless the rate fell to
        under half the fastest trial's and kept falling from there (a rise of more than
        WANDER between longer trials is a busy machine's wander, not a bucket), or when a
        second settling did not find it again (``confirmed`` False)."""
        if self.confirmed is False or not self.falls():
            return None
        (t0, r0), (_t1, r1) = max(self.rates_bps, key=lambda tr: tr[1]), self.rates_bps[-1]
        # bytes a trial moved beyond what the sustained rate explains: the burst, seen
        # whole by the longest trial that still carried all of it (a shorter trial that
        # fit in the burst shows only its own size)
        burst = self.burst_bytes()
        return {"sustained_bps": r1, "short_trial_bps": r0, "short_trial_s": t0,
                "burst_bytes": round(burst), "trial_s": self.trial_s,
                "settled": self.settled, "message_size": size,
                "confirmed": self.confirmed}

    def falls(self) -> bool:
        """The rate fell to under (1 - SHAPER_DROP) of the fastest trial's and never rose
        by more than WANDER on the way."""
        return falls(self.rates_bps)

    def refill_s(self) -> float:
        """How long a bucket of the burst seen takes to refill at the sustained rate
        (with room), at most MAX_REFILL."""
        (_t, r1), burst = self.rates_bps[-1], self.burst_bytes()
        return min(MAX_REFILL, 1.5 * burst * 8 / r1 + 0.01) if r1 > 0 else MAX_REFILL

    def burst_bytes(self) -> float:
        """Bytes a trial moved beyond what the sustained rate explains, largest over the
        trials at least BURST_RATE times the sustained rate (a long trial a few % above
        it on a busy machine would otherwise count its noise times its length)."""
        r1 = self.rates_bps[-1][1]
        return max((max(0.0, (r - r1) * t / 8) for t, r in self.rates_bps[:-1]
                    if r >= BURST_RATE * r1), default=0.0)


SETTLE_SIZE = 64 * 1024


def falls(rates_bps: list[tuple[float, float]]) -> bool:
    """A token bucket's signature in a settling's (trial seconds, rate) pairs: the rate
    fell to under (1 - SHAPER_DROP) of the fastest trial's and never rose by more than
    WANDER on the way."""
    rates = [r for _t, r in rates_bps]
    top = rates.index(max(rates))
    after = rates[top:]
    return (len(after) > 1 and after[-1] < after[0] * (1 - SHAPER_DROP)
            and all(b <= a * (1 + WANDER) for a, b in zip(after, after[1:], strict=False)))


def settle_size(sizes: list[int]) -> int:
    """The message size to settle the stream trial's length with: small enough that the
    shortest trial fits in a shaper's burst (so that the fall shows), large enough to be
    cheap per byte: 64 KiB, or the largest size of a sweep of smaller ones (1 byte for
    empty messages only: a rate needs bytes)."""
    return max(1, min(SETTLE_SIZE, max(sizes)))


def parallel_settle_size(cfg: SweepConfig) -> int:
    """The message size the stream settling runs (settle_size), shared by --streams'
    parallel streams: each sends its part, so that the first trial's few messages on
    every stream still fit in a shaper's burst (4 streams of 64 KiB overflowed a 256 KB
    burst in the first trial, and the shaper went unseen: the sum read 1-2% high)."""
    streams = max(1, cfg.streams) if cfg.mode == "stream" else 1
    return max(1, settle_size(cfg.sizes) // streams)


def settle_stream(m: PingPongMeasurer, size: int, unit_ns: float, start_s: float,
                  cap_s: float = MAX_STREAM_TRIAL) -> Settled:
    """Double the stream trial's length until its rate stops changing.

    A shaper (tc tbf, a policed cloud or campus link) lets a burst through at line rate
    and then holds the stream to its rate; a trial that fits in the burst measures the
    line, not the link.  The rate of a trial of length L is about R + B/L (B the burst,
    R the rate): it falls as L grows and settles within 1% once L > 50 B/R (a rate that
    still rises by more than 5%, slow start or noise, is not settled either); settled
    means two doublings in a row inside that band (see steady).  Every
    stream trial opens a fresh connection (the bucket refills in between), so each
    length is measured as a trial is.  The first trial is FIRST_MESSAGES messages, so
    that a burst holds it on any machine (a first trial of ``start_s`` overflows a
    256 KB burst on a fast one and the fall goes unseen); no length shorter than
    ``start_s`` counts as settled.  While the rates show no fall (see falls) the trials
    grow to ``cap_s`` at most (not settled then): without a bucket there is no burst to
    outlast, and a busy machine's wander would otherwise double them to
    MAX_STREAM_TRIAL."""
    rates: list[tuple[float, float]] = []
    length = min(start_s, FIRST_MESSAGES * unit_ns * 1e-9)
    while True:
        reps = reps_for(unit_ns, length)
        unit_ns = m.cost(m.trial(size, reps))
        took = reps * unit_ns * 1e-9  # what the trial really lasted
        rates.append((took, size * 8e9 * _streams(m) / unit_ns))  # all streams together
        if took >= start_s and steady(rates):
            return Settled(took, unit_ns, rates, True)
        if took * 2 > MAX_STREAM_TRIAL or (took * 2 > cap_s and not falls(rates)):
            return Settled(took, unit_ns, rates, False)
        length = 2 * took


def steady(rates: list[tuple[float, float]]) -> bool:
    """The last two doublings each changed the rate by less than SETTLE down or RISE up:
    one step inside the band can be a busy machine's chance (a stream through a
    100 Mbit/s bucket once settled 3% above its rate on one step)."""
    if len(rates) < 3:
        return False
    (_, a), (_, b), (_, c) = rates[-3:]
    return a * (1 - SETTLE) <= b <= a * (1 + RISE) and b * (1 - SETTLE) <= c <= b * (1 + RISE)


def _streams(m: PingPongMeasurer) -> int:
    """The parallel streams a measurer's trials run (1 for a measurer without them)."""
    return int(getattr(m, "streams", 1))


def replay_stream(m: PingPongMeasurer, size: int,
                  rates: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The trials of a settling again, with the same message counts (a bucket gives the
    same rates for the same bytes)."""
    out = []
    for took, rate in rates:
        reps = max(1, round(took * rate / (8.0 * size * _streams(m))))
        unit_ns = m.cost(m.trial(size, reps))
        out.append((reps * unit_ns * 1e-9, size * 8e9 * _streams(m) / unit_ns))
    return out


def settle_confirmed(m: PingPongMeasurer, size: int, unit_ns: float, start_s: float,
                     sleep: Callable[[float], None] = time.sleep,
                     cap_s: float = MAX_STREAM_TRIAL) -> Settled:
    """settle_stream, and when it shows a shaper, its trials once more (the same message
    counts) after the bucket has had time to refill: a token bucket is deterministic and
    shows the same fall to the same rate again (within CONFIRM), while a busy machine
    that happened to slow down during the longer trials does not, as a rule.  The second
    series' rates are kept."""
    first = settle_stream(m, size, unit_ns, start_s, cap_s)
    seen = first.shaper(size)
    if seen is None:
        return first
    sleep(first.refill_s())
    again = dataclasses.replace(first, rates_bps=replay_stream(m, size, first.rates_bps))
    other = again.shaper(size)
    same = other is not None and abs(other["sustained_bps"] / seen["sustained_bps"] - 1) \
        <= CONFIRM
    return dataclasses.replace(first, confirmed=same, repeat_bps=again.rates_bps)


def shaper_probe(peer: Peer, params: SessionParams, sizes: list[int], *,
                 timeout: float, trial_time: float,
                 open_stream: Callable[[SessionParams], Transport] | None = None,
                 ) -> JsonObject:
    """A stream session of its own that only settles the trial length (settle_stream):
    for a ping-pong or bidir sweep, whether the path has a shaper whose burst its
    messages fit in.  {"shaper": ... or None, "stream_rates": [...]}."""
    size = settle_size(sizes)
    stream_params: SessionParams = {**params, "mode": "stream", "max_size": size,
                                    "integrity": False}
    cfg = SweepConfig(sizes=[size], mode="stream", trial_time=trial_time)
    transport = open_stream(stream_params) if open_stream else \
        open_transport(peer, stream_params, timeout=timeout)
    try:
        m = PingPongMeasurer(transport, cfg)
        unit = m.cost(m.trial(size, 1))
        settled = settle_confirmed(m, size, unit, trial_time,
                                   cap_s=max(trial_time, NO_FALL_TRIAL))
    finally:
        transport.close()
    return {"shaper": _shaper_json(settled.shaper(size)),
            "stream_rates": _pairs(settled.rates_bps),
            "stream_rates_repeat": _pairs(settled.repeat_bps)}


def _shaper_json(shaper: Shaper | None) -> JsonObject | None:
    return jsonvalue.as_object(shaper) if shaper is not None else None


def _pairs(rates: list[tuple[float, float]] | None) -> list[JsonValue] | None:
    return [[t, r] for t, r in rates] if rates is not None else None


def stream_medians(per_trial: list[tuple[float, list[float]]] | None,
                   point: Point) -> list[float] | None:
    """Each parallel stream's median goodput (bit/s) over the trials the size's figures
    come from (its chunks: not the warm-ups, probes and settling trials, which ran too)."""
    kept = {float(c[0]) for c in point.chunks if len(c)}
    rates = [r for sample, r in per_trial or [] if sample in kept]
    if not rates:
        return None
    return [float(v) for v in np.median(np.array(rates), axis=0)]


def size_result(point: Point, mode: str, corrupt: int = 0,
                inflation: float = 1.0, streams_bps: list[float] | None = None) -> SizeResult:
    """The statistics of one size (times one-way, microseconds).

    The median is the median of the trials' medians (trials, spread over the run, are the
    independent unit); ``ci95_median_us`` is its 95% interval (order statistics), and
    ``ci95_us`` (with its half-width and relative half-width) the interval a repeat run's
    median is expected in: the first widened by sqrt(2) and by ``inflation`` (the
    machine's state carried between passes; beoperf.sweep.precision), on the log scale.
    ``ci95_within_run_us`` is the same interval, kept as this run's own part when the
    spread between runs is added to ``ci95_us`` later (suites.pingpong.across_runs).
    The other statistics are of all samples (``sample_median`` too); ``tail`` holds the
    deep percentiles and their log histogram (beoperf.analysis.tails), in the modes timed
    per message (a stream trial is one sample)."""
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
        ci95_median_us=_positive([plain[1] / 1000.0, plain[2] / 1000.0]) if plain else None,
        ci95_within_run_us=[repeat[0] / 1000.0, repeat[1] / 1000.0] if repeat else None,
        trial_passes=list(point.pass_of),
        tail=jsonvalue.as_object(tail_of(point.chunks)) if mode != "stream" else None,
        streams_bps=streams_bps)


def _positive(interval: list[float]) -> list[float] | None:
    """An interval of a time, if both bounds are positive (a trial median of 0 ns, which
    no clock should give, leaves the size without one rather than with a bound of 0)."""
    return interval if interval[0] > 0 else None


def open_transport(peer: Peer, params: SessionParams, *,
                   timeout: float = DEFAULT_TIMEOUT) -> Transport:
    """The transport ``params["transport"]`` names (tcp if none), built through the
    registry and connected.  errors.BadSpec for an unknown name; errors.ConnectError or
    errors.PeerError when it cannot connect (then nothing is left open)."""
    cls = engines.get(params.get("transport", "tcp"))
    transport = cls(peer, params, timeout=timeout)
    transport.connect()
    return transport


def make_pool(size: int, cfg: SweepConfig) -> _core.Pool:
    """Two message buffers, or with nocache the session's one no-cache span
    (beoperf.pools: more than the last-level cache, the same for every size); a sweep of
    empty messages gets a 1-byte pool (the byte TCP sends for one: engines.tcp_data)."""
    size = max(size, 1)
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
                                         result.inflation,
                                         stream_medians(measurer.per_stream.get(point.key),
                                                        point)))
            out.samples[int(point.key)] = point.chunks
            if on_size:
                on_size(out.sizes[-1])
    _classify(out, result.stopped)
    return out


def loop_config(cfg: SweepConfig) -> LoopConfig:
    return LoopConfig(precision=cfg.precision, trial_time=cfg.trial_time, min_reps=cfg.min_reps,
                      min_trials=cfg.min_trials, time_budget=cfg.time_budget,
                      max_time=cfg.max_time, seed=cfg.seed)


def sweep_facts(cfg: SweepConfig, result: LoopOutcome,
                measurer: PingPongMeasurer) -> JsonObject:
    """How the sweep ran, for the result (its body's "sweep")."""
    stream = measurer.stream
    shaper = stream.shaper(parallel_settle_size(cfg)) if stream is not None else None
    return {"stream_trial_s": stream.trial_s if stream else None,
            "shaper": _shaper_json(shaper),
            "stream_rates": _pairs(stream.rates_bps) if stream else None,
            "stream_rates_repeat": _pairs(stream.repeat_bps) if stream else None,
            "passes": result.passes, "elapsed_s": round(result.elapsed_s, 3),
            "time_budget_s": cfg.time_budget, "over_budget": result.over_budget,
            "hard_budget": True, **cut_facts(result.points, cfg.min_trials),
            "max_time_s": cfg.max_time, "trial_time_s": cfg.trial_time,
            "min_trials": cfg.min_trials, "min_reps": cfg.min_reps, "seed": cfg.seed,
            "order": "ascending passes, each on a fresh data connection",
            "drift": jsonvalue.as_object(result.drift),
            "interval_inflation": round(result.inflation, 3),
            "pass_autocorrelation": result.pass_autocorrelation,
            "interval": "ci95_us: where a repeat run's median falls (95%): the median's "
                        "order-statistic interval over trial medians (ci95_median_us), "
                        "widened by sqrt(2) and by interval_inflation on the log scale "
                        "(ci95_within_run_us: this run's own part, always), then (ping-pong "
                        "over TCP, between_runs) with the spread between runs of the setup "
                        "added on the log scale, when it is known"}


def cut_facts(points: list[Point], min_trials: int) -> JsonObject:
    """The sizes the hard budget cut: measured fewer than ``min_trials`` times
    (``short_of_minimum``: [size, trials] each) or not at all (``not_measured``)."""
    return {"short_of_minimum": [[int(p.key), p.trials] for p in points
                                 if 0 < p.trials < min_trials],
            "not_measured": [int(p.key) for p in points if not p.trials]}


OVERRUN_NOTE = 0.05  # a run this much over its budget says so (less: its last trial's noise)


def budget_notes(facts: JsonObject, status: str = "complete") -> list[str]:
    """What the time budget left out, for a result's warnings: sizes not measured or short
    of their minimum trials (each with its count), and a run that overran the budget."""
    budget, minimum = jsonvalue.number(facts, "time_budget_s"), facts.get("min_trials")
    notes = []
    missing = _not_measured(facts)
    if missing and status == "complete":
        notes.append(f"{_count(missing, 'size')} not measured ({_span(missing)}): a first "
                     f"trial did not fit in the time budget of {budget:g} s beside the "
                     "minimum trials of the cheaper sizes; give a longer --time-budget")
    short = _short_of_minimum(facts)
    if short:
        listed = ", ".join(f"{size} B ({trials})" for size, trials in short[:6])
        notes.append(f"{_count(short, 'size')} got fewer than the minimum {minimum} trials "
                     f"within the time budget of {budget:g} s, so no interval: "
                     f"{listed}{' ...' if len(short) > 6 else ''} (trials in brackets)")
    elapsed = jsonvalue.number(facts, "elapsed_s")
    if facts.get("hard_budget") is False and facts.get("over_budget"):
        notes.append(f"the minimum {minimum} trials of every size took {elapsed} s, longer "
                     f"than the time budget of {budget} s")
    elif budget and elapsed and elapsed > budget * (1 + OVERRUN_NOTE):
        notes.append(f"the sizes took {elapsed} s, more than the time budget of {budget:g} "
                     "s: a trial lasted longer than the one before it predicted")
    return notes


def _not_measured(facts: JsonObject) -> list[int]:
    """The sizes the budget left unmeasured (cut_facts)."""
    return [size for size in jsonvalue.items(facts, "not_measured") if isinstance(size, int)]


def _short_of_minimum(facts: JsonObject) -> list[list[JsonValue]]:
    """The [size, trials] of each size measured fewer than the minimum times (cut_facts)."""
    return [pair for pair in jsonvalue.items(facts, "short_of_minimum")
            if isinstance(pair, list) and len(pair) == 2]


def _count(items: Sized, what: str) -> str:
    return f"{len(items)} {what}{'s' if len(items) != 1 else ''}"


def _span(sizes: list[int]) -> str:
    return f"{sizes[0]} B" if len(sizes) == 1 else f"{min(sizes)} B to {max(sizes)} B"


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

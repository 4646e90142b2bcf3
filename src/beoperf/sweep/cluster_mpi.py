"""The measurers of the cluster's own MPI tests, for the precision loop: rings (HPCC's ring
latency and bandwidth), all pairs (a ping-pong per pair, one pair at a time or a round of
disjoint pairs at once) and N pairs at once (osu_mbw_mr's windows).

Each trial is one order per rank (``engines.mpi_group``): every loop runs in C, with a
warm-up and, where several ranks must start together, MPI_Barrier between the warm-up
and the timed repetitions (HPCC's rings start after an MPI_Allreduce and one untimed
step; osu_mbw_mr's pairs after warm-up windows and a barrier).  A trial gives the
precision loop one figure (its samples are that one value), and the measurer keeps what
else it learnt per key in ``log`` (each rank's or each pair's part), from which the
suites build their documents.  A corrupted message stops the loop (``check``), the trials
so far kept.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import replace
from typing import Generic, TypedDict, TypeVar, cast

import numpy as np

from beoperf import errors
from beoperf.analysis.cluster_mpi import neighbours, pairings, trial_latency
from beoperf.engines.mpi_group import Leader, Order, Result

RING_WARMUP = 1  # HPCC: one untimed step before each timed loop (each variant's)
MIN_LOOP_NS = 10_000  # HPCC: a timed loop lasts 10 ticks of MPI_Wtime, a tick 1 us at least
PINGPONG_WARMUP = 1  # HPCC: one untimed round trip
IDLE_S = 1e-3  # a ring trial this long after the previous one ended follows a pause ...
REWARM_S = 2e-3  # ... and is preceded by untimed trials of its ring for this long
FIRST_WARM_S = 0.1  # (this long before the run's first trial)
WARM_MAX_TRIAL_S = 0.05  # not for trials longer than this: a cold start is lost in them


Entry = TypeVar("Entry")


class RingEntry(TypedDict):
    """A ring trial as the log keeps it (and a cluster-ring document stores it)."""

    reps: int
    latency_s: float
    sendrecv_s: float
    nonblocking_s: float
    slowest_rank: int


class RoundTripEntry(TypedDict):
    """A pair's part of a ping-pong trial: its median and mean round trip (s)."""

    reps: int
    median_rtt_s: float
    mean_rtt_s: float


class StreamEntry(TypedDict):
    """A trial of N pairs at once: the repetitions and each sender's elapsed time."""

    reps: int
    elapsed_ns: list[int]


class _Base(Generic[Entry]):
    """What every measurer here shares: the log, the cost of a repetition, integrity."""

    def __init__(self, leader: Leader, integrity: bool = False) -> None:
        self.leader, self.integrity = leader, integrity
        self.log: dict[Hashable, list[Entry]] = {}
        self.seq = 0
        self.corrupt = 0
        self._wall_ns = 1.0

    def _seq0(self, count: int) -> int:
        seq0, self.seq = self.seq, self.seq + count
        return seq0

    def _count_corrupt(self, results: dict[int, Result]) -> None:
        self.corrupt += sum(r.corrupt for r in results.values())

    def cost(self, _values: np.ndarray) -> float:
        """The wall time of one repetition in the last trial (every variant, warm-up and
        control message included), so that the next trial lasts what the loop asks."""
        return self._wall_ns

    def check(self, key: Hashable) -> None:
        if self.corrupt:
            raise errors.IntegrityError(f"{self.corrupt} corrupted message(s) at {key}",
                                        "the trials before were kept")

    def calibrate(self, key: Hashable, estimate_ns: float | None
                  ) -> tuple[float, np.ndarray, int]:
        reps = self.first_reps(key)
        values = self.trial(key, reps)
        return self._wall_ns, values, reps

    def first_reps(self, key: Hashable) -> int:
        return 1

    def trial(self, key: Hashable, reps: int) -> np.ndarray:
        raise NotImplementedError

    def _timed(self, reps: int, began: float) -> None:
        self._wall_ns = max(1.0, (time.monotonic() - began) * 1e9 / max(reps, 1))


class RingMeasurer(_Base[RingEntry]):
    """Keys (ring index, message size).  ``rings``: the orders of the ranks (the first
    the natural one); ``loop_length``: the timed steps of a trial per size, HPCC's (5
    steps at 8 B, 2 at 2,000,000 B), grown as HPCC grows it (x 1.5, the trial made
    again) while the slowest rank's Sendrecv loop lasts under MIN_LOOP_NS; kept for the
    following trials of that size.  HPCC's figure is a minimum over trials, and the
    minimum of short loops is not that of long ones, so the trials are as long as HPCC's
    whatever the precision loop asks (it decides how many there are)."""

    def __init__(self, leader: Leader, rings: Sequence[Sequence[int]],
                 loop_length: dict[int, int], integrity: bool = False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(leader, integrity)
        self.rings = [list(r) for r in rings]
        self.loop_length = loop_length
        self.clock = clock
        self.warm_trials = 0  # untimed trials made after pauses (see ``rewarm``)
        self._ended: float | None = None  # when the last trial ended
        self._trial_s: dict[int, float] = {}  # per size, how long its last trial took

    def first_reps(self, key: Hashable) -> int:
        return self.loop_length.get(key[1], 1)  # type: ignore[index]

    def trial(self, key: Hashable, reps: int) -> np.ndarray:
        """Every rank runs HPCC's sequence at once (in C, no pause between its parts): the
        barrier, a warm-up step and the timed steps of the Sendrecv variant, then of the
        non-blocking one."""
        index, size = cast(tuple[int, int], key)
        self.rewarm(index, size, reps)
        began = self.clock()
        latency = self._grown(index, size, reps)
        self._ended = self.clock()
        self._trial_s[size] = self._ended - began
        self.log.setdefault(key, []).append(latency)
        return np.array([latency["latency_s"] * 1e9])

    def _grown(self, index: int, size: int, reps: int) -> RingEntry:
        """One trial, its loop grown as HPCC grows it until it is long enough."""
        while True:
            latency = self._ring(self.rings[index], size, self.loop_length.get(size, reps))
            if latency is not None:
                return latency
            length = self.loop_length.get(size, reps)
            self.loop_length[size] = 2 if length == 1 else int(length * 1.5)

    def rewarm(self, index: int, size: int, reps: int) -> None:
        """Untimed trials of the ring before a trial that follows a pause of the ranks
        (the run's start, or rank 0's bookkeeping between two passes, over ``IDLE_S``):
        HPCC's measurements follow one another with nothing in between, and ranks that
        waited (sleeping between probes of the next order) make the first trial after a
        pause slow: measured on a 100 Mbit/s namespace link, each ring's first trial of
        the run took 7.9-8.8 us against 5.9-6.2 us for the following ones, and the
        natural ring, first of every pass, was its slowest ring.  Not for trials over
        ``WARM_MAX_TRIAL_S``, in which a cold start is lost."""
        if self._ended is not None and self.clock() - self._ended < IDLE_S:
            return
        if self._trial_s.get(size, 0.0) > WARM_MAX_TRIAL_S:
            return
        until = self.clock() + (FIRST_WARM_S if self._ended is None else REWARM_S)
        while True:
            began = self.clock()
            self._grown(index, size, reps)
            self.warm_trials += 1
            self._ended = self.clock()
            self._trial_s[size] = self._ended - began
            if self._ended >= until or self._trial_s[size] > WARM_MAX_TRIAL_S:
                return

    def _ring(self, order: list[int], size: int, reps: int) -> RingEntry | None:
        """One trial of the ring at ``reps`` steps; None if its loops were too short."""
        seq0 = self._seq0(reps + RING_WARMUP)
        orders = {}
        for rank in order:
            left, right = neighbours(order, rank)
            orders[rank] = Order("ring", size=size, reps=reps, warmup=RING_WARMUP, barrier=True,
                                 left=left, right=right, window=2, integrity=self.integrity,
                                 seq0=seq0, samples=False)
        began = time.monotonic()
        results = self.leader.execute(orders)
        self._timed(reps, began)
        self._count_corrupt(results)
        per_rank = {r: (v.elapsed_ns, v.elapsed2_ns or v.elapsed_ns) for r, v in results.items()}
        if max(sr for sr, _ in per_rank.values()) < MIN_LOOP_NS:
            return None
        return {"reps": reps, "latency_s": trial_latency(per_rank, reps),
                "sendrecv_s": max(sr for sr, _ in per_rank.values()) / reps / 2e9,
                "nonblocking_s": max(nb for _, nb in per_rank.values()) / reps / 2e9,
                "slowest_rank": max(per_rank, key=lambda r: min(per_rank[r]))}


class PairsMeasurer(_Base[dict[tuple[int, int], RoundTripEntry]]):
    """Keys (round index, message size): a round is a list of pairs (initiator,
    responder) run at once (one pair: the others wait, undisturbed; several disjoint
    pairs: each pair's figure as it is with the others running).  The log of a key holds,
    per trial, each pair's median and mean round trip (seconds)."""

    def __init__(self, leader: Leader, rounds: Sequence[Sequence[tuple[int, int]]],
                 integrity: bool = False) -> None:
        super().__init__(leader, integrity)
        self.rounds = [list(r) for r in rounds]

    def first_reps(self, key: Hashable) -> int:
        return 2

    def trial(self, key: Hashable, reps: int) -> np.ndarray:
        index, size = cast(tuple[int, int], key)
        pairs = self.rounds[index]
        together = len(pairs) > 1
        seq0 = self._seq0(reps + PINGPONG_WARMUP)
        common = Order("pingpong-initiator", size=size, reps=reps, warmup=PINGPONG_WARMUP,
                       barrier=together, integrity=self.integrity, seq0=seq0)
        orders: dict[int, Order] = {}
        for a, b in pairs:
            orders[a] = replace(common, peer=b)
            orders[b] = replace(common, role="pingpong-responder", peer=a)
        if together:  # every rank meets in the barrier
            for rank in range(self.leader.size):
                orders.setdefault(rank, Order("barrier"))
        began = time.monotonic()
        results = self.leader.execute(orders)
        self._timed(reps, began)
        self._count_corrupt(results)
        entry: dict[tuple[int, int], RoundTripEntry] = {}
        for a, b in pairs:
            r = results[a]
            entry[(a, b)] = {"reps": reps, "median_rtt_s": (r.median_ns or 0) / 1e9,
                             "mean_rtt_s": r.elapsed_ns / reps / 1e9}
        self.log.setdefault(key, []).append(entry)
        return np.array([max(e["median_rtt_s"] for e in entry.values()) * 1e9])


class MbwMeasurer(_Base[StreamEntry]):
    """Keys (pairs, message size), as osu_mbw_mr: rank i streams to rank i + pairs in
    windows of ``window`` messages, each window acknowledged; a window of warm-up, then
    every rank meets in MPI_Barrier, then the timed windows.  A trial's figure: the
    senders' mean time per message; the log keeps each sender's elapsed time."""

    def __init__(self, leader: Leader, window: int, integrity: bool = False) -> None:
        super().__init__(leader, integrity)
        self.window = window

    def first_reps(self, key: Hashable) -> int:
        return self.window

    def trial(self, key: Hashable, reps: int) -> np.ndarray:
        count, size = cast(tuple[int, int], key)
        reps = max(self.window, -(-reps // self.window) * self.window)  # whole windows
        seq0 = self._seq0(reps + self.window)
        common = Order("stream-send", size=size, reps=reps, warmup=self.window, barrier=True,
                       window=self.window, integrity=self.integrity, seq0=seq0)
        orders: dict[int, Order] = {}
        for sender, receiver in pairings(count):
            orders[sender] = replace(common, peer=receiver)
            orders[receiver] = replace(common, role="stream-recv", peer=sender)
        for rank in range(self.leader.size):
            orders.setdefault(rank, Order("barrier"))
        began = time.monotonic()
        results = self.leader.execute(orders)
        self._timed(reps, began)
        self._count_corrupt(results)
        elapsed = [results[s].elapsed_ns for s, _ in pairings(count)]
        self.log.setdefault(key, []).append({"reps": reps, "elapsed_ns": elapsed})
        return np.array([float(np.mean(elapsed)) / reps])

"""The measurer of `beoperf cluster rma` for the precision loop: one-sided MPI_Put and
MPI_Get between two ranks with their synchronisation, and the two-sided ping-pong of the
same sizes beside them.

Keys are (op, sync, size): op "put" or "get" with sync "fence", "lock", "flush" or
"lock_all" (``engines.mpi_rma``: osu_put_latency's and osu_get_latency's loops), "put_bw"
or "get_bw" (osu_put_bw's and osu_get_bw's: a burst of ``burst`` operations per
synchronisation), or op "two-sided" with sync "pingpong" (the cluster's ping-pong loop).
A trial's figure is the time of one operation with its synchronisation, the mean over
the trial's timed repetitions as osu reports it: the origin's loop time / repetitions,
halved for fence's latency loop (each repetition is an operation each way) and for the
ping-pong (a round trip), divided by the burst for the bandwidth loops.  A
few untimed repetitions go first in every trial.  The data each trial moved is checked
by both ranks outside the timed loop; a failed check stops the loop (``check``), the
trials so far kept.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from dataclasses import replace
from typing import TypedDict, cast

import numpy as np

from beoperf.engines import mpi_rma
from beoperf.engines.mpi_group import Leader, Order
from beoperf.sweep.cluster_mpi import _Base

TWO_SIDED = "two-sided"
PINGPONG = "pingpong"


class RmaEntry(TypedDict):
    """A trial as the log keeps it: timed repetitions and the time of one operation."""

    reps: int
    op_s: float


def warmup_of(reps: int) -> int:
    """Untimed repetitions before a trial's timed ones: a tenth, at least one."""
    return max(1, reps // 10)


def per_operation(op: str, sync: str, burst: int) -> int:
    """Operations in one repetition: the burst of a bandwidth loop, two for fence's
    latency loop (each rank's) and for a round trip, else one."""
    if op.endswith("_bw"):
        return burst
    return 2 if sync in ("fence", PINGPONG) else 1


class RmaMeasurer(_Base[RmaEntry]):
    """Keys (op, sync, size) between ``origin`` and ``target`` (ranks of the job)."""

    def __init__(self, leader: Leader, origin: int = 0, target: int = 1,
                 burst: int = 1) -> None:
        super().__init__(leader, integrity=False)
        self.origin, self.target, self.burst = origin, target, burst

    def first_reps(self, key: Hashable) -> int:
        return 2

    def orders(self, op: str, sync: str, size: int, reps: int) -> dict[int, Order]:
        seq0 = self._seq0(1)
        warmup = warmup_of(reps)
        if op == TWO_SIDED:
            common = Order("pingpong-initiator", size=size, reps=reps, warmup=warmup,
                           seq0=seq0, samples=False)
            return {self.origin: replace(common, peer=self.target),
                    self.target: replace(common, role="pingpong-responder", peer=self.origin)}
        burst = self.burst if op.endswith("_bw") else 1
        return {rank: Order(mpi_rma.role_name(op, sync, rank == self.origin), size=size,
                            reps=reps, warmup=warmup, peer=peer, seq0=seq0, window=burst)
                for rank, peer in ((self.origin, self.target), (self.target, self.origin))}

    def prepare(self, keys: list[tuple[str, str, int]]) -> None:
        """One untimed trial of each (op, sync) at its largest size: the windows are made
        at their full size before any trial is timed."""
        largest: dict[tuple[str, str], int] = {}
        for op, sync, size in keys:
            largest[(op, sync)] = max(size, largest.get((op, sync), 0))
        for (op, sync), size in largest.items():
            self.leader.execute(self.orders(op, sync, size, 1))

    def trial(self, key: Hashable, reps: int) -> np.ndarray:
        op, sync, size = cast(tuple[str, str, int], key)
        began = time.monotonic()
        results = self.leader.execute(self.orders(op, sync, size, reps))
        self._timed(reps + warmup_of(reps), began)
        self._count_corrupt(results)
        op_s = results[self.origin].elapsed_ns / 1e9 / reps / per_operation(op, sync,
                                                                             self.burst)
        self.log.setdefault(key, []).append({"reps": reps, "op_s": op_s})
        return np.array([op_s * 1e9])

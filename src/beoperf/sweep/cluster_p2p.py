"""The measurer of the cluster's point-to-point patterns (``beoperf cluster bibw | incast
| bisect``), for the precision loop.

Keys (flow count, message size): the first ``count`` flows of the pattern run at once,
every rank meeting in MPI_Barrier after a window of warm-up (as osu_mbw_mr's pairs).

* bibw and bisect: each flow is a pair, both ends running osu_bibw's windows (a window of
  receives posted, a window of sends, all waited for; ``bibw`` of csrc/mpipat.c); a
  flow's time is its slower end's.
* incast: each flow is a sender streaming to the one receiver as osu_bw does
  (``stream-send``: windows, each acknowledged); the receiver keeps a window posted for
  every sender and acknowledges each as it arrives (``incast-recv``); a flow's time is
  its sender's,
  and the receiver's own time is kept too.

A trial gives the loop one figure, the flows' mean time per message; the log keeps each
flow's elapsed time (and the receiver's), from which the suite computes the rates.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence
from dataclasses import replace
from typing import TypedDict, cast

import numpy as np

from beoperf.engines.mpi_group import Leader, Order
from beoperf.sweep.cluster_mpi import _Base

PATTERNS = ("bibw", "incast", "bisect")


class FlowEntry(TypedDict):
    """A trial of a pattern: the messages per flow (each way, for a pair), each flow's
    elapsed time, and the receiver's (an incast's; None otherwise)."""

    reps: int
    elapsed_ns: list[int]
    receiver_ns: int | None


class FlowMeasurer(_Base[FlowEntry]):
    """``flows``: the pattern's flows (rank a, rank b) in order, the first ``count`` of
    them measured at a key (bibw, bisect: pairs; incast: senders to one receiver)."""

    def __init__(self, leader: Leader, pattern: str, flows: Sequence[tuple[int, int]],
                 window: int, integrity: bool = False) -> None:
        super().__init__(leader, integrity)
        if pattern not in PATTERNS:
            raise ValueError(f"unknown pattern {pattern!r}")
        self.pattern, self.flows, self.window = pattern, list(flows), window

    def first_reps(self, key: Hashable) -> int:
        return self.window

    def orders(self, count: int, size: int, reps: int, seq0: int) -> dict[int, Order]:
        """Each rank's order for a trial of the first ``count`` flows."""
        flows = self.flows[:count]
        orders: dict[int, Order] = {}
        if self.pattern == "incast":
            common = Order("stream-send", size=size, reps=reps, warmup=self.window,
                           barrier=True, window=self.window, integrity=self.integrity,
                           seq0=seq0)
            receiver = flows[0][1]
            for sender, _ in flows:
                orders[sender] = replace(common, peer=receiver)
            orders[receiver] = replace(common, role="incast-recv",
                                       senders=tuple(s for s, _ in flows))
        else:
            common = Order("bibw", size=size, reps=reps, warmup=self.window, barrier=True,
                           window=self.window, integrity=self.integrity, seq0=seq0)
            for a, b in flows:
                orders[a] = replace(common, peer=b)
                orders[b] = replace(common, peer=a)
        for rank in range(self.leader.size):
            orders.setdefault(rank, Order("barrier"))
        return orders

    def trial(self, key: Hashable, reps: int) -> np.ndarray:
        count, size = cast(tuple[int, int], key)
        reps = max(self.window, -(-reps // self.window) * self.window)  # whole windows
        seq0 = self._seq0(reps + self.window)
        began = time.monotonic()
        results = self.leader.execute(self.orders(count, size, reps, seq0))
        self._timed(reps, began)
        self._count_corrupt(results)
        flows = self.flows[:count]
        if self.pattern == "incast":
            elapsed = [results[a].elapsed_ns for a, _ in flows]
            receiver: int | None = results[flows[0][1]].elapsed_ns
        else:
            elapsed = [max(results[a].elapsed_ns, results[b].elapsed_ns) for a, b in flows]
            receiver = None
        self.log.setdefault(key, []).append({"reps": reps, "elapsed_ns": elapsed,
                                             "receiver_ns": receiver})
        return np.array([float(np.mean(elapsed)) / reps])

"""The measurer of `beoperf cluster coll`, for the precision loop: keys (collective, size),
each trial every rank running the collective ``reps`` times in C (engines/mpi_coll.py:
MPI_Barrier before every call, only the call timed, as OSU does).

A trial's figure is IMB's t_avg: each rank's mean time per call, averaged over the
ranks; the log keeps, per trial, t_min and t_max over the ranks too (IMB's reduction),
the longest single call of any rank and the calls.  The first trial of each key checks
the collective's result first (untimed): the elements found wrong and the ranks that
checked are counted per key, and the trials go on (the document says how many were
wrong)."""

from __future__ import annotations

import time
from collections.abc import Hashable
from typing import TypedDict, cast

import numpy as np

from beoperf.engines.mpi_coll import CollOrder
from beoperf.engines.mpi_group import Leader
from beoperf.sweep.cluster_mpi import _Base

WARMUP = 1  # untimed calls before each trial's timed ones (after the check, if any)


class CollEntry(TypedDict):
    """A trial: the calls timed per rank, IMB's reduction of the ranks' means and the
    longest single call of any rank (s)."""

    reps: int
    t_min_s: float
    t_avg_s: float
    t_max_s: float
    longest_s: float


class CollMeasurer(_Base[CollEntry]):
    """Keys (collective, size in bytes); ``root`` of the rooted collectives; ``nocache``:
    the buffers are not reused (engines/mpi_coll.py)."""

    def __init__(self, leader: Leader, root: int = 0, nocache: bool = False) -> None:
        super().__init__(leader)
        self.root, self.nocache = root, nocache
        self.checked: dict[Hashable, int] = {}
        self.wrong: dict[Hashable, int] = {}

    def trial(self, key: Hashable, reps: int) -> np.ndarray:
        op, size = cast(tuple[str, int], key)
        check = key not in self.checked
        order = CollOrder(op, size, reps=reps, warmup=WARMUP, root=self.root,
                          nocache=self.nocache, check=check, seq=self._seq0(1))
        began = time.monotonic()
        results = self.leader.collective(order)
        self._timed(reps + WARMUP + int(check), began)
        if check:
            self.checked[key] = sum(r.corrupt is not None for r in results.values())
            self.wrong[key] = sum(r.corrupt or 0 for r in results.values())
        means = [r.elapsed_ns / r.reps / 1e9 for r in results.values()]
        entry: CollEntry = {"reps": reps, "t_min_s": min(means),
                            "t_avg_s": float(np.mean(means)), "t_max_s": max(means),
                            "longest_s": max(r.max_ns for r in results.values()) / 1e9}
        self.log.setdefault(key, []).append(entry)
        return np.array([entry["t_avg_s"] * 1e9])

    def check(self, key: Hashable) -> None:
        """A wrong result is counted, not fatal (the document holds the count)."""

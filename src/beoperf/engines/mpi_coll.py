"""Every rank of an MPI job in one collective (`beoperf cluster coll`): rank 0 orders,
each rank runs the C loop (``beoperf._mpi.Collectives``, csrc/mpicoll.c) on buffers
made here, and answers with its own times.

**Synchronisation** is OSU's: every repetition (warm-up or timed) is MPI_Barrier then
the collective, and only the collective is timed, so a rank's time per call is the mean
of its timed calls; rank 0 reduces them over the ranks as IMB does (t_min, t_avg,
t_max: :mod:`beoperf.sweep.cluster_coll`).

**Buffers**: one send and one receive buffer reused by every repetition, or with
``nocache`` as many as span the no-cache pool of the other tests (``beoperf.pools``:
twice the last-level cache, at least two), repetition i on buffer i % slots.

**Check**: an order with ``check`` first runs the collective once, untimed, on buffers
filled with values that depend on the sending rank (and the receiving one for
alltoall and scatter) and the element's index, then each rank compares what it received
with what the collective must give: the exact sum for the reductions (MPI_DOUBLE,
MPI_SUM; small integers, so any order of summation is exact), each block from the rank
it must come from for the others (MPI_BYTE).  The answer counts the elements that
differ (``corrupt``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from beoperf import pools, sysinfo
from beoperf.engines.mpi import Session

# each collective: the datatype its elements have here
REDUCTIONS = ("allreduce", "reduce", "reduce_scatter")
BLOCKING = ("allreduce", "allgather", "alltoall", "bcast", "reduce", "reduce_scatter",
            "gather", "scatter", "barrier")
# the non-blocking forms (MPI_Iallreduce ...): posted, then MPI_Wait at once, nothing
# overlapped: the time of the non-blocking path, not OSU's overlap of computation
NONBLOCKING = tuple(f"i{op}" for op in BLOCKING)
OPERATIONS = BLOCKING + NONBLOCKING
ROOTED = ("bcast", "reduce", "gather", "scatter")
ALIGN = 64
STALE = 0xEE  # what a receive buffer holds before the checked call


@dataclass(frozen=True)
class CollOrder:
    """One trial of a collective: ``size`` bytes (its meaning per collective:
    :func:`count_of`), ``reps`` timed after ``warmup`` untimed repetitions, the root,
    buffers reused or not, and whether to check the result first (``seq`` varies the
    values checked)."""

    op: str
    size: int
    reps: int
    warmup: int = 1
    root: int = 0
    nocache: bool = False
    check: bool = False
    seq: int = 0

    def __post_init__(self) -> None:
        if self.op not in OPERATIONS:
            raise ValueError(f"unknown collective {self.op!r}")


@dataclass(frozen=True)
class CollResult:
    """One rank's part: the timed calls' total and longest time, their count, the
    elements its check found wrong (None: not checked), its buffers per repetition."""

    rank: int
    elapsed_ns: int
    max_ns: int
    reps: int
    corrupt: int | None
    slots: int


def base(op: str) -> str:
    """The blocking collective of a non-blocking one ('iallreduce' -> 'allreduce')."""
    return op[1:] if op in NONBLOCKING else op


def element_bytes(op: str) -> int:
    return 8 if base(op) in REDUCTIONS else 1


def count_of(op: str, size: int, np_: int) -> int:
    """Elements per call: ``size`` is the vector for allreduce, reduce and bcast, each
    rank's block for allgather, alltoall, gather and scatter (OSU's and IMB's meaning),
    the whole vector for reduce_scatter, of which each rank gets 1/np (whole doubles, at
    least one)."""
    op = base(op)
    if op == "barrier":
        return 0
    if op == "reduce_scatter":
        return max(1, size // 8 // np_)
    return max(1, size // element_bytes(op))


def buffer_bytes(op: str, count: int, np_: int) -> tuple[int, int]:
    """(send, receive) bytes of one call on this rank (as csrc/mpicoll.c checks them)."""
    one, op = count * element_bytes(op), base(op)
    if op in ("allgather", "gather"):
        return one, one * np_
    if op == "alltoall":
        return one * np_, one * np_
    if op in ("scatter", "reduce_scatter"):
        return one * np_, one
    if op == "barrier":
        return 0, 0
    return one, one


def _stride(n: int) -> int:
    return max(ALIGN, -(-n // ALIGN) * ALIGN)


class CollRank:
    """This rank's side: its bound collectives and its send and receive buffers (grown to
    the largest a call has needed)."""

    def __init__(self, session: Session) -> None:
        from beoperf import _mpi

        MPI = session.MPI
        self.session = session
        self.lib = _mpi.Collectives(MPI.__file__, MPI._sizeof(MPI.Comm))
        self.double = int(MPI._handleof(MPI.DOUBLE))
        self.sum = int(MPI._handleof(MPI.SUM))
        self._shape: tuple[int, int, int] | None = None
        self.send = np.zeros(ALIGN, dtype=np.uint8)  # two arrays: MPI refuses aliased
        self.recv = np.zeros(ALIGN, dtype=np.uint8)  # send and receive buffers

    def _buffers(self, send: int, recv: int, nocache: bool) -> int:
        """Buffers for ``send``/``recv`` bytes a call; the number of slots."""
        slots = 1
        if nocache and send + recv:  # (a barrier has no buffers)
            per = _stride(send) + _stride(recv)
            span = pools.nocache_span(max(send, recv, 1), sysinfo.llc_bytes())
            slots = max(2, -(-span // per))
        self._shape = (_stride(send), _stride(recv), slots)
        # grown, never shrunk: the precision loop visits the sizes in turn, and a buffer
        # made anew for each trial would cost more than the trial
        if len(self.send) < self._shape[0] * slots:
            self.send = np.zeros(self._shape[0] * slots, dtype=np.uint8)
        if len(self.recv) < self._shape[1] * slots:
            self.recv = np.zeros(self._shape[1] * slots, dtype=np.uint8)
        return slots

    def run(self, order: CollOrder) -> CollResult:
        """Check the collective once if asked, then the timed loop (RuntimeError,
        ValueError from the loop)."""
        s = self.session
        count = count_of(order.op, order.size, s.size)
        send, recv = buffer_bytes(order.op, count, s.size)
        slots = self._buffers(send, recv, order.nocache)
        corrupt = self._check(order, count, send, recv) if order.check else None
        elapsed, longest = self._call(order, count, slots, order.reps, order.warmup)
        return CollResult(s.rank, int(elapsed), int(longest), order.reps, corrupt, slots)

    def _call(self, order: CollOrder, count: int, slots: int, reps: int,
              warmup: int) -> tuple[int, int]:
        dtype = self.double if base(order.op) in REDUCTIONS else self.session.byte
        assert self._shape is not None
        out: tuple[int, int] = self.lib.run(
            order.op, self.session.handle(), dtype, self.sum, self.send, self.recv, count,
            self._shape[0], self._shape[1], slots, order.root, reps, warmup)
        return out

    def _check(self, order: CollOrder, count: int, send: int, recv: int) -> int:
        """One untimed call on buffers 0 filled with known values; the elements wrong."""
        rank, np_ = self.session.rank, self.session.size
        sbuf, rbuf = self.send[:send], self.recv[:recv]
        rbuf[:] = STALE
        fill(order, rank, np_, count, sbuf)
        self._call(order, count, 1, 1, 0)
        return wrong(order, rank, np_, count, sbuf if base(order.op) == "bcast" else rbuf)


# --------------------------------------------------------------------------- the values


def _doubles(buf: np.ndarray) -> np.ndarray:
    return buf.view(np.float64)


def _pattern(src: int, dst: int, n: int, seq: int) -> np.ndarray:
    """A block's bytes from ``src`` to ``dst`` (dst -1: the same for every receiver)."""
    j = np.arange(n, dtype=np.int64)
    return ((src * 31 + (dst + 1) * 17 + j + seq) % 251).astype(np.uint8)


def _terms(n: int, offset: int, seq: int) -> np.ndarray:
    """A rank's doubles before its factor (rank + 1): 1 .. 7 by index."""
    return (1 + (np.arange(n, dtype=np.int64) + offset + seq) % 7).astype(np.float64)


def fill(order: CollOrder, rank: int, np_: int, count: int, sbuf: np.ndarray) -> None:
    """This rank's send buffer before the checked call."""
    op, seq = base(order.op), order.seq
    if op in REDUCTIONS:
        n = len(sbuf) // 8
        _doubles(sbuf)[:] = (rank + 1) * _terms(n, 0, seq)
    elif op == "alltoall":
        for d in range(np_):
            sbuf[d * count:(d + 1) * count] = _pattern(rank, d, count, seq)
    elif op == "scatter":
        for d in range(np_):
            sbuf[d * count:(d + 1) * count] = _pattern(rank, d, count, seq) \
                if rank == order.root else STALE
    elif op == "bcast":
        sbuf[:] = _pattern(rank, -1, count, seq) if rank == order.root else STALE
    elif op != "barrier":
        sbuf[:] = _pattern(rank, -1, count, seq)


def expected(order: CollOrder, rank: int, np_: int, count: int) -> np.ndarray | None:
    """What this rank must hold after the call (None: nothing, e.g. reduce off the
    root): doubles for the reductions, bytes otherwise."""
    op, seq, root = base(order.op), order.seq, order.root
    total = np_ * (np_ + 1) / 2  # the factors (rank + 1) summed
    if op in ("allreduce", "reduce"):
        return None if op == "reduce" and rank != root else total * _terms(count, 0, seq)
    if op == "reduce_scatter":
        return total * _terms(count, rank * count, seq)
    if op in ("allgather", "gather"):
        if op == "gather" and rank != root:
            return None
        return np.concatenate([_pattern(k, -1, count, seq) for k in range(np_)])
    if op == "alltoall":
        return np.concatenate([_pattern(k, rank, count, seq) for k in range(np_)])
    if op == "scatter":
        return _pattern(root, rank, count, seq)
    if op == "bcast":
        return _pattern(root, -1, count, seq)
    return None


def wrong(order: CollOrder, rank: int, np_: int, count: int, got: np.ndarray) -> int:
    """The elements of ``got`` that differ from what the collective must give."""
    want = expected(order, rank, np_, count)
    if want is None:
        return 0
    have: Any = _doubles(got)[:len(want)] if base(order.op) in REDUCTIONS else \
        got[:len(want)]
    return int(np.count_nonzero(have != want))

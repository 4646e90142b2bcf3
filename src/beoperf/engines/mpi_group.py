"""Every rank of an MPI job measuring together (the cluster tests: rings, all pairs, N
pairs at once): rank 0 gives each rank its order, each runs its part of a C loop
(``beoperf._mpi``), and rank 0 gathers what each one measured.

Orders and replies are mpi4py's small pickled objects on CONTROL_TAG, outside every
timed loop.  A rank with nothing to do waits for its next message *quietly*: it probes
for it and sleeps between probes (from POLL_MIN_S, doubling up to POLL_MAX_S), instead of
spinning in MPI_Recv as MPI libraries do.  So the ranks that are not being measured leave
the CPUs of their node to those that are: HPCC's all-pairs test keeps its idle processes
in MPI_Recv, and where they share a node's cores with a measured pair their polling
becomes part of what it measures.  The loops themselves spin, as every MPI benchmark's do.

A rank answers with what its loop measured, summarised (elapsed time, the median and
minimum of its samples, corrupted messages): a reply stays a few hundred bytes whatever
the repetitions.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict

import numpy as np

from beoperf import _core, errors
from beoperf.engines import mpi_rma
from beoperf.engines.mpi import (
    CONTROL_TAG,
    DATA_TAG,
    Session,
    end_facts,
)
from beoperf.engines.mpi_coll import CollOrder, CollRank, CollResult
from beoperf.model.document import JsonObject

POLL_MIN_S = 50e-6
POLL_MAX_S = 2e-3
RING_SLOTS = 4  # a ring step's buffers: to the right, to the left, from each side
ROLES = ("pingpong-initiator", "pingpong-responder", "stream-send", "stream-recv",
         "ring", "ring-sendrecv", "ring-nonblocking", "barrier")
PATTERN_ROLES = ("bibw", "incast-recv")  # csrc/mpipat.c (Library.pattern)


@dataclass(frozen=True)
class Order:
    """One rank's part of a trial: the C loop's role and arguments.  ``peer`` for a
    ping-pong or a stream; ``left``/``right`` for a ring; ``warmup`` repetitions before
    the timed ones; ``barrier``: every rank given an order meets in MPI_Barrier after its
    warm-up (each must then have ``barrier`` set, or the role "barrier"); ``samples``: each
    timed repetition's own time kept (two clock reads a repetition; HPCC's rings read the
    clock only around their loops, and at 0.1 us a message over shared memory two reads
    of 20 ns a step are a fifth of the figure)."""

    role: str
    size: int = 0
    reps: int = 1
    warmup: int = 0
    barrier: bool = False
    peer: int | None = None
    left: int | None = None
    right: int | None = None
    window: int = 1
    integrity: bool = False
    seq0: int = 0
    samples: bool = True
    senders: tuple[int, ...] = ()  # incast-recv: the ranks that send to this one

    def __post_init__(self) -> None:
        if self.role not in ROLES + PATTERN_ROLES and not mpi_rma.is_role(self.role):
            raise ValueError(f"unknown MPI loop role {self.role!r}")


@dataclass(frozen=True)
class Result:
    """What one rank's loop measured: the timed repetitions' elapsed time, its samples'
    median and minimum (None for roles without samples) and count, corrupted messages;
    for HPCC's ring (role "ring"), ``elapsed_ns`` is its Sendrecv loop's and
    ``elapsed2_ns`` its non-blocking loop's."""

    rank: int
    elapsed_ns: int
    median_ns: float | None
    min_ns: float | None
    samples: int
    corrupt: int
    elapsed2_ns: int | None = None


class Reply(TypedDict):
    """A rank's answer to rank 0 (a pickled control message): what its loop measured,
    why it failed, or its facts."""

    op: Literal["done", "error", "facts"]
    result: NotRequired[Result]
    reason: NotRequired[str]
    facts: NotRequired[JsonObject]
    coll: NotRequired[CollResult]


def quiet_recv(comm: Any, source: int, tag: int = CONTROL_TAG) -> Any:
    """The next pickled message from ``source``, waited for by probing and sleeping."""
    delay = POLL_MIN_S
    while not comm.iprobe(source=source, tag=tag):
        time.sleep(delay)
        delay = min(POLL_MAX_S, delay * 2)
    return comm.recv(source=source, tag=tag)


def pool_for(size: int, slots: int) -> _core.Pool:
    """A pool of at least ``slots`` buffers of ``size`` bytes."""
    stride = max(64, -(-size // 64) * 64)
    pool = _core.Pool(max(size, 1), slots * stride)
    if pool.slots < slots:
        raise errors.Failed(f"a pool of {slots} buffers of {size} B could not be made")
    return pool


def pattern_slots(order: Order) -> int:
    """The pool slots a pattern loop needs (csrc/beo_mpipat.h): bibw a window of
    receives and one send buffer (with integrity, one per message); an incast's receiver
    a window (with integrity, a window per sender)."""
    if order.role == "bibw":
        return 2 * order.window if order.integrity else order.window + 1
    if order.role == "incast-recv":
        return order.window * (max(1, len(order.senders)) if order.integrity else 1)
    return 0


class Member:
    """This rank's side: its pool (grown as orders need) and the loop it runs."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.pool: _core.Pool | None = None
        self.rma: mpi_rma.RmaSide | None = None  # one-sided state, made when first used
        self.coll: CollRank | None = None

    def _pool(self, order: Order) -> _core.Pool:
        slots = max(RING_SLOTS, order.window if order.role == "stream-recv" else 2,
                    pattern_slots(order))
        pool = self.pool
        if pool is None or pool.size < order.size or pool.slots < slots:
            size = max(order.size, pool.size if pool is not None else 0)
            self.pool = pool = pool_for(size, slots)
        return pool

    def run(self, order: Order) -> Result:
        """Run this rank's loop of ``order`` (MpiError, ValueError on failure)."""
        s = self.session
        if mpi_rma.is_role(order.role):
            return self._run_rma(order)
        if order.role in PATTERN_ROLES:
            _, elapsed, corrupt = s.lib.pattern(
                order.role, s.handle(), s.byte, self._pool(order), order.reps,
                peer=-1 if order.peer is None else order.peer, from_=order.senders,
                size=order.size, seq0=order.seq0, tag=DATA_TAG, integrity=order.integrity,
                window=order.window, warmup=order.warmup, barrier=order.barrier)
            return Result(s.rank, int(elapsed), None, None, 0, int(corrupt))
        kwargs: dict[str, object] = dict(size=order.size, tag=DATA_TAG, warmup=order.warmup,
                                      barrier=order.barrier, window=order.window,
                                      integrity=order.integrity, seq0=order.seq0,
                                      timed=order.samples)
        if order.role.startswith("ring"):
            kwargs.update(to=(order.right,), from_=(order.left,))
        elif order.role != "barrier":
            kwargs["peer"] = order.peer
        samples, elapsed, corrupt, *second = s.lib.run(order.role, s.handle(), s.byte,
                                                       self._pool(order), order.reps, **kwargs)
        elapsed2 = int(second[0]) if second else None
        if samples is None:
            return Result(s.rank, int(elapsed), None, None, 0, int(corrupt), elapsed2)
        arr = np.frombuffer(samples, dtype=np.uint64)
        return Result(s.rank, int(elapsed), float(np.median(arr)), float(arr.min()), len(arr),
                      int(corrupt), elapsed2)

    def _run_rma(self, order: Order) -> Result:
        """One-sided: this rank's side of a put or get trial with ``order.peer``."""
        if self.rma is None:
            self.rma = mpi_rma.RmaSide(self.session)
        if order.peer is None:
            raise ValueError(f"role {order.role} needs a peer rank")
        elapsed, corrupt = self.rma.run(order.role, order.size, order.reps, order.warmup,
                                        order.peer, order.seq0, order.window)
        return Result(self.session.rank, elapsed, None, None, 0, corrupt)

    def close(self) -> None:
        """Free what the one-sided trials made (collective over each pair of ranks)."""
        if self.rma is not None:
            self.rma.close()
            self.rma = None

    def facts(self) -> JsonObject:
        return end_facts(self.session)

    def collective(self, order: CollOrder) -> CollResult:
        """This rank's part of a collective (`beoperf cluster coll`: engines/mpi_coll.py)."""
        if self.coll is None:
            self.coll = CollRank(self.session)
        return self.coll.run(order)


def serve(session: Session) -> None:
    """A rank other than 0: carry out rank 0's orders until it says bye."""
    member, comm = Member(session), session.comm
    while True:
        message = quiet_recv(comm, 0)
        op = message.get("op") if isinstance(message, dict) else None
        if op == "bye":
            member.close()
            return
        if op == "facts":
            facts: Reply = {"op": "facts", "facts": member.facts()}
            comm.send(facts, dest=0, tag=CONTROL_TAG)
            continue
        try:
            if op == "coll":
                reply: Reply = {"op": "done", "coll": member.collective(message["order"])}
            else:
                reply = {"op": "done", "result": member.run(message["order"])}
        except Exception as exc:  # noqa: BLE001 - told to rank 0, which decides
            reply = {"op": "error", "reason": session.error_text(exc)}
        comm.send(reply, dest=0, tag=CONTROL_TAG)


class Leader:
    """Rank 0's side: orders the ranks, runs its own part, gathers the results."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.member = Member(session)
        self.size = session.size

    def execute(self, orders: Mapping[int, Order]) -> dict[int, Result]:
        """Each rank named runs its order (rank 0 its own, here); every result, by rank.
        Failed (naming the rank) when any loop failed, after all have answered."""
        comm = self.session.comm
        for rank, order in orders.items():
            if rank != 0:
                comm.send({"op": "run", "order": order}, dest=rank, tag=CONTROL_TAG)
        results: dict[int, Result] = {}
        failures: list[str] = []
        if 0 in orders:
            try:
                results[0] = self.member.run(orders[0])
            except Exception as exc:  # noqa: BLE001 - the others still answer first
                failures.append(f"rank 0: {self.session.error_text(exc)}")
        for rank in orders:
            if rank == 0:
                continue
            reply: Reply = quiet_recv(comm, rank)
            if reply["op"] == "done" and "result" in reply:
                results[rank] = reply["result"]
            else:
                failures.append(f"rank {rank}: {reply.get('reason', reply)}")
        if failures:
            raise errors.Failed("an MPI loop failed: " + "; ".join(failures[:4]))
        return results

    def collective(self, order: CollOrder) -> dict[int, CollResult]:
        """Every rank runs ``order``'s collective (rank 0 here); each rank's result.
        Failed (naming the ranks) when any failed, after all have answered."""
        comm = self.session.comm
        for rank in range(1, self.size):
            comm.send({"op": "coll", "order": order}, dest=rank, tag=CONTROL_TAG)
        results: dict[int, CollResult] = {}
        failures: list[str] = []
        try:
            results[0] = self.member.collective(order)
        except Exception as exc:  # noqa: BLE001 - the others still answer first
            failures.append(f"rank 0: {self.session.error_text(exc)}")
        for rank in range(1, self.size):
            reply: Reply = quiet_recv(comm, rank)
            if reply["op"] == "done" and "coll" in reply:
                results[rank] = reply["coll"]
            else:
                failures.append(f"rank {rank}: {reply.get('reason', reply)}")
        if failures:
            raise errors.Failed(f"MPI {order.op} at {order.size} B failed: "
                                + "; ".join(failures[:4]))
        return results

    def facts(self) -> list[JsonObject]:
        """Every rank's facts (host, CPUs, network namespace, what carries the messages),
        in rank order."""
        comm = self.session.comm
        for rank in range(1, self.size):
            comm.send({"op": "facts"}, dest=rank, tag=CONTROL_TAG)
        out = [self.member.facts()]
        for rank in range(1, self.size):
            out.append(quiet_recv(comm, rank)["facts"])
        return out

    def close(self) -> None:
        """Every other rank's serve() returns (also after a failure)."""
        for rank in range(1, self.size):
            self.session.comm.send({"op": "bye"}, dest=rank, tag=CONTROL_TAG)
        self.member.close()

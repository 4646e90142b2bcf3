"""One-sided MPI between two ranks of a job (`beoperf cluster rma`): each rank's side of
an MPI_Put or MPI_Get trial with fence or passive-target synchronisation, the timed loop
in C (``beoperf._mpi.Rma``, csrc/mpirma.c).

The two ranks share a communicator of their own (``MPI_Comm_create_group``: collective
over the two only, so the job's other ranks go on waiting quietly) and, per
synchronisation, a window of their own made by ``MPI_Win_allocate`` (osu's default
window), grown when a larger size comes (both ranks get the same orders, so both make
the same windows in the same order).  Fence and passive-target epochs never share a
window.

``put_bw`` and ``get_bw`` are osu_put_bw's and osu_get_bw's loops: a burst of operations
per synchronisation, operation j moving the j-th block of the buffer to (or from) the
j-th block of the window; with fence they go one way (fence, the origin's burst,
fence).

The data is checked outside the timed loop, every trial: a put's source holds a pattern
of the trial (``pattern``) and the target's window is cleared first, then checked to
hold the pattern; a get's target window holds the pattern and the origin's buffer is
cleared first, then checked.  The window's memory is touched locally under an exclusive
lock of the rank's own window (passive target), or between fences.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

OPS = ("put", "get", "put_bw", "get_bw")  # _bw: a burst of operations per synchronisation
SYNCS = ("fence", "lock", "flush", "lock_all")
SIDES = ("origin", "target")
ROLES = tuple(f"rma-{op}-{sync}-{side}" for op in OPS for sync in SYNCS for side in SIDES)
PATTERN_MODULUS = 251  # a prime: a shifted or stale block never matches


def is_role(role: str) -> bool:
    return role in ROLES


@dataclass(frozen=True)
class Role:
    """An order's role read back: the operation, the synchronisation, the side."""

    op: str
    sync: str
    origin: bool

    @property
    def base(self) -> str:
        """The MPI operation: put or get (put_bw is a burst of puts)."""
        return self.op.removesuffix("_bw")

    @property
    def two_way(self) -> bool:
        """Both ranks operate: fence's latency loop (a put or get each way)."""
        return self.sync == "fence" and not self.op.endswith("_bw")

    @classmethod
    def of(cls, role: str) -> Role:
        if role not in ROLES:
            raise ValueError(f"unknown one-sided role {role!r}")
        _, op, rest = role.split("-", 2)
        sync, side = rest.rsplit("-", 1)
        return cls(op, sync, side == "origin")


def role_name(op: str, sync: str, origin: bool) -> str:
    return f"rma-{op}-{sync}-{'origin' if origin else 'target'}"


def pattern(size: int, seq: int) -> np.ndarray:
    """The bytes a trial moves: (i + seq) mod 251."""
    return ((np.arange(size, dtype=np.uint64) + np.uint64(seq)) %
            PATTERN_MODULUS).astype(np.uint8)


def capacity_for(size: int) -> int:
    """A window's size for messages of ``size``: the next power of two (at least 4 KiB)."""
    return max(4096, 1 << max(0, size - 1).bit_length())


class RmaSide:
    """This rank's one-sided state: the pair communicators, the windows and the local
    buffer; ``run`` carries out one order.  ``session`` is an engines.mpi.Session."""

    def __init__(self, session: Any) -> None:
        from beoperf import _mpi

        MPI = session.MPI
        self.session, self.MPI = session, MPI
        self.lib = _mpi.Rma(MPI.__file__, MPI._sizeof(MPI.Comm))
        self.pairs: dict[tuple[int, int], Any] = {}
        self.windows: dict[tuple[tuple[int, int], str], tuple[Any, np.ndarray]] = {}
        self.local = np.zeros(0, dtype=np.uint8)

    def _pair(self, peer: int) -> tuple[Any, tuple[int, int]]:
        me = self.session.rank
        key = (min(me, peer), max(me, peer))
        if key not in self.pairs:
            world = self.session.comm
            group = world.Get_group().Incl(list(key))
            self.pairs[key] = world.Create_group(group)
            group.Free()
        return self.pairs[key], key

    def _window(self, comm: Any, key: tuple[int, int], sync: str,
                size: int) -> tuple[Any, np.ndarray]:
        """The pair's window for ``sync`` of ``size`` bytes at least (made or grown)."""
        found = self.windows.get((key, sync))
        if found is not None and found[1].size >= size:
            return found
        if found is not None:
            found[0].Free()
        win = self.MPI.Win.Allocate(capacity_for(size), 1, comm=comm)
        made = (win, np.frombuffer(win.tomemory(), dtype=np.uint8))
        self.windows[(key, sync)] = made
        return made

    def _buffer(self, size: int) -> np.ndarray:
        if self.local.size < size:
            self.local = np.zeros(capacity_for(size), dtype=np.uint8)
        return self.local

    def run(self, role_text: str, size: int, reps: int, warmup: int, peer: int,
            seq: int, burst: int = 1) -> tuple[int, int]:
        """This rank's side of one trial of ``burst`` operations per synchronisation
        (operation j moves bytes j x size to (j + 1) x size): (the origin's timed ns (0 on
        the target), 1 if the data failed the check, else 0)."""
        role = Role.of(role_text)
        span = size * burst
        comm, key = self._pair(peer)
        win, memory = self._window(comm, key, role.sync, span)
        local = self._buffer(span)
        me_in_pair = comm.Get_rank()
        self._prepare(role, win, memory[:span], local[:span], span, seq, me_in_pair)
        elapsed = self.lib.run(role.base, role.sync, role.origin, self.MPI._handleof(comm),
                               self.MPI._handleof(win), self.session.byte, local, size,
                               1 - me_in_pair, reps, warmup, int(self.MPI.LOCK_SHARED),
                               burst=burst)
        corrupt = self._check(role, win, memory[:span], local[:span], span, seq, me_in_pair)
        return int(elapsed), corrupt

    def _local_access(self, role: Role, win: Any, me: int) -> _Access:
        return _Access(win, me, self.MPI.LOCK_EXCLUSIVE, role.sync != "fence")

    def _prepare(self, role: Role, win: Any, memory: np.ndarray, local: np.ndarray,
                 size: int, seq: int, me: int) -> None:
        """Before the trial: a put's source filled and its destination cleared; a get's
        source (the window) filled and its destination cleared."""
        expected = pattern(size, seq)
        moves_here = role.two_way or role.origin  # this rank's buffer is used
        exposed = role.two_way or not role.origin  # this rank's window is used
        if moves_here:
            local[:] = expected if role.base == "put" else 0
        if exposed:
            with self._local_access(role, win, me):
                memory[:] = 0 if role.base == "put" else expected

    def _check(self, role: Role, win: Any, memory: np.ndarray, local: np.ndarray,
               size: int, seq: int, me: int) -> int:
        """After the trial: 1 if what should have arrived here did not, else 0."""
        expected = pattern(size, seq)
        if role.base == "get" and (role.two_way or role.origin):
            return int(not np.array_equal(local, expected))
        if role.base == "put" and (role.two_way or not role.origin):
            with self._local_access(role, win, me):
                return int(not np.array_equal(memory, expected))
        return 0

    def close(self) -> None:
        """Free the windows and communicators (collective over each pair: both ranks
        close, in the same order, as they made them)."""
        for win, _memory in self.windows.values():
            win.Free()
        for comm in self.pairs.values():
            comm.Free()
        self.windows.clear()
        self.pairs.clear()


class _Access:
    """Local loads and stores of a window's memory: under an exclusive lock of this
    rank's own window (passive target), or as they are (between fences)."""

    def __init__(self, win: Any, me: int, exclusive: int, lock: bool) -> None:
        self.win, self.me, self.exclusive, self.lock = win, me, exclusive, lock

    def __enter__(self) -> None:
        if self.lock:
            self.win.Lock(self.me, self.exclusive)

    def __exit__(self, *_exc: object) -> None:
        if self.lock:
            self.win.Unlock(self.me)

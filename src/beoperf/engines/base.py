"""The transport interface every engine implements.

A transport owns the connection to the peer and runs timed trials; the sweep driver
decides sizes, repetitions and when a size is measured well enough; a suite builds a
transport by name (``beoperf.engines.get``), connects it, hands it to the sweep, and asks
the transport what a failure means (``failure``).  Everything a suite needs is here, so
that a new transport (MPI, UDP) is one new module with a registered class.
"""

from __future__ import annotations

import socket
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Required, TypedDict

from beoperf import errors
from beoperf.model.document import JsonObject

if TYPE_CHECKING:  # not imported at run time: `beoperf monitor` uses engines without numpy
    import numpy as np

    from beoperf import _core

MODES = ("pingpong", "stream", "bidir")


@dataclass(frozen=True)
class Peer:
    """Where the other end is (family: socket.AF_INET, AF_INET6 or AF_UNSPEC for either)."""

    host: str
    port: int
    family: int = socket.AF_UNSPEC


@dataclass
class Trial:
    """Raw outcome of one trial of `reps` messages."""

    samples_ns: np.ndarray | None  # per round trip / exchange, when timed per message
    elapsed_ns: int  # whole trial as timed by the timing end
    corrupt: int  # messages that failed verification, both ends together
    # parallel streams: each stream's own loop time (elapsed_ns is then their common window)
    streams_ns: list[int] | None = None


class SessionParams(TypedDict, total=False):
    """The session parameters both ends agree on, and the result records as its
    ``parameters``: mode and largest message size; the data path's options (TCP: socket
    buffers, Nagle, busy polling, congestion control, each end's CPU; MPI: the loop's
    variants); how the sweep ran (precision, budget, trial length, the sizes).  Sent as
    they are in the TCP hello, so the keys are the wire's."""

    mode: Required[str]
    max_size: Required[int]
    integrity: bool
    nocache: bool
    sndbuf: int | None
    rcvbuf: int | None
    nodelay: bool
    busy_poll: int | None
    congestion: str | None
    client_cpu: int | None
    server_cpu: int | None
    # stream mode: parallel data connections (1: the one stream), and the direction
    # (reverse: the server sends, the client receives, as iperf3 -R)
    streams: int
    reverse: bool
    # ping-pong under load: bulk load connections beside the data connection (0: none)
    load_streams: int
    # --udp (stream mode): datagrams at this rate (bit/s), one trial per size (engines.udp)
    udp_rate: float
    transport: str
    precision: float
    time_budget: float | None
    max_time: float | None
    trial_time: float
    perturbation: int | None
    sizes: int
    start: int
    end: int
    # transport mpi (model.mpi_options.MpiOptions.params, and the library's name)
    window: int
    sync: bool
    recv: str
    bind: str | None
    mpi_env: dict[str, str]
    mpi: str
    # recorded only, never sent to a peer: --link-speed (bit/s), the efficiency's link
    link_speed_bps: float


class TransportError(Exception):
    """The peer broke the transport's rules or refused a request (not a lost connection):
    its text is meant for the user."""


class Stopped(errors.Failed):
    """A measurement stopped for a reason no other class names (exit 1)."""

    category = "error"


class Transport(ABC):
    """connect / trial / reset / facts / close, as in iperf3's protocol table.

    ``params`` are the session parameters (mode, max_size, integrity, nocache, socket
    options ...), sent to the peer as they are; ``warnings`` collects what either end
    refused or changed (a socket option the kernel would not set, say).
    """

    name: ClassVar[str] = "abstract"

    def __init__(self, peer: Peer, params: SessionParams, *, timeout: float = 10.0) -> None:
        self.peer, self.params, self.timeout = peer, params, timeout
        self.warnings: list[str] = []

    @abstractmethod
    def connect(self) -> JsonObject:
        """Reach the peer, agree on the parameters, open the data path; the peer's facts.

        Raises errors.ConnectError (cannot reach it) or errors.PeerError (it refused, is
        busy, speaks another version, is not a beoperf server); nothing is left open then.
        """

    @abstractmethod
    def trial(self, size: int, reps: int, pool: _core.Pool, seq0: int) -> Trial:
        """Run one trial of `reps` messages of `size` bytes (message i has sequence
        number seq0 + i, for integrity checks).  `pool` is the session's, made for its
        largest message: send `size` bytes from it (``_core.run(..., size=size)``)."""

    @abstractmethod
    def reset(self) -> None:
        """Tear the data path down and open it again (NetPIPE's -r; stream mode)."""

    @abstractmethod
    def facts(self) -> tuple[JsonObject, JsonObject]:
        """(local, remote) metadata of the current data path."""

    @abstractmethod
    def close(self, abort: bool = False) -> None:
        """End the session; with abort, drop connections without a goodbye."""

    def retransmissions(self) -> int | None:
        """The segments this end's data sockets retransmitted so far (the kernel's count),
        or None when the transport cannot see its sockets (MPI)."""
        return None

    def peer_retransmissions(self) -> int | None:
        """The segments the peer's data sockets retransmitted, as it said when the
        session ended (after ``close``), or None when it did not say."""
        return None

    @classmethod
    def failure(cls, exc: BaseException, host: str) -> errors.BeoperfError:
        """What a failure of trial() or reset() in the middle of a sweep means to a user:
        errors.ConnectError when `host` was lost, errors.IntegrityError (as raised) for
        corruption, errors.PeerError when it refused, else errors.Failed.  A transport
        with errors of its own overrides this and calls it for the rest."""
        if isinstance(exc, errors.BeoperfError) and not isinstance(exc, OSError):
            return exc  # already says what it means (IntegrityError, PeerError ...)
        if isinstance(exc, OSError):  # reset, timed out, or cannot reconnect the data path
            return errors.ConnectError(f"lost {host}: {exc}")
        return Stopped(f"the sweep stopped: {type(exc).__name__}: {exc}",
                       "the sizes measured before it were kept")

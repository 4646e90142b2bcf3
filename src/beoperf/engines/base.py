"""The transport interface every engine implements, and their registry.

A transport owns the connection to the peer and runs timed trials; the sweep
driver decides sizes, repetitions and when a size is measured well enough.
A new transport (MPI, UDP) is one new module with a registered class.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from beoperf import _core

MODES = ("pingpong", "stream", "bidir")

TRANSPORTS: dict[str, type[Transport]] = {}


def register(name: str) -> Callable[[type[Transport]], type[Transport]]:
    def deco(cls: type[Transport]) -> type[Transport]:
        cls.name = name
        TRANSPORTS[name] = cls
        return cls

    return deco


@dataclass
class Trial:
    """Raw outcome of one trial of `reps` messages."""

    samples_ns: np.ndarray | None  # per round trip / exchange, when timed per message
    elapsed_ns: int  # whole trial as timed by the timing end
    corrupt: int  # messages that failed verification, both ends together


class Transport(ABC):
    """setup / open_data / trial / reset / close, as in iperf3's protocol table."""

    name = "abstract"

    @abstractmethod
    def setup(self) -> dict[str, Any]:
        """Connect, agree on parameters; return the peer's metadata."""

    @abstractmethod
    def open_data(self) -> None:
        """Open (or reopen) the data path with the requested options."""

    @abstractmethod
    def trial(self, size: int, reps: int, pool: _core.Pool, seq0: int) -> Trial:
        """Run one trial of `reps` messages of `size` bytes."""

    @abstractmethod
    def reset(self) -> None:
        """Tear the data path down and open it again (NetPIPE's -r)."""

    @abstractmethod
    def close(self, abort: bool = False) -> None:
        """End the session; with abort, drop connections without a goodbye."""

    @abstractmethod
    def facts(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(local, remote) metadata of the current data path."""

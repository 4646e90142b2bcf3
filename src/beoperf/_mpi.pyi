"""Stubs for the MPI loops (src/beoperf/_mpi.c), bound to the library mpi4py loaded."""

from typing import Any

class Library:
    pointer_handles: bool
    request_size: int
    status_size: int
    def __init__(
        self, path: str, handle_size: int, request_size: int, status_size: int
    ) -> None: ...
    def version(self) -> str: ...
    def ready(self) -> bool: ...
    def run(
        self, role: str, comm: int, byte: int, pool: Any, reps: int, *, peer: int = ...,
        size: int = ..., seq0: int = ..., tag: int = ..., integrity: bool = ...,
        sync: bool = ..., nonblocking: bool = ..., window: int = ..., timed: bool = ...,
        to: Any = ..., from_: Any = ..., warmup: int = ..., barrier: bool = ...,
    ) -> tuple[Any, ...]: ...

class Rma:
    """The one-sided loops (_mpirma.c, csrc/mpirma.c)."""

    def __init__(self, path: str, handle_size: int) -> None: ...
    def run(
        self, op: str, sync: str, origin: bool, comm: int, win: int, byte: int, buf: Any,
        size: int, peer: int, reps: int, warmup: int, lock_shared: int, *, burst: int = ...,
    ) -> int: ...
class Collectives:
    def __init__(self, path: str, handle_size: int) -> None: ...
    def run(
        self, op: str, comm: int, dtype: int, mpi_op: int, send: Any, recv: Any, count: int,
        send_stride: int, recv_stride: int, slots: int, root: int, reps: int, warmup: int,
    ) -> tuple[int, int]: ...

"""Stubs for the C core (src/beoperf/_core.c over csrc/)."""

class PeerClosedError(ConnectionError): ...

class Pool:
    """Page-aligned, pre-faulted message buffers; with span > size, a no-cache pool.

    A read-write buffer (PEP 688) of ``total`` bytes: ``memoryview(pool)`` and
    ``numpy.frombuffer(pool, dtype=numpy.uint8)`` see the memory the loops send from and
    receive into; message ``i`` starts at ``offset(i)``.  While a view is alive the pool
    cannot be reinitialised (BufferError) and is not freed.
    """

    size: int
    total: int
    slots: int
    stride: int
    exports: int
    def __init__(self, size: int, span: int = 0) -> None: ...
    def message(self, index: int) -> bytes: ...
    def offset(self, index: int) -> int: ...
    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...
    def __release_buffer__(self, view: memoryview, /) -> None: ...

def run(
    role: str,
    fd: int,
    pool: Pool,
    reps: int,
    *,
    integrity: bool = False,
    seq0: int = 0,
    timeout_ms: int = 30000,
    inject_corrupt: int = -1,
    timed: bool = True,
    size: int = 0,
) -> tuple[bytes | None, int, int]:
    """Run one loop: (per-message samples as native uint64 ns, elapsed ns, corrupt count).

    size: the message length, at most pool.size (0: pool.size), so that one pool serves
    every size of a session.

    role is one of pingpong-client, pingpong-server, stream-send, stream-recv, bidir.
    """

def now_ns() -> int: ...
def clock_overhead_ns(rounds: int) -> int: ...
def pattern(length: int, seq: int) -> bytes: ...
def verify(data: bytes, seq: int) -> bool: ...

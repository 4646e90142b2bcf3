"""Stubs for the C core (src/beoperf/_core.c over csrc/)."""

class PeerClosedError(ConnectionError): ...

class Pool:
    """Page-aligned, pre-faulted message buffers; with span > size, a no-cache pool."""

    size: int
    total: int
    slots: int
    def __init__(self, size: int, span: int = 0) -> None: ...
    def message(self, index: int) -> bytes: ...

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
) -> tuple[bytes | None, int, int]:
    """Run one loop: (per-message samples as native uint64 ns, elapsed ns, corrupt count).

    role is one of pingpong-client, pingpong-server, stream-send, stream-recv, bidir.
    """

def now_ns() -> int: ...
def clock_overhead_ns(rounds: int) -> int: ...
def pattern(length: int, seq: int) -> bytes: ...
def verify(data: bytes, seq: int) -> bool: ...

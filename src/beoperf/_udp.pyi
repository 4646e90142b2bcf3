"""Stubs for the UDP-at-a-rate loops (src/beoperf/_udp.c; engines/udp.py uses them)."""

HEADER_BYTES: int
N_STATE: int

def send_paced(fd: int, size: int, rate_bps: float, duration_s: float,
               tag: int, /) -> tuple[int, int]:
    """Datagrams of ``size`` bytes at ``rate_bps`` for ``duration_s`` on a connected
    socket (a sender behind schedule sends at once until back on it): (sent, elapsed ns)."""

def receive(fd: int, tag: int, limit: int, seen: bytearray, state: object, jitter: object,
            wait_ms: int, slice_ms: int, /) -> int:
    """Count the datagrams that arrive (into ``seen``, the int64 ``state`` and the double
    ``jitter``) until none came for ``wait_ms`` or ``slice_ms`` have passed: how many."""

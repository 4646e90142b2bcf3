"""Socket-buffer advice from the bandwidth-delay product, with the arithmetic shown.

A TCP connection can keep at most one window of data in flight, so to fill a
link of rate R with round-trip time RTT the window must reach R x RTT (the
bandwidth-delay product). Linux counts packet overhead against a socket
buffer: with the default tcp_adv_win_scale about half of it carries data, so
the buffer limits should be about twice the BDP.

The RTT is measured by the audit suite (``beoperf.suites.audit``: a short ping-pong of
``RTT_SIZE`` bytes against the peer's ``beoperf serve``); this module only does the
arithmetic and reads the current limits.
"""

from __future__ import annotations

from pathlib import Path

from beoperf.model.audit import BufferAdvice

RTT_SIZE = 64  # bytes: a small message, so the RTT is the path's and not the bandwidth's
MIN_BUFFER = 64 * 1024
OVERHEAD_FACTOR = 2  # buffer bytes per byte of window (tcp_adv_win_scale = 1)


def next_power_of_two(n: float) -> int:
    value = 1
    while value < n:
        value *= 2
    return value


def read_sysctl(key: str, root: str = "/proc/sys") -> str | None:
    try:
        return " ".join(Path(root, *key.split(".")).read_text().split())
    except OSError:
        return None


def _max_of(value: str | None) -> int | None:
    """The limit of a sysctl: the value, or the last of a 'min default max' triple."""
    if not value:
        return None
    try:
        return int(value.split()[-1])
    except ValueError:
        return None


def advise(rate_bps: float, rtt_us: float, samples: int,
           current: dict[str, str | None]) -> BufferAdvice:
    """The arithmetic, the recommended limit and the commands that set it."""
    bdp = int(rate_bps * rtt_us * 1e-6 / 8)
    rec = max(MIN_BUFFER, next_power_of_two(OVERHEAD_FACTOR * bdp))
    arithmetic = [
        f"RTT = {rtt_us:.1f} us (median of {samples} round trips of {RTT_SIZE} B, idle link)",
        f"BDP = {rate_bps / 1e9:g} Gbit/s x {rtt_us:.1f} us / 8 = {bdp:,} bytes in flight",
        f"buffer = {OVERHEAD_FACTOR} x BDP = {OVERHEAD_FACTOR * bdp:,} bytes (about half of a "
        f"socket buffer carries data), rounded up to {rec:,} bytes (at least {MIN_BUFFER:,})",
    ]
    sufficient = {k: (None if (limit := _max_of(v)) is None else limit >= rec)
                  for k, v in current.items()}
    commands = [_raise_limit(key, current[key], rec)
                for key, ok in sufficient.items() if ok is False]
    if commands:
        commands.append("persist: the same keys = values in /etc/sysctl.d/90-beoperf.conf")
    else:
        commands.append("the current limits are enough for this link: nothing to raise")
    commands.append(f"measure: beoperf pingpong PEER --sndbuf {rec // 2} --rcvbuf {rec // 2} "
                    f"(Linux doubles the request to {rec:,})")
    return BufferAdvice(rate_bps, rtt_us, samples, bdp, rec, current, sufficient, arithmetic,
                        commands)


def _raise_limit(key: str, value: str | None, limit: int) -> str:
    """sysctl -w that raises one limit (for a triple, its max; never below its default)."""
    parts = (value or "").split()
    if len(parts) == 3:
        high = max(limit, int(parts[1]))
        return f'sysctl -w {key}="{parts[0]} {parts[1]} {high}"'
    return f"sysctl -w {key}={limit}"


BUFFER_SYSCTLS = ("net.core.rmem_max", "net.core.wmem_max", "net.ipv4.tcp_rmem",
                  "net.ipv4.tcp_wmem")


def current_limits() -> dict[str, str | None]:
    """This node's socket-buffer limits (None where one cannot be read)."""
    return {k: read_sysctl(k) for k in BUFFER_SYSCTLS}

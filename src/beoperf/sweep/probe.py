"""One short measurement of one message size against a `beoperf serve` peer.

Used where a figure is needed rather than a sweep: the RTT behind the buffer
advice, and each repeat of the tuning procedure.
"""

from __future__ import annotations

import socket

from beoperf import protocol
from beoperf.engines.tcp import TcpClient
from beoperf.results.model import SizeResult
from beoperf.sweep.driver import SweepConfig, run_sweep


def measure_size(host: str, port: int, size: int, max_time: float,
                 timeout: float = 10.0) -> SizeResult:
    """A fresh connection, one size measured; ConnectionError says why it could not be."""
    params = {"mode": "pingpong", "max_size": size, "transport": "tcp"}
    client = TcpClient(host, port, params, family=socket.AF_UNSPEC, timeout=timeout)
    try:
        client.setup()
        client.open_data()
        out = run_sweep(client, SweepConfig(sizes=[size], max_time=max_time))
    except (OSError, protocol.ProtocolError, protocol.PeerRefused) as exc:
        raise ConnectionError(f"measuring against {host} port {port}: {exc}") from None
    finally:
        client.close()
    if out.status != "complete" or not out.sizes:
        raise ConnectionError(f"measuring against {host} port {port}: {out.reason}")
    return out.sizes[0]

"""One short measurement of one message size against a `beoperf serve` peer.

Used where a figure is needed rather than a sweep: the RTT behind the buffer
advice, and each repeat of the tuning procedure.
"""

from __future__ import annotations

from beoperf import errors
from beoperf.engines import Peer
from beoperf.engines.base import SessionParams
from beoperf.model.pingpong import SizeResult
from beoperf.sweep.driver import SweepConfig, open_transport, run_sweep


def measure_size(host: str, port: int, size: int, max_time: float,
                 timeout: float = 10.0) -> SizeResult:
    """A fresh connection, one size measured.  When it cannot be, an errors.BeoperfError
    says why: ConnectError (cannot reach the peer, or lost it; a ConnectionError, as
    before), PeerError (it refused), IntegrityError; its text starts "measuring against
    HOST port PORT: ".  An interruption (Ctrl-C, SIGTERM) is raised again, not turned
    into an error."""
    params: SessionParams = {"mode": "pingpong", "max_size": size, "transport": "tcp"}
    try:
        client = open_transport(Peer(host, port), params, timeout=timeout)
    except errors.BeoperfError as exc:  # what connect() says, with the cause's own words
        raise _failed(exc, exc.__cause__ or exc, host, port) from None
    try:
        out = run_sweep(client, SweepConfig(sizes=[size], max_time=max_time))
    finally:
        client.close()
    if out.status == "interrupted" and isinstance(out.error, KeyboardInterrupt):
        raise out.error  # Ctrl-C or SIGTERM: the caller undoes what it changed, then stops
    if out.status != "complete" or not out.sizes:
        assert out.error is not None
        raise _failed(type(client).failure(out.error, host), out.reason, host, port)
    return out.sizes[0]


def _failed(meaning: errors.BeoperfError, detail: object, host: str,
            port: int) -> errors.BeoperfError:
    """`meaning`'s class and hint, with the text measure_size has always given."""
    return type(meaning)(f"measuring against {host} port {port}: {detail}", meaning.hint)

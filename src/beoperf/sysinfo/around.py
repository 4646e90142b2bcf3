"""The conditions around a run: was the machine dedicated, and did the network lose anything.

``Watch.start()`` before a run and ``Watch.stop()`` after it give the block a document
keeps in its meta as ``"conditions"``: the load average and the busiest other processes
at the start and end (beoperf.sysinfo.load), whether the machine was dedicated, and for
network runs what the TCP, interface and qdisc counters gained in between
(beoperf.sysinfo.counters); with the warnings to record and print.  Together they cost
about two windows of beoperf.sysinfo.load.WINDOW_S.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from beoperf.sysinfo import counters, load


class Watch:
    """Snapshots before and after one run."""

    def __init__(self, network: bool = True, window: float = load.WINDOW_S,
                 used: Collection[str] | None = None, me: int | None = None) -> None:
        """``network``: read the network counters too; ``used``: the interfaces the run
        uses, when known (drops elsewhere are the host's, not the run's); ``me``: the
        root of beoperf's own processes (default this one; a rank started by the user's
        launcher gives its parent, so that the job's other ranks here are its own)."""
        self.network, self.window, self.used, self.me = network, window, used, me
        self.first: load.Moment | None = None
        self.before: counters.Snapshot | None = None

    def start(self) -> Watch:
        """Take the first snapshots (the load's window first, then the counters, so that
        they are read as close to the run as they can be)."""
        self.first = load.moment(self.window, me=self.me)
        if self.network:
            self.before = counters.snapshot()
        return self

    def stop(self, socket_retransmissions: int | None = None,
             peer_retransmissions: int | None = None) -> tuple[dict[str, Any], list[str]]:
        """The block of the conditions and the warnings; the counters are read before
        the load's window, as close to the run's end as they can be.  The data sockets'
        retransmissions, when known: this end's and the peer's (as it said)."""
        after = counters.snapshot() if self.before is not None else None
        last = load.moment(self.window, me=self.me)
        first = self.first or last
        warnings = load.judge([
            ("the start", first.record, float(first.record["own_running"])),
            ("the end", last.record, load.own_load_at_end(first, last))])
        block: dict[str, Any] = {"start": first.record, "end": last.record,
                                 "dedicated": not warnings}
        if self.before is not None and after is not None:
            block["network"] = counters.delta(self.before, after, socket_retransmissions,
                                              self.used, peer_retransmissions)
            warnings += counters.notes(block["network"])
        block["warnings"] = warnings
        return block, warnings


__all__ = ["Watch"]

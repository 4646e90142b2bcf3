"""The loaded half of ``beoperf pingpong --under-load`` (sockperf's under-load mode).

The ping-pong sweep runs twice in one session over the same link: first alone (the
document's ``sizes``), then while a bulk TCP load runs on the session's load connections
(engines/tcp_load.py), the same sizes, each sweep with half the time budget.  The load
starts after the idle sweep, runs a short warm-up (TCP's slow start fills the path's
queue) and is stopped when the loaded sweep ends, however it ends (complete,
interrupted, failed): the server drains it, bounded by its own cap, and reports what it
delivered, which becomes the load's throughput while the ping-pong ran.

Idle first, then loaded (not interleaved): the load's queue takes seconds to build and
to drain on a slow link, so a switch per trial would measure the transitions.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

from beoperf import errors, interrupts
from beoperf.engines import protocol, tcp_load
from beoperf.engines.base import Transport, TransportError
from beoperf.engines.tcp import TcpClient, count
from beoperf.model import jsonvalue
from beoperf.model.document import JsonObject
from beoperf.sweep.driver import SweepConfig, SweepOutcome, run_sweep

WARMUP_S = 0.5  # the load runs this long before the first loaded trial
Progress = Callable[[int, list], None]


@dataclass
class Loaded:
    """The loaded sweep and the load's facts (the document's ``under_load``)."""

    outcome: SweepOutcome
    load: JsonObject


def halved(cfg: SweepConfig) -> SweepConfig:
    """A phase's sweep: the same sizes and seed, half of the budget (None stays None)."""
    budget = cfg.time_budget / 2 if cfg.time_budget is not None else None
    return dataclasses.replace(cfg, time_budget=budget)


def run(client: Transport, cfg: SweepConfig, on_pass: Progress | None = None) -> Loaded:
    """Start the load, run the loaded sweep, stop the load (always): the loaded outcome
    and the load's facts.  A load that cannot start fails the phase (its outcome says
    so), never the idle sweep before it."""
    if not isinstance(client, TcpClient):
        raise errors.BadSpec("--under-load is for the tcp transport")
    streams = int(client.params.get("load_streams") or 0)
    facts: JsonObject = {"streams": streams, "write_bytes": tcp_load.DEFAULT_WRITE,
                         "direction": "this end sends, the server drains",
                         "warmup_s": WARMUP_S}
    try:
        ready = client.start_load(tcp_load.DEFAULT_WRITE)
    except (TransportError, OSError) as exc:
        failed = SweepOutcome(status="failed", reason=f"the load did not start: {exc}",
                              error=exc)
        return Loaded(failed, {**facts, "started": False})
    facts["server_cap_s"] = ready.get("max_seconds")
    started = time.monotonic()
    outcome = SweepOutcome(status="interrupted", reason="interrupted during the load's warm-up")
    try:
        time.sleep(WARMUP_S)
        outcome = run_sweep(client, cfg, on_pass=on_pass)
    except KeyboardInterrupt as exc:  # during the warm-up (run_sweep keeps its own)
        outcome.reason, outcome.error = interrupts.reason(exc), exc
    try:
        facts.update(_stopped(client, time.monotonic() - started))
    except KeyboardInterrupt as exc:  # a stop signal while the load is stopped: the sizes
        # measured are kept (the load's sockets are closed whatever happens)
        facts["note"] = "stopped while the load was ended: its account is not known"
        outcome.status, outcome.reason, outcome.error = "interrupted", interrupts.reason(exc), exc
    return Loaded(outcome, {**facts, "started": True})


def _stopped(client: TcpClient, seconds: float) -> JsonObject:
    """Stop the load; what the server says it delivered, and its goodput over its window
    (the receiver's bytes from the first to the last), or why that is not known."""
    errors_seen = client.load_errors()
    out: JsonObject = {"ran_s": round(seconds, 3)}
    try:
        done = client.stop_load()
    except (TransportError, OSError, protocol.ProtocolError) as exc:
        return {**out, "bytes": None, "throughput_bps": None, "capped": None,
                "note": f"the server's account of the load was not had: {exc}"}
    per = done.get("bytes")
    per_stream = [v for v in per if isinstance(v, int) and not isinstance(v, bool)
                  and v >= 0] if isinstance(per, list) else []
    window = count(done, "window_ns", 0)
    total = sum(per_stream)
    out.update({"bytes": total, "bytes_per_stream": jsonvalue.as_json(per_stream),
                "window_s": round(window / 1e9, 6),
                "throughput_bps": total * 8 / (window / 1e9) if window > 0 else None,
                "capped": bool(done.get("capped"))})
    if done.get("capped"):
        out["note"] = ("the server's cap on a load's duration ended it before the loaded "
                       "sweep did: the last sizes ran without it")
    elif errors_seen:
        out["note"] = "; ".join(errors_seen[:3])
    return out

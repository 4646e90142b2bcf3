"""UDP at a set rate (`beoperf pingpong --mode stream --udp --rate R`): one trial per
size against a `beoperf serve` (or the embedded one), each negotiated on the session's
control connection (``beoperf.engines.udp``), the figures in a ping-pong document.

Each size's row holds its ``udp`` figures (goodput, loss, reordering, duplicates,
jitter, the rate asked for and the rate sent); its throughput is the goodput and its
time the time per datagram at that goodput, so that compare, plots and the np file read
a UDP run as a curve over sizes.  A size that fails (the server refused it, the peer went
away) stops the run; the sizes measured before it are kept.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from beoperf import _core, errors, interrupts, sysinfo
from beoperf.analysis.pingpong import document
from beoperf.engines import protocol, udp
from beoperf.engines.base import Peer
from beoperf.engines.tcp import TcpClient
from beoperf.model import jsonvalue
from beoperf.model.document import JsonObject, make_meta, utc_now
from beoperf.model.pingpong import RunResult, SizeResult
from beoperf.suites import pingpong
from beoperf.suites.pingpong import HINT, Measured, Spec

DEFAULT_SIZES = (64, 512, 1472)  # 1472: the largest that fits a 1500-byte MTU over IPv4
TRIAL_S = 2.0  # each size's trial unless --trial-time says
SHORT_OF_RATE = 0.95  # a sender below this share of the rate asked for is said to be


def validate(spec: Spec) -> None:
    """BadSpec for a UDP run no server would take (the server checks again)."""
    pingpong.validate(spec)
    rate = spec.udp_rate
    if rate is None or not rate > 0:
        raise errors.BadSpec("--udp needs --rate, e.g. --rate 100M (bit/s)", HINT)
    if spec.transport != "tcp" or spec.mode != "stream":
        raise errors.BadSpec("--udp is for --mode stream against 'beoperf serve'", HINT)
    if spec.streams != 1 or spec.reverse:
        raise errors.BadSpec("--udp with --streams or --reverse is not supported", HINT)
    if spec.integrity or spec.nocache:
        raise errors.BadSpec("--udp counts datagrams, it does not check their content: "
                             "leave out --integrity and --nocache", HINT)
    bad = [s for s in spec.sizes if not udp.MIN_SIZE <= s <= udp.MAX_SIZE]
    if bad:
        raise errors.BadSpec(f"--udp sizes are {udp.MIN_SIZE} to {udp.MAX_SIZE} bytes (a "
                             f"datagram carries a {udp.MIN_SIZE}-byte header): not {bad[0]}",
                             HINT)
    if not 0 < spec.trial_time <= udp.MAX_DURATION_S:
        raise errors.BadSpec(f"--trial-time with --udp is each size's duration: 0 to "
                             f"{udp.MAX_DURATION_S:g} s (a server's cap)", HINT)


def run(spec: Spec, progress: Callable[[int, int], None] | None = None,
        hold: contextlib.ExitStack | None = None) -> Measured:
    """The run (see the module docstring), the embedded server started first if no host
    was given."""
    spec = pingpong.arranged(spec)
    validate(spec)
    with pingpong.peer([spec]) as (host, port), pingpong.pinned(spec.client_cpu):
        return measure(spec, host, port, progress, hold)


def measure(spec: Spec, host: str, port: int,
            progress: Callable[[int, int], None] | None = None,
            hold: contextlib.ExitStack | None = None) -> Measured:
    started_utc, started = utc_now(), time.monotonic()
    params = spec.params()
    client = TcpClient(Peer(host, port, spec.family), params, timeout=spec.timeout)
    client.connect()
    try:
        _check_server(client, spec)
    except protocol.PeerRefused as exc:
        client.close()
        raise TcpClient.failure(exc, host) from None
    rows: list[SizeResult] = []
    error: errors.BeoperfError | None = None
    interrupt: KeyboardInterrupt | None = None
    try:
        for i, size in enumerate(spec.sizes):
            rows.append(size_result(size, trial(client, size, spec)))
            if progress is not None:
                progress(i + 1, len(spec.sizes))
    except KeyboardInterrupt as exc:
        interrupt = exc
    except (OSError, protocol.ProtocolError, protocol.PeerRefused,
            errors.BeoperfError) as exc:
        error = TcpClient.failure(exc, host)
    if hold is not None:
        hold.enter_context(interrupts.deferred())
    local, remote = client.facts()
    client.close(abort=error is not None or interrupt is not None)
    status = "complete" if error is None and interrupt is None else \
        "interrupted" if interrupt is not None else "failed"
    meta = make_meta(list(spec.command_line), utc_start=started_utc,
                     duration_s=round(time.monotonic() - started, 3),
                     peer=f"{host} port {port}",
                     clock=dict(sysinfo.clock_facts(), overhead_ns=_core.clock_overhead_ns(1000)))
    result = RunResult(parameters=spec.recorded(params), local=local, remote=remote, meta=meta,
                       sizes=rows, status=status,
                       status_reason=str(error) if error else
                       interrupts.reason(interrupt) if interrupt else None)
    result.warnings = [*client.warnings, *short_of_rate(rows)]
    return Measured(document(result), result, error, interrupt)


def _check_server(client: TcpClient, spec: Spec) -> None:
    """Before any datagram, in one line: a server older than --udp (it took the session
    but would refuse the trials as an unexpected op), or a rate above its cap."""
    cap = jsonvalue.number(client.limits, "max_udp_rate_bps")
    if cap is None:
        raise protocol.PeerRefused("this 'beoperf serve' is older than --udp; upgrade it",
                                   "version")
    if spec.udp_rate is not None and spec.udp_rate > cap:
        raise protocol.PeerRefused(f"--rate {spec.udp_rate / 1e6:g} Mbit/s is above this "
                                   f"server's UDP cap of {cap / 1e6:g} Mbit/s", "limit")


def trial(client: TcpClient, size: int, spec: Spec) -> JsonObject:
    assert client.ctrl is not None and spec.udp_rate is not None
    return udp.run_trial(client.ctrl, size, spec.udp_rate, spec.trial_time, spec.timeout)


def size_result(size: int, figures: JsonObject) -> SizeResult:
    """A size's row: the UDP figures, and the goodput as its throughput (the time per
    datagram at that goodput as its time)."""
    goodput = jsonvalue.number(figures, "goodput_bps")
    per_us = size * 8e6 / goodput if goodput else None
    sent = jsonvalue.integer(figures, "sent") or 0
    received = jsonvalue.integer(figures, "received") or 0
    duplicates = jsonvalue.integer(figures, "duplicates") or 0
    return SizeResult(size=size, samples=received - duplicates, trials=1, reps=sent,
                      time_us={"median": per_us}, ci95_halfwidth_us=None, ci95_relative=None,
                      converged=True, throughput_bps={"from_median": goodput}, udp=figures)


def short_of_rate(rows: list[SizeResult]) -> list[str]:
    """A warning for each size whose sender did not hold the rate asked for."""
    out = []
    for row in rows:
        figures = row.udp or {}
        asked, sent = (jsonvalue.number(figures, k) for k in ("rate_bps", "sent_bps"))
        if asked and sent is not None and sent < SHORT_OF_RATE * asked:
            out.append(f"UDP {row.size} B: this end sent {sent / 1e6:.1f} Mbit/s of the "
                       f"{asked / 1e6:.1f} asked for (it could not send faster); the loss is "
                       "of what it sent")
    return out

"""The ping-pong sweep (`beoperf pingpong`) and its configuration sweep (`--sweep`).

:func:`run` measures one sweep against a peer (or an embedded server on loopback) and
returns a :class:`Measured`: the document (whatever stopped the sweep, it holds every size
measured before) and, when the sweep did not complete, the error or interruption the
caller must report after saving it.  :func:`run_configs` does one sweep per value of one
setting and yields each as it completes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import math
import os
import random
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from beoperf import _core, engines, errors, interrupts, pools, sysinfo, units
from beoperf.analysis import efficiency, intervals
from beoperf.analysis.pingpong import document, precision_shortfall
from beoperf.analysis.stats import MIN_CI_SAMPLES
from beoperf.audit import state
from beoperf.audit.base import valid_ifname
from beoperf.engines import protocol, tcp_data
from beoperf.engines.base import MODES, Peer, SessionParams
from beoperf.model import jsonvalue
from beoperf.model.document import Document, JsonObject, make_meta, utc_now
from beoperf.model.mpi_options import MpiOptions
from beoperf.model.pingpong import RunResult, SizeResult
from beoperf.suites import serve, under_load
from beoperf.sweep import history as run_history
from beoperf.sweep.driver import (
    DEFAULT_TIME_BUDGET,
    DEFAULT_TIMEOUT,
    PRECISION,
    TRIAL_S,
    SweepConfig,
    SweepOutcome,
    budget_notes,
    open_transport,
    run_sweep,
    shaper_of,
    shaper_probe,
)
from beoperf.sweep.history import History
from beoperf.sweep.precision import Point
from beoperf.sweep.schedule import explicit_schedule, netpipe_schedule
from beoperf.sysinfo import around

__all__ = ["MODES", "DEFAULT_PORT", "DEFAULT_TIME_BUDGET", "DEFAULT_TIMEOUT", "PRECISION",
           "SWEEP_TRIAL_S", "SUSTAINED_TRIAL_S", "SWEEPABLE", "Spec", "Measured",
           "run", "run_configs", "placed", "explicit_schedule", "netpipe_schedule",
           "default_trial_time"]

DEFAULT_PORT = protocol.DEFAULT_PORT
SWEEPABLE = ("sndbuf", "rcvbuf", "mode", "nocache")
HINT = "see 'beoperf COMMAND --help'"
SWEEP_TRIAL_S = TRIAL_S  # a sweep's trials: short, many sizes share the budget
SUSTAINED_TRIAL_S = 0.25  # one size's: about as long as NetPIPE's, sustained
Progress = Callable[[int, list[Point]], None]  # after each pass: its number, the sizes


@dataclass(frozen=True)
class Spec:
    """One sweep, every value parsed (bytes, seconds).  The measurement's settings and
    their defaults are those of beoperf.sweep.driver (``sweep()`` hands them on); the
    others say where and how to connect."""

    sizes: tuple[int, ...]
    host: str | None = None  # None: an embedded server on loopback
    port: int = DEFAULT_PORT
    family: int = socket.AF_UNSPEC
    transport: str = "tcp"
    mode: str = "pingpong"
    precision: float = PRECISION
    time_budget: float | None = DEFAULT_TIME_BUDGET  # the whole sweep (None: no limit)
    max_time: float | None = None  # per size (None: no cap)
    trial_time: float = SWEEP_TRIAL_S
    seed: int | None = None  # of the passes' shuffled order (None: drawn, then recorded)
    timeout: float = DEFAULT_TIMEOUT
    integrity: bool = False
    nocache: bool = False
    sndbuf: int | None = None
    rcvbuf: int | None = None
    nodelay: bool = True
    busy_poll: int | None = None
    congestion: str | None = "auto"  # data connections' TCP_CONGESTION; None: the system's,
    # "auto": the mode's (default_congestion)
    client_cpu: int | None = None
    server_cpu: int | None = None
    place_embedded: bool = True  # the embedded peer and no --cpu: ends on two CPUs (placed)
    perturbation: int | None = None  # recorded: how the sizes were made
    command_line: tuple[str, ...] = ()
    mpi: MpiOptions | None = None  # transport mpi: hosts, launcher, loop variants
    history: Path | None = None  # earlier runs of this setup (beoperf.sweep.history); None: none
    link_speed: float | None = None  # bit/s (--link-speed): the efficiency's link; None: the NICs'
    streams: int = 1  # --streams: parallel data connections in stream mode
    reverse: bool = False  # --reverse: the server sends, this end receives (stream mode)
    under_load: bool = False  # --under-load: the sweep again while a bulk load runs
    load_streams: int = 1  # --load-streams: the load's connections
    udp_rate: float | None = None  # --udp --rate: datagrams at this rate (bit/s; suites.udp)

    def params(self) -> SessionParams:
        """The session parameters both ends agree on (and the result records)."""
        # an empty message still moves a byte on TCP (engines.tcp_data.wire_size)
        params: SessionParams = {
                "mode": self.mode, "max_size": max(self.sizes[-1], 1), "integrity": self.integrity,
                "nocache": self.nocache, "sndbuf": self.sndbuf, "rcvbuf": self.rcvbuf,
                "nodelay": self.nodelay, "busy_poll": self.busy_poll,
                "congestion": (default_congestion(self.mode, self.transport)
                               if self.congestion == AUTO else self.congestion),
                "client_cpu": self.client_cpu, "server_cpu": self.server_cpu,
                "transport": self.transport, "precision": self.precision,
                "time_budget": self.time_budget, "max_time": self.max_time,
                "trial_time": self.trial_time,
                "perturbation": self.perturbation, "sizes": len(self.sizes),
                "start": self.sizes[0], "end": self.sizes[-1]}
        # streams and reverse, when either is asked for: a run of one stream forward
        # records (and sends) neither, as before them, so its history setup is unchanged
        if self.streams != 1 or self.reverse:
            params["streams"], params["reverse"] = self.streams, self.reverse
        if self.under_load:  # the server opens that many load connections to drain
            params["load_streams"] = self.load_streams
        if self.udp_rate is not None:
            params["udp_rate"] = self.udp_rate
        return params

    def recorded(self, params: SessionParams) -> JsonObject:
        """The parameters the result records: the session's, and --link-speed when given
        (the peer never sees it, and a run's history setup does not depend on it)."""
        out = jsonvalue.as_object(params)
        if self.link_speed is not None:
            out[efficiency.LINK_SPEED_PARAM] = self.link_speed
        return out

    def sweep(self) -> SweepConfig:
        """The sweep's settings; with --under-load each of its two sweeps (idle, loaded)
        has half of the budget."""
        cfg = self._sweep()
        return under_load.halved(cfg) if self.under_load else cfg

    def _sweep(self) -> SweepConfig:
        return SweepConfig(sizes=list(self.sizes), mode=self.mode, precision=self.precision,
                           trial_time=self.trial_time, max_time=self.max_time,
                           nocache=self.nocache, time_budget=self.time_budget,
                           streams=self.streams, seed=self.seed if self.seed is not None
                           else random.randrange(2**32))


def default_trial_time(sizes: Sequence[int], time_budget: float | None,
                       max_time: float | None, min_trials: int = MIN_CI_SAMPLES) -> float:
    """How long a trial lasts unless ``--trial-time`` says: SWEEP_TRIAL_S for a sweep;
    for one size (a latency or a rate), trials as long as NetPIPE's, SUSTAINED_TRIAL_S,
    as far as the budget (or the cap) affords its ``min_trials`` twice over.  Where a
    wake-up of the other end is cheap just after a pause and dear in a sustained
    exchange (two CPUs of a KVM guest that halts when idle), short trials with the
    client's pauses between them read lower than every sustained ping-pong:
    16 B one-way on two CPUs here, 19.5 us in 2 ms trials, 26-27 us in 0.2 s ones,
    sockperf 27.1-27.5 (bench/RESULTS.md, L1)."""
    if len(sizes) != 1:
        return SWEEP_TRIAL_S
    limits = [t for t in (time_budget, max_time) if t is not None]
    afford = min(limits) / (2 * min_trials) if limits else SUSTAINED_TRIAL_S
    return max(SWEEP_TRIAL_S, min(SUSTAINED_TRIAL_S, afford))


class Measured(NamedTuple):
    """A sweep's document, and why it stopped early (None when it completed)."""

    document: Document
    run: RunResult
    error: errors.BeoperfError | None = None
    interrupt: KeyboardInterrupt | None = None
    # each size's samples (one-way ns, an array per trial) when the sweep ran here: the
    # rows of --raw-samples (None when they stayed in another process)
    samples: dict[int, list[Any]] | None = None


def validate(spec: Spec) -> None:
    """BadSpec for a value no sweep can use."""
    if not spec.sizes or spec.sizes[0] < 0:
        raise errors.BadSpec("no usable sizes", HINT)
    if spec.link_speed is not None and not (math.isfinite(spec.link_speed)
                                            and spec.link_speed > 0):
        raise errors.BadSpec(f"--link-speed {spec.link_speed!r} bit/s: give a finite rate > 0",
                             HINT)
    if spec.mode not in MODES:
        raise errors.BadSpec(f"--mode {spec.mode!r}: choose {', '.join(MODES)}", HINT)
    if not 0 < spec.precision < 1:
        raise errors.BadSpec("--precision is a fraction between 0 and 1, e.g. 0.02 for 2%",
                             HINT)
    for name in ("time_budget", "max_time", "trial_time", "timeout"):
        if getattr(spec, name) is not None:
            serve.check_seconds(f"--{name.replace('_', '-')}", getattr(spec, name))
    if not 0 <= spec.port <= 65535:
        raise errors.BadSpec(f"--port {spec.port} is not a TCP port (0-65535)", HINT)
    _validate_socket(spec)
    _validate_parallel(spec)
    _validate_load(spec)


CLIENT_MAX_STREAMS = 1024  # this end's bound; the server's own cap (tcp_data.MAX_STREAMS) decides


def _validate_parallel(spec: Spec) -> None:
    """--streams and --reverse: stream mode over TCP only; a no-cache pool is the
    session's one, so not with several streams."""
    if not 1 <= spec.streams <= CLIENT_MAX_STREAMS:
        raise errors.BadSpec(f"--streams {spec.streams}: give 1 to {CLIENT_MAX_STREAMS}", HINT)
    if spec.streams == 1 and not spec.reverse:
        return
    what = "--streams" if spec.streams > 1 else "--reverse"
    if spec.transport != "tcp" or spec.mode != "stream":
        raise errors.BadSpec(f"{what} is for --mode stream over the tcp transport", HINT)
    if spec.nocache and spec.streams > 1:
        raise errors.BadSpec("--nocache with --streams is not supported: give one of them", HINT)


def _validate_load(spec: Spec) -> None:
    """--under-load (and --load-streams): a ping-pong over TCP, one data connection."""
    if not spec.under_load:
        if spec.load_streams != 1:
            raise errors.BadSpec("--load-streams needs --under-load", HINT)
        return
    if not 1 <= spec.load_streams <= CLIENT_MAX_STREAMS:
        raise errors.BadSpec(f"--load-streams {spec.load_streams}: give 1 to "
                             f"{CLIENT_MAX_STREAMS}", HINT)
    if spec.transport != "tcp" or spec.mode != "pingpong":
        raise errors.BadSpec("--under-load is for --mode pingpong over the tcp transport", HINT)
    if spec.streams != 1 or spec.reverse:
        raise errors.BadSpec("--under-load is not for --streams or --reverse", HINT)


def _validate_socket(spec: Spec) -> None:
    if spec.busy_poll is not None and not 0 <= spec.busy_poll <= 1_000_000:
        raise errors.BadSpec("--busy-poll is in microseconds, 0..1000000", HINT)
    for name in ("sndbuf", "rcvbuf"):
        value = getattr(spec, name)
        if value is not None and not 0 < value < 2**31:
            raise errors.BadSpec(f"--{name} must be between 1 byte and 2G", HINT)
    if spec.congestion not in (None, AUTO):
        if spec.transport != "tcp":
            raise errors.BadSpec("--congestion is for the tcp transport", HINT)
        problem = tcp_data.congestion_problem(spec.congestion)
        if problem:
            raise errors.BadSpec(f"--congestion: {problem}", HINT)
    if spec.client_cpu is not None and spec.client_cpu not in os.sched_getaffinity(0):
        raise errors.BadSpec(f"--cpu: CPU {spec.client_cpu} is not available here", HINT)


PINGPONG_CONGESTION = tcp_data.ALWAYS_THERE
AUTO = "auto"


def default_congestion(mode: str, transport: str) -> str | None:
    """The data connections' congestion control when none is asked for: Reno for the
    ping-pong and bidirectional modes over TCP, the system's for stream mode.

    Each pass of a sweep opens a fresh data connection (see ``PingPongMeasurer.start_pass``)
    and gives each size milliseconds.  Under BBR (the default of many current systems) a
    fresh connection sends at the rate it has estimated so far, and a ping-pong, idle
    between messages, gives it few samples to raise that estimate: on a veth pair large
    messages read 48 Gbit/s where NPtcp's one long connection read 87-93 and Reno's slow
    start, which opens the window in a few round trips, 96 (bench/RESULTS.md, C1).  A
    stream measures what the congestion control does with the link, so it keeps the
    system's, as iperf3 does."""
    if transport != "tcp" or mode == "stream":
        return None
    return PINGPONG_CONGESTION


def arranged(spec: Spec) -> Spec:
    """The spec as it runs: the mode's congestion control where it says "auto", and the
    ends placed (``placed``)."""
    if spec.congestion == AUTO:
        spec = dataclasses.replace(spec, congestion=spec.params()["congestion"])
    return placed(spec)


def placed(spec: Spec) -> Spec:
    """With the embedded server on loopback and no CPU given: the client on the last CPU
    this process may use, the server on the one before (when there are two).  Left to
    the scheduler, the two ends of a loopback ping-pong share one CPU in some runs and not
    in others, and the figure moves with it: 16 B one-way 6.0-6.3 us on one CPU against
    26-27 us on two of a 2-vCPU KVM guest (bench/RESULTS.md, L1).  Two CPUs is what two
    processes talking on one host normally get, and what MPI's default binding gives two
    ranks.  ``place_embedded=False`` (``--cpu none``) leaves both ends to the scheduler."""
    if (spec.host or spec.transport != "tcp" or not spec.place_embedded
            or spec.client_cpu is not None or spec.server_cpu is not None):
        return spec
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return spec
    return dataclasses.replace(spec, client_cpu=cpus[-1], server_cpu=cpus[-2])


@contextlib.contextmanager
def pinned(cpu: int | None) -> Iterator[None]:
    """Run this thread on one CPU, then give the old CPU set back."""
    old = os.sched_getaffinity(0)
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, old)


@contextlib.contextmanager
def peer(specs: Sequence[Spec]) -> Iterator[tuple[str, int]]:
    """(host, port) of the peer: the one given, or an embedded server on loopback allowed
    the memory these sessions need (a no-cache pool spans the LLC)."""
    first = specs[0]
    if first.host:
        yield first.host, first.port
        return
    loopback = "::1" if first.family == socket.AF_INET6 else "127.0.0.1"
    llc = sysinfo.llc_bytes()
    need = max(pools.ideal_span(s.sizes[-1], llc) if s.nocache
               else pools.two_buffers(s.sizes[-1]) * s.streams for s in specs)
    with serve.embedded(loopback, max_memory=max(need, 64 * 1024 * 1024)) as port:
        yield loopback, port


def run(spec: Spec, progress: Progress | None = None,
        hold: contextlib.ExitStack | None = None) -> Measured:
    """One sweep (see the module docstring); the embedded server, if any, is started
    before this end is pinned to its CPU, so that it does not inherit the pinning."""
    spec = arranged(spec)
    validate(spec)
    with peer([spec]) as (host, port), pinned(spec.client_cpu):
        return measure(spec, host, port, progress, hold)


def measure(spec: Spec, host: str, port: int, progress: Progress | None = None,
            hold: contextlib.ExitStack | None = None) -> Measured:
    """Connect, sweep and build the document.  From the end of the sweep on, a stop
    signal is held in ``hold`` (the caller's), so that what was measured can be saved
    before the signal takes effect."""
    started_utc, started = utc_now(), time.monotonic()
    params = spec.params()
    client = open_transport(Peer(host, port, spec.family), params, timeout=spec.timeout)
    local, remote = client.facts()
    history = History.load(spec.history, "pingpong",
                           history_setup(params, host, local, tuning_settings(local))) \
        if spec.history is not None else None
    used = jsonvalue.section(local, "interface").get("name")
    watch = around.Watch(used=[used] if isinstance(used, str) else None).start()
    outcome = run_sweep(client, spec.sweep(), on_pass=progress)
    loaded = under_load.run(client, spec.sweep(), progress) \
        if spec.under_load and outcome.status == "complete" else None
    if hold is not None:
        hold.enter_context(interrupts.deferred())
    own = client.retransmissions()
    client.close(abort=outcome.status != "complete"
                 or (loaded is not None and loaded.outcome.status != "complete"))
    conditions, machine_notes = watch.stop(own, client.peer_retransmissions())
    if outcome.status == "complete" and spec.mode != "stream" and not _loopback(host):
        outcome.facts.update(shaper_check(spec, params, host, port))
    meta = make_meta(list(spec.command_line), utc_start=started_utc,
                     duration_s=round(time.monotonic() - started, 3),
                     peer=f"{host} port {port}",
                     clock=dict(sysinfo.clock_facts(), overhead_ns=_core.clock_overhead_ns(1000)),
                     conditions=conditions)
    result = RunResult(parameters=jsonvalue.as_object(params), local=local, remote=remote,
                       meta=meta,
                       sizes=outcome.sizes, status=outcome.status, status_reason=outcome.reason,
                       sweep=outcome.facts)
    result.parameters = spec.recorded(params)  # with --link-speed, which the peer never saw
    notes = history_notes(result, history, started_utc,
                          "--history off" if spec.transport == "tcp" else
                          f"no history for the {spec.transport} transport")
    # after the history: the warnings quote the intervals the summary shows
    result.warnings = [*warnings_of(client.warnings, outcome, spec.precision),
                       *shaper_notes(result, local), *notes, *machine_notes]
    idle_samples = outcome.samples  # --raw-samples: those of the sweep without load
    if spec.under_load:
        outcome = _with_load(result, outcome, loaded)
    return Measured(document(result), result, *_stopped(outcome, spec.transport, host),
                    samples=idle_samples)


def _with_load(result: RunResult, outcome: SweepOutcome,
               loaded: under_load.Loaded | None) -> SweepOutcome:
    """Put the loaded sweep into the result (``under_load``); the outcome that decides
    how the run ended: the idle sweep's if it did not complete (then no load ran), else
    the loaded sweep's when that did not (the run is then interrupted or failed)."""
    if loaded is None:
        result.under_load = {"load": {"started": False}, "sizes": [], "status": outcome.status,
                             "status_reason": "the sweep without load did not complete"}
        return outcome
    got = loaded.outcome
    result.under_load = {"load": loaded.load,
                         "sizes": [dataclasses.asdict(z) for z in got.sizes],
                         "status": got.status, "status_reason": got.reason,
                         "sweep": got.facts}
    for size in result.under_load["sizes"]:  # type: ignore[union-attr]
        if isinstance(size, dict) and size.get("streams_bps") is None:
            size.pop("streams_bps", None)
    note = loaded.load.get("note")
    if isinstance(note, str):
        result.warnings.append(f"under load: {note}")
    result.warnings += [f"under load: {n}" for n in budget_notes(got.facts, got.status)]
    if got.status != "complete":
        result.status, result.status_reason = got.status, f"under load: {got.reason}"
        return got
    return outcome


def history_notes(result: RunResult, history: History | None, utc: str,
                  off: str = "--history off") -> list[str]:
    """Add the spread between runs to the intervals (across_runs), or record that none
    was known and why (no_history: ``off`` when there is no history); the notes for the
    result.  Never costs the measured run."""
    if history is None:
        no_history(result, off)
        return []
    try:
        return across_runs(result, history, utc)
    except Exception as exc:  # noqa: BLE001 - the history never costs a measured run
        no_history(result, f"the history was not used: {type(exc).__name__}: {exc}")
        return [f"history not used: {type(exc).__name__}: {exc}"]


HISTORY_ENV = run_history.ENV


def history_dir(option: str | None) -> Path | None:
    """Where the runs' history goes (``--history``; beoperf.sweep.history.resolve)."""
    return run_history.resolve(option)


def history_setup(params: SessionParams, host: str,
                  local: JsonObject | None = None,
                  settings: JsonObject | None = None) -> JsonObject:
    """What makes two runs the same setup for the history: every parameter that shapes
    the figures (not the budget, precision or cap, which only decide how many trials),
    the peer (its address as given; not the port, which the embedded server draws), and
    from this end's facts its host name and kernel, the congestion control its data
    socket got and the interface's MTU (a history shared over NFS by several nodes, a
    kernel update or "system" meaning another control start a new history), and a digest
    of ``settings``: every setting of this end that tune or a study may change
    (beoperf.audit.state: sysctls, coalescing, offloads, rings, irqbalance, firewall,
    governor ...), so that a run before a tuning change and one after it are two setups
    with a history each.  The other end's settings are not read (it is another host)."""
    drop = ("precision", "time_budget", "max_time")
    setup: JsonObject = {"peer": host, **{k: v for k, v in jsonvalue.as_object(params).items()
                                          if k not in drop}}
    machine, sock, iface = (jsonvalue.section(local, k) for k in ("host", "socket", "interface"))
    for name, value in (("local_host", machine.get("hostname")), ("kernel", machine.get("kernel")),
                        ("congestion_used", sock.get("congestion")), ("mtu", iface.get("mtu"))):
        if value is not None:
            setup[name] = value
    if settings is not None:
        setup["settings"] = state.digest(settings)
    return setup


def tuning_settings(local: JsonObject) -> JsonObject | None:
    """This end's settings a tuning change may touch (beoperf.audit.state), for the
    interface the data socket uses; None if they could not be read at all."""
    name = jsonvalue.text(jsonvalue.section(local, "interface"), "name")
    try:
        return jsonvalue.as_object(state.settings(name if valid_ifname(name) else None))
    except Exception:  # noqa: BLE001 - reading them never costs a run
        return None


def across_runs(result: RunResult, history: History, utc: str) -> list[str]:
    """Add to every size's ``ci95_us`` the spread between this run and the earlier runs
    of its setup (beoperf.sweep.history; this run's own part stays in
    ``ci95_within_run_us``), record what was done in ``sweep.between_runs``, and add a
    complete run to the history; the notes for the result."""
    medians = {s.size: float(m) for s in result.sizes
               if (m := s.time_us.get("median")) is not None}  # range: between_run_sd, record
    own = run_history.between_run_sd(medians, history.runs)
    sd, cut = run_history.capped(run_history.pooled_sd(own, len(history.runs),
                                                       history.host_sd))
    notes = [history.note] if history.note else []
    notes += history.warnings(medians)
    if cut:
        notes.append(f"history: the spread between runs it gives was capped at "
                     f"{run_history.MAX_RELATIVE_SD:.0%} (beoperf.sweep.history); "
                     f"{history.path} may hold runs of another machine state")
    if sd is not None:
        for s in result.sizes:
            _add_between_runs(s, sd)
    facts = _between_facts(history, own, sd,
                           far=len(run_history.implausible(medians, history.runs)))
    result.sweep = dict(result.sweep or {}, between_runs=facts)
    if result.status == "complete" and medians:
        kept = history.record(utc, medians)
        if kept:
            notes.append(kept)
        facts["recorded"] = kept is None
    return notes


def _add_between_runs(s: SizeResult, sd: float) -> None:
    """One size's ``ci95_us``: its within-run interval with the spread between runs added
    on the log scale (beoperf.sweep.history.widen), with its half-width and relative
    half-width; left as it is without a within-run interval."""
    within = s.ci95_within_run_us or s.ci95_us  # (a size made by hand may lack the first)
    median = s.time_us.get("median")
    if within is None or median is None:
        return
    got = run_history.widen(float(median), within, sd)
    if got is None:
        return
    s.ci95_within_run_us = list(within)
    s.ci95_us = [got[0], got[1]]
    s.ci95_halfwidth_us = (got[1] - got[0]) / 2.0
    s.ci95_relative = intervals.relative_halfwidth(float(median), got[0], got[1])


def _between_facts(history: History, own: float | None, sd: float | None,
                   far: int = 0) -> JsonObject:
    """``sweep.between_runs``: the spread applied (``relative_sd``, None: none) and where
    it came from (``source``: "own" earlier runs of this setup, "own+host" those pooled
    with the host's other setups, "host" borrowed from those only, "none"), the part it
    adds to an interval, the file and what was read.  Where the spread came from is said
    beside every interval (report.pingpong), so it is no warning; only a history that
    could not be read or kept is (history.note, record's note).  ``far``: how many
    earlier runs had a size left out as more than MAX_RATIO from this run's."""
    host = history.host_sd is not None
    source = "none" if sd is None else "host" if own is None else "own+host" if host else "own"
    missing = ("this setup's own history could not be read" if history.note else
               "no earlier run of this setup" if not history.runs else
               f"the earlier runs of this setup are more than {run_history.MAX_RATIO:g}x "
               "from this one at every size they share" if far else
               "no earlier run of this setup has a size of this one")
    facts: JsonObject = {
        "history": str(history.path),
        "earlier_runs": len(history.runs) if own is not None else 0,
        "relative_sd": _rounded(sd), "added_to_intervals": sd is not None,
        "own_relative_sd": _rounded(own), "host_relative_sd": _rounded(history.host_sd),
        "host_setups": history.host_setups, "source": source,
        "relative_halfwidth": _rounded(intervals.log_relative(
            intervals.between_runs_halfwidth(sd))) if sd is not None else None,
        "runs_read": len(history.runs), "recorded": False,
        "settings": history.setup.get("settings")}
    if own is None:
        facts["own_missing"] = missing
    if sd is None:
        facts["why_none"] = missing + ("" if history.note else
                                       "; the next run of this setup adds it")
    return facts


def no_history(result: RunResult, why: str) -> None:
    """Record in ``sweep.between_runs`` that this run's intervals hold no spread between
    runs, and why (the comparison reads the same fields whether there is one or not)."""
    result.sweep = dict(result.sweep or {}, between_runs={
        "history": None, "earlier_runs": 0, "relative_sd": None, "added_to_intervals": False,
        "own_relative_sd": None, "host_relative_sd": None, "host_setups": 0,
        "source": "none", "relative_halfwidth": None, "runs_read": 0, "recorded": False,
        "settings": None, "why_none": why})


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 5)


def _loopback(host: str) -> bool:
    """A loopback path has no shaper to look for."""
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return host == "localhost"


def shaper_check(spec: Spec, params: SessionParams, host: str, port: int) -> JsonObject:
    """After a ping-pong or bidir sweep: does a shaper's burst hold every message of it?
    (Then each direction's bucket refills while the other talks, and the ping-pong
    throughput can be twice the link's rate.)  A failure here costs only this check."""
    try:
        return shaper_probe(Peer(host, port, spec.family), params, list(spec.sizes),
                            timeout=spec.timeout, trial_time=spec.trial_time)
    except (errors.BeoperfError, OSError) as exc:
        return {"shaper": None, "shaper_check": f"not done: {exc}"}


def shaper_notes(result: RunResult, local: JsonObject) -> list[str]:
    """What a shaper on the path means for these figures, with the wire rate beside the
    payload rate (a full segment carries MSS payload bytes in an MTU + 14 byte frame)."""
    shaper = shaper_of(result.sweep)
    if not shaper:
        return []
    rate = shaper["sustained_bps"]
    mss = jsonvalue.integer(jsonvalue.section(local, "socket"), "mss")
    mtu = jsonvalue.integer(jsonvalue.section(local, "interface"), "mtu")
    wire = ""
    if mss and mtu and mtu - 80 <= mss < mtu:  # full segments fill an MTU frame
        wire = (f" ({units.format_rate(rate * (mtu + 14) / mss)} on the wire: {mtu + 14}-byte "
                f"frames carrying {mss} bytes)")
    notes = [f"the stream rate falls as trials get longer, as behind a shaper: about "
             f"{units.format_size(shaper['burst_bytes'])} pass at line rate "
             f"({units.format_rate(shaper['short_trial_bps'])} in a "
             f"{units.format_time(shaper['short_trial_s'], 3)} trial), then "
             f"{units.format_rate(rate)} of payload{wire}, sustained in trials of "
             f"{shaper['trial_s']:.2g} s"]
    peak = max((s.central_bps() for s in result.sizes), default=0.0)
    if result.parameters.get("mode") != "stream" and peak > 1.3 * rate:
        notes.append(f"the ping-pong peak ({units.format_rate(peak)}) exceeds that sustained "
                     "rate: each direction's token bucket refills while the other direction "
                     "sends, so a message passes at up to twice the link's rate; "
                     "--mode stream measures the sustained rate")
    return notes


def _stopped(outcome: SweepOutcome, transport: str,
             host: str) -> tuple[errors.BeoperfError | None, KeyboardInterrupt | None]:
    if outcome.status == "interrupted" and isinstance(outcome.error, KeyboardInterrupt):
        return None, outcome.error
    if outcome.error is not None:
        return engines.get(transport).failure(outcome.error, host), None
    return None, None


def warnings_of(transport_warnings: list[str], outcome: SweepOutcome,
                precision: float | None = None) -> list[str]:
    out = list(transport_warnings)
    short = precision_shortfall(outcome.sizes, precision)  # the intervals shown
    if short:
        out.append(f"{short} (each size's interval is in the result)")
    out += budget_notes(outcome.facts, outcome.status)  # sizes the hard budget cut
    return out


def configure(spec: Spec, key: str, value: Any) -> Spec:
    """The spec with one sweepable setting changed."""
    if key not in SWEEPABLE:
        raise errors.BadSpec(f"--sweep {key}: choose {', '.join(SWEEPABLE)}", HINT)
    return dataclasses.replace(spec, **{key: value})


def run_configs(spec: Spec, key: str, values: Sequence[Any],
                progress: Progress | None = None,
                hold: Callable[[], contextlib.ExitStack] = contextlib.ExitStack,
                ) -> Iterator[tuple[Any, Measured, contextlib.ExitStack]]:
    """One sweep per value, against the same peer; yields (value, measured, its hold) as
    each completes (the caller saves it, then closes the hold), and stops after the first
    that did not complete.  Every value is validated before the first sweep."""
    specs = [arranged(configure(spec, key, v)) for v in values]
    for one in specs:
        validate(one)
    with peer(specs) as (host, port), pinned(specs[0].client_cpu):
        for value, one in zip(values, specs, strict=True):
            stack = hold()
            measured = measure(one, host, port, progress, stack)
            yield value, measured, stack
            if measured.error is not None or measured.interrupt is not None:
                return

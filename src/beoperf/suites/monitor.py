"""The monitor's suites: a session (probe a host until stopped, within a budget) and a
report (one host over one transport, over a time range of the database).

* :func:`plan` (``--dry-run``): what a session's schedule costs on the link, checked
  against the budget; a monitor-session document of status "planned".
* :func:`session`: resolve, check the budget, take the database's lock, start a run and
  probe until the ``stop`` flag is set (the CLI sets it from SIGTERM, SIGINT and SIGHUP,
  with the signal's name as the reason), the cycle count is reached or the budget is
  spent; a monitor-session document says how it ended (:func:`check` raises if it
  failed).  Every probe is a row of the database, committed cycle by cycle.
* :func:`report`: the monitor-report document: the store's one read-only query, the
  analysis of ``analysis/monitor.py``; the caller renders it (report/monitor.py) and
  writes the files it lists.

Everything a command line needs to build the specs (default steps, transports, port,
report defaults, the step grammar, the stop flag) is re-exported here.  The session path
imports neither numpy nor matplotlib: a monitor runs for weeks and stays small.
"""

from __future__ import annotations

import math
import os
import platform
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from beoperf import errors, interrupts
from beoperf.engines.protocol import DEFAULT_PORT
from beoperf.model.document import Document, make_meta, utc_now
from beoperf.model.monitor import (
    MAX_SPIKE_THRESHOLDS,
    NOISE_FLOOR_US,
    OUTAGE_CYCLES,
    PERSIST_WINDOWS,
    PLOTS,
    RUN_FIELDS,
    SPIKE_RTT_MS,
    TRANSPORTS,
    MonitorSession,
    Run,
    ScheduledStep,
    SessionBudget,
    SessionTotals,
    Source,
)
from beoperf.monitor import probes, store
from beoperf.monitor import schedule as sched
from beoperf.monitor.probes import Prober, Target
from beoperf.monitor.runner import BUDGET_MEMORY, Monitor, StopFlag
from beoperf.monitor.schedule import DEFAULT_STEPS, Budget, Schedule, Step, parse_step
from beoperf.report import monitor_session as text

if TYPE_CHECKING:
    from beoperf.monitor.metrics import Metrics

__all__ = ["DEFAULT_PORT", "DEFAULT_STEPS", "NOISE_FLOOR_US", "OUTAGE_CYCLES",
           "PERSIST_WINDOWS", "PLOTS", "SPIKE_RTT_MS", "TRANSPORTS", "ReportSpec",
           "SessionSpec", "Step", "StopFlag", "Stopped", "check", "parse_step", "plan",
           "report", "session"]

Progress = Callable[[str], None]
FAILED = ("budget", "database error", "internal error")  # stop reasons that are failures


class MonitorError(errors.BeoperfError):
    """The monitor cannot start (its metrics endpoint, say): exit status 1."""

    category = "monitor"


class Stopped(errors.Failed):
    """A session ended by a failure (the budget spent, the database lost ...): exit 1."""

    category = "monitor stopped"


# --------------------------------------------------------------------------- session


@dataclass(frozen=True)
class SessionSpec:
    """A monitor session, every value parsed: rates in bit/s, times in seconds."""

    host: str
    db: str | None = None  # required by session(), not by plan()
    transport: str = "icmp"
    port: int = DEFAULT_PORT  # udp/tcp: the port of 'beoperf serve'
    family: int = 0  # 0, socket.AF_INET or socket.AF_INET6
    steps: tuple[Step, ...] = tuple(parse_step(s) for s in DEFAULT_STEPS)
    period_s: float | None = None  # None: the steps' total
    timeout_s: float = 2.0
    link_bps: float | None = None
    budget_bps: float | None = None  # the traffic budget, bit/s
    budget_text: str | None = None  # how it was given, e.g. "0.2% of 10 Mbit/s"
    metrics_port: int | None = None
    metrics_bind: str = "127.0.0.1"
    start_offset_s: float | None = None  # None: random within one period
    cycles: int | None = None  # stop after this many cycles
    command_line: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Prepared:
    target: Target
    schedule: Schedule
    budget: Budget | None
    per_cycle: int  # bytes a cycle puts on the link, with headers


def _schedule(spec: SessionSpec) -> Schedule:
    if spec.transport not in TRANSPORTS:
        raise errors.BadSpec(f"transport {spec.transport!r}: give one of "
                             f"{', '.join(TRANSPORTS)}")
    try:
        return Schedule.build(list(spec.steps), spec.period_s, spec.transport)
    except ValueError as exc:
        raise errors.BadSpec(str(exc)) from None


def _budget(spec: SessionSpec) -> Budget | None:
    if spec.budget_bps is None:
        return None
    if not (math.isfinite(spec.budget_bps) and spec.budget_bps > 0):
        raise errors.BadSpec(f"budget {spec.budget_bps!r} bit/s: give a finite rate > 0")
    return Budget(spec.budget_bps / 8, spec.budget_text or f"{spec.budget_bps:g} bit/s",
                  spec.link_bps)


def _prepare(spec: SessionSpec) -> _Prepared:
    """The schedule, the target and what a cycle costs; BadSpec over the budget."""
    schedule = _schedule(spec)
    budget = _budget(spec)
    target = probes.resolve(spec.host, spec.family)
    per_cycle = sched.cycle_bytes(schedule, spec.transport, target.ipv6, target.mtu)
    if sched.over_budget(schedule, per_cycle, budget):
        assert budget is not None
        raise errors.BadSpec(
            f"schedule over budget: {per_cycle:,} bytes per {schedule.period_s:g} s cycle = "
            f"{per_cycle / schedule.period_s:,.1f} B/s > {budget.text} = "
            f"{budget.bytes_per_s:,.1f} B/s", "fewer or smaller probes (--step), or a longer "
            "--period")
    return _Prepared(target, schedule, budget, per_cycle)


def _body(spec: SessionSpec, ready: _Prepared) -> MonitorSession:
    """The session as planned (no run yet)."""
    budget = ready.budget
    return MonitorSession(
        spec.host, ready.target.shown, spec.transport, spec.port, spec.db, None,
        ready.schedule.period_s,
        [ScheduledStep(s.size, s.count, s.spacing_s) for s in ready.schedule.steps],
        spec.timeout_s, ready.target.mtu, ready.target.mtu_unknown or None, ready.per_cycle,
        spec.link_bps, None if budget is None else SessionBudget(budget.text,
                                                                 budget.bytes_per_s))


def plan(spec: SessionSpec) -> Document:
    """What the session would cost (status "planned"); nothing is sent, no file touched.

    BadSpec for a bad schedule or one over the budget; errors.ConnectError if the host
    does not resolve; probes.ProbeSetupError if it cannot be probed."""
    started = utc_now()
    return _body(spec, _prepare(spec)).to_document(
        make_meta(list(spec.command_line), utc_start=started))


def session(spec: SessionSpec, progress: Progress | None = None, stop: StopFlag | None = None,
            log: Progress | None = None) -> Document:
    """Probe until stopped; the monitor-session document of how it ended.

    ``progress`` gets the lines to show as it starts (the cost, then where it writes),
    ``log`` one line per committed cycle, ``stop`` ends it once set (between probes).
    Before the first probe: store.StoreError (the database unusable or in use by another
    monitor), BadSpec, errors.ConnectError, probes.ProbeSetupError, MonitorError."""
    say = progress or (lambda _line: None)
    if not spec.db:
        raise errors.BadSpec("--db FILE is required (the SQLite database probes go to)")
    store.check_path(spec.db, must_exist=False)  # a FIFO or a device is never opened
    ready = _prepare(spec)
    prober = probes.make_prober(spec.transport, ready.target, spec.port)
    try:
        store.check_path(spec.db, must_exist=False)  # again: a moment has passed
        lock = store.lock(spec.db)  # a second monitor is refused before it says anything
        try:
            body = _body(spec, ready)
            for line in text.cost_lines(body):
                say(line)
            return _run(spec, ready, prober, body, say, stop, log)
        finally:
            os.close(lock)
    finally:
        prober.close()


def _metrics(spec: SessionSpec, budget: Budget | None) -> Metrics | None:
    if spec.metrics_port is None:
        return None
    from beoperf.monitor.metrics import Metrics  # only then: prometheus-client

    metrics = Metrics(budget.bytes_per_s if budget else None)
    try:
        metrics.serve(spec.metrics_port, spec.metrics_bind)
    except OSError as exc:
        raise MonitorError(f"cannot serve metrics on {spec.metrics_bind} port "
                           f"{spec.metrics_port}: {exc.strerror or exc}") from None
    return metrics


def _start_run(db: sqlite3.Connection, spec: SessionSpec, ready: _Prepared,
               prober: Prober) -> tuple[int, tuple[int, float]]:
    """The new run's id and what earlier runs sent within BUDGET_MEMORY."""
    budget = ready.budget
    config = {**ready.schedule.to_dict(), "timeout_s": spec.timeout_s, "port": spec.port,
              "budget": budget.text if budget else None, "link_bps": spec.link_bps,
              "budget_bytes_per_s": budget.bytes_per_s if budget else None,
              "icmp_socket": getattr(prober, "mode", None), "path_mtu": prober.mtu,
              "path_mtu_unknown": prober.target.mtu_unknown or None,
              "argv": list(spec.command_line), "monitor_host": platform.node()}
    try:
        run_id = store.start_run(db, host=spec.host, address=prober.target.shown,
                                 transport=spec.transport, period_s=ready.schedule.period_s,
                                 config=config)
        return run_id, store.recent_traffic(db, BUDGET_MEMORY) if budget else (0, 0.0)
    except sqlite3.Error as exc:
        db.close()
        raise store.StoreError(f"{spec.db}: {exc}") from None


def _end_run(db: sqlite3.Connection, run_id: int, reason: str) -> None:
    """Record why the run stopped, and close the database."""
    try:
        store.end_run(db, run_id, reason)
    except sqlite3.Error:
        pass  # the probes are committed; only the run's end is missing
    db.close()


def _loop(monitor: Monitor) -> str:
    """The monitor's loop; why it stopped (committed cycles are safe whatever happens)."""
    try:
        reason = monitor.run()
    except sqlite3.Error as exc:
        reason = f"database error: {exc}"
    except Exception as exc:  # noqa: BLE001 - committed cycles are safe; say what happened
        reason = f"internal error: {exc!r}"
    if reason == "stopped by signal" and monitor.stop.reason:
        reason = monitor.stop.reason
    return reason


def _run(spec: SessionSpec, ready: _Prepared, prober: Prober, body: MonitorSession,
         say: Progress, stop: StopFlag | None, log: Progress | None) -> Document:
    """Start the run in the database, probe until stopped, record why it stopped."""
    started = utc_now()
    metrics = _metrics(spec, ready.budget)  # before the database: a busy port creates nothing
    db = store.connect(spec.db or "")
    run_id, prior = _start_run(db, spec, ready, prober)
    flag = StopFlag() if stop is None else stop
    monitor = Monitor(prober, ready.schedule, db, run_id, timeout=spec.timeout_s,
                      budget=ready.budget, metrics=metrics, log=log,
                      start_offset=spec.start_offset_s, max_cycles=spec.cycles, prior=prior,
                      stop=flag)
    body = replace(body, run_id=run_id)
    say(text.started_line(body, os.getpid()))
    try:
        reason = _loop(monitor)
    except KeyboardInterrupt as exc:  # no stop flag watched the signal: record it, go on
        _end_run(db, run_id, interrupts.reason(exc))
        raise
    finally:
        if stop is None:
            flag.close()
    _end_run(db, run_id, reason)
    t = monitor.totals
    body = replace(body, status="failed" if reason.startswith(FAILED) else "stopped",
                   stop_reason=reason,
                   totals=SessionTotals(t.cycles, t.probes, t.answered, t.bytes,
                                        t.skipped_cycles, t.skipped_probes))
    return body.to_document(make_meta(list(spec.command_line), utc_start=started,
                                      pid=os.getpid()))


def check(doc: Document) -> None:
    """Stopped if the session ended by a failure (its stop reason says which)."""
    found = MonitorSession.from_document(doc)
    if found.status == "failed":
        raise Stopped(found.stop_reason or "failed")


# --------------------------------------------------------------------------- report


@dataclass(frozen=True)
class ReportSpec:
    """A report on a monitor database: times are UTC epoch seconds (None: no bound)."""

    db: str
    t_from: float | None = None
    t_to: float | None = None
    host: str | None = None  # which probed host, when the range holds several
    transport: str | None = None  # which transport, when the range holds several
    outage_cycles: int = OUTAGE_CYCLES
    baseline_windows: int = PERSIST_WINDOWS
    noise_floor_us: float = NOISE_FLOOR_US
    link_bps: float | None = None  # the link speed, bit/s (None: each run's --link-speed)
    plots: bool = False  # list the figures (the caller draws and writes them)
    command_line: tuple[str, ...] = ()
    timezone: str = "UTC"  # IANA zone of the report's days, weeks and hours
    spike_ms: tuple[float, ...] = SPIKE_RTT_MS  # RTT thresholds spikes are counted above


def _check_report(spec: ReportSpec) -> ReportSpec:
    """BadSpec for parameters the analysis cannot use; -0 noise floor is 0."""
    from beoperf.analysis.monitor import iso
    from beoperf.analysis.monitor_local import zone

    if spec.t_from is not None and spec.t_to is not None and spec.t_from >= spec.t_to:
        raise errors.BadSpec(f"empty range: from {iso(spec.t_from)} to {iso(spec.t_to)}")
    if spec.outage_cycles < 1:
        raise errors.BadSpec(f"--outage-cycles {spec.outage_cycles}: give 1 or more")
    if spec.baseline_windows < 2:
        raise errors.BadSpec(f"--baseline-windows {spec.baseline_windows}: give 2 or more")
    if not 0 <= spec.noise_floor_us <= 1e6:  # also refuses NaN
        raise errors.BadSpec(f"--noise-floor {spec.noise_floor_us}: give 0 to 1000000 "
                             "microseconds")
    if spec.link_bps is not None and not (math.isfinite(spec.link_bps) and spec.link_bps > 0):
        raise errors.BadSpec(f"--link-speed {spec.link_bps!r} bit/s: give a finite rate > 0")
    try:
        zone(spec.timezone)
    except ValueError as exc:
        raise errors.BadSpec(f"--timezone: {exc}") from None
    return replace(spec, noise_floor_us=abs(spec.noise_floor_us),
                   spike_ms=_spike_thresholds(spec.spike_ms))


MAX_SPIKE_MS = 60_000.0  # a threshold beyond any probe's timeout counts nothing


def _spike_thresholds(found: tuple[float, ...]) -> tuple[float, ...]:
    """The thresholds sorted, each once (BadSpec: more than MAX_SPIKE_THRESHOLDS, or one
    not in (0, 60 s])."""
    if len(found) > MAX_SPIKE_THRESHOLDS:
        raise errors.BadSpec(f"--spike: at most {MAX_SPIKE_THRESHOLDS} thresholds "
                             f"({len(found)} given)")
    for limit in found:
        if not 0 < limit <= MAX_SPIKE_MS:  # also refuses NaN
            raise errors.BadSpec(f"--spike {limit / 1000:g} s: give a time above 0 and at most "
                                 f"{MAX_SPIKE_MS / 1000:g} s")
    return tuple(sorted(set(found)))


def _run_item(r: dict) -> Run:
    """A run of the store as the report names it (its schedule as the store keeps it)."""
    from beoperf.analysis.monitor_bandwidth import link_of_run

    return Run.from_dict({**{k: r[k] for k in RUN_FIELDS},
                          "schedule": r["config"].get("schedule"), "link_bps": link_of_run(r)})


def report(spec: ReportSpec, progress: Progress | None = None) -> Document:
    """The monitor-report document of the probes sent in [t_from, t_to).

    The database is only read, never changed (store.read), even while a monitor writes
    it.  A report is about one host over one transport: errors.InputError for a range
    without probes, or with probes to several hosts or over several transports (then
    the spec must name one); store.StoreError if the database cannot be read; BadSpec
    for an empty range or unusable parameters."""
    from beoperf.analysis import monitor as analysis  # numpy: the report's only

    spec = _check_report(spec)
    started = utc_now()
    p, runs = store.report_probes(spec.db, spec.t_from, spec.t_to, spec.host, spec.transport)
    if p.t.size == 0:
        where = analysis.range_words(spec.t_from, spec.t_to)
        raise errors.InputError(f"{spec.db}: no probes {where}"
                                + (f" to {spec.host}" if spec.host else "")
                                + (f" over {spec.transport}" if spec.transport else ""))
    for key in ("host", "transport"):
        try:
            analysis.one_of(spec.db, key, p, runs, spec.t_from, spec.t_to)
        except ValueError as exc:
            raise errors.InputError(str(exc)) from None
    source = Source(str(spec.db), runs[0]["host"], runs[0]["transport"],
                    [_run_item(r) for r in runs])
    found = analysis.analyse(p, runs, source, spec.t_from, spec.t_to,
                             outage_cycles=spec.outage_cycles,
                             baseline_windows=spec.baseline_windows,
                             noise_floor_us=spec.noise_floor_us, link_bps=spec.link_bps,
                             plots=PLOTS if spec.plots else (), timezone=spec.timezone,
                             spike_ms=spec.spike_ms)
    return found.to_document(make_meta(list(spec.command_line), utc_start=started))

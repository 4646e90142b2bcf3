"""`beoperf monitor`: watch a link for weeks within a traffic budget; report on it."""

from __future__ import annotations

import argparse
import contextlib
import functools
import signal
import socket
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

from beoperf import errors, interrupts, report, safeio, units
from beoperf.cli import MAX_SECONDS, ExitStatus, Parser, UsageError, check_seconds
from beoperf.model.document import Document
from beoperf.model.monitor import MonitorReport
from beoperf.suites import monitor

EXAMPLES = """examples:
  beoperf monitor gw.cluster-b.example.org --db link.db            # ICMP, the default cycle
  beoperf monitor 10.1.0.1 --db link.db --budget 0.2% --link-speed 10M
  beoperf monitor 10.1.0.1 --db link.db --transport udp --port 5202 --metrics-port 9465
  beoperf monitor 10.1.0.1 --db link.db --step 8:3:1 --step 20000:1:6 --period 9
  beoperf monitor report link.db --from 2026-11-01 --to 2026-11-08 -o report/

The default cycle is the published one: 3 probes of 8 bytes 1 s apart, then one of 20,000
bytes, next cycle 9 s after the first (--step SIZE:COUNT:SPACING, repeatable, and --period
change it).  Probe k of a cycle is sent at a fixed offset on the monotonic clock; its
timeout (--timeout, at most until the next probe is due) never shifts the schedule.
--transport icmp (datagram socket if net.ipv4.ping_group_range allows, else raw as root)
or udp/tcp against 'beoperf serve' on the peer.  Outcomes: ok, timeout, unreachable,
refused (host up, no server), error.  Before starting it prints the bytes per cycle with
headers and the share of the link; a schedule over --budget is refused with the numbers,
and probing stops (and the run says why) if the bytes actually sent would exceed it
(what earlier runs in the same --db sent in the last hour counts too).
Every probe is a row in the SQLite --db (WAL; one transaction per cycle): a restart with
the same --db continues it, a kill -9 loses at most the cycle in flight.  One monitor per
--db: a second one is refused with the first one's pid (an flock on FILE.lock beside it,
which the kernel releases however the first one ends).  SIGTERM or Ctrl-C end it
cleanly.  --link-speed and --budget are rates as every beoperf option reads them: SI,
bit/s unless a capital B says bytes (10M = 10 Mbit/s; 10GB/s = 80 Gbit/s; 2kB/s =
16 kbit/s); a --budget ending in % is a share of --link-speed.  Exit status: 0 stopped;
1 budget exhausted or a database/probe setup error (the database in use, not writable,
not a file); 2 usage (bad schedule, over budget); 3 the host does not resolve.
'beoperf monitor report --help' tells about the report.
"""


RUN_USAGE = "beoperf monitor HOST --db FILE [options]"
REPORT_USAGE = "beoperf monitor report FILE [--from T] [--to T] [-o DIR] [options]"
REPORT_EPILOG = """examples:
  beoperf monitor report link.db                         # Markdown on stdout
  beoperf monitor report link.db --from 2026-11-01 --to 2026-11-08 -o report/
  beoperf monitor report link.db --json > report.json
  beoperf monitor report link.db --timezone Europe/Berlin --spike 5ms --spike 20ms
  beoperf monitor report link.db --period 2026-11-02..2026-11-09 --period 2026-12-21..2026-12-28

A report is about one host over one transport: when the database holds probes to
several hosts or over several transports (ICMP is answered by the peer's kernel, UDP
and TCP by its echo service, so their latencies differ), choose with --host and
--transport.  The database is only read, never changed, even while a monitor writes it.
Bandwidth is shown as a figure only where the probes resolve it: where the large probe's
extra time is within the small probes' noise the table shows '> X' (a lower bound), and
where the estimates exceed the link speed (the monitor's --link-speed, or this command's)
it shows 'above link': a probe smaller than a shaper's burst passes at line rate, and
the warnings say which probe size would measure the shaped rate.
Spikes: the answered small probes whose RTT (as ping shows it) exceeded each --spike
threshold, per day; the defaults, 10 ms and 50 ms, are the stalls a user notices on a LAN
or campus path (give thresholds above a longer path's own RTT).
--period FROM..TO twice compares two periods (the first the baseline): the median and
p95 one-way latency of each day monitored at least half of its length are the
replicates, as 'beoperf compare' judges runs (ratio, interval, verdict).
Days, ISO weeks and the hours of the day are UTC's unless --timezone names an IANA
zone (Europe/Berlin): then a day runs from one local midnight to the next, and a day
with a daylight-saving change lasts 23 or 25 hours.
--json prints the report as a beoperf document (kind monitor-report, schema version 4),
as -o writes it to report.json.
"""


class _HostOrReport(Parser):
    """`beoperf monitor`: "report" as the first argument selects the report's options,
    anything else the monitor's (HOST first, or options first); each set refuses the
    other's options by name."""

    def __init__(self, prog: str, run: tuple[Parser, set[str]],
                 report: tuple[Parser, set[str]]) -> None:
        super().__init__(prog=prog, add_help=False)
        self.run, self.report = run, report

    def parse_known_args(  # type: ignore[override]
            self, args: Sequence[str] | None = None,
            namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        args = list(args or [])
        chosen, other = (self.report, self.run) if args[:1] == ["report"] else \
            (self.run, self.report)
        parser = chosen[0]
        ns, extras = parser.parse_known_args(args[1:] if chosen is self.report else args,
                                             namespace)
        for extra in extras:
            name = extra.split("=", 1)[0]
            theirs = [f for f in other[1] if f == name or (name.startswith("--")
                                                            and f.startswith(name))]
            if name.startswith("-") and len(theirs) == 1:
                which = "beoperf monitor report" if other is self.report else \
                    "beoperf monitor HOST"
                parser.error(f"{theirs[0]} is an option of '{which}', not of this command")
        if extras:
            parser.error(f"unrecognized arguments: {' '.join(extras)}")
        return ns, extras

    def format_help(self) -> str:
        return self.run[0].format_help()


def add_parser(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("monitor", help="watch a link for weeks within a traffic budget; report on it")
    prog = sub.choices["monitor"].prog
    # the command's parser is a router between two real option sets (Action.choices is
    # the subcommand -> parser map)
    sub.choices["monitor"] = _HostOrReport(prog, _run_parser(prog),
                                           _report_parser(f"{prog} report"))


def _adder(flags: set[str]) -> Callable[..., argparse.Action]:
    """add_argument that also records the option strings (to name them when refused)."""
    def add(container: Any, *names: str, **kw: Any) -> argparse.Action:
        action = container.add_argument(*names, **kw)
        flags.update(action.option_strings)
        return action
    return add


def _run_parser(prog: str) -> tuple[Parser, set[str]]:
    p = Parser(prog=prog, usage=RUN_USAGE, epilog=EXAMPLES,
               description="Probe HOST until stopped (see also 'beoperf monitor report "
                           "--help').", formatter_class=argparse.RawDescriptionHelpFormatter)
    flags: set[str] = set()
    add = _adder(flags)
    add(p, "target", metavar="HOST", help="the host to probe")
    add(p, "--db", metavar="FILE", help="SQLite database (created, or continued)")
    add(p, "--transport", choices=monitor.TRANSPORTS, default="icmp",
        help="probe with ICMP echo, or UDP/TCP echo of 'beoperf serve' (default %(default)s)")
    add(p, "--port", type=int, default=monitor.DEFAULT_PORT,
        help="udp/tcp: the port of 'beoperf serve' (default %(default)s)")
    fam = p.add_mutually_exclusive_group()
    add(fam, "-4", dest="family", action="store_const", const=socket.AF_INET, default=0,
        help="IPv4 only")
    add(fam, "-6", dest="family", action="store_const", const=socket.AF_INET6,
        help="IPv6 only")
    add(p, "--step", action="append", metavar="SIZE:COUNT:SPACING",
        help="COUNT probes of SIZE payload bytes, SPACING seconds apart; repeatable "
             f"(default {' '.join(monitor.DEFAULT_STEPS)})")
    add(p, "--period", type=float, metavar="SECONDS",
        help="one cycle per SECONDS (default: the steps' total, 9)")
    add(p, "--timeout", type=float, default=2.0, metavar="SECONDS",
        help="per probe, at most until the next one is due (default %(default)s)")
    add(p, "--budget", metavar="RATE",
        help="traffic budget: a share of --link-speed (0.2%%) or a rate (2kB/s, 16kbit/s)")
    add(p, "--link-speed", metavar="RATE",
        help="the link's rate, e.g. 10M, 1G (bit/s), 10GB/s (bytes: 80 Gbit/s)")
    add(p, "--metrics-port", type=int, metavar="PORT",
        help="serve Prometheus metrics on PORT (/metrics)")
    add(p, "--metrics-bind", default="127.0.0.1", metavar="ADDR",
        help="address of the metrics endpoint (default %(default)s)")
    add(p, "--start-offset", type=float, metavar="SECONDS",
        help="first cycle after SECONDS (default: random within one period)")
    add(p, "--cycles", type=int, metavar="N", help="stop after N cycles")
    add(p, "--dry-run", action="store_true",
        help="print the schedule's cost and budget check, then exit")
    add(p, "--verbose", "-v", action="store_true", help="one line per cycle")
    p.set_defaults(func=run_monitor)
    return p, flags


def _report_parser(prog: str) -> tuple[Parser, set[str]]:
    p = Parser(prog=prog, usage=REPORT_USAGE, epilog=REPORT_EPILOG,
               description="Report on a monitor database: availability, latency, bandwidth "
                           "and events, by day and week.",
               formatter_class=argparse.RawDescriptionHelpFormatter)
    flags: set[str] = set()
    add = _adder(flags)
    add(p, "file", nargs="?", metavar="FILE", help="the monitor database")
    add(p, "--from", dest="t_from", metavar="TIME",
        help="report from TIME (ISO 8601, UTC unless a zone is given, or epoch seconds)")
    add(p, "--to", dest="t_to", metavar="TIME", help="report until TIME")
    add(p, "-o", "--output", metavar="DIR",
        help="write report.md, report.json and the plots into DIR")
    add(p, "--outage-cycles", type=int, default=monitor.OUTAGE_CYCLES, metavar="N",
        help="an outage is N or more cycles with no answer (default %(default)s)")
    add(p, "--baseline-windows", type=int, default=monitor.PERSIST_WINDOWS, metavar="N",
        help="a stable level lasting N detection windows is a baseline (default "
             "%(default)s; fewer for reports of minutes)")
    add(p, "--noise-floor", type=float, default=monitor.NOISE_FLOOR_US, metavar="US",
        help="RTT changes and IQRs under US microseconds are the probing host's own noise, "
             "not events (default %(default)g; 0: none)")
    add(p, "--link-speed", metavar="RATE",
        help="the link's rate (10M, 1G: bit/s), for runs started without it: no bandwidth "
             "above it is shown as a figure (default: each run's --link-speed)")
    add(p, "--host", dest="report_host", metavar="HOST",
        help="the probed host to report on, when the database has several")
    add(p, "--transport", dest="report_transport", choices=monitor.TRANSPORTS,
        help="the transport to report on, when the database has several")
    add(p, "--timezone", metavar="TZ", default="UTC",
        help="days, ISO weeks and hours of the day in the IANA time zone TZ, e.g. "
             "Europe/Berlin (default %(default)s; times in the tables stay UTC)")
    add(p, "--spike", action="append", metavar="TIME",
        help="count the small probes whose RTT exceeded TIME (10ms, 0.5ms), per day; "
             "repeatable (default "
             + " ".join(f"--spike {x:g}ms" for x in monitor.SPIKE_RTT_MS) + ")")
    add(p, "--period", action="append", metavar="FROM..TO",
        help="twice: compare two periods of the database (the first the baseline), each "
             "day one replicate, e.g. --period 2026-11-02..2026-11-09 --period "
             "2026-11-16..2026-11-23")
    add(p, "--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run_report)
    return p, flags


# --------------------------------------------------------------------------- checks


LAST_TIME = 253402300799.0  # 9999-12-31T23:59:59Z, the last second a datetime can show


def parse_time(text: str, name: str) -> float:
    """ISO 8601 (UTC unless a zone is given) or epoch seconds -> epoch seconds, from 1970
    to the year 9999 (UsageError otherwise: NaN, infinities and 1e308 included)."""
    try:
        value = float(text)
    except ValueError:
        try:
            when = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(f"{name} {text!r}: give a time like 2026-11-01 or "
                             "2026-11-01T20:00:00Z") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        value = when.timestamp()
    if not 0.0 <= value <= LAST_TIME:  # also refuses NaN
        raise UsageError(f"{name} {text!r}: give a time from 1970-01-01 to 9999-12-31 "
                         "(ISO 8601, or epoch seconds)")
    return value



def steps_from(args: argparse.Namespace) -> tuple[monitor.Step, ...]:
    """--step SIZE:COUNT:SPACING (repeatable), or the default cycle."""
    try:
        return tuple(monitor.parse_step(s) for s in (args.step or monitor.DEFAULT_STEPS))
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _rate(name: str, text: str) -> float:
    """A rate option in bit/s (beoperf.units: SI, "B" = bytes); UsageError if it is not."""
    try:
        return units.parse_rate(text)
    except ValueError as exc:
        raise UsageError(f"{name} {text!r}: {exc}") from None


def budget_from(args: argparse.Namespace) -> tuple[float | None, str | None, float | None]:
    """(budget in bit/s, how it was given, link speed in bit/s) from --budget and
    --link-speed: a budget ending in % is a share of the link, anything else a rate."""
    link = _rate("--link-speed", args.link_speed) if args.link_speed else None
    if not args.budget:
        return None, None, link
    text = args.budget.strip()
    if not text.endswith("%"):
        try:
            return units.parse_rate(text), text, link
        except ValueError as exc:
            raise UsageError(f"--budget {text!r}: give a share (0.2%, with --link-speed) or a "
                             f"rate such as 2kB/s or 16kbit/s ({exc})") from None
    if link is None:
        raise UsageError(f"--budget {text}: a share of the link needs --link-speed")
    try:
        share = units.parse_fraction(text)
    except ValueError as exc:
        raise UsageError(f"--budget {text}: {exc}") from None
    if share == 0:
        raise UsageError(f"--budget {text}: give more than 0% and at most 100%")
    return link * share, f"{text} of {units.format_rate(link)}", link


def check_run_args(args: argparse.Namespace) -> None:
    if not args.db and not args.dry_run:
        raise UsageError("--db FILE is required (the SQLite database probes go to)")
    if not 0 < args.port < 65536:
        raise UsageError(f"--port {args.port}: give 1..65535")
    if args.metrics_port is not None and not 0 < args.metrics_port < 65536:
        raise UsageError(f"--metrics-port {args.metrics_port}: give 1..65535")
    check_seconds("--timeout", args.timeout)
    if args.start_offset is not None and not 0 <= args.start_offset <= MAX_SECONDS:
        raise UsageError(f"--start-offset {args.start_offset}: give seconds from 0 to "
                         f"{MAX_SECONDS:.0f}")  # also refuses NaN
    if args.cycles is not None and args.cycles < 1:
        raise UsageError(f"--cycles {args.cycles}: give 1 or more")


def session_spec(args: argparse.Namespace) -> monitor.SessionSpec:
    """The monitor's options as a session spec (UsageError for a bad one)."""
    check_run_args(args)
    steps = steps_from(args)
    budget_bps, budget_text, link_bps = budget_from(args)
    return monitor.SessionSpec(
        host=args.target, db=args.db, transport=args.transport, port=args.port,
        family=args.family, steps=steps, period_s=args.period, timeout_s=args.timeout,
        link_bps=link_bps, budget_bps=budget_bps, budget_text=budget_text,
        metrics_port=args.metrics_port, metrics_bind=args.metrics_bind,
        start_offset_s=args.start_offset, cycles=args.cycles,
        command_line=tuple(args.argv))


# --------------------------------------------------------------------------- monitoring

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@contextlib.contextmanager
def stopping_on_signals(stop: monitor.StopFlag) -> Iterator[None]:
    """Once the monitor's loop runs (``stop.armed``), SIGTERM, Ctrl-C and SIGHUP end it
    cleanly: they set the stop flag, with the signal's name as the stop reason.  Before
    (resolving, locking), they stop the command as they stop every command."""
    previous: dict[int, object] = {}

    def handler(signum: int, frame: FrameType | None) -> None:
        if stop.armed:
            stop.set(f"stopped by {signal.Signals(signum).name}")
            return
        before = previous.get(signum)
        if callable(before):
            before(signum, frame)
        elif signum == signal.SIGINT:
            raise KeyboardInterrupt
        else:
            raise interrupts.Terminated(signum)

    previous.update({sig: signal.signal(sig, handler) for sig in STOP_SIGNALS})
    try:
        yield
    finally:
        for sig, before in previous.items():
            signal.signal(sig, before)  # type: ignore[arg-type]


def _say(line: str) -> None:
    print(line, flush=True)


def run_monitor(args: argparse.Namespace) -> int:
    # report.render imports only the session's renderer: a monitor stays as small as it ran
    spec = session_spec(args)
    if args.dry_run:
        print(report.render(monitor.plan(spec), "text"), end="", flush=True)
        return int(ExitStatus.OK)
    with monitor.StopFlag() as stop, stopping_on_signals(stop):
        doc = monitor.session(spec, progress=_say, stop=stop,
                              log=_say if args.verbose else None)
    print(report.render(doc, "text"), end="", file=sys.stderr, flush=True)
    monitor.check(doc)  # a failure (budget spent, database lost) is exit status 1
    return int(ExitStatus.OK)


# --------------------------------------------------------------------------- report


def report_spec(args: argparse.Namespace) -> monitor.ReportSpec:
    """The report's options as a spec (UsageError for a bad command line)."""
    if not args.file:
        raise UsageError("give the database: beoperf monitor report FILE")
    t_from = parse_time(args.t_from, "--from") if args.t_from else None
    t_to = parse_time(args.t_to, "--to") if args.t_to else None
    if t_from is not None and t_to is not None and t_to <= t_from:
        raise UsageError("--to must be after --from")
    from beoperf.analysis.monitor_local import zone  # numpy: the report's only

    try:
        zone(args.timezone)
    except ValueError as exc:
        raise UsageError(f"--timezone: {exc}") from None
    return monitor.ReportSpec(
        spike_ms=spikes_from(args.spike),
        db=args.file, t_from=t_from, t_to=t_to, host=args.report_host,
        transport=args.report_transport, outage_cycles=args.outage_cycles,
        baseline_windows=args.baseline_windows, noise_floor_us=args.noise_floor,
        link_bps=_rate("--link-speed", args.link_speed) if args.link_speed else None,
        plots=bool(args.output), command_line=tuple(args.argv), timezone=args.timezone)


def spikes_from(given: list[str] | None) -> tuple[float, ...]:
    """--spike TIME (repeatable) as RTT thresholds in ms (the defaults when none)."""
    if not given:
        return monitor.SPIKE_RTT_MS
    try:
        return tuple(units.parse_time(text) * 1000.0 for text in given)
    except ValueError as exc:
        raise UsageError(f"--spike: {exc}") from None


def write_report(doc: Document, outdir: str | Path) -> list[str]:
    """Write OUTDIR/report.md, report.json and the plots the document lists; the paths.

    Each file is written whole or not at all, and a symlink planted at its name is
    replaced, never followed (safeio).  errors.OutputError if the directory cannot be
    made or written."""
    from beoperf.report import monitor_plots  # matplotlib only when plots are drawn

    out = Path(outdir)
    paths = [out / "report.md", out / "report.json"]
    try:
        out.mkdir(parents=True, exist_ok=True)
        safeio.write_atomic(paths[0], report.render(doc, "markdown"))
        safeio.write_atomic(paths[1], report.render(doc, "json"))
        for name in MonitorReport.from_document(doc).plots:
            figure = monitor_plots.figure(doc, name)
            safeio.write_via(out / name, functools.partial(figure.savefig, format="png"))
            paths.append(out / name)
    except OSError as exc:
        raise errors.OutputError(f"cannot write into {outdir}: {exc.strerror or exc}") from None
    return [str(p) for p in paths]


def periods_from(given: list[str]) -> list[tuple[float, float]]:
    """--period FROM..TO, given twice, as (from, to) epoch seconds (UsageError if not)."""
    if len(given) != 2:
        raise UsageError(f"--period: give two (the baseline first), not {len(given)}")
    out = []
    for text in given:
        lo, sep, hi = text.partition("..")
        if not sep or not lo or not hi:
            raise UsageError(f"--period {text!r}: give FROM..TO, e.g. 2026-11-02..2026-11-09")
        a, b = parse_time(lo, "--period"), parse_time(hi, "--period")
        if b <= a:
            raise UsageError(f"--period {text!r}: TO must be after FROM")
        out.append((a, b))
    return out


def run_periods(args: argparse.Namespace) -> int:
    """`monitor report FILE --period A --period B`: B against A, days as replicates."""
    from beoperf.analysis import monitor_compare
    from beoperf.report.monitor import comparison_lines

    if args.t_from or args.t_to or args.output or args.json:
        raise UsageError("--period compares two periods: not with --from, --to, -o or --json")
    periods = periods_from(args.period)
    spec = report_spec(args)
    docs = [MonitorReport.from_document(monitor.report(replace(spec, t_from=a, t_to=b)))
            for a, b in periods]
    rows = monitor_compare.compare(docs[0], docs[1])
    print("\n".join(comparison_lines((args.period[0], args.period[1]), rows)))
    return int(ExitStatus.OK)


def run_report(args: argparse.Namespace) -> int:
    if args.period:
        return run_periods(args)
    doc = monitor.report(report_spec(args))
    if args.output:
        for path in write_report(doc, args.output):
            print(f"wrote {path}", file=sys.stderr)
    if args.json:
        print(report.render(doc, "json"), end="")
    elif not args.output:  # shown on stdout alone: the document lists no figures
        print(report.render(doc, "markdown"), end="")
    return int(ExitStatus.OK)

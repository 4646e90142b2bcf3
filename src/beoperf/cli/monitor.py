"""`beoperf monitor`: watch a link for weeks within a traffic budget; report on it."""

from __future__ import annotations

import argparse
import math
import os
import platform
import signal
import socket
import sys
from datetime import UTC, datetime

from beoperf.cli import CliError, ExitStatus, UsageError, check_seconds
from beoperf.monitor import schedule as sched
from beoperf.monitor import store
from beoperf.protocol import DEFAULT_PORT

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
the same --db continues it, a kill -9 loses at most the cycle in flight.  SIGTERM or
Ctrl-C end it cleanly.  Exit status: 0 stopped; 1 budget exhausted or a database/probe
setup error; 2 usage (bad schedule, over budget).
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "monitor", help="watch a link for weeks within a traffic budget; report on it",
        description="beoperf monitor HOST --db FILE [options]  probes HOST until stopped;\n"
                    "beoperf monitor report FILE [--from T] [--to T] [-o DIR]  reports.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", metavar="HOST|report", help="host to probe, or 'report'")
    p.add_argument("file", nargs="?", metavar="FILE", help="report: the monitor database")
    run = p.add_argument_group("monitoring")
    run.add_argument("--db", metavar="FILE", help="SQLite database (created, or continued)")
    run.add_argument("--transport", choices=("icmp", "udp", "tcp"), default="icmp",
                     help="probe with ICMP echo, or UDP/TCP echo of 'beoperf serve' "
                          "(default %(default)s)")
    run.add_argument("--port", type=int, default=DEFAULT_PORT,
                     help="udp/tcp: the port of 'beoperf serve' (default %(default)s)")
    fam = run.add_mutually_exclusive_group()
    fam.add_argument("-4", dest="family", action="store_const", const=socket.AF_INET,
                     default=0, help="IPv4 only")
    fam.add_argument("-6", dest="family", action="store_const", const=socket.AF_INET6,
                     help="IPv6 only")
    run.add_argument("--step", action="append", metavar="SIZE:COUNT:SPACING",
                     help="COUNT probes of SIZE payload bytes, SPACING seconds apart; "
                          f"repeatable (default {' '.join(sched.DEFAULT_STEPS)})")
    run.add_argument("--period", type=float, metavar="SECONDS",
                     help="one cycle per SECONDS (default: the steps' total, 9)")
    run.add_argument("--timeout", type=float, default=2.0, metavar="SECONDS",
                     help="per probe, at most until the next one is due (default %(default)s)")
    run.add_argument("--budget", metavar="RATE",
                     help="traffic budget: a share of --link-speed (0.2%%) or a rate (2kB/s)")
    run.add_argument("--link-speed", metavar="BITS/S", help="the link's rate, e.g. 10M, 1G")
    run.add_argument("--metrics-port", type=int, metavar="PORT",
                     help="serve Prometheus metrics on PORT (/metrics)")
    run.add_argument("--metrics-bind", default="127.0.0.1", metavar="ADDR",
                     help="address of the metrics endpoint (default %(default)s)")
    run.add_argument("--start-offset", type=float, metavar="SECONDS",
                     help="first cycle after SECONDS (default: random within one period)")
    run.add_argument("--cycles", type=int, metavar="N", help="stop after N cycles")
    run.add_argument("--dry-run", action="store_true",
                     help="print the schedule's cost and budget check, then exit")
    run.add_argument("--verbose", "-v", action="store_true", help="one line per cycle")
    rep = p.add_argument_group("report")
    rep.add_argument("--from", dest="t_from", metavar="TIME",
                     help="report from TIME (ISO 8601, UTC unless a zone is given)")
    rep.add_argument("--to", dest="t_to", metavar="TIME", help="report until TIME")
    rep.add_argument("-o", "--output", metavar="DIR",
                     help="write report.md, report.json and the plots into DIR")
    rep.add_argument("--outage-cycles", type=int, default=2, metavar="N",
                     help="an outage is N or more cycles with no answer (default %(default)s)")
    rep.add_argument("--baseline-windows", type=int, default=36, metavar="N",
                     help="a stable level lasting N detection windows is a baseline "
                          "(default %(default)s; fewer for reports of minutes)")
    rep.add_argument("--noise-floor", type=float, default=100.0, metavar="US",
                     help="RTT changes and IQRs under US microseconds are the probing host's "
                          "own noise, not events (default %(default)g; 0: none)")
    rep.add_argument("--host", dest="report_host", metavar="HOST",
                     help="the probed host to report on, when the database has several")
    rep.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run_command)


# --------------------------------------------------------------------------- checks


def parse_time(text: str, name: str) -> float:
    """ISO 8601 (UTC unless a zone is given) or epoch seconds -> epoch seconds."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{name} {text!r}: give a time like 2026-11-01 or "
                         "2026-11-01T20:00:00Z") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def schedule_from(args: argparse.Namespace) -> sched.Schedule:
    try:
        steps = [sched.parse_step(s) for s in (args.step or sched.DEFAULT_STEPS)]
        return sched.Schedule.build(steps, args.period, args.transport)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def budget_from(args: argparse.Namespace) -> tuple[sched.Budget | None, float | None]:
    try:
        link = sched.parse_rate(args.link_speed) if args.link_speed else None
        budget = sched.parse_budget(args.budget, args.link_speed) if args.budget else None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return budget, link


def check_run_args(args: argparse.Namespace) -> None:
    if args.file is not None:
        raise UsageError(f"unexpected argument {args.file!r} (did you mean "
                         "'beoperf monitor report FILE'?)")
    if not args.db and not args.dry_run:
        raise UsageError("--db FILE is required (the SQLite database probes go to)")
    if not 0 < args.port < 65536:
        raise UsageError(f"--port {args.port}: give 1..65535")
    if args.metrics_port is not None and not 0 < args.metrics_port < 65536:
        raise UsageError(f"--metrics-port {args.metrics_port}: give 1..65535")
    check_seconds("--timeout", args.timeout)
    if args.start_offset is not None and not (math.isfinite(args.start_offset)
                                              and args.start_offset >= 0):
        raise UsageError(f"--start-offset {args.start_offset}: give seconds >= 0")
    if args.cycles is not None and args.cycles < 1:
        raise UsageError(f"--cycles {args.cycles}: give 1 or more")


# --------------------------------------------------------------------------- monitoring


def run_monitor(args: argparse.Namespace) -> int:
    from beoperf.monitor.probes import ProbeSetupError, make_prober, resolve

    check_run_args(args)
    schedule = schedule_from(args)
    budget, link = budget_from(args)
    try:
        target = resolve(args.target, args.family)
    except ProbeSetupError as exc:
        raise CliError(ExitStatus.ERROR, "monitor", str(exc)) from None
    per_cycle = sched.cycle_bytes(schedule, args.transport, target.ipv6, target.mtu)
    mtu = f"path MTU {target.mtu}" + (f" assumed: {target.mtu_unknown}"
                                       if target.mtu_unknown else "")
    lines = sched.budget_lines(schedule, args.transport, per_cycle, budget, link, mtu)
    if sched.over_budget(schedule, per_cycle, budget):
        assert budget is not None
        raise UsageError(f"schedule over budget: {per_cycle:,} bytes per {schedule.period_s:g} s "
                         f"cycle = {per_cycle / schedule.period_s:,.1f} B/s > {budget.text} = "
                         f"{budget.bytes_per_s:,.1f} B/s",
                         "fewer or smaller probes (--step), or a longer --period")
    for line in lines:
        print(line, flush=True)
    if args.dry_run:
        return int(ExitStatus.OK)
    try:
        prober = make_prober(args.transport, target, args.port)
    except ProbeSetupError as exc:
        raise CliError(ExitStatus.ERROR, "monitor", str(exc)) from None
    try:
        return _monitor(args, schedule, budget, prober)
    finally:
        prober.close()


def _open_db(path: str):
    try:
        return store.connect(path)
    except store.StoreError as exc:
        raise CliError(ExitStatus.ERROR, "monitor database", str(exc)) from None


def _monitor(args, schedule, budget, prober) -> int:
    from beoperf.monitor.runner import BUDGET_MEMORY, Monitor

    metrics = None
    if args.metrics_port is not None:  # before the database: a busy port creates nothing
        from beoperf.monitor.metrics import Metrics  # only then: prometheus-client

        metrics = Metrics(budget.bytes_per_s if budget else None)
        try:
            metrics.serve(args.metrics_port, args.metrics_bind)
        except OSError as exc:
            raise CliError(ExitStatus.ERROR, "monitor", f"cannot serve metrics on "
                           f"{args.metrics_bind} port {args.metrics_port}: "
                           f"{exc.strerror or exc}") from None
    db = _open_db(args.db)
    config = {**schedule.to_dict(), "timeout_s": args.timeout, "port": args.port,
              "budget": budget.text if budget else None,
              "budget_bytes_per_s": budget.bytes_per_s if budget else None,
              "icmp_socket": getattr(prober, "mode", None), "path_mtu": prober.mtu,
              "path_mtu_unknown": prober.target.mtu_unknown or None,
              "argv": args.argv,
              "monitor_host": platform.node()}
    run_id = store.start_run(db, host=args.target, address=prober.target.shown,
                             transport=args.transport, period_s=schedule.period_s, config=config)
    log = (lambda line: print(line, flush=True)) if args.verbose else None
    prior = store.recent_traffic(db, BUDGET_MEMORY) if budget else (0, 0.0)
    monitor = Monitor(prober, schedule, db, run_id, timeout=args.timeout, budget=budget,
                      metrics=metrics, log=log, start_offset=args.start_offset,
                      max_cycles=args.cycles, prior=prior)
    previous = {sig: signal.signal(sig, lambda *_: monitor.stop.set())
                for sig in (signal.SIGTERM, signal.SIGINT)}
    print(f"monitoring {args.target} ({prober.target.shown}) over {args.transport}, run {run_id} "
          f"in {args.db}; pid {os.getpid()}", flush=True)
    try:
        reason = monitor.run()
    except store.sqlite3.Error as exc:
        reason = f"database error: {exc}"
    except Exception as exc:  # noqa: BLE001 - committed cycles are safe; say what happened
        reason = f"internal error: {exc!r}"
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        monitor.stop.close()
    try:
        store.end_run(db, run_id, reason)
    except store.sqlite3.Error:
        pass  # the probes are committed; only the run's end is missing
    db.close()
    t = monitor.totals
    skipped = (f", skipped (late) {t.skipped_cycles} cycle(s) and {t.skipped_probes} "
               "probe(s)") if t.skipped_cycles or t.skipped_probes else ""
    print(f"stopped ({reason}): {t.cycles} cycle(s), {t.probes} probe(s), {t.answered} "
          f"answered, {t.bytes:,} bytes sent{skipped}", file=sys.stderr, flush=True)
    if reason.startswith(("budget", "database error", "internal error")):
        raise CliError(ExitStatus.ERROR, "monitor stopped", reason)
    return int(ExitStatus.OK)


# --------------------------------------------------------------------------- report


def check_report_args(args: argparse.Namespace) -> tuple[float | None, float | None]:
    """(from, to) in epoch seconds; UsageError for a bad report command line."""
    if not args.file:
        raise UsageError("give the database: beoperf monitor report FILE")
    if args.outage_cycles < 1:
        raise UsageError(f"--outage-cycles {args.outage_cycles}: give 1 or more")
    if args.baseline_windows < 2:
        raise UsageError(f"--baseline-windows {args.baseline_windows}: give 2 or more")
    if not 0 <= args.noise_floor <= 1e6:  # also refuses nan
        raise UsageError(f"--noise-floor {args.noise_floor}: give 0 to 1000000 microseconds")
    args.noise_floor = abs(args.noise_floor)  # -0 is 0
    t_from = parse_time(args.t_from, "--from") if args.t_from else None
    t_to = parse_time(args.t_to, "--to") if args.t_to else None
    if t_from is not None and t_to is not None and t_to <= t_from:
        raise UsageError("--to must be after --from")
    return t_from, t_to


def run_report(args: argparse.Namespace) -> int:
    from beoperf.monitor import report

    t_from, t_to = check_report_args(args)
    if not os.path.exists(args.file):
        raise CliError(ExitStatus.ERROR, "monitor report", f"{args.file} does not exist")
    try:
        doc = report.build_report(args.file, t_from, t_to, outage_cycles=args.outage_cycles,
                                  host=args.report_host,
                                  baseline_windows=args.baseline_windows,
                                  noise_floor_us=args.noise_floor)
    except store.StoreError as exc:
        raise CliError(ExitStatus.ERROR, "monitor report", str(exc)) from None
    except ValueError as exc:
        raise CliError(ExitStatus.ERROR, "monitor report", str(exc)) from None
    if args.output:
        try:
            paths = report.write_report(doc, args.file, args.output)
        except OSError as exc:
            raise CliError(ExitStatus.ERROR, "monitor report", f"cannot write into "
                           f"{args.output}: {exc.strerror or exc}") from None
        for path in paths:
            print(f"wrote {path}", file=sys.stderr)
    if args.json:
        import json

        json.dump(doc, sys.stdout, indent=2)
        print()
    elif not args.output:
        print(report.render_markdown(doc), end="")
    return int(ExitStatus.OK)


def run_command(args: argparse.Namespace) -> int:
    if args.target == "report":
        return run_report(args)
    return run_monitor(args)

"""`beoperf pingpong`: a NetPIPE-equivalent sweep over message sizes (and --sweep)."""

from __future__ import annotations

import argparse
import contextlib
import socket
import sys
from pathlib import Path
from typing import Any

from beoperf import errors, interrupts, report, safeio, units
from beoperf.cli import (
    ExitStatus,
    UsageError,
    link_speed,
    mpi_options,
    peer_host,
    raw_samples,
    runs,
)
from beoperf.cli.progress import Progress
from beoperf.model.document import Document
from beoperf.model.pingpong import RunResult
from beoperf.report import conditions
from beoperf.suites import mpi_pingpong, pingpong, udp
from beoperf.suites.pingpong import MODES, Measured

EXAMPLES = """examples:
  beoperf pingpong                          # both ends on loopback (starts its own server)
  beoperf pingpong node02 -o runs/n01-n02   # writes runs/n01-n02.json and .np
  beoperf pingpong node02 --mode stream --end 4M --sndbuf 256K --rcvbuf 256K
  beoperf pingpong node02 --sizes 16,1024,64K --precision 0.01 --json
  beoperf pingpong node02 --sweep sndbuf=16K,64K,256K,512K -o runs/bufs
      # runs/bufs-sndbuf-16K.json ... , runs/bufs-compare.md, runs/bufs-plots/*.png

Times are one-way (half a round trip in pingpong mode); throughput is in SI
bits/s (1 Mbit/s = 10^6 bit/s). The .np file keeps NetPIPE's own units.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pingpong", help="measure latency and throughput over message sizes",
                       description="Bounce messages between two ends over a sweep of sizes "
                                   "(NetPIPE's method) and report latency, throughput and "
                                   "their precision.",
                       epilog=EXAMPLES + "\n" + mpi_options.EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("host", nargs="?", type=peer_host,
                   help="peer running 'beoperf serve' (default: own loopback)")
    p.add_argument("--port", type=int, default=pingpong.DEFAULT_PORT)
    fam = p.add_mutually_exclusive_group()
    fam.add_argument("-4", dest="family", action="store_const", const=socket.AF_INET,
                     help="IPv4 only")
    fam.add_argument("-6", dest="family", action="store_const", const=socket.AF_INET6,
                     help="IPv6 only")
    p.add_argument("--transport", choices=("tcp", "mpi"), default="tcp",
                   help="tcp (against 'beoperf serve') or mpi (two MPI ranks; see below)")
    _add_schedule_options(p)
    _add_mode_options(p)
    mpi_options.add_mpi_options(p)
    out = p.add_argument_group("output")
    out.add_argument("-o", "--output", metavar="PREFIX",
                     help="write PREFIX.json, PREFIX.np and PREFIX.csv (median and tail "
                          "percentiles per size, per phase with --under-load; with --udp "
                          "goodput, loss and jitter per size)")
    out.add_argument("--json", action="store_true", help="print the result document to stdout")
    raw_samples.add_option(out)
    out.add_argument("--sweep", metavar="KEY=V1,V2,...",
                     help="one run per value of sndbuf, rcvbuf, mode, nocache (on/off), "
                          "transport (tcp,mpi) or mpi-env:VARIABLE, then a comparison table "
                          "and the graphs; needs -o PREFIX")
    out.add_argument("--history", metavar="DIR|off",
                     help="earlier runs of the same setup, whose spread widens each size's "
                          "interval so that it holds for the next run (default: "
                          f"${pingpong.HISTORY_ENV}, else /var/lib/beoperf/history as root, "
                          "$XDG_STATE_HOME/beoperf/history otherwise; 'off': none)")
    out.add_argument("--link-speed", metavar="RATE",
                     help="the link's speed, for the efficiency (peak as a share of the link "
                          "and of its goodput limit): bit/s, SI, e.g. 1G, 100M, 10Gbit; "
                          "default: the slower end's NIC (unknown for veth, bridges, "
                          "virtual NICs)")
    out.add_argument("--timeout", type=float, default=pingpong.DEFAULT_TIMEOUT, metavar="SECONDS",
                     help="give up on a silent peer after this long (default %(default)s)")
    p.set_defaults(func=run, family=socket.AF_UNSPEC)


def _add_schedule_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("sizes and precision")
    g.add_argument("--start", default="1", metavar="SIZE",
                   help="smallest size (default 1; 0: an empty message first)")
    g.add_argument("--end", default="8M", metavar="SIZE", help="largest size (default 8M)")
    g.add_argument("--perturbation", type=int, default=3, metavar="BYTES",
                   help="also measure each size +-BYTES (default 3, 0 = off)")
    g.add_argument("--sizes", metavar="LIST",
                   help="explicit sizes instead, e.g. 0,8,1024,64K (0: an empty message; "
                        "on TCP one byte each way, the smallest round trip)")
    g.add_argument("--precision", type=float, default=pingpong.PRECISION, metavar="FRACTION",
                   help="stop a size once the median's 95%% CI is within this "
                        "(default %(default)s)")
    g.add_argument("--time-budget", default=f"{pingpong.DEFAULT_TIME_BUDGET:g}", metavar="TIME",
                   help="for the whole sweep: after every size's minimum trials, passes over "
                        "the sizes not yet precise until this is spent, e.g. 60 or 2min "
                        "(default %(default)s s; 'none': no limit)")
    g.add_argument("--max-time", type=float, default=None, metavar="SECONDS",
                   help="time cap per size (default: none, the budget decides)")
    g.add_argument("--seed", type=int, default=None,
                   help="seed of the passes' shuffled order (default: drawn; recorded)")
    g.add_argument("--trial-time", type=float, default=None, metavar="SECONDS",
                   help=f"target duration of one trial (default {pingpong.SWEEP_TRIAL_S:g} for "
                        f"a sweep; for one size {pingpong.SUSTAINED_TRIAL_S:g}, sustained as "
                        "NetPIPE's trials, or less if the budget is short)")


def _add_mode_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("mode and socket options")
    g.add_argument("--mode", choices=MODES, default="pingpong")
    g.add_argument("--integrity", action="store_true",
                   help="verify every message's content; corruption fails the run")
    g.add_argument("--nocache", action="store_true",
                   help="rotate buffers through more memory than the last-level cache")
    g.add_argument("--sndbuf", metavar="SIZE", help="SO_SNDBUF at both ends")
    g.add_argument("--rcvbuf", metavar="SIZE", help="SO_RCVBUF at both ends")
    g.add_argument("--nagle", action="store_true", help="allow Nagle (TCP_NODELAY off)")
    g.add_argument("--busy-poll", type=int, metavar="USEC", help="SO_BUSY_POLL at both ends")
    g.add_argument("--congestion", metavar="NAME|system",
                   help="TCP congestion control of the data connections at both ends "
                        "(default: reno in pingpong and bidir modes, the system's in stream "
                        "mode; 'system': the system's)")
    g.add_argument("--streams", type=int, default=1, metavar="N",
                   help="--mode stream: N data connections at once, one thread each, "
                        "started together; the goodput is their sum (iperf3 -P; the "
                        "server caps N, 'beoperf serve' at 128)")
    g.add_argument("--reverse", action="store_true",
                   help="--mode stream: the server sends and this end receives, so a "
                        "client behind NAT measures its download (iperf3 -R)")
    g.add_argument("--under-load", action="store_true",
                   help="--mode pingpong: the sweep twice in one session, alone and then "
                        "while a bulk TCP stream runs to the same server (sockperf's "
                        "under-load): both latency distributions, their tails, and the "
                        "load's throughput; each half of the time budget")
    g.add_argument("--load-streams", type=int, default=1, metavar="N",
                   help="--under-load: the load's TCP connections (default 1)")
    g.add_argument("--udp", action="store_true",
                   help="--mode stream: UDP datagrams at --rate, one trial per size (default "
                        f"sizes {','.join(map(str, udp.DEFAULT_SIZES))}; --trial-time: each "
                        f"size's seconds, default {udp.TRIAL_S:g}): goodput, loss, reordering "
                        "and RFC 3550 jitter (iperf3 -u); the server caps rate and duration")
    g.add_argument("--rate", metavar="RATE",
                   help="with --udp: the sending rate in bit/s, SI, e.g. 100M, 1G")
    g.add_argument("--cpu", metavar="N[,M]|none",
                   help="pin this end to CPU N (and the server to M); without a host the "
                        "embedded server and this end go on two CPUs unless 'none'")


def _congestion(args: argparse.Namespace) -> str | None:
    """--congestion: a name, 'system' (None), or absent ("auto": the mode's)."""
    if args.congestion is None:
        return pingpong.AUTO  # the mode's, settled per configuration
    name = args.congestion.strip()
    return None if name.lower() == "system" else name


def _udp_rate(args: argparse.Namespace) -> float | None:
    """--rate (bit/s) with --udp; either without the other is a usage error."""
    if not args.udp:
        if args.rate is not None:
            raise UsageError("--rate is for --udp (TCP's rate is what the link gives)")
        return None
    if args.rate is None:
        raise UsageError("--udp needs --rate, e.g. --rate 100M (bit/s)")
    try:
        rate = units.parse_rate(args.rate)
    except ValueError as exc:
        raise UsageError(f"--rate: {exc}") from None
    if not rate > 0:
        raise UsageError(f"--rate {args.rate}: give a rate above 0")
    return rate


def _sizes(args: argparse.Namespace) -> list[int]:
    if args.udp and args.sizes is None:
        return list(udp.DEFAULT_SIZES)
    try:
        if args.sizes is not None:  # '' is a mistake, not "the default sweep"
            return pingpong.explicit_schedule(args.sizes)
        return pingpong.netpipe_schedule(units.parse_size(args.start, allow_zero=True),
                                         units.parse_size(args.end), args.perturbation)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _cpus(text: str | None) -> tuple[int | None, int | None]:
    if not text or text.strip().lower() == "none":
        return None, None
    try:
        parts = [int(x) for x in text.split(",")]
    except ValueError:
        raise UsageError(f"--cpu {text!r}: expected N or N,M (CPU numbers)") from None
    if len(parts) > 2 or min(parts) < 0:
        raise UsageError(f"--cpu {text!r}: expected N or N,M (CPU numbers)")
    return parts[0], parts[1] if len(parts) == 2 else None


def _buffer(text: str | None, name: str) -> int | None:
    if text is None:
        return None
    try:
        value = units.parse_size(text)
    except ValueError as exc:
        raise UsageError(f"{name}: {exc}") from None
    if not 0 < value < 2**31:
        raise UsageError(f"{name} must be between 1 byte and 2G")
    return value


def _budget(text: str) -> float | None:
    if text.strip().lower() == "none":
        return None
    try:
        return units.parse_time(text)
    except ValueError as exc:
        raise UsageError(f"--time-budget: {exc}") from None


def spec_from(args: argparse.Namespace) -> pingpong.Spec:
    """The options as a sweep spec (the suite checks what a value means)."""
    sizes = _sizes(args)
    client_cpu, server_cpu = _cpus(args.cpu)
    budget = _budget(args.time_budget)
    udp_rate = _udp_rate(args)
    trial_time = args.trial_time if args.trial_time is not None else \
        udp.TRIAL_S if udp_rate is not None else \
        pingpong.default_trial_time(sizes, budget, args.max_time)
    return pingpong.Spec(
        sizes=tuple(sizes), host=args.host, port=args.port, family=args.family,
        mode=args.mode, precision=args.precision, time_budget=budget,
        max_time=args.max_time, seed=args.seed,
        trial_time=trial_time, timeout=args.timeout, integrity=args.integrity,
        nocache=args.nocache, sndbuf=_buffer(args.sndbuf, "--sndbuf"),
        rcvbuf=_buffer(args.rcvbuf, "--rcvbuf"), nodelay=not args.nagle,
        busy_poll=args.busy_poll, congestion=_congestion(args),
        client_cpu=client_cpu, server_cpu=server_cpu,
        place_embedded=(args.cpu or "").strip().lower() != "none",
        perturbation=None if args.sizes is not None else args.perturbation,
        command_line=tuple(args.argv), transport=args.transport,
        history=pingpong.history_dir(args.history) if args.transport == "tcp" else None,
        link_speed=link_speed(args.link_speed),
        streams=getattr(args, "streams", 1), reverse=bool(getattr(args, "reverse", False)),
        under_load=bool(getattr(args, "under_load", False)),
        load_streams=getattr(args, "load_streams", 1),
        udp_rate=udp_rate,
        mpi=mpi_options.mpi_options_from(args, mpi_pingpong.hosts_from(args.hosts,
                                                                        args.hostfile)))


def run(args: argparse.Namespace) -> int:
    raw_samples.check(args)
    if args.sweep:
        return run_config_sweep(args)
    spec = spec_from(args)
    with contextlib.ExitStack() as hold, _progress(spec, args.json) as progress:
        if spec.transport == "mpi":
            measured = mpi_pingpong.run(spec, progress.advance, hold)
            if measured is None:  # a rank other than 0: rank 0 reports
                return ExitStatus.OK
        elif spec.udp_rate is not None:
            measured = udp.run(spec, None, hold)
        else:
            measured = pingpong.run(spec, progress.advance, hold)
        progress.__exit__(None, None, None)  # the bar gone before anything is printed
        kept = write_outputs(args.output, measured.document, args.json)
    raw_error = raw_samples.write(args.raw_samples, measured) if args.raw_samples else None
    for warning in conditions.warnings_of(measured.document.meta):
        print(f"beoperf: WARN: {warning}", file=sys.stderr)
    if spec.transport == "mpi":
        mpi_options.print_notes(measured.document)
    if kept is not None:
        print(f"kept in {kept} (no -o given; the newest {runs.KEEP} runs are kept there)",
              file=sys.stderr)
    status = finish(measured, quiet_stdout=args.json)
    if raw_error is not None:
        raise raw_error
    return status


def _progress(spec: pingpong.Spec, quiet: bool) -> Progress:
    """The bar over the time budget on a terminal; piped, nothing until the summary (a
    single run is one phase)."""
    return Progress(spec.time_budget, enabled=sys.stderr.isatty() and not quiet,
                    what="sizes", precision=spec.precision)


def _flush_line(text: str, out: Any = None) -> None:
    print(text, file=out or sys.stderr, flush=True)


def write_outputs(prefix_text: str | None, doc: Document, to_stdout: bool,
                  keep: bool = True) -> Path | None:
    """PREFIX.json, PREFIX.np and PREFIX.csv (and the document on stdout with --json); without a
    prefix, the run is kept in the runs directory (beoperf.cli.runs) and its path
    returned.  A result that cannot be written where asked goes to a private directory,
    and the error says where.  Written before anything is printed, a stop signal held
    meanwhile."""
    kept = None
    with interrupts.deferred():
        if prefix_text:
            _write_prefix(Path(prefix_text), doc)
        elif keep:
            kept = _keep(doc)
    if to_stdout:
        print(doc.dumps(), end="", flush=True)
    return kept


def _write_prefix(prefix: Path, doc: Document) -> None:
    try:
        prefix.parent.mkdir(parents=True, exist_ok=True)
        doc.save(prefix.with_name(prefix.name + ".json"))
        safeio.write_atomic(prefix.with_name(prefix.name + ".np"), report.render(doc, "np"))
        safeio.write_atomic(prefix.with_name(prefix.name + ".csv"), report.render(doc, "csv"))
    except OSError as exc:
        fallback = safeio.private_dir() / f"{prefix.name or 'result'}.json"
        doc.save(fallback)
        raise errors.OutputError(f"cannot write {prefix}.json: {exc.strerror}",
                                 f"the result was saved to {fallback}") from None


def _keep(doc: Document) -> Path | None:
    """The run in the runs directory; a directory that cannot be used costs a note, not
    the run (which is printed all the same)."""
    try:
        return runs.keep("pingpong", {".json": doc.dumps(), ".np": report.render(doc, "np")})
    except (OSError, safeio.PrivateDirError) as exc:
        print(f"beoperf: note: the run was not kept ({exc}); give -o PREFIX, or set "
              f"{runs.ENV}", file=sys.stderr)
        return None


def finish(measured: Measured, quiet_stdout: bool) -> int:
    """The summary (stdout, or stderr when stdout holds JSON or the run stopped early),
    then the exit status of how it stopped."""
    complete = measured.error is None and measured.interrupt is None
    out = sys.stderr if not complete or quiet_stdout else sys.stdout
    out.write(report.render(measured.document, "text"))
    out.flush()
    if measured.interrupt is not None:
        return interrupts.exit_status(measured.interrupt)
    if measured.error is not None:
        raise measured.error
    return ExitStatus.OK


# --------------------------------------------------------------------------- --sweep

ON_OFF = {"on": True, "off": False, "yes": True, "no": False, "true": True, "false": False}


def parse_sweep(text: str) -> tuple[str, list[str]]:
    """'sndbuf=16K,64K' -> ('sndbuf', ['16K', '64K'])."""
    key, sep, values = text.partition("=")
    key = key.strip()
    items = [v.strip() for v in values.split(",") if v.strip()]
    known = key in pingpong.SWEEPABLE or key == "transport" or (
        key.startswith(mpi_pingpong.ENV_KEY) and key[len(mpi_pingpong.ENV_KEY):].isidentifier())
    if not sep or not known or not items:
        raise UsageError(f"--sweep {text!r}: expected KEY=V1,V2,... with KEY one of "
                         f"{', '.join(pingpong.SWEEPABLE)}, transport or mpi-env:VARIABLE")
    if key == "transport" and any(v not in ("tcp", "mpi") for v in items):
        raise UsageError(f"--sweep {text!r}: transports are tcp and mpi")
    if key == "nocache" and any(v.lower() not in ON_OFF for v in items):
        raise UsageError(f"--sweep {text!r}: nocache takes on or off")
    if key == "mode" and any(v not in MODES for v in items):
        raise UsageError(f"--sweep {text!r}: modes are {', '.join(MODES)}")
    return key, items


def sweep_value(key: str, text: str) -> Any:
    """One --sweep value, parsed as its own option would be."""
    if key == "nocache":
        return ON_OFF[text.lower()]
    if key in ("sndbuf", "rcvbuf"):
        return _buffer(text, f"--{key}")
    return text


def run_config_sweep(args: argparse.Namespace) -> int:
    """One run per configuration, each written as it completes (PREFIX-KEY-VALUE.json/.np)
    and then its summary printed (flushed: piped too); then the table against the first
    (PREFIX-compare.md) and the graphs (PREFIX-plots/).  The time budget holds for each
    value; the total is said before the first starts.  A stop (Ctrl-C, SIGTERM) keeps
    every value completed and writes their comparison."""
    key, texts = parse_sweep(args.sweep)
    if getattr(args, "udp", False):
        raise UsageError("--sweep with --udp is not supported: one --rate per run")
    if not args.output:
        raise UsageError("--sweep writes one result per configuration: give -o PREFIX",
                         "a single run without -o is kept in the runs directory")
    values = [sweep_value(key, t) for t in texts]  # every value checked before any run
    spec = spec_from(args)
    mpi = mpi_pingpong.is_mpi_sweep(spec, key)
    _flush_line(_sweep_plan(key, texts, spec))
    done, last, stop = _run_values(args, spec, key, values, texts, mpi)
    if done:  # what completed is compared even when a later configuration failed
        labels = [f"{key}={t}" for t in texts[:len(done)]]
        write_comparison(done, labels, Path(args.output))
        if mpi and len(done) > 1:
            mpi_options.write_overhead(done, labels, Path(args.output))
    if stop is not None:
        _flush_line(f"beoperf: {interrupts.reason(stop)}: {len(done)} of {len(texts)} "
                    "values completed, each written")
        return interrupts.exit_status(stop)
    if last is not None and (last.error is not None or last.interrupt is not None):
        return finish(last, quiet_stdout=True)  # its own exit status: 130, 5, 3, ...
    return ExitStatus.OK


def _run_values(args: argparse.Namespace, spec: pingpong.Spec, key: str, values: list[Any],
                texts: list[str], mpi: bool
                ) -> tuple[list[RunResult], Measured | None, KeyboardInterrupt | None]:
    """Each value measured, written, then its summary shown; the runs completed, the
    last measured, and the stop signal that came between two values (if one did)."""
    done: list[RunResult] = []
    last: Measured | None = None
    by_value = dict(zip(map(repr, values), texts, strict=True))
    progress = Progress(spec.time_budget, enabled=sys.stderr.isatty(), lines=True,
                        what="sizes", precision=spec.precision)
    configs = (mpi_pingpong.run_configs if mpi else pingpong.run_configs)(
        spec, key, values, progress.advance)
    try:
        with progress:
            progress.phase(_value_line(key, texts, 0, spec))
            for value, measured, hold in configs:
                with hold:  # a stop signal waits until the value is written and counted
                    text = by_value[repr(value)]
                    complete = measured.error is None and measured.interrupt is None
                    if complete or measured.document.body["sizes"]:
                        write_outputs(f"{args.output}-{mpi_options.file_part(key, text)}",
                                      measured.document, False)
                    else:  # stopped before its first size: no file with nothing in it
                        _flush_line(f"beoperf: {key}={text}: stopped before any size was "
                                    "measured; nothing written for it", sys.stderr)
                    last = measured
                    if complete:
                        done.append(measured.run)
                _show_value(progress, key, text, measured)
                if complete and len(done) < len(texts):
                    progress.restart(spec.time_budget)
                    progress.phase(_value_line(key, texts, len(done), spec))
    except KeyboardInterrupt as exc:  # between two values: what completed is kept
        return done, last, exc
    return done, last, None


def _sweep_plan(key: str, texts: list[str], spec: pingpong.Spec) -> str:
    """The line before a sweep starts: how long it may take."""
    n = len(texts)
    if spec.time_budget is None:
        return f"== --sweep {key}: {n} values, no time limit (--time-budget none)"
    return (f"== --sweep {key}: {n} values x {spec.time_budget:g} s (--time-budget, per "
            f"value) = at most {units.format_time(n * spec.time_budget)} of measuring, "
            "plus start-up and the graphs")


def _value_line(key: str, texts: list[str], i: int, spec: pingpong.Spec) -> str:
    limit = f", at most {spec.time_budget:g} s" if spec.time_budget is not None else ""
    return f"== {key}={texts[i]} ({i + 1} of {len(texts)}){limit}"


def _show_value(progress: Progress, key: str, text: str, measured: Measured) -> None:
    """A value's summary as soon as it is written: on stdout when it completed (on
    stderr, by finish, when it did not), flushed; the bar is cleared first."""
    if measured.error is not None or measured.interrupt is not None:
        return
    summary = report.render(measured.document, "text")
    if progress.enabled:
        progress.phase(f"== {key}={text}: done")
    sys.stdout.write(f"== {key}={text}\n{summary}")
    sys.stdout.flush()


def write_comparison(results: list[RunResult], labels: list[str], prefix: Path) -> None:
    """The table against the first configuration, and the graphs."""
    from beoperf.cli.plot import write_figures
    from beoperf.suites import compare

    doc = compare.document_of(results, labels)
    table = report.render(doc, "markdown")
    out = prefix.with_name(prefix.name + "-compare.md")
    with interrupts.deferred():  # the files first, then what is printed
        safeio.write_atomic(out, table + "\n")
        paths = write_figures(results, labels, prefix.with_name(prefix.name + "-plots"),
                              "png")
    print(table)
    print(f"wrote {out} and {', '.join(str(p) for p in paths)}", flush=True)

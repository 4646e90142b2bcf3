"""`beoperf pingpong`: a NetPIPE-equivalent sweep over message sizes."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from beoperf import __version__, _core, protocol, sysinfo
from beoperf.analysis.curve import analyze_run
from beoperf.cli import CliError, ExitStatus, UsageError, check_seconds
from beoperf.cli.embedded import embedded_server
from beoperf.cli.progress import Progress
from beoperf.engines.base import MODES
from beoperf.engines.tcp import ConnectError, TcpClient
from beoperf.results.model import RunResult, save_json, summary
from beoperf.results.netpipe import write_netpipe
from beoperf.server import pool_bytes
from beoperf.sweep.driver import IntegrityError, SweepConfig, SweepOutcome, run_sweep
from beoperf.sweep.schedule import explicit_schedule, netpipe_schedule, parse_size

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
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("host", nargs="?", help="peer running 'beoperf serve' (default: own loopback)")
    p.add_argument("--port", type=int, default=protocol.DEFAULT_PORT)
    fam = p.add_mutually_exclusive_group()
    fam.add_argument("-4", dest="family", action="store_const", const=socket.AF_INET,
                     help="IPv4 only")
    fam.add_argument("-6", dest="family", action="store_const", const=socket.AF_INET6,
                     help="IPv6 only")
    _add_schedule_options(p)
    _add_mode_options(p)
    out = p.add_argument_group("output")
    out.add_argument("-o", "--output", metavar="PREFIX", help="write PREFIX.json and PREFIX.np")
    out.add_argument("--json", action="store_true", help="print the result document to stdout")
    out.add_argument("--sweep", metavar="KEY=V1,V2,...",
                     help="one run per value of sndbuf, rcvbuf, mode or nocache (on/off), "
                          "then a comparison table and the graphs; needs -o PREFIX")
    out.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                     help="give up on a silent peer after this long (default %(default)s)")
    p.set_defaults(func=run, family=socket.AF_UNSPEC)


def _add_schedule_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("sizes and precision")
    g.add_argument("--start", default="1", metavar="SIZE", help="smallest size (default 1)")
    g.add_argument("--end", default="8M", metavar="SIZE", help="largest size (default 8M)")
    g.add_argument("--perturbation", type=int, default=3, metavar="BYTES",
                   help="also measure each size +-BYTES (default 3, 0 = off)")
    g.add_argument("--sizes", metavar="LIST", help="explicit sizes instead, e.g. 8,1024,64K")
    g.add_argument("--precision", type=float, default=0.02, metavar="FRACTION",
                   help="stop a size once the median's 95%% CI is within this (default 0.02)")
    g.add_argument("--max-time", type=float, default=2.0, metavar="SECONDS",
                   help="time cap per size (default %(default)s)")
    g.add_argument("--trial-time", type=float, default=0.01, metavar="SECONDS",
                   help="target duration of one trial (default %(default)s)")


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
    g.add_argument("--cpu", metavar="N[,M]", help="pin this end to CPU N (and the server to M)")


def _sizes(args: argparse.Namespace) -> list[int]:
    try:
        if args.sizes:
            return explicit_schedule(args.sizes)
        return netpipe_schedule(parse_size(args.start), parse_size(args.end), args.perturbation)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _cpus(text: str | None) -> tuple[int | None, int | None]:
    if not text:
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
        value = parse_size(text)
    except ValueError as exc:
        raise UsageError(f"{name}: {exc}") from None
    if not 0 < value < 2**31:
        raise UsageError(f"{name} must be between 1 byte and 2G")
    return value


def check_args(args: argparse.Namespace) -> tuple[SweepConfig, dict[str, Any]]:
    """Validate options into the sweep configuration and the session parameters."""
    sizes = _sizes(args)
    if not 0 < args.precision < 1:
        raise UsageError("--precision is a fraction between 0 and 1, e.g. 0.02 for 2%")
    for name in ("max_time", "trial_time", "timeout"):
        check_seconds(f"--{name.replace('_', '-')}", getattr(args, name))
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port} is not a TCP port (0-65535)")
    if args.busy_poll is not None and not 0 <= args.busy_poll <= 1_000_000:
        raise UsageError("--busy-poll is in microseconds, 0..1000000")
    client_cpu, server_cpu = _cpus(args.cpu)
    if client_cpu is not None and client_cpu not in os.sched_getaffinity(0):
        raise UsageError(f"--cpu: CPU {client_cpu} is not available here")
    cfg = SweepConfig(sizes=sizes, mode=args.mode, precision=args.precision,
                      trial_time=args.trial_time, max_time=args.max_time, nocache=args.nocache)
    params = {"mode": args.mode, "max_size": sizes[-1], "integrity": args.integrity,
              "nocache": args.nocache, "sndbuf": _buffer(args.sndbuf, "--sndbuf"),
              "rcvbuf": _buffer(args.rcvbuf, "--rcvbuf"), "nodelay": not args.nagle,
              "busy_poll": args.busy_poll, "client_cpu": client_cpu, "server_cpu": server_cpu,
              "transport": "tcp", "precision": args.precision, "max_time": args.max_time,
              "trial_time": args.trial_time,
              "perturbation": None if args.sizes else args.perturbation,
              "sizes": len(sizes), "start": sizes[0], "end": sizes[-1]}
    return cfg, params


def run(args: argparse.Namespace) -> int:
    if args.sweep:
        from beoperf.cli.configsweep import run_config_sweep

        return run_config_sweep(args)
    cfg, params = check_args(args)
    with pinned(params["client_cpu"]), peer(args, [params]) as (host, port):
        return measure(args, cfg, params, host, port)


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
def peer(args: argparse.Namespace, params: list[dict[str, Any]]) -> Iterator[tuple[str, int]]:
    """(host, port) of the peer: the one given, or an embedded server on loopback
    allowed the memory these sessions need (a no-cache pool spans the LLC)."""
    if args.host:
        yield args.host, args.port
        return
    loopback = "::1" if args.family == socket.AF_INET6 else "127.0.0.1"
    need = max(pool_bytes(p["max_size"], bool(p["nocache"])) for p in params)
    with embedded_server(loopback, max_memory=max(need, 64 * 1024 * 1024)) as port:
        yield loopback, port


def connect_transport(args: argparse.Namespace, params: dict[str, Any], host: str,
                      port: int) -> TcpClient:
    client = TcpClient(host, port, params, family=args.family, timeout=args.timeout)
    try:
        client.setup()
        client.open_data()
    except ConnectError as exc:
        client.close(abort=True)
        raise CliError(ExitStatus.CONNECTION, "connection error", str(exc),
                       "is 'beoperf serve' running there, and the port open?") from None
    except (protocol.PeerRefused, protocol.ProtocolError, OSError) as exc:
        client.close(abort=True)
        raise peer_error(exc, host) from None
    return client


def peer_error(exc: BaseException, host: str) -> CliError:
    """Map a failure talking to the peer to a one-line CLI error."""
    if isinstance(exc, protocol.PeerRefused):
        return CliError(ExitStatus.PEER, "peer error", f"{host} refused: {exc.reason}")
    if isinstance(exc, protocol.VersionMismatch):
        return CliError(ExitStatus.PEER, "peer error", f"{host}: {exc}",
                        "use the same beoperf version at both ends")
    if isinstance(exc, protocol.ProtocolError):
        return CliError(ExitStatus.PEER, "peer error", f"{host} is not a beoperf server: {exc}",
                        "check --port")
    if isinstance(exc, IntegrityError):
        return CliError(ExitStatus.INTEGRITY, "integrity error", str(exc),
                        "check the NICs, cables and offloads on this path")
    if isinstance(exc, OSError | protocol.PeerGone):
        return CliError(ExitStatus.CONNECTION, "connection error", f"lost {host}: {exc}")
    return CliError(ExitStatus.ERROR, "error", f"the sweep stopped: {type(exc).__name__}: {exc}",
                    "the sizes measured before it were kept")


def measure(args: argparse.Namespace, cfg: SweepConfig, params: dict[str, Any], host: str,
            port: int) -> int:
    """One sweep: measure, write the outputs, print the summary; the exit status."""
    result, outcome = collect(args, cfg, params, host, port)
    write_outputs(args, result)
    return finish(result, outcome, host, quiet_stdout=args.json)


def collect(args: argparse.Namespace, cfg: SweepConfig, params: dict[str, Any], host: str,
            port: int) -> tuple[RunResult, SweepOutcome]:
    """Connect, sweep and build the result document (nothing written yet)."""
    started_utc, started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), time.monotonic()
    client = connect_transport(args, params, host, port)
    local, remote = client.facts()
    with Progress(len(cfg.sizes), enabled=sys.stderr.isatty() and not args.json) as progress:
        outcome = run_sweep(client, cfg, on_size=progress.advance)
    client.close(abort=outcome.status != "complete")
    meta = {"beoperf": __version__, "command_line": args.argv, "utc_start": started_utc,
            "utc_end": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "duration_s": round(time.monotonic() - started, 3), "peer": f"{host} port {port}",
            "clock": dict(sysinfo.clock_facts(), overhead_ns=_core.clock_overhead_ns(1000))}
    result = RunResult(parameters=params, local=local, remote=remote, meta=meta,
                       sizes=outcome.sizes, status=outcome.status, status_reason=outcome.reason,
                       warnings=warnings_of(client, outcome))
    return result, outcome


def warnings_of(client: TcpClient, outcome: SweepOutcome) -> list[str]:
    out = list(client.warnings)
    late = [s.size for s in outcome.sizes if not s.converged]
    if late:
        out.append(f"{len(late)} size(s) did not reach the requested precision within the "
                   f"time cap: {', '.join(map(str, late[:8]))}{' ...' if len(late) > 8 else ''}")
    return out


def write_outputs(args: argparse.Namespace, result: RunResult) -> None:
    if args.output:
        prefix = Path(args.output)
        try:
            prefix.parent.mkdir(parents=True, exist_ok=True)
            save_json(result, prefix.with_name(prefix.name + ".json"))
            write_netpipe(result, prefix.with_name(prefix.name + ".np"))
        except OSError as exc:
            fallback = Path(tempfile.gettempdir()) / f"beoperf-{os.getpid()}.json"
            save_json(result, fallback)
            raise CliError(ExitStatus.ERROR, "output error",
                           f"cannot write {prefix}.json: {exc.strerror}",
                           f"the result was saved to {fallback}") from None
    if args.json:
        print(json.dumps(result.to_dict(), indent=1))


def finish(result: RunResult, outcome: SweepOutcome, host: str, quiet_stdout: bool) -> int:
    out = sys.stderr if outcome.status != "complete" or quiet_stdout else sys.stdout
    print_summary(result, out)
    if outcome.status == "interrupted":
        return ExitStatus.INTERRUPTED
    if outcome.error is not None:
        raise peer_error(outcome.error, host)
    return ExitStatus.OK


def print_analysis(result: RunResult, out: Any) -> None:
    """Saturation, n1/2 and the fitted model (definitions in beoperf.analysis.curve)."""
    a = analyze_run(result)
    if a is None or len(result.sizes) < 3:
        return
    if a.saturation_size is not None and a.saturation_interval is not None:
        low, high = a.saturation_interval
        sat = f"{a.saturation_size} B (interval {low}..{high} B)"
    else:
        sat = "not reached within the measured sizes"
    half = f"{a.n_half:.0f} B" if a.n_half is not None else "-"
    print(f"  saturation {sat}; n1/2 {half}", file=out)
    if a.hockney and a.hockney.bandwidth_bps:
        h = a.hockney
        breaks = ", ".join(str(b) for b in a.thresholds) or "none"
        print(f"  model      t = {h.alpha_us:.2f} us + n / {h.bandwidth_bps / 1e6:.1f} Mbit/s "
              f"(R^2 {h.r2:.3f}); protocol thresholds at: {breaks} B", file=out)


def print_summary(result: RunResult, out: Any) -> None:
    s = summary(result)
    mode = result.parameters["mode"]
    print(f"beoperf pingpong: {result.meta['peer']}, mode {mode}, {s['sizes_measured']} of "
          f"{result.parameters['sizes']} sizes in {result.meta['duration_s']:.1f} s "
          f"({result.status})", file=out)
    if s["sizes_measured"]:
        first = result.sizes[0]
        ci = first.ci95_relative
        ci_text = f", 95% CI +-{ci * 100:.1f}%" if ci is not None else ""
        p99 = s["latency_p99_us"]
        p99_text = f", {p99:.2f} us p99" if p99 is not None else ""
        print(f"  latency    {s['latency_median_us']:.2f} us median{p99_text} (one-way, "
              f"{first.size} B, {first.samples} samples{ci_text})", file=out)
        print(f"  throughput {s['peak_throughput_bps'] / 1e6:.2f} Mbit/s peak at "
              f"{s['peak_size']} B (from the median time)", file=out)
        print_analysis(result, out)
    for warning in result.warnings:
        print(f"  warning: {warning}", file=out)
    if result.status_reason:
        print(f"  stopped: {result.status_reason}", file=out)

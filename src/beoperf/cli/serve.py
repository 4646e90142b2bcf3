"""`beoperf serve`: run the peer for network tests."""

from __future__ import annotations

import argparse
import signal
import sys

from beoperf import __version__, protocol
from beoperf.cli import CliError, ExitStatus, UsageError, check_seconds
from beoperf.server import MiB, Server, ServerConfig
from beoperf.sweep.schedule import parse_size

EXAMPLES = """examples:
  beoperf serve                       # all addresses, port 5202
  beoperf serve --bind 10.0.0.1 --max-memory 256M
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the peer for network tests",
                       description="Serve one test session at a time (others are told the "
                                   "server is busy); bounded and safe to leave running.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bind", default="::", metavar="ADDR",
                   help="address to listen on (default: all, IPv6 and IPv4)")
    p.add_argument("--port", type=int, default=protocol.DEFAULT_PORT,
                   help="TCP port (default %(default)s; 0 picks a free one)")
    p.add_argument("--max-memory", default="64M", metavar="SIZE",
                   help="largest message and buffer memory per session (default 64M)")
    p.add_argument("--idle-timeout", type=float, default=30.0, metavar="SECONDS",
                   help="drop a session silent this long (default %(default)s)")
    p.add_argument("--handshake-timeout", type=float, default=5.0, metavar="SECONDS",
                   help="drop a connection that does not say hello in time (default %(default)s)")
    p.add_argument("--inject-corruption", type=int, default=-1, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def config_from(args: argparse.Namespace) -> ServerConfig:
    try:
        max_memory = parse_size(args.max_memory)
    except ValueError as exc:
        raise UsageError(f"--max-memory: {exc}") from None
    if max_memory < 1 or max_memory > 64 * 1024 * MiB:
        raise UsageError("--max-memory must be between 1 byte and 64G")
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port} is not a TCP port (0-65535)")
    check_seconds("--idle-timeout", args.idle_timeout)
    check_seconds("--handshake-timeout", args.handshake_timeout)
    return ServerConfig(bind=args.bind, port=args.port, max_memory=max_memory,
                        idle_timeout=args.idle_timeout, handshake_timeout=args.handshake_timeout,
                        inject_corrupt=args.inject_corruption)


def run(args: argparse.Namespace) -> int:
    cfg = config_from(args)
    try:
        server = Server(cfg)
    except OSError as exc:
        raise CliError(ExitStatus.ERROR, "server error",
                       f"cannot listen on {cfg.bind} port {cfg.port}: {exc.strerror}",
                       "is another server running there? try --port or --bind") from None
    signal.signal(signal.SIGTERM, lambda *_: server.shutdown())
    print(f"beoperf {__version__} serving on {args.bind} port {server.port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        server.shutdown()
    print("beoperf serve: stopped", file=sys.stderr, flush=True)
    return ExitStatus.OK

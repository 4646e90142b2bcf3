"""`beoperf serve`: run the peer for network tests."""

from __future__ import annotations

import argparse
import signal
import sys
import textwrap

from beoperf import __version__, units
from beoperf.cli import ExitStatus, UsageError
from beoperf.suites import serve

EXAMPLES = """examples:
  beoperf serve                       # all addresses, port 5202
  beoperf serve --bind 10.0.0.1 --max-memory 256M
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the peer for network tests",
                       description="Serve one test session at a time (others are told the "
                                   "server is busy; sessions go in turns by client "
                                   "address); bounded and safe to leave running.",
                       epilog=EXAMPLES + "\n" + textwrap.fill(serve.UDP_CAPS, 79),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bind", default="::", metavar="ADDR",
                   help="address to listen on (default: all, IPv6 and IPv4)")
    p.add_argument("--port", type=int, default=serve.DEFAULT_PORT,
                   help="TCP port (default %(default)s; 0 picks a free one)")
    p.add_argument("--max-memory", default="64M", metavar="SIZE",
                   help="largest message and buffer memory per session (default 64M)")
    p.add_argument("--idle-timeout", type=float, default=30.0, metavar="SECONDS",
                   help="drop a session (or echo connection) whose next message does not "
                        "arrive whole within this time (default %(default)s)")
    p.add_argument("--handshake-timeout", type=float, default=5.0, metavar="SECONDS",
                   help="drop a connection that does not say hello in time (default %(default)s)")
    p.add_argument("--max-load-time", type=float, default=600.0, metavar="SECONDS",
                   help="drain a ping-pong's bulk load (pingpong --under-load) this long at "
                        "most, then end it (default %(default)s)")
    p.add_argument("--inject-corruption", type=int, default=-1, help=argparse.SUPPRESS)
    # the embedded server of 'beoperf pingpong': stop when the parent's pipe closes
    p.add_argument("--exit-with-stdin", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def spec_from(args: argparse.Namespace) -> serve.Spec:
    try:
        max_memory = units.parse_size(args.max_memory)
    except ValueError as exc:
        raise UsageError(f"--max-memory: {exc}") from None
    return serve.Spec(bind=args.bind, port=args.port, max_memory=max_memory,
                      idle_timeout=args.idle_timeout, handshake_timeout=args.handshake_timeout,
                      inject_corrupt=args.inject_corruption, max_load_s=args.max_load_time)


def run(args: argparse.Namespace) -> int:
    server = serve.start(spec_from(args))
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: server.shutdown())
    if args.exit_with_stdin:
        serve.stop_at_eof(server, sys.stdin.buffer)
    print(f"beoperf {__version__} serving on {args.bind} port {server.port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        server.shutdown()
    print("beoperf serve: stopped", file=sys.stderr, flush=True)
    return ExitStatus.OK

"""The `beoperf` command: subcommands, and the one place errors become exit codes."""

from __future__ import annotations

import argparse
import importlib
import math
import sys
from collections.abc import Sequence
from typing import NoReturn

from beoperf import __version__, interrupts, units
from beoperf.cli import errors, streams
from beoperf.cli.errors import CliError, ExitStatus, UsageError  # noqa: E402,F401

MAX_SECONDS = 2**31 / 1000.0  # what a millisecond timeout in a C int can hold


def check_seconds(name: str, value: float) -> None:
    """A duration option: finite, from 1 ms to about 24 days."""
    if not (math.isfinite(value) and 0.001 <= value <= MAX_SECONDS):
        raise UsageError(f"{name} {value}: give seconds between 0.001 and {MAX_SECONDS:.0f}")


def link_speed(text: str | None) -> float | None:
    """--link-speed in bit/s (units.parse_rate: 1G = 1e9, 10Gbit = 1e10, 10GB/s = 8e10)."""
    if text is None:
        return None
    try:
        return units.parse_rate(text)
    except ValueError as exc:
        raise UsageError(f"--link-speed: {exc}") from None


def peer_host(text: str) -> str:
    """A HOST argument (argparse type): an empty one is refused, not read as "no HOST",
    which would measure this host's loopback in silence (pingpong '')."""
    if not text.strip():
        raise argparse.ArgumentTypeError("HOST is empty: name the peer, or give no HOST to "
                                         "measure this host's loopback")
    return text


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line and an exception, not usage + exit."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


# a module each in beoperf.cli (imported by name from MODULES only: a literal table that
# tests/test_architecture.py reads and checks against the layer rules)
COMMANDS = ("serve", "pingpong", "plot", "compare", "audit", "tune", "monitor", "report",
            "predict", "replay", "cluster", "node", "lab", "study")
MODULES = {"serve": "beoperf.cli.serve", "pingpong": "beoperf.cli.pingpong",
           "plot": "beoperf.cli.plot", "compare": "beoperf.cli.compare",
           "audit": "beoperf.cli.audit", "tune": "beoperf.cli.tune",
           "monitor": "beoperf.cli.monitor", "report": "beoperf.cli.report",
           "predict": "beoperf.cli.predict", "replay": "beoperf.cli.replay",
           "cluster": "beoperf.cli.cluster", "node": "beoperf.cli.node",
           "lab": "beoperf.cli.lab", "study": "beoperf.cli.study"}


def command_of(argv: Sequence[str]) -> str | None:
    """The command an argument list names first (None: none, or an option comes first)."""
    first = argv[0] if argv else ""
    return first if first in COMMANDS else None


def build_parser(only: str | None = None, rest: Sequence[str] = ()) -> Parser:
    """The whole parser, or (`only`) one with just that command: each command module
    imports what it needs, and a long-running `beoperf monitor` need not carry the
    engines, numpy and the audit in its memory.  A command with subcommands of its own
    (``add_parser_for``) is given the arguments after its name (``rest``), so that it
    too can add just the one named (`beoperf cluster hpcc` starts 0.1 s sooner without
    the MPI tests' modules)."""
    parser = Parser(prog="beoperf", description="Measure, explain, tune and watch the "
                    "performance of Linux clusters, above all their interconnect.")
    parser.add_argument("--version", action="version", version=f"beoperf {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name in (only,) if only else COMMANDS:
        module = importlib.import_module(MODULES[name])
        if only and hasattr(module, "add_parser_for"):
            module.add_parser_for(sub, rest)
        else:
            module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit status. Never raises for bad input.

    SIGTERM and SIGHUP stop a command as Ctrl-C does (beoperf.interrupts); the status is
    then 128 + the signal's number.  A closed stdout or stderr (``| head``, ``| tee``
    stopped with Ctrl-C) loses only what would have been printed: the command goes on and
    writes its files (beoperf.cli.streams; status 141 if it otherwise succeeded)."""
    with interrupts.handling(), streams.guarded() as outputs:
        return outputs.status(_main(argv))


def _main(argv: Sequence[str] | None) -> int:
    try:
        return _dispatch(list(sys.argv[1:] if argv is None else argv))
    except (Exception, KeyboardInterrupt) as exc:  # one table maps them (cli/errors.py)
        try:
            status, line = errors.describe(exc)
        except KeyError:
            raise exc from None  # not a known failure: a bug, shown as one
        print(line, file=sys.stderr)
        return status
    except SystemExit as exc:  # --help and --version
        return int(exc.code or 0) if isinstance(exc.code, int) else 0


def _dispatch(argv: list[str]) -> int:
    args = build_parser(command_of(argv), argv[1:]).parse_args(argv)
    args.argv = ["beoperf", *argv]
    if not getattr(args, "command", None):
        raise UsageError("no command given", "try 'beoperf pingpong' or 'beoperf --help'")
    return int(args.func(args))


def run() -> None:
    sys.exit(main(sys.argv[1:]))

"""`beoperf study`: experiments on hosts (P3's stub: only `restore` and the internal `agent`
so far; P5 adds the presets and `run` to SUBCOMMANDS)."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence

# subcommand -> the module that adds its parser
SUBCOMMANDS = {"restore": "beoperf.cli.study_agent", "agent": "beoperf.cli.study_agent"}

DESCRIPTION = """Studies: factors x measurements on every host involved, interleaved blocks
against Default, and a dead-man way back on each host. 'restore' puts a host back from the
rollback file a study's agent left."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    add_parser_for(sub, ())


def add_parser_for(sub: argparse._SubParsersAction, rest: Sequence[str]) -> None:
    """The `study` parser; only the named subcommand's module is imported."""
    p = sub.add_parser("study", help="experiments on hosts, with a guaranteed way back",
                       description=DESCRIPTION)
    inner = p.add_subparsers(dest="study_command", metavar="SUBCOMMAND",
                             parser_class=type(p))
    named = SUBCOMMANDS.get(rest[0]) if rest else None
    for module in (named,) if named else dict.fromkeys(SUBCOMMANDS.values()):
        importlib.import_module(module).add_parsers(inner)
    p.set_defaults(func=_no_subcommand)


def _no_subcommand(_args: argparse.Namespace) -> int:
    from beoperf.cli import UsageError

    raise UsageError("beoperf study: no subcommand given",
                     f"one of {', '.join(SUBCOMMANDS)}; see 'beoperf study --help'")

"""`beoperf cluster`: tests of the whole cluster, one subcommand each.

``hpcc`` runs HPC Challenge over process counts (cli/cluster_hpcc.py); ``import``, ``show``,
``plot`` and ``references`` read what it and HPCC wrote (cli/cluster_docs.py); ``ring``,
``pairs`` and ``mbw``, MPI tests of beoperf's own, are cli/cluster_mpi.py.  A new
subcommand is one module ``beoperf.cli.cluster_<name>`` with an ``add_parsers(sub)`` and
its name in SUBCOMMANDS.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence

from beoperf import errors

# subcommand -> the module that adds its parser
SUBCOMMANDS = {"hpcc": "beoperf.cli.cluster_hpcc", "import": "beoperf.cli.cluster_docs",
               "show": "beoperf.cli.cluster_docs", "plot": "beoperf.cli.cluster_docs",
               "references": "beoperf.cli.cluster_docs", "ring": "beoperf.cli.cluster_mpi",
               "pairs": "beoperf.cli.cluster_mpi", "mbw": "beoperf.cli.cluster_mpi",
               "rma": "beoperf.cli.cluster_rma",
               "bibw": "beoperf.cli.cluster_p2p", "incast": "beoperf.cli.cluster_p2p",
               "bisect": "beoperf.cli.cluster_p2p", "coll": "beoperf.cli.cluster_coll"}
MAX_PROCESSES = 1 << 20

DESCRIPTION = """Cluster-wide tests. 'hpcc' runs HPC Challenge at several process counts,
several times each, through mpirun (Open MPI, MPICH) or srun, and writes one document per
run and a scaling document (mean and spread per metric and count, speedup, parallel
efficiency, the metrics that stopped scaling). 'import' reads existing hpccoutf.txt files
into the same documents; 'show' and 'plot' render them; 'references' lists the published
systems --reference puts beside a run. 'ring', 'pairs' and 'mbw' are MPI tests of
beoperf's own, with statistics: HPCC's ring latency and bandwidth, the all-pairs
ping-pong matrix with the slow nodes and links named, and N pairs streaming at once;
'coll' times MPI collectives (allreduce, alltoall ...) as OSU and IMB do; 'rma' one-sided
put and get. 'bibw', 'incast' and 'bisect' are point-to-point patterns: pairs sending
both ways at once, many senders to one receiver, and half the nodes to the other half."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    add_parser_for(sub, ())


def add_parser_for(sub: argparse._SubParsersAction, rest: Sequence[str]) -> None:
    """The `cluster` parser; when ``rest`` (the arguments after `cluster`) starts with a
    subcommand, only that subcommand's module is imported and adds its parsers."""
    p = sub.add_parser("cluster", help="HPC Challenge over process counts, with statistics",
                       description=DESCRIPTION)
    inner = p.add_subparsers(dest="cluster_command", metavar="SUBCOMMAND",
                             parser_class=type(p))
    named = SUBCOMMANDS.get(rest[0]) if rest else None
    for module in (named,) if named else dict.fromkeys(SUBCOMMANDS.values()):
        importlib.import_module(module).add_parsers(inner)
    p.set_defaults(func=_no_subcommand)


def _no_subcommand(_args: argparse.Namespace) -> int:
    from beoperf.cli import UsageError

    raise UsageError("beoperf cluster: no subcommand given",
                     f"one of {', '.join(SUBCOMMANDS)}; see 'beoperf cluster --help'")


def add_reference_options(p: argparse.ArgumentParser) -> None:
    """--reference NAME and --reference-file FILE (repeatable)."""
    g = p.add_argument_group("reference systems")
    g.add_argument("--reference", action="append", default=[], metavar="NAME",
                   help="a published system to put beside the results, per metric with the "
                        "ratio (XC4000, 'Altix 3700', P575, Medusa; see 'beoperf cluster "
                        "references'); repeatable")
    g.add_argument("--reference-file", action="append", default=[], metavar="FILE",
                   help="your own reference systems: a CSV in the layout of the built-in "
                        "ones, or a beoperf cluster or scaling document; repeatable")


def add_output_options(p: argparse.ArgumentParser, formats: tuple[str, ...]) -> None:
    g = p.add_argument_group("output")
    g.add_argument("--format", choices=formats, default="text",
                   help="what is printed (default: text)")
    g.add_argument("--all", action="store_true", dest="all_keys",
                   help="every summary key, not only the performance figures")


def parse_counts(text: str, what: str = "--np") -> tuple[int, ...]:
    """'2,6,12' -> (2, 6, 12), ascending, each once; BadSpec otherwise."""
    try:
        values = sorted({int(v) for v in text.split(",") if v.strip()})
    except ValueError:
        raise errors.BadSpec(f"{what} {text!r}: expected counts such as 2,6,12") from None
    if not values or values[0] < 1 or values[-1] > MAX_PROCESSES:
        raise errors.BadSpec(f"{what} {text!r}: counts from 1 to {MAX_PROCESSES}")
    return tuple(values)

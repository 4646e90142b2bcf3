"""`beoperf cluster ring | pairs | mbw`: the cluster's own MPI tests, with statistics."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from beoperf import errors, interrupts, report, safeio, units
from beoperf.cli import ExitStatus, UsageError, check_seconds
from beoperf.cli.cluster import parse_counts
from beoperf.cli.mpi_options import env_pairs
from beoperf.cli.progress import PassLines, Progress
from beoperf.model.document import Document
from beoperf.model.mpi_options import (
    BINDINGS,
    DEFAULT_WINDOW,
    IMPLEMENTATIONS,
    LAUNCHERS,
    MpiOptions,
)
from beoperf.report import conditions
from beoperf.suites import cluster_mbw, cluster_pairs, cluster_ring
from beoperf.suites.cluster_mpi import Common, Outcome

FORMATS = ("text", "markdown", "csv", "json")
PLACES = """Hosts: --hosts (a list or a ClusterShell node set), --hostfile, else the Slurm
allocation this runs in (launched with srun), else this host. --ranks-per-node 1,2 runs
one series per value and compares them. As root, Open MPI's mpirun gets
--allow-run-as-root (said in the document)."""

RING_EXAMPLES = f"""examples:
  beoperf cluster ring --hosts 'node[01-06]' --ranks-per-node 1,2 --repeat 3 -o ring.json
  salloc -N 4 beoperf cluster ring --format markdown
  beoperf cluster ring --ranks-per-node 4              # four ranks here: shared memory

HPCC 1.5's definitions: 8 B for latency, 2,000,000 B for bandwidth; the natural ring
and 30 random rings (10 for bandwidth); each step sends to both neighbours (two
MPI_Sendrecv, or non-blocking calls: the faster counts), the slowest rank's time per
step halved; a ring's figure is the minimum over its trials, the random figure the
geometric mean over the random rings; bandwidth = size / latency. Each ring is measured
until the median of its trials is known within --precision (at least --min-trials);
--repeat draws new random rings and gives each figure's mean and standard deviation.
{PLACES}"""

PAIRS_EXAMPLES = f"""examples:
  beoperf cluster pairs --hosts 'node[01-16]' -o pairs.json --plot pairs.png
  beoperf cluster pairs --hostfile hosts --concurrent --format markdown

Every pair of ranks runs a ping-pong (8 B for latency, 2,000,000 B for bandwidth), one
pair at a time while the others wait quietly (--concurrent: rounds of disjoint pairs at
once). A node's figure is its best pair; a node is slow when that figure is worse than
the nodes' median by more than --threshold and a robust outlier (modified z-score of the
logarithms beyond --z-limit); a link is slow when it falls that far short of what its two
nodes reach. The rule is stated in the output. {PLACES}"""

MBW_EXAMPLES = f"""examples:
  beoperf cluster mbw --hosts 'node[01-08]' --sizes 8,1K,64K,1M -o mbw.json
  beoperf cluster mbw --hosts a,b,c,d --pairs 1,2 --ranks-per-node 1,2

As osu_mbw_mr: with N pairs rank i streams to rank i + N in windows of --window
messages, each acknowledged, after a warm-up window and a barrier; aggregate bandwidth =
N x size x messages / the senders' mean time, message rate = N x messages / that time.
{PLACES}"""


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = _parser(sub, "ring", "HPCC's ring latency and bandwidth, with their spread",
                "Naturally and randomly ordered ring latency and bandwidth, both "
                "directions, as HPC Challenge defines them, measured with MPI loops in C and "
                "repeated with their spread.", RING_EXAMPLES)
    _sizes(p)
    p.add_argument("--random-rings", default="30,10", metavar="L,B",
                   help="random rings for latency and for bandwidth (default %(default)s, "
                        "as HPCC)")
    p.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="whole measurements, each with new random rings (default "
                        "%(default)s)")
    p.set_defaults(func=run_ring)

    p = _parser(sub, "pairs", "the all-pairs ping-pong matrix, slow nodes and links named",
                "Latency and bandwidth of every pair of ranks, one pair at a time (or "
                "concurrently), as a matrix over the nodes with the slow nodes and links "
                "named.", PAIRS_EXAMPLES)
    _sizes(p)
    p.add_argument("--concurrent", action="store_true",
                   help="rounds of disjoint pairs at once (default: one pair at a time)")
    p.add_argument("--threshold", default="25%", metavar="FRACTION",
                   help="how much worse than the rest a node or link must be to be named "
                        "(default %(default)s)")
    p.add_argument("--z-limit", type=float, default=cluster_pairs.Z_LIMIT, metavar="Z",
                   help="and its modified z-score beyond this (default %(default)s)")
    p.add_argument("--plot", metavar="PNG", help="draw the heat maps to this PNG file")
    p.set_defaults(func=run_pairs)

    p = _parser(sub, "mbw", "aggregate bandwidth and message rate of N pairs at once",
                "Aggregate bandwidth and message rate of N concurrent pairs of ranks, as "
                "osu_mbw_mr.", MBW_EXAMPLES)
    p.add_argument("--sizes", default="8,1K,64K,1M", metavar="LIST",
                   help="message sizes (default %(default)s)")
    p.add_argument("--pairs", metavar="LIST",
                   help="pair counts (default: 1, 2, 4 ... and all the ranks make)")
    p.add_argument("--window", type=int, default=DEFAULT_WINDOW, metavar="N",
                   help="messages per acknowledged window (default %(default)s, as osu)")
    p.set_defaults(func=run_mbw)


def _parser(sub: argparse._SubParsersAction, name: str, helptext: str, description: str,
            epilog: str) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help=helptext, description=description, epilog=epilog,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("hosts (default: the Slurm allocation, else this host)")
    g.add_argument("--hosts", metavar="LIST",
                   help="hosts in rank order: a list or a ClusterShell node set")
    g.add_argument("--hostfile", metavar="FILE",
                   help="one host a line (Open MPI 'host slots=N' and MPICH 'host:N' read)")
    g.add_argument("--ranks-per-node", default="1", metavar="LIST",
                   help="ranks on each node, one series per value (e.g. 1,2; default "
                        "%(default)s)")
    _mpi(p)
    _loop(p)
    g = p.add_argument_group("output")
    g.add_argument("-o", "--output", metavar="FILE", help="write the JSON document here")
    g.add_argument("--format", choices=FORMATS, default="text",
                   help="what is printed (default: text)")
    g.add_argument("--label", help="the study's name")
    g.add_argument("--quiet", action="store_true",
                   help="no progress lines on stderr (errors still)")
    return p


def _sizes(p: argparse.ArgumentParser) -> None:
    p.add_argument("--latency-size", default="8", metavar="SIZE",
                   help="latency message size (default %(default)s B, as HPCC)")
    p.add_argument("--bandwidth-size", default="2000000", metavar="SIZE",
                   help="bandwidth message size (default %(default)s B, as HPCC)")


def _mpi(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("MPI and launching")
    g.add_argument("--mpi", choices=IMPLEMENTATIONS,
                   help="which MPI (default: Open MPI if installed)")
    g.add_argument("--launcher", choices=LAUNCHERS,
                   help="mpirun, or srun (default: srun inside a Slurm allocation, else "
                        "mpirun)")
    g.add_argument("--bind-to", dest="bind", choices=BINDINGS, default="none",
                   help="CPU binding of the ranks (default %(default)s)")
    g.add_argument("--mpi-agent", metavar="COMMAND",
                   help="how mpirun reaches a host (an rsh/ssh-like command)")
    g.add_argument("--mpi-interface", metavar="IF",
                   help="the network (interface or CIDR) MPI traffic must use")
    g.add_argument("--mpi-env", action="append", default=[], metavar="KEY=VALUE",
                   help="a variable every rank gets (OMPI_MCA_*, UCX_*, ...); repeatable")
    g.add_argument("--launcher-arg", action="append", default=[], metavar="ARG",
                   help="passed to mpirun or srun as it is; repeatable")
    g.add_argument("--deadline", metavar="SECONDS",
                   help="end each MPI job after this long (default: 3 x the time budget + "
                        "2 min)")


def _loop(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("precision")
    g.add_argument("--precision", default="5%", metavar="FRACTION",
                   help="95%% interval of each figure's median, relative (default "
                        "%(default)s)")
    g.add_argument("--min-trials", type=int, default=6, metavar="N",
                   help="trials of each figure at least (default %(default)s; 6 give an "
                        "interval)")
    g.add_argument("--trial-time", default="0.05", metavar="SECONDS",
                   help="a trial lasts this long at least (default %(default)s)")
    g.add_argument("--time-budget", default="120", metavar="SECONDS",
                   help="per series (and repeat); soft: every figure gets its minimum "
                        "trials; 'none' (default %(default)s)")
    g.add_argument("--seed", type=int, help="of the random rings and the order of trials")
    g.add_argument("--integrity", action="store_true", help="fill and verify every message")


# --------------------------------------------------------------------------- values


def _seconds(text: str | None, name: str, none_ok: bool = False) -> float | None:
    if text is None or (none_ok and text.strip().lower() == "none"):
        return None
    try:
        value = units.parse_time(text)
    except ValueError as exc:
        raise UsageError(f"{name}: {exc}") from None
    check_seconds(name, value)
    return value


def _fraction(text: str, name: str) -> float:
    try:
        return units.parse_fraction(text)
    except ValueError as exc:
        raise UsageError(f"{name}: {exc}") from None


def _size(text: str, name: str) -> int:
    try:
        return units.parse_size(text)
    except ValueError as exc:
        raise UsageError(f"{name}: {exc}") from None


def _counts(text: str, name: str) -> tuple[int, ...]:
    return parse_counts(text, name)


def common_of(args: argparse.Namespace) -> Common:
    opts = MpiOptions(implementation=args.mpi, launcher=args.launcher, bind=args.bind,
                      agent=args.mpi_agent, interface=args.mpi_interface,
                      env=env_pairs(args.mpi_env), launcher_args=tuple(args.launcher_arg),
                      deadline=_seconds(args.deadline, "--deadline"))
    return Common(hosts=args.hosts, hostfile=args.hostfile,
                  ranks_per_node=_counts(args.ranks_per_node, "--ranks-per-node"), mpi=opts,
                  precision=_fraction(args.precision, "--precision"),
                  min_trials=args.min_trials,
                  trial_time=_seconds(args.trial_time, "--trial-time") or 0.05,
                  time_budget=_seconds(args.time_budget, "--time-budget", none_ok=True),
                  integrity=args.integrity, seed=args.seed, label=args.label,
                  command_line=tuple(args.argv))


def _two(text: str, name: str) -> tuple[int, int]:
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise UsageError(f"{name} {text!r}: expected L,B (e.g. 30,10)")
    return int(parts[0]), int(parts[1])


# --------------------------------------------------------------------------- commands


def finish(outcome: Outcome | None, args: argparse.Namespace) -> int:
    """Write the document (-o), print it in --format, and return how it ended."""
    if outcome is None:  # a rank other than 0 of the user's job: rank 0 reports
        return ExitStatus.OK
    doc = outcome.document
    with interrupts.deferred():
        if args.output:
            _save(doc, Path(args.output))
        sys.stdout.write(report.render(doc, args.format))
    for series in doc.body["series"]:
        for note in (series.get("launch") or {}).get("notes", []):
            print(f"note: {note}", file=sys.stderr)
    for warning in conditions.warnings_of(doc.meta):
        print(f"beoperf: WARN: {warning}", file=sys.stderr)
    if getattr(args, "precision_line", None):
        print(args.precision_line, file=sys.stderr, flush=True)
    if outcome.interrupt is not None:
        return interrupts.exit_status(outcome.interrupt)
    if outcome.error is not None:
        raise outcome.error
    return ExitStatus.OK


def _save(doc: Document, path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        doc.save(path)
    except OSError as exc:
        fallback = safeio.private_dir() / (path.name or "result.json")
        doc.save(fallback)
        raise errors.OutputError(f"cannot write {path}: {exc.strerror or exc}",
                                 f"the result was saved to {fallback}") from None


def progress_of(args: argparse.Namespace) -> PassLines | None:
    """Rank 0's progress (unless --quiet): on a terminal a bar with the line of the pass
    under way; piped, a line per measurement, not per pass (beoperf.cli.progress)."""
    if args.quiet:
        return None
    budget = _seconds(args.time_budget, "--time-budget", none_ok=True)  # per measurement
    return PassLines(Progress(budget, enabled=sys.stderr.isatty(), what="starting",
                              hard=False), budget_s=budget)


def measured(run: Callable[[Any, Any], Outcome | None], spec: Any,
             args: argparse.Namespace) -> Outcome | None:
    """``run(spec, progress)`` with the progress display up meanwhile; the one line of
    what missed its precision is kept for ``finish`` to print after the result is
    written (``args.precision_line``)."""
    lines = progress_of(args)
    if lines is None:
        return run(spec, None)
    with lines.progress:
        outcome = run(spec, lines)
    args.precision_line = lines.summary()
    return outcome


def run_ring(args: argparse.Namespace) -> int:
    spec = cluster_ring.Spec(common=common_of(args),
                             latency_bytes=_size(args.latency_size, "--latency-size"),
                             bandwidth_bytes=_size(args.bandwidth_size, "--bandwidth-size"),
                             random_rings=_two(args.random_rings, "--random-rings"),
                             repeat=args.repeat)
    return finish(measured(cluster_ring.run, spec, args), args)


def run_pairs(args: argparse.Namespace) -> int:
    spec = cluster_pairs.Spec(common=common_of(args),
                              latency_bytes=_size(args.latency_size, "--latency-size"),
                              bandwidth_bytes=_size(args.bandwidth_size, "--bandwidth-size"),
                              concurrent=args.concurrent,
                              relative=_fraction(args.threshold, "--threshold"),
                              z_limit=args.z_limit)
    outcome = measured(cluster_pairs.run, spec, args)
    if outcome is not None and args.plot:
        write_heatmap(outcome.document, Path(args.plot))
    return finish(outcome, args)


def write_heatmap(doc: Document, path: Path) -> None:
    from beoperf.report import pairs_plots  # matplotlib only when drawn

    fig = pairs_plots.figure(doc)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        safeio.write_via(path, lambda stream: fig.savefig(stream, format="png"))
    except OSError as exc:
        raise errors.OutputError(f"cannot write {path}: {exc.strerror or exc}") from None


def run_mbw(args: argparse.Namespace) -> int:
    sizes = tuple(_size(s, "--sizes") for s in args.sizes.split(",") if s.strip())
    spec = cluster_mbw.Spec(common=common_of(args), sizes=sizes,
                            pairs=_counts(args.pairs, "--pairs") if args.pairs else None,
                            window=args.window)
    return finish(measured(cluster_mbw.run, spec, args), args)

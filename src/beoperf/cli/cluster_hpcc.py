"""`beoperf cluster hpcc`: HPC Challenge over process counts, repeated, with statistics."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from beoperf import errors, units
from beoperf.analysis.scaling import processes
from beoperf.cli import ExitStatus, UsageError, check_seconds
from beoperf.cli.cluster import add_output_options, add_reference_options, parse_counts
from beoperf.cli.cluster_docs import FORMATS, print_doc, write_plots
from beoperf.model.document import Document
from beoperf.suites import cluster
from beoperf.suites.cluster import Event

EXAMPLES = """examples:
  beoperf cluster hpcc --np 2,6,12 --repeat 5 --hosts 'node[01-06]' -o runs/medusa
  beoperf cluster hpcc --np 4,8 --ranks-per-node 1,2 --hostfile hosts -o runs/rpn
  salloc -N 6 beoperf cluster hpcc --np 2,6,12 --repeat 5 -o runs/slurm   # srun
  beoperf cluster hpcc --np 1,2 --n 2000 -o runs/here --reference Medusa --plots

Writes DIR/runs/npP-rR/ (hpccinf.txt, the raw hpccoutf.txt), DIR/runs/npP-rR.json
(one cluster document per run), DIR/scaling.json (mean and sample standard
deviation per metric and count, speedup and parallel efficiency against the
smallest count, the metrics that stopped scaling) and, with --plots,
DIR/plots/KEY.png. Runs go repeat by repeat (2, 6, 12, 2, 6, 12 ...). A run counts
only with Success=1 and HPL's residual check passed; the others are listed and left
out. As root, Open MPI's mpirun gets --allow-run-as-root (said in each document).
On several nodes DIR must be shared with the first host (hpcc's rank 0 writes its
output file in its working directory)."""


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("hpcc", help="HPC Challenge over process counts, with repeats",
                       description="Run HPC Challenge at each process count, several times, "
                                   "and tabulate every metric with its spread, speedup and "
                                   "parallel efficiency.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--np", required=True, metavar="LIST", help="process counts, e.g. 2,6,12")
    p.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="runs of each count (default %(default)s)")
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="a new directory for the runs and documents")
    p.add_argument("--label", help="the study's name (default: DIR's name)")
    _where(p)
    _problem(p)
    _launcher(p)
    add_reference_options(p)
    add_output_options(p, FORMATS)
    p.add_argument("--plots", action="store_true", help="also draw DIR/plots/KEY.png")
    p.add_argument("--quiet", action="store_true",
                   help="no progress lines or notes on stderr (errors still)")
    p.set_defaults(func=run)


def _where(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("hosts (default: the Slurm allocation, else this host)")
    g.add_argument("--hosts", metavar="LIST",
                   help="hosts in rank order: a list or a ClusterShell node set "
                        "('node[01-12]')")
    g.add_argument("--hostfile", metavar="FILE",
                   help="one host a line (Open MPI 'host slots=N' and MPICH 'host:N' read)")
    g.add_argument("--ranks-per-node", metavar="LIST",
                   help="processes per node, one series per value (e.g. 1,2); default: "
                        "as few as the hosts allow")


def _problem(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("problem size (hpccinf.txt)")
    g.add_argument("--n", type=int, metavar="N", help="HPL's matrix order for every count")
    g.add_argument("--memory-fraction", default=str(cluster.DEFAULT_FRACTION),
                   metavar="FRACTION",
                   help="else N fills this fraction of the nodes' memory (default "
                        "%(default)s; 8 N^2 bytes, PTRANS and the rest sized from it)")
    g.add_argument("--node-memory", metavar="SIZE",
                   help="memory of each node (default: read from the nodes)")
    g.add_argument("--nb", type=int, default=cluster.DEFAULT_NB, metavar="NB",
                   help="HPL's block size (default %(default)s)")
    g.add_argument("--grid", metavar="PxQ",
                   help="the process grid (one --np only; default: the most square)")


def _launcher(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("launching")
    g.add_argument("--hpcc", default="hpcc", metavar="PATH",
                   help="the hpcc to run (default: hpcc on PATH); its MPI and BLAS are "
                        "recorded")
    g.add_argument("--launcher", choices=cluster.plan.LAUNCHERS, default="auto",
                   help="default auto: srun inside a Slurm allocation, else mpirun of the "
                        "MPI hpcc is linked against")
    g.add_argument("--srun-mpi", choices=("pmix", "pmi2", "none"),
                   help="srun's --mpi (default: pmix for Open MPI, pmi2 for MPICH)")
    g.add_argument("--bind-to", dest="bind", choices=("none", "core", "socket"),
                   default="none", help="CPU binding of the processes (default %(default)s)")
    g.add_argument("--mpi-agent", metavar="COMMAND",
                   help="how mpirun reaches a host (an rsh/ssh-like command)")
    g.add_argument("--mpi-interface", metavar="IF",
                   help="the network (interface or CIDR) MPI traffic must use")
    g.add_argument("--mpi-env", action="append", default=[], metavar="KEY=VALUE",
                   help="a variable every process gets (OMPI_MCA_*, UCX_*, ...); repeatable")
    g.add_argument("--launcher-arg", action="append", default=[], metavar="ARG",
                   help="passed to mpirun or srun as it is; repeatable")
    g.add_argument("--timeout", default=f"{cluster.DEFAULT_TIMEOUT_S:g}", metavar="SECONDS",
                   help="end a run after this long (default %(default)s; 'none')")


def env_pairs(items: list[str]) -> tuple[tuple[str, str], ...]:
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise UsageError(f"--mpi-env {item!r}: expected KEY=VALUE")
        out.append((key, value))
    return tuple(out)


def _timeout(text: str) -> float | None:
    if text.strip().lower() == "none":
        return None
    try:
        value = units.parse_time(text)
    except ValueError as exc:
        raise UsageError(f"--timeout: {exc}") from None
    check_seconds("--timeout", value)
    return value


def _fraction(text: str) -> float:
    try:
        return units.parse_fraction(text)
    except ValueError as exc:
        raise UsageError(f"--memory-fraction: {exc}") from None


def _memory(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return units.parse_size(text)
    except ValueError as exc:
        raise UsageError(f"--node-memory: {exc}") from None


def spec_of(args: argparse.Namespace) -> cluster.Spec:
    per_node = parse_counts(args.ranks_per_node, "--ranks-per-node") \
        if args.ranks_per_node else None
    return cluster.Spec(
        output=args.output, np=parse_counts(args.np), repeat=args.repeat, hosts=args.hosts,
        hostfile=args.hostfile, ranks_per_node=per_node, n=args.n,
        memory_fraction=_fraction(args.memory_fraction), node_memory=_memory(args.node_memory),
        nb=args.nb, grid=args.grid, hpcc=args.hpcc, launcher=args.launcher,
        srun_mpi=args.srun_mpi, agent=args.mpi_agent, interface=args.mpi_interface,
        env=env_pairs(args.mpi_env), launcher_args=tuple(args.launcher_arg), bind=args.bind,
        timeout=_timeout(args.timeout), references=tuple(args.reference),
        reference_files=tuple(args.reference_file), label=args.label,
        command_line=tuple(args.argv))


def show_progress(event: Event) -> None:
    """One line when a run starts (which of how many, the time left) and one when it ends."""
    if event.what == "start":
        left = "estimating the time left after the first run" if event.eta_s is None else \
            f"about {units.format_time(round(event.eta_s))} left"
        print(f"run {event.index}/{event.total}: {processes(event.np)}, repeat {event.repeat} "
              f"({left})", file=sys.stderr, flush=True)
    else:
        took = units.format_time(event.elapsed_s) if event.elapsed_s else "?"
        verdict = "passed" if event.status == "ok" else "FAILED: " + "; ".join(event.failures)
        print(f"  {event.label}: {verdict} ({took})", file=sys.stderr, flush=True)


def _notes(doc: Document) -> None:
    runs = doc.body["runs"]
    failed = [r for r in runs if r["status"] != "ok"]
    if failed:
        raise errors.Failed(f"{len(failed)} of {len(runs)} runs failed (left out of the "
                            "statistics; see the table and their documents)")


def run(args: argparse.Namespace) -> int:
    spec = spec_of(args)
    doc = cluster.run(spec, None if args.quiet else show_progress)
    if args.plots:
        write_plots(doc, Path(spec.output) / "plots")
    print_doc(doc, args.format, args.all_keys)
    if not args.quiet:
        for note in doc.meta.get("notes", []):
            print(f"note: {note}", file=sys.stderr)
    _notes(doc)
    return ExitStatus.OK

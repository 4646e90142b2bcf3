"""`beoperf pingpong --transport mpi`: its options, and the MPI options of a spec."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from beoperf import safeio
from beoperf.cli.errors import UsageError
from beoperf.model.document import Document
from beoperf.model.mpi_options import (
    BINDINGS,
    DEFAULT_WINDOW,
    IMPLEMENTATIONS,
    LAUNCHERS,
    RECV_MODES,
    MpiOptions,
)
from beoperf.model.pingpong import RunResult

EXAMPLES = """MPI (--transport mpi):
  beoperf pingpong --transport mpi                  # both ranks here: shared memory
  beoperf pingpong --transport mpi --mpi mpich --hosts node01,node02 -o runs/mpich
  beoperf pingpong --transport mpi --mode stream --window 64 --hosts 'node[01-02]'
  mpirun -np 2 beoperf pingpong --transport mpi -o runs/x   # started as ranks
  beoperf pingpong --transport mpi --sweep transport=tcp,mpi --hosts a,b -o runs/tcp-mpi
  beoperf pingpong --transport mpi --sweep mpi-env:OMPI_MCA_btl_tcp_eager_limit=4096,65536 -o e
"""


def add_mpi_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("MPI (--transport mpi)")
    g.add_argument("--hosts", metavar="A,B",
                   help="the two ranks' hosts: a list or a ClusterShell node set (one host: "
                        "both ranks there; default: both here, over shared memory)")
    g.add_argument("--hostfile", metavar="FILE",
                   help="hosts from a file, one per line (Open MPI's 'host slots=N' and "
                        "MPICH's 'host:N' lines are read; the first two hosts are used)")
    g.add_argument("--mpi", choices=IMPLEMENTATIONS,
                   help="which MPI (Debian installs both: mpirun.openmpi, mpirun.mpich; "
                        "default: Open MPI if installed)")
    g.add_argument("--launcher", choices=LAUNCHERS,
                   help="mpirun, or srun (default: srun inside a Slurm allocation "
                        "when no hosts are given, else mpirun)")
    g.add_argument("--window", type=int, default=DEFAULT_WINDOW, metavar="N",
                   help="stream mode: non-blocking sends in flight per acknowledgement, as "
                        "osu_bw (default %(default)s)")
    g.add_argument("--sync", action="store_true", help="synchronous sends (MPI_Ssend)")
    g.add_argument("--recv", choices=RECV_MODES, default="blocking",
                   help="blocking MPI_Recv, or a receive posted before the send "
                        "(NetPIPE's -a) (default %(default)s)")
    g.add_argument("--bind-to", dest="bind", choices=BINDINGS, default="core",
                   help="CPU binding of the ranks (default %(default)s; 'none' when the "
                        "hosts are containers or namespaces of one machine)")
    g.add_argument("--mpi-agent", metavar="COMMAND",
                   help="how mpirun reaches a host (an rsh/ssh-like command)")
    g.add_argument("--mpi-interface", metavar="IF", help="the network interface MPI must use")
    g.add_argument("--mpi-env", action="append", default=[], metavar="KEY=VALUE",
                   help="a variable every rank gets (OMPI_MCA_*, UCX_*, MPIR_CVAR_* ...); "
                        "repeatable")
    g.add_argument("--launcher-arg", action="append", default=[], metavar="ARG",
                   help="passed to the launcher as it is; repeatable")
    g.add_argument("--deadline", type=float, metavar="SECONDS",
                   help="end the MPI job after this long (default: the time budget + 2 min)")


def env_pairs(items: list[str]) -> tuple[tuple[str, str], ...]:
    """['A=1', 'B=x=y'] -> (('A', '1'), ('B', 'x=y')); UsageError for a bad one."""
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise UsageError(f"--mpi-env {item!r}: expected KEY=VALUE")
        out.append((key, value))
    return tuple(out)


def mpi_options_from(args: argparse.Namespace, hosts: tuple[str, ...]) -> MpiOptions:
    if args.window < 1:
        raise UsageError(f"--window {args.window}: at least 1")
    return MpiOptions(hosts=hosts, implementation=args.mpi, launcher=args.launcher,
                      window=args.window, sync=args.sync, recv=args.recv, bind=args.bind,
                      agent=args.mpi_agent, interface=args.mpi_interface,
                      env=env_pairs(args.mpi_env), launcher_args=tuple(args.launcher_arg),
                      deadline=args.deadline)


def print_notes(doc: Document) -> None:
    """What beoperf did on the user's behalf to launch the job (running Open MPI as root)."""
    for note in (doc.meta.get("launch") or {}).get("notes", []):
        print(f"note: {note}", file=sys.stderr)


def file_part(key: str, text: str) -> str:
    """KEY-VALUE for a --sweep run's file name: 'mpi-env:UCX_TLS' and 'tcp,self' become
    'mpi-env-UCX_TLS-tcp_self' (nothing that is not a letter, digit, '.', '_' or '-')."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in
                   f"{key.replace(':', '-')}-{text}")


def write_overhead(results: list[RunResult], labels: list[str], prefix: Path) -> None:
    """PREFIX-overhead.md and PREFIX-plots/overhead.png: per size, what each run adds to
    the first (the MPI overhead over TCP in a transport sweep)."""
    from beoperf.report.mpi import overhead_markdown, overhead_png

    table = prefix.with_name(prefix.name + "-overhead.md")
    safeio.write_atomic(table, overhead_markdown(results[0], results[1:], labels))
    plots = prefix.with_name(prefix.name + "-plots")
    plots.mkdir(parents=True, exist_ok=True)
    safeio.write_atomic(plots / "overhead.png", overhead_png(results[0], results[1:], labels))
    print(f"wrote {table} and {plots / 'overhead.png'}")

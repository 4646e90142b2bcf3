"""What `beoperf cluster hpcc` will run, before anything runs: the hosts each process count
uses, the ranks per node, HPL's N, NB and P x Q, and the launcher.

Placement.  With hosts (``--hosts``, ``--hostfile`` or the Slurm allocation), a count of
``np`` processes at ``K`` ranks per node uses the first ``np / K`` hosts.  ``K`` is given
(``--ranks-per-node 1,2``: one series per value) or, by default, the smallest that fits
(``spread``: one per node while there are nodes enough, then two ...; as the published
study ran 2 and 6 processes one per node and 12 two per node).  Without hosts every
process runs on this host.

Problem size.  ``--n`` as given, else from memory: the matrix of doubles filling
``--memory-fraction`` of the memory of the nodes used (the smallest node's MemTotal times
their number; HPCC sizes its other tests from HPL's matrix, PTRANS with two of N/2),
rounded down to a multiple of NB.  The grid is the most square P x Q (P <= Q) unless
``--grid`` says otherwise.

Launcher.  ``auto``: srun inside a Slurm allocation (``SLURM_JOB_ID``), else mpirun of the
MPI hpcc is linked against (Open MPI or MPICH, from ldd); ``--launcher`` overrides.  srun's
PMI plugin is pmix for Open MPI and pmi2 for MPICH unless ``--srun-mpi`` says otherwise.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from beoperf import errors, launch
from beoperf.launch import binary, hosts
from beoperf.launch.base import Launcher
from beoperf.launch.mpirun import Mpirun
from beoperf.launch.srun import Srun, allocation
from beoperf.model import hpcc

LAUNCHERS = ("auto", "openmpi", "mpich", "mpirun", "srun")
SRUN_PLUGIN = {"openmpi": "pmix", "mpich": "pmi2"}
_MEMTOTAL = re.compile(r"^MemTotal:\s+(\d+)\s+kB", re.MULTILINE)


@dataclass(frozen=True)
class Config:
    """One process count in one series: where it runs and what it solves."""

    np: int
    series: str
    ranks_per_node: int
    nodes: tuple[str, ...]  # empty: this host
    input: hpcc.Input | None = None
    n_from: str = ""

    @property
    def name(self) -> str:
        tag = "" if self.series in ("spread", "this host") else f"-{self.ranks_per_node}pn"
        return f"np{self.np}{tag}"


def spread(np_: int, available: int) -> int:
    """The fewest ranks per node that place np processes on at most ``available`` nodes
    (a divisor of np, so that every node used gets as many)."""
    for k in range(1, np_ + 1):
        if np_ % k == 0 and np_ // k <= available:
            return k
    return np_


def place(np_: int, per_node: int | None, names: tuple[str, ...]) -> Config:
    """The hosts and ranks per node of one count (per_node None: spread)."""
    if not names:
        if per_node not in (None, np_):
            raise errors.BadSpec(f"--ranks-per-node {per_node} with {np_} processes needs "
                                 f"{math.ceil(np_ / per_node)} hosts; give --hosts or "
                                 "--hostfile")
        return Config(np_, "this host", np_, ())
    k = spread(np_, len(names)) if per_node is None else per_node
    if np_ % k:
        raise errors.BadSpec(f"{np_} processes at {k} per node: the count must be a "
                             "multiple of the ranks per node")
    needed = np_ // k
    if needed > len(names):
        raise errors.BadSpec(f"{np_} processes at {k} per node need {needed} hosts; "
                             f"{len(names)} given",
                             "name more hosts, or raise --ranks-per-node")
    series = "spread" if per_node is None else f"{k} per node"
    return Config(np_, series, k, names[:needed])


def grid_of(text: str | None, np_: int) -> tuple[int, int]:
    """--grid 'PxQ' (must make np) or the most square grid."""
    if text is None:
        return hpcc.square_grid(np_)
    found = re.fullmatch(r"\s*(\d{1,7})\s*[xX*]\s*(\d{1,7})\s*", text)
    if not found:
        raise errors.BadSpec(f"--grid {text!r}: expected PxQ, e.g. 2x3")
    p, q = int(found.group(1)), int(found.group(2))
    if p * q != np_:
        raise errors.BadSpec(f"--grid {text}: {p} x {q} is not {np_} processes")
    return p, q


def memory_of(text: str) -> int | None:
    """MemTotal in bytes from /proc/meminfo text (None if absent)."""
    found = _MEMTOTAL.search(text)
    return int(found.group(1)) * 1024 if found else None


def local_memory() -> int:
    """This host's MemTotal in bytes."""
    try:
        with open("/proc/meminfo", encoding="ascii", errors="replace") as f:
            value = memory_of(f.read(64 * 1024))
    except OSError:
        value = None
    if value is None:
        raise errors.Failed("cannot read MemTotal from /proc/meminfo",
                            "give --n (HPL's N) or --node-memory")
    return value


def problem(config: Config, *, n: int | None, nb: int, grid: str | None, fraction: float,
            node_memory: int | None) -> Config:
    """The config with its input file's figures."""
    p, q = grid_of(grid, config.np)
    if n is not None:
        return Config(config.np, config.series, config.ranks_per_node, config.nodes,
                      hpcc.Input(n, nb, p, q), "--n")
    assert node_memory is not None
    nodes = max(1, len(config.nodes))
    total = node_memory * nodes * fraction
    value = hpcc.n_for_memory(total, nb)
    why = (f"{fraction:g} of {nodes} x {node_memory // 2**20} MiB: the largest multiple of "
           f"NB={nb} with 8 N^2 bytes <= {int(total) // 2**20} MiB")
    return Config(config.np, config.series, config.ranks_per_node, config.nodes,
                  hpcc.Input(value, nb, p, q), why)


# --------------------------------------------------------------------------- launcher


@dataclass(frozen=True)
class Chosen:
    """The launcher to use, its name, and why."""

    launcher: Launcher
    name: str
    why: str


def choose(name: str, linked: binary.Linked, srun_mpi: str | None,
           environ: Mapping[str, str] | None = None) -> Chosen:
    """The launcher ``name`` (or, for 'auto', the one that fits: see the module's doc)."""
    env = os.environ if environ is None else environ
    if name not in LAUNCHERS:
        raise errors.BadSpec(f"--launcher {name!r}: choose {', '.join(LAUNCHERS)}")
    job = allocation(env)
    if name == "auto":
        if job is not None:
            name, why = "srun", f"inside Slurm allocation {job.job_id}"
        elif linked.mpi is not None:
            name, why = linked.mpi, f"{linked.path} is linked against {linked.mpi}"
        else:
            name, why = "mpirun", "the system's mpirun (hpcc's MPI not found by ldd)"
    else:
        why = "--launcher"
    if name == "srun":
        plugin = srun_mpi or SRUN_PLUGIN.get(linked.mpi or "", "pmix")
        try:
            return Chosen(Srun(plugin, env), "srun", f"{why}; --mpi={plugin}")
        except ValueError as exc:
            raise errors.BadSpec(str(exc)) from None
    chosen = Mpirun() if name == "mpirun" else launch.get(name)
    if not chosen.available():
        raise errors.BadSpec(f"launcher {name}: its mpirun is not installed",
                             "install the MPI hpcc was built with, or use --launcher")
    return Chosen(chosen, name, why)


def resolve_hosts(text: str | None, hostfile: str | None,
                  environ: Mapping[str, str] | None = None) -> hosts.Hosts | None:
    """hosts.resolve with its errors as BadSpec (the user named them)."""
    try:
        return hosts.resolve(text, hostfile, environ)
    except hosts.HostError as exc:
        raise errors.BadSpec(str(exc)) from None
    except ValueError as exc:  # FileInputError: the hostfile cannot be read
        raise errors.InputError(str(exc)) from None

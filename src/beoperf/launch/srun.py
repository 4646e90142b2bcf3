"""srun: Slurm's launcher, inside an allocation (``salloc``, ``sbatch``) or for named nodes.

::

    srun -N 2 -n 4 --ntasks-per-node 2 --nodelist a,b --mpi=pmix --cpu-bind=none
         --export=ALL,VAR=value CMD

With no hosts named, srun runs on the allocation it is in (``SLURM_JOB_ID``,
``SLURM_JOB_NODELIST``): :func:`allocation` reads it, and the node count comes from
there.  The MPI plugin (``--mpi``) is pmix by default, pmi2 for MPI libraries built
without PMIx.  A variable whose value holds a comma (which ``--export`` cannot carry) is
set in srun's own environment and exported by name.  srun has no option for an agent or
a network interface: such a spec is refused.

A job whose command is srun, stopped by beoperf or left by it (SIGKILL included), has
its steps cancelled too: the guard runs :func:`step_canceller`'s command
(:mod:`beoperf.launch.slurm_step`: ``scancel JOBID.STEPID`` of each step whose srun it
was), besides ending srun's process tree.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from beoperf.launch.base import Launch, Launcher, LaunchSpec, refuse, register

MPI_PLUGINS = ("pmix", "pmi2", "none")
CPU_BIND = {"none": "none", "core": "cores", "socket": "sockets"}
STEP_SCRIPT = str(Path(__file__).with_name("slurm_step.py"))


@dataclass(frozen=True)
class Allocation:
    """The Slurm job this process runs in: its id, node list (Slurm's folded syntax) and
    node count (None when Slurm does not say)."""

    job_id: str
    nodelist: str
    nodes: int | None


def allocation(environ: Mapping[str, str] | None = None) -> Allocation | None:
    """The allocation this process is in, from Slurm's variables; None outside one."""
    env = os.environ if environ is None else environ
    job = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not job or not nodelist:
        return None
    count = env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES") or ""
    return Allocation(job, nodelist, int(count) if count.isdigit() else None)


def step_canceller(argv: Sequence[str]) -> tuple[str, ...]:
    """What the guard runs when it stops a job running ``argv`` (``{pid}``: the child's
    PID): for srun, the script that cancels the steps that srun created; () for another
    command, or where Slurm's scancel is not installed."""
    if not argv or Path(argv[0]).name != "srun" or shutil.which("scancel") is None:
        return ()
    return (sys.executable, "-I", "-S", STEP_SCRIPT, "{pid}")


@register("srun")
class Srun(Launcher):
    """Slurm's srun."""

    def __init__(self, mpi: str = "pmix", environ: Mapping[str, str] | None = None) -> None:
        if mpi not in MPI_PLUGINS:
            raise ValueError(f"srun --mpi={mpi!r}: choose {', '.join(MPI_PLUGINS)}")
        self.mpi, self.environ = mpi, environ

    def available(self) -> bool:
        return shutil.which("srun") is not None

    def _placement(self, spec: LaunchSpec) -> list[str]:
        k = str(spec.ranks_per_host)
        if spec.hosts:
            n = len(spec.hosts)
            return ["-N", str(n), "-n", str(n * spec.ranks_per_host), "--ntasks-per-node", k,
                    "--nodelist", ",".join(spec.hosts)]
        job = allocation(self.environ)
        if job is None:
            raise ValueError("srun needs hosts, or to run inside a Slurm allocation "
                             "(SLURM_JOB_ID and SLURM_JOB_NODELIST unset)")
        if job.nodes is None:  # srun spreads over the whole allocation by itself
            return ["--ntasks-per-node", k]
        return ["-N", str(job.nodes), "-n", str(job.nodes * spec.ranks_per_host),
                "--ntasks-per-node", k]

    def command(self, spec: LaunchSpec) -> Launch:
        refuse(spec, "srun", agent=None, interface=None)
        inline = {k: v for k, v in spec.env.items() if "," not in v}
        by_name = {k: v for k, v in spec.env.items() if "," in v}
        export = ",".join(["ALL", *(f"{k}={v}" for k, v in inline.items()), *by_name])
        argv = ["srun", *self._placement(spec), f"--mpi={self.mpi}",
                f"--cpu-bind={CPU_BIND[spec.bind]}", f"--export={export}"]
        return Launch((*argv, *spec.extra, *spec.argv), by_name)

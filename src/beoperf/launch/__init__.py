"""Launchers by name: local processes, ClusterShell fan-out, mpirun (Open MPI, MPICH
hydra) and srun.  See :mod:`beoperf.launch.base`; ``get(name)`` gives one."""

from beoperf.launch.base import (
    LAUNCHERS,
    Launch,
    Launcher,
    LaunchSpec,
    get,
    names,
    register,
)

__all__ = ["LAUNCHERS", "Launch", "Launcher", "LaunchSpec", "get", "names", "register"]

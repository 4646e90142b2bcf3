"""mpirun: Open MPI's and MPICH's (hydra) launchers.

The two take the same request in different words::

    Open MPI:  mpirun.openmpi -np 4 --host a:2,b:2 --bind-to none -x VAR
               [--allow-run-as-root] [--mca plm_rsh_agent AGENT]
               [--mca btl_tcp_if_include IF --mca oob_tcp_if_include IF] CMD
    MPICH:     mpirun.mpich -np 4 -hosts a,b -ppn 2 -bind-to none -genv VAR value
               [-launcher ssh -launcher-exec AGENT] [-iface IF] CMD

Open MPI exports ``-x VAR`` from mpirun's own environment (the Launch's ``env``); MPICH
takes the value on the command line.  Open MPI refuses to run as root unless told, so
``--allow-run-as-root`` is added when beoperf runs as root (as it does on nodes).

The executable is the one Debian installs for each (``mpirun.openmpi``, ``mpirun.mpich``);
where neither is there, ``mpirun`` or ``mpiexec`` is used if its ``--version`` says it is
that implementation (Intel MPI's hydra counts as MPICH).  The ``mpirun`` launcher is
whichever implementation the system's ``mpirun`` is (else the one installed).
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Callable

from beoperf.launch import job
from beoperf.launch.base import Launch, Launcher, LaunchSpec, register

VERSION_TIMEOUT_S = 10.0
VERSION_BYTES = 64 * 1024  # of what --version prints, read (its start and its end)
GENERIC = ("mpirun", "mpiexec")
# what `--version` prints, per implementation
SIGNATURES = {"openmpi": ("Open MPI", "OpenRTE"), "mpich": ("HYDRA", "MPICH", "Intel(R) MPI")}


@functools.cache
def implementation_of(executable: str) -> str | None:
    """'openmpi' or 'mpich' from ``executable --version`` (None: neither, or it failed)."""
    out = job.probe([executable, "--version"], VERSION_TIMEOUT_S,
                    env={**os.environ, "LC_ALL": "C"}, keep=VERSION_BYTES)
    if out is None:
        return None
    text = out[0] + out[1]
    for name, words in SIGNATURES.items():
        if any(word in text for word in words):
            return name
    return None


def find(implementation: str) -> str | None:
    """The executable of an implementation: Debian's name for it, else a generic mpirun or
    mpiexec that says it is that one; None if there is none."""
    own = shutil.which(f"mpirun.{implementation}")
    if own:
        return own
    for name in GENERIC:
        path = shutil.which(name)
        if path and implementation_of(path) == implementation:
            return path
    return None


def _is_root() -> bool:
    return os.geteuid() == 0


class _Mpirun(Launcher):
    implementation = "openmpi"

    def __init__(self, executable: str | None = None,
                 is_root: Callable[[], bool] = _is_root) -> None:
        self._executable, self._is_root = executable, is_root

    def executable(self) -> str:
        """The one found (or given); Debian's name when none is installed."""
        return self._executable or find(self.implementation) or \
            f"mpirun.{self.implementation}"

    def available(self) -> bool:
        return self._executable is not None or find(self.implementation) is not None


@register("openmpi")
class OpenMpi(_Mpirun):
    """Open MPI's mpirun."""

    implementation = "openmpi"

    def command(self, spec: LaunchSpec) -> Launch:
        argv = [self.executable(), "-np", str(spec.ranks)]
        if spec.hosts:
            argv += ["--host", ",".join(f"{h}:{spec.ranks_per_host}" for h in spec.hosts)]
        argv += ["--bind-to", spec.bind]
        for name in spec.env:
            argv += ["-x", name]
        if self._is_root():
            argv.append("--allow-run-as-root")
        if spec.agent:
            argv += ["--mca", "plm_rsh_agent", spec.agent]
        if spec.interface:
            argv += ["--mca", "btl_tcp_if_include", spec.interface,
                     "--mca", "oob_tcp_if_include", spec.interface]
        return Launch((*argv, *spec.extra, *spec.argv), dict(spec.env))


@register("mpich")
class Mpich(_Mpirun):
    """MPICH's hydra mpirun (mpiexec.hydra; Intel MPI's takes the same options)."""

    implementation = "mpich"

    def command(self, spec: LaunchSpec) -> Launch:
        argv = [self.executable(), "-np", str(spec.ranks)]
        if spec.hosts:
            argv += ["-hosts", ",".join(spec.hosts), "-ppn", str(spec.ranks_per_host)]
        argv += ["-bind-to", spec.bind]
        for name, value in spec.env.items():
            argv += ["-genv", name, value]
        if spec.agent:
            argv += ["-launcher", "ssh", "-launcher-exec", spec.agent]
        if spec.interface:
            argv += ["-iface", spec.interface]
        return Launch((*argv, *spec.extra, *spec.argv))


@register("mpirun")
class Mpirun(Launcher):
    """Whichever MPI the system's ``mpirun`` is (else the one installed, Open MPI first)."""

    def __init__(self) -> None:
        self.chosen = self._choose()

    @staticmethod
    def _choose() -> _Mpirun:
        path = shutil.which("mpirun")
        found = implementation_of(path) if path else None
        if found == "mpich" or (found is None and find("openmpi") is None
                                and find("mpich") is not None):
            return Mpich()
        return OpenMpi()

    def available(self) -> bool:
        return self.chosen.available()

    def command(self, spec: LaunchSpec) -> Launch:
        return self.chosen.command(spec)

"""The process side of an MPI launch: am I a rank, under which MPI, and can mpi4py load it?

A process started by ``mpirun`` (Open MPI or MPICH's hydra) or ``srun`` finds its rank in
its environment (:func:`rank_of`).  mpi4py's wheel carries one extension module per MPI ABI
and loads the library by its ABI's soname: ``libmpi.so.40`` for Open MPI, which Debian
installs as such, and ``libmpi.so.12`` for MPICH, which Debian names ``libmpich.so.12``.
:func:`prepare_mpich` gives the MPICH one what it needs: ``MPI4PY_MPIABI=mpich`` and a
private directory (``mkdtemp``: 0700, unpredictable name, owned by this user) holding a
``libmpi.so.12`` link to Debian's library, on ``LD_LIBRARY_PATH``.  The dynamic loader
reads that variable only when a process starts, so the rank starts itself again
(``execve``: same PID, so the launcher does not notice) and, once mpi4py has loaded the
library, removes the directory (:func:`remove_shim`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import stat
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

IMPLEMENTATIONS = ("openmpi", "mpich")
MPICH_SONAME = "libmpi.so.12"  # what mpi4py's MPICH module needs
MPICH_DEBIAN = "libmpich.so.12"  # what Debian installs
SHIM_VAR = "BEOPERF_MPICH_SHIM"  # the private directory, for the restarted rank to remove
IMPL_VAR = "BEOPERF_MPI"  # the implementation, set by beoperf's own launches


@dataclass(frozen=True)
class RankInfo:
    """Where this process is in an MPI job, from its launcher's variables."""

    rank: int
    size: int
    launcher: str  # openmpi (mpirun), mpich (hydra), slurm (srun), pmix


def _int(env: Mapping[str, str], *names: str) -> int | None:
    for name in names:
        value = env.get(name, "")
        if value.isdigit():
            return int(value)
    return None


def rank_of(environ: Mapping[str, str] | None = None) -> RankInfo | None:
    """This process's rank if a launcher started it as one; None for a plain process
    (a Slurm batch script is not a rank: only a job step of srun is)."""
    env = os.environ if environ is None else environ
    table = (("openmpi", ("OMPI_COMM_WORLD_RANK",), ("OMPI_COMM_WORLD_SIZE",)),
             ("mpich", ("PMI_RANK",), ("PMI_SIZE",)),
             ("pmix", ("PMIX_RANK",), ("OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS")))
    for launcher, ranks, sizes in table:
        rank = _int(env, *ranks)
        if rank is not None:
            return RankInfo(rank, _int(env, *sizes) or 0, launcher)
    if "SLURM_STEP_ID" in env and _int(env, "SLURM_STEP_NUM_TASKS") not in (None, 1):
        rank = _int(env, "SLURM_PROCID")
        if rank is not None:
            return RankInfo(rank, _int(env, "SLURM_STEP_NUM_TASKS") or 0, "slurm")
    return None


def implementation_here(environ: Mapping[str, str] | None = None) -> str:
    """The MPI this rank runs under: as beoperf's launch or mpi4py's variable says, else
    MPICH's hydra when its variables are there and Open MPI's are not, else Open MPI."""
    env = os.environ if environ is None else environ
    for name in (IMPL_VAR, "MPI4PY_MPIABI"):
        value = env.get(name, "").lower().replace("-", "").replace("_", "")
        if value in ("impi", "intelmpi"):
            return "mpich"
        if value in IMPLEMENTATIONS:
            return value
    if any(k.startswith("OMPI_") and k.endswith("RANK") for k in env):
        return "openmpi"
    if "PMI_RANK" in env or "PMI_FD" in env or "PMI_PORT" in env:
        return "mpich"
    return "openmpi"


def loadable(name: str) -> bool:
    """Whether the dynamic loader finds a library by this name (loads it to see)."""
    try:
        ctypes.CDLL(name)
    except OSError:
        return False
    return True


def library_path(name: str) -> str | None:
    """The file a library name resolves to (loaded here to ask the loader)."""
    try:
        ctypes.CDLL(name)
    except OSError:
        return None
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            path = line.rstrip("\n").split(maxsplit=5)[-1]
            if Path(path).name.startswith(name):
                return path
    return None


def make_shim(target: str) -> Path:
    """A private directory with ``libmpi.so.12`` linking to ``target``."""
    directory = Path(tempfile.mkdtemp(prefix="beoperf-mpich-"))
    os.symlink(target, directory / MPICH_SONAME)
    return directory


def mpich_environment(environ: Mapping[str, str]) -> dict[str, str] | None:
    """The variables a rank needs for mpi4py's MPICH module (a shim made when Debian's
    library lacks the ``libmpi.so.12`` name); None when nothing needs to change."""
    changes: dict[str, str] = {}
    if environ.get("MPI4PY_MPIABI", "").lower() != "mpich":
        changes["MPI4PY_MPIABI"] = "mpich"
    if not loadable(MPICH_SONAME):
        target = library_path(MPICH_DEBIAN)
        if target is None:
            raise OSError(f"neither {MPICH_SONAME} nor {MPICH_DEBIAN} is installed "
                          "(Debian: apt-get install libmpich12)")
        shim = make_shim(target)
        old = environ.get("LD_LIBRARY_PATH", "")
        changes["LD_LIBRARY_PATH"] = f"{shim}:{old}" if old else str(shim)
        changes[SHIM_VAR] = str(shim)
    return changes or None


def prepare(implementation: str) -> None:
    """Make mpi4py load ``implementation`` in this process, before mpi4py.MPI is imported:
    for Open MPI set MPI4PY_MPIABI; for MPICH restart this process with the variables of
    :func:`mpich_environment` if it needs any (never returns then)."""
    if implementation == "openmpi":
        os.environ.setdefault("MPI4PY_MPIABI", "openmpi")
        return
    if os.environ.get(SHIM_VAR):  # already restarted once: do not loop
        return
    changes = mpich_environment(os.environ)
    if changes is None:
        return
    if SHIM_VAR not in changes:
        os.environ.update(changes)
        return
    sys.stdout.flush()
    sys.stderr.flush()
    argv = [sys.executable, *sys.orig_argv[1:]]
    os.execve(sys.executable, argv, {**os.environ, **changes})


def remove_shim() -> None:
    """Remove the private directory :func:`prepare` made, once the library is loaded: only
    a directory of this user's, mode 0700, holding nothing but the link."""
    directory = os.environ.pop(SHIM_VAR, "")
    if not directory:
        return
    path = Path(directory)
    with contextlib.suppress(OSError):
        st = path.lstat()
        if (not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid()
                or stat.S_IMODE(st.st_mode) != 0o700):
            return
        if [p.name for p in path.iterdir()] != [MPICH_SONAME]:
            return
        (path / MPICH_SONAME).unlink()
        path.rmdir()

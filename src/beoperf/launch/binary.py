"""What an MPI program is linked against: its MPI (which decides the launcher and srun's
PMI plugin) and its BLAS (which decides HPL's and DGEMM's figures), from ``ldd``.

Debian's ``hpcc`` links ``libmpi.so.40`` (Open MPI) and ``libblas.so.3``, which the
alternatives system points at the reference BLAS (``.../blas/libblas.so.3``), OpenBLAS
(``.../openblas-pthread/``), BLIS or ATLAS: the resolved path names the one in use.  A
statically linked program names neither; the facts are then None, never guessed.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field

from beoperf.launch import job

LDD_TIMEOUT_S = 20.0
LDD_BYTES = 200_000  # of ldd's output read (its start and its end)
_LINE = re.compile(r"^\s*(\S+)\s+=>\s+(\S+)\s+\(0x[0-9a-f]+\)", re.MULTILINE)
# (start of the library's soname, implementation), first match wins: MPICH's ABI is
# libmpi.so.12 (and Debian's libmpich.so.12), Open MPI's libmpi.so.40 and others
MPI_LIBRARIES = (("libmpi.so.12", "mpich"), ("libmpich", "mpich"), ("libmpi_mt", "mpich"),
                 ("libmpi.so", "openmpi"))
BLAS_SONAMES = ("libblas", "libopenblas", "libblis", "libmkl_rt", "libmkl_core", "libsatlas",
                "libtatlas", "libcblas", "libflexiblas", "libessl", "libarmpl")
# (substring of the resolved path, what it is)
BLAS_KINDS = (("openblas", "OpenBLAS"), ("blis", "BLIS"), ("atlas", "ATLAS"), ("mkl", "MKL"),
              ("flexiblas", "FlexiBLAS"), ("armpl", "Arm Performance Libraries"),
              ("/blas/", "reference BLAS (netlib)"), ("essl", "ESSL"))


@dataclass(frozen=True)
class Linked:
    """The program, its MPI ('openmpi', 'mpich' or None) and BLAS (None if not found)."""

    path: str
    mpi: str | None
    mpi_library: str | None
    blas: dict[str, str] | None
    libraries: dict[str, str] = field(default_factory=dict)


def which(program: str) -> str | None:
    """The program's absolute path (as given if it has a slash), None if not found."""
    if "/" in program:
        return os.path.abspath(program) if os.access(program, os.X_OK) else None
    return shutil.which(program)


def libraries(path: str) -> dict[str, str]:
    """soname -> resolved path of the shared libraries ``ldd`` lists ({} if none/failed)."""
    out = job.probe(["ldd", path], LDD_TIMEOUT_S, env={**os.environ, "LC_ALL": "C"},
                    keep=LDD_BYTES)
    if out is None:
        return {}
    return {name: target for name, target in _LINE.findall(out[0])}


def _blas(libs: dict[str, str]) -> dict[str, str] | None:
    for soname, target in libs.items():
        if soname.startswith(BLAS_SONAMES):
            resolved = os.path.realpath(target)
            kind = next((what for part, what in BLAS_KINDS if part in resolved.lower()),
                        "unknown")
            return {"library": soname, "path": target, "resolved": resolved, "kind": kind}
    return None


def inspect(path: str) -> Linked:
    """What ``path`` links (through ldd)."""
    libs = libraries(path)
    mpi, mpi_library = None, None
    for part, implementation in MPI_LIBRARIES:
        found = [soname for soname in libs if soname.startswith(part)]
        if found:
            mpi, mpi_library = implementation, os.path.realpath(libs[found[0]])
            break
    return Linked(path, mpi, mpi_library, _blas(libs), libs)

"""Build the C core; everything else is declared in pyproject.toml."""

import platform

from setuptools import Extension, setup

FLAGS = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror"]
# the node kernels (issue 13): vectorised, FMA allowed (a*b+c counts 2 flops either way),
# threads through OpenMP; the flags are recorded in every node document
NODE_FLAGS = ["-std=c99", "-O3", "-ffp-contract=fast", "-fopenmp", *FLAGS[2:]]
if platform.machine() in ("x86_64", "AMD64"):  # the AVX-512 clones of the PEAK loops
    NODE_FLAGS.append("-mprefer-vector-width=512")  # use 512-bit vectors, as likwid does

setup(
    ext_modules=[
        Extension(
            "beoperf._core",
            sources=["src/beoperf/_core.c", "src/beoperf/csrc/loops.c"],
            include_dirs=["src/beoperf/csrc"],
            extra_compile_args=FLAGS,
        ),
        # The MPI loops: no MPI headers or mpicc needed, the library is bound at run time
        # (the one mpi4py loaded), so this builds wherever _core does.
        Extension(
            "beoperf._mpi",
            sources=["src/beoperf/_mpi.c", "src/beoperf/csrc/mpiloops.c",
                     "src/beoperf/csrc/loops.c",
                     "src/beoperf/_mpirma.c", "src/beoperf/csrc/mpirma.c",
                     "src/beoperf/csrc/mpipat.c", "src/beoperf/_mpicoll.c",
                     "src/beoperf/csrc/mpicoll.c"],
            include_dirs=["src/beoperf/csrc"],
            libraries=["dl"],
            extra_compile_args=FLAGS,
        ),
        # UDP at a rate (engines/udp.py): the paced sender and the counting receiver
        Extension(
            "beoperf._udp",
            sources=["src/beoperf/_udp.c"],
            extra_compile_args=FLAGS,
        ),
        Extension(
            "beoperf._node",
            sources=["src/beoperf/_node.c", "src/beoperf/csrc/loops.c",
                     "src/beoperf/csrc/stream.c", "src/beoperf/csrc/peak.c",
                     "src/beoperf/csrc/gups.c", "src/beoperf/csrc/iopat.c"],
            include_dirs=["src/beoperf/csrc"],
            define_macros=[("BEO_NODE_CFLAGS", '"' + " ".join(NODE_FLAGS) + '"')],
            extra_compile_args=NODE_FLAGS,
            extra_link_args=["-fopenmp"],
        ),
    ]
)

"""Build the C core; everything else is declared in pyproject.toml."""

from setuptools import Extension, setup

FLAGS = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror"]

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
                     "src/beoperf/csrc/loops.c"],
            include_dirs=["src/beoperf/csrc"],
            libraries=["dl"],
            extra_compile_args=FLAGS,
        ),
    ]
)

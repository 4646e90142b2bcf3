"""Build the C core; everything else is declared in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "beoperf._core",
            sources=["src/beoperf/_core.c", "src/beoperf/csrc/loops.c"],
            include_dirs=["src/beoperf/csrc"],
            extra_compile_args=["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror"],
        )
    ]
)

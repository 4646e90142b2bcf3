"""The conditions a node figure holds under: CPU and its caches, cores used, frequency
governor, memory and NUMA layout, compiler and flags of the kernels, the BLAS numpy uses
and its thread variables, and the file system of each I/O directory.

Everything is read from sysfs and procfs (bounded, never raising: a fact that cannot be
seen is None), so gathering conditions can never stop a measurement.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import NotRequired, TypedDict

from beoperf import _node, sysinfo, units

BLAS_VARIABLES = ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                  "MKL_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES")
READ_LIMIT = 1 << 20


class Cache(TypedDict):
    """One of cpu0's caches as sysfs shows it (size in bytes; None where unreadable)."""

    level: int
    type: str | None  # Data, Instruction, Unified
    size: int | None
    shared_cpus: str | None  # "0-3"


class NumaNode(TypedDict):
    node: int
    cpus: str | None  # "0-3"
    memory: int | None  # bytes


class Blas(TypedDict):
    """numpy's BLAS and the variables that steer it (version and configuration only when
    numpy can say: numpy >= 1.25)."""

    numpy: str
    library: str | None
    version: NotRequired[str | None]
    configuration: NotRequired[str | None]
    environment: dict[str, str]


Mount = dict[str, str | None]  # mount_point, fstype, source, options


class Facts(TypedDict):
    """Every condition of the CPU, memory and compute parts (see :func:`collect`)."""

    host: Mapping[str, object]  # sysinfo.host_facts()
    cpu_model: object
    cpus: int | None
    cores_used: int
    governor: dict[str, str] | None
    caches: list[Cache]
    llc_total: int | None
    memory: int | None
    memory_available: int | None
    numa: list[NumaNode]
    build: Mapping[str, object]  # the C kernels' compiler, flags, OpenMP ...
    blas: Blas
    clock: Mapping[str, object]  # sysinfo.clock_facts()


def read_text(path: str | Path, limit: int = READ_LIMIT) -> str | None:
    """A small kernel file's text (at most ``limit`` bytes), None if unreadable."""
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace").strip()
    except OSError:
        return None


def cpu_list(text: str | None) -> list[int]:
    """'0-3,8' -> [0, 1, 2, 3, 8] ([] for nothing readable)."""
    out: list[int] = []
    for part in (text or "").split(","):
        lo, _, hi = part.strip().partition("-")
        if lo.isdigit() and (not hi or hi.isdigit()):
            out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def caches(root: str = "/sys") -> list[Cache]:
    """cpu0's caches: level, type, size (bytes), which CPUs share it."""
    out: list[Cache] = []
    base = Path(root, "devices/system/cpu/cpu0/cache")
    for index in sorted(base.glob("index*")) if base.is_dir() else []:
        size = read_text(index / "size")
        level = read_text(index / "level")
        try:
            nbytes = units.parse_size(size) if size else None
        except ValueError:
            nbytes = None
        if level is None or not level.isdigit():
            continue
        out.append({"level": int(level), "type": read_text(index / "type"), "size": nbytes,
                    "shared_cpus": read_text(index / "shared_cpu_list")})
    return out


def last_level_total(root: str = "/sys") -> int | None:
    """Bytes of last-level cache in all (each distinct instance counted once): STREAM's
    arrays must each be at least 4 times this."""
    seen: dict[str, int] = {}
    top = 0
    for cpu in sorted(Path(root, "devices/system/cpu").glob("cpu[0-9]*")):
        for index in sorted((cpu / "cache").glob("index*")):
            if read_text(index / "type") == "Instruction":
                continue
            level = int(read_text(index / "level") or 0)
            size = read_text(index / "size")
            try:
                nbytes = units.parse_size(size) if size else 0
            except ValueError:
                nbytes = 0
            if level > top:
                top, seen = level, {}
            if level == top:
                seen[read_text(index / "shared_cpu_list") or str(cpu)] = nbytes
    return sum(seen.values()) or sysinfo.llc_bytes(root)


def meminfo() -> dict[str, int]:
    """/proc/meminfo in bytes."""
    out = {}
    for line in (read_text("/proc/meminfo") or "").splitlines():
        m = re.match(r"(\w+):\s+(\d+)\s*kB", line)
        if m:
            out[m.group(1)] = int(m.group(2)) * 1024
    return out


def numa(root: str = "/sys") -> list[NumaNode]:
    nodes: list[NumaNode] = []
    for node in sorted(Path(root, "devices/system/node").glob("node[0-9]*")):
        total = None
        m = re.search(r"MemTotal:\s+(\d+)\s*kB", read_text(node / "meminfo") or "")
        if m:
            total = int(m.group(1)) * 1024
        nodes.append({"node": int(node.name[4:]), "cpus": read_text(node / "cpulist"),
                      "memory": total})
    return nodes


def governors(root: str = "/sys") -> dict[str, str] | None:
    """governor -> CPUs using it; None without cpufreq (e.g. a virtual machine)."""
    found: dict[str, list[str]] = {}
    for cpu in sorted(Path(root, "devices/system/cpu").glob("cpu[0-9]*")):
        gov = read_text(cpu / "cpufreq/scaling_governor")
        if gov:
            found.setdefault(gov, []).append(cpu.name[3:])
    return {g: ",".join(c) for g, c in found.items()} or None


def cores_used() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def blas() -> Blas:
    """numpy's BLAS (name, version, configuration) and the variables that steer it."""
    import numpy as np

    environment = {k: os.environ[k] for k in BLAS_VARIABLES if k in os.environ}
    try:
        config = np.show_config(mode="dicts")  # numpy >= 1.25
        deps = config.get("Build Dependencies", {})
        lib = deps.get("blas", {})
        return {"numpy": np.__version__, "library": lib.get("name"),
                "version": lib.get("version"),
                "configuration": lib.get("openblas configuration"),
                "environment": environment}
    except (TypeError, AttributeError):
        return {"numpy": np.__version__, "library": None, "environment": environment}


def mount_of(directory: str) -> Mount:
    """The mount a directory is on: mount point, file system type, source, options."""
    path = os.path.realpath(directory)
    best: Mount = {"mount_point": None, "fstype": None, "source": None,
                            "options": None}
    for line in (read_text("/proc/self/mountinfo", 4 << 20) or "").splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 6 or len(tail) < 2:
            continue
        point = re.sub(r"\\(\d{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best["mount_point"] or ""):
            extra = tail[2] if len(tail) > 2 else ""
            best = {"mount_point": point, "fstype": tail[0], "source": tail[1],
                    "options": ",".join(x for x in (fields[5], extra) if x)}
    return best


def collect() -> Facts:
    """Every condition of the CPU, memory and compute parts."""
    host = sysinfo.host_facts()
    mem = meminfo()
    return {"host": host, "cpu_model": host.get("cpu_model"), "cpus": os.cpu_count(),
            "cores_used": cores_used(), "governor": governors(), "caches": caches(),
            "llc_total": last_level_total(), "memory": mem.get("MemTotal"),
            "memory_available": mem.get("MemAvailable"), "numa": numa(),
            "build": _node.build(), "blas": blas(), "clock": sysinfo.clock_facts()}

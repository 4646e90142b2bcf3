"""Published node figures shipped with beoperf, to show beside a run (`--reference NAME`).

The tables of a 2007 evaluation of a commodity cluster ("Medusa": Sun X2100, dual-core
Opteron) against three reference systems (model/reference/README.md): PMAC I/O Bench on
a local directory (and Medusa's NFS directory), PMAC PEAK in MFLOPS by loop length, and
HPC Challenge's STREAM, DGEMM, RandomAccess and FFT.  A system is named by any of its
aliases, case-insensitively; each gives what the source has for it (Itanium 2 has no 100
MB I/O figures; the HPCC-only systems have no I/O or PEAK figures).
"""

from __future__ import annotations

import csv
import functools
import io
from dataclasses import dataclass, field
from importlib import resources

from beoperf.model.document import JsonObject

# system -> (aliases, iobench-local column, iobench-nfs column, PEAK column prefix,
#            hpcc-systems column)
SYSTEMS: dict[str, tuple[tuple[str, ...], str | None, str | None, str | None, str | None]] = {
    "medusa": (("medusa", "x2100", "opteron"), "X2100 (Medusa; Opteron)", "Medusa NFS (MB/s)",
               "Medusa", "Medusa (Opteron; 100 Mbit Ethernet; 12 procs)"),
    "itanium2": (("itanium2", "itanium", "rx2600", "hp-linux", "hp linux"), "RX2600 (Itanium2)",
                 None, "HP Linux", None),
    "power4": (("power4", "p690", "p690+"), "P690+ (Power4)", None, "Power4", None),
    "xc4000": (("xc4000",), None, None, None, "XC4000 (Opteron; InfiniBand 4x; 32 procs)"),
    "altix3700": (("altix3700", "altix", "altix 3700"), None, None, None,
                  "Altix 3700 (Itanium 2; NUMAlink; 32 procs)"),
    "p575": (("p575", "power5"), None, None, None, "P575 (Power5; HPS; 64 procs)"),
}
SOURCE = ("a 2007 evaluation of the Medusa commodity cluster (HPC Challenge 1.x, PMAC I/O "
          "Bench, PMAC PEAK); each figure the mean of 5 runs")


@dataclass
class Reference:
    """One system's published figures: I/O MB/s by (file size in bytes, test) and where
    (local or nfs), PEAK MFLOPS by (kernel, loop length), HPCC figures by metric."""

    name: str
    column: str
    io: dict[str, dict[tuple[int, str], float]] = field(default_factory=dict)
    kernels: dict[tuple[str, int], float] = field(default_factory=dict)
    hpcc: dict[str, tuple[float, str]] = field(default_factory=dict)

    def to_json(self) -> JsonObject:
        return {"name": self.name, "system": self.column, "source": SOURCE,
                "io": {where: [{"file_size": s, "test": t, "mb_s": v}
                               for (s, t), v in rows.items()]
                       for where, rows in self.io.items()},
                "kernels": [{"kernel": k, "length": n, "mflops": v}
                            for (k, n), v in self.kernels.items()],
                "hpcc": [{"metric": m, "value": v, "unit": u}
                         for m, (v, u) in self.hpcc.items()]}


def names() -> list[str]:
    return sorted(SYSTEMS)


def find(name: str) -> str | None:
    """The system an alias names (None: none)."""
    wanted = name.strip().lower()
    for system, (aliases, *_rest) in SYSTEMS.items():
        if wanted == system or wanted in aliases:
            return system
    return None


@functools.cache
def _table(name: str) -> list[dict[str, str]]:
    text = resources.files("beoperf.model").joinpath("reference", name).read_text("utf-8")
    return list(csv.DictReader(io.StringIO(text)))


def _mb(text: str) -> int:
    return int(text.removesuffix("MB")) * 10**6


def _io(column: str, table: str) -> dict[tuple[int, str], float]:
    return {(_mb(r["file_size"]), r["test"]): float(r[column])
            for r in _table(table) if r.get(column)}


def load(name: str) -> Reference:
    """The published figures of a system; KeyError listing the names if there is none."""
    system = find(name)
    if system is None:
        raise KeyError(f"no reference system {name!r} (there are {', '.join(names())})")
    _aliases, local, nfs, peak, hpcc = SYSTEMS[system]
    ref = Reference(system, local or peak or hpcc or system)
    if local:
        ref.io["local"] = _io(local, "iobench-local.csv")
    if nfs:
        ref.io["nfs"] = _io(nfs, "iobench-nfs.csv")
    if peak:
        for row in _table("peak-kernels.csv"):
            for kernel in ("div", "daxpy", "dot", "poly"):
                value = row.get(f"{peak} {kernel}")
                if value:
                    ref.kernels[(kernel, int(row["loop_length"]))] = float(value)
    if hpcc:
        ref.hpcc = {r["metric"]: (float(r[hpcc]), r["unit"]) for r in _table("hpcc-systems.csv")
                    if r.get(hpcc)}
    return ref

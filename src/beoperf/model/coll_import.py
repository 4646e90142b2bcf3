"""OSU Micro-Benchmarks' and IMB-MPI1's collective outputs read into a cluster-coll
document (`beoperf cluster coll --import FILE`), beside what beoperf measures.

Read: OSU's blocking collectives (osu_allreduce, osu_allgather, osu_alltoall, osu_bcast,
osu_reduce, osu_reduce_scatter, osu_gather, osu_scatter, osu_barrier): the "Avg
Latency(us)" column is t_avg; with ``-f`` the "Min/Max Latency(us)" columns (the ranks'
extremes of their mean, as IMB's) are t_min and t_max, "Iterations" the calls; a
"Validation" column (``-c``) counts as the ranks' check (a Fail row: corrupt 1).  OSU
does not print how many processes ran: ``np`` is then the caller's (``--np``).  IMB-MPI1:
each "Benchmarking Allreduce" (Allgather, Alltoall, Bcast, Reduce, Reduce_scatter,
Reduce_scatter_block, Gather, Scatter, Barrier) section with its "#processes", its
t_min, t_max and t_avg in usec and its #repetitions (a reduction's element is the
header's "MPI_Datatype for reductions", -red_data_type: MPI_FLOAT when it does not say);
rows of 0 bytes are left out (a note says so).  Each figure is one value: no interval
(``interval_note`` says why).
One series per file and process count, its ``launch`` naming the file and the tool,
with its notes.  A non-blocking OSU test (overlap, not latency) is refused in one
line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from beoperf.model.cluster_mpi import COLL_KIND, CollPoint, CollSettings, MpiRun, Series, Stat
from beoperf.model.document import Document, JsonObject, make_meta
from beoperf.model.importers import _NUMERIC, _read_text
from beoperf.model.pingpong import ResultFormatError

ONE_FIGURE = "one figure imported: the file gives no spread over trials"
SYNC = {"osu": "as OSU: MPI_Barrier after every timed call",
        "imb": "as IMB-MPI1 ran them (its own synchronisation: see that version's -sync)"}
STATISTIC = "imported: each rank's mean over the tool's repetitions, t_avg over the ranks"
_OSU_TITLE = re.compile(r"^\s*#\s*OSU\s+MPI\s+(.*?)\s+Latency\s+Test\s*(v[\d.]+)?")
_OSU_OPS = {"allreduce": "allreduce", "allgather": "allgather", "barrier": "barrier",
            "all-to-all personalized exchange": "alltoall", "alltoall": "alltoall",
            "broadcast": "bcast", "bcast": "bcast", "reduce": "reduce",
            "reduce_scatter": "reduce_scatter", "reduce_scatter_block": "reduce_scatter",
            "gather": "gather", "scatter": "scatter"}
_OSU_COLUMN = re.compile(r"(Avg Latency\(us\)|Min Latency\(us\)|Max Latency\(us\)|"
                         r"Iterations|Validation|Size)")
_DATATYPE = re.compile(r"^\s*#\s*Datatype:\s*(MPI_\w+)")
_ELEMENT = {"MPI_CHAR": 1, "MPI_BYTE": 1, "MPI_INT": 4, "MPI_FLOAT": 4, "MPI_DOUBLE": 8}
_IMB_SECTION = re.compile(r"^\s*#\s*Benchmarking\s+(\S+)")
_IMB_PROCESSES = re.compile(r"^\s*#\s*#processes\s*=\s*(\d+)")
_IMB_RED_TYPE = re.compile(r"^\s*#\s*MPI_Datatype for reductions\s*:\s*(MPI_\w+)")
_IMB_OPS = {"Allreduce": "allreduce", "Allgather": "allgather", "Alltoall": "alltoall",
            "Bcast": "bcast", "Reduce": "reduce", "Reduce_scatter": "reduce_scatter",
            "Reduce_scatter_block": "reduce_scatter", "Gather": "gather", "Scatter": "scatter",
            "Barrier": "barrier"}
MAX_ROWS = 10_000


@dataclass
class _Found:
    """What a file gave: per process count, its points; the tool and its version."""

    tool: str
    version: str | None
    points: dict[int, list[CollPoint]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _stat(us: float | None) -> Stat | None:
    if us is None:
        return None
    s = us * 1e-6
    return Stat(median=s, ci_low=None, ci_high=None, min=s, max=s, trials=1,
                interval_note=ONE_FIGURE)


def _num(path: Path, number: int, token: str) -> float:
    if not _NUMERIC.match(token):
        raise ResultFormatError(f"{path}:{number}: {token[:40]!r} is not a number")
    value = float(token)
    if not value >= 0:
        raise ResultFormatError(f"{path}:{number}: {token!r} is below zero")
    return value


def _point(op: str, size: int, element: int | None, avg: float, low: float | None,
           high: float | None, calls: int, checked: int, corrupt: int) -> CollPoint:
    t_avg = _stat(avg)
    assert t_avg is not None
    count = size // element if element else 0
    return CollPoint(op=op, size=max(size, 1), count=count, bytes=size, trials=1, calls=calls,
                     t_avg_s=t_avg, t_min_s=_stat(low), t_max_s=_stat(high),
                     checked=checked, corrupt=corrupt)


def _osu_header(path: Path, lines: list[str], title: int, op: str
                ) -> tuple[int | None, int, list[str]]:
    """(the element's bytes if a Datatype line says, the header's index, its columns)."""
    element = None
    for j in range(title + 1, min(len(lines), title + 20)):
        if (d := _DATATYPE.match(lines[j])):
            element = _ELEMENT.get(d.group(1))
        if lines[j].lstrip().startswith("#") and "Latency(us)" in lines[j]:
            columns = _OSU_COLUMN.findall(lines[j])
            if op == "barrier" and "Size" not in columns:
                columns = ["Size", *columns]  # osu_barrier prints no size column
            return element, j, columns
    raise ResultFormatError(f"{path}: OSU output without its '# Size  Avg Latency(us)' "
                            "header (truncated?)")


def _osu_row(path: Path, number: int, op: str, element: int | None, columns: list[str],
             tokens: list[str]) -> CollPoint:
    row = dict(zip(columns, tokens, strict=True))
    valid = row.get("Validation")
    if valid is not None and valid not in ("Pass", "Fail"):
        raise ResultFormatError(f"{path}:{number}: {valid!r} is not Pass/Fail")
    nums = {c: _num(path, number, t) for c, t in row.items() if c != "Validation"}
    return _point(op, int(nums["Size"]), element, nums["Avg Latency(us)"],
                  nums.get("Min Latency(us)"), nums.get("Max Latency(us)"),
                  int(nums.get("Iterations", 0)), 1 if valid else 0, int(valid == "Fail"))


def _osu(path: Path, lines: list[str], np_: int | None) -> _Found:
    i, m = next((i, m) for i, line in enumerate(lines) if (m := _OSU_TITLE.match(line)))
    name = " ".join(m.group(1).split()).lower()
    if name not in _OSU_OPS:
        raise ResultFormatError(f"{path}: OSU {m.group(1)!r} is not read (OSU's blocking "
                                "collectives are: osu_allreduce ... osu_barrier)")
    if np_ is None:
        raise ResultFormatError(f"{path}: OSU does not print how many processes ran: "
                                "give it with --np N")
    op = _OSU_OPS[name]
    found = _Found("OSU Micro-Benchmarks", m.group(2))
    element, header, columns = _osu_header(path, lines, i, op)
    points: list[CollPoint] = []
    for k in range(header + 1, min(len(lines), header + 1 + MAX_ROWS)):
        tokens = lines[k].split()
        if not tokens or tokens[0].startswith("#"):
            if points:
                break
            continue
        if op == "barrier" and len(tokens) == len(columns) - 1:
            tokens = ["1", *tokens]
        if len(tokens) != len(columns):
            if not points:
                raise ResultFormatError(f"{path}:{k + 1}: {len(tokens)} columns in an OSU "
                                        f"table of {len(columns)}")
            found.notes.append(f"the OSU table ends at line {k + 1}")
            break
        points.append(_osu_row(path, k + 1, op, element, columns, tokens))
    if not points:
        raise ResultFormatError(f"{path}: an OSU table without rows")
    found.points[np_] = points
    return found


def _imb_section(path: Path, lines: list[str], i: int, name: str, found: _Found,
                 red_element: int | None = 4) -> int:
    """One IMB section's rows into ``found``; how many rows of 0 bytes were left out.
    ``red_element``: the reductions' element bytes (the header's "MPI_Datatype for
    reductions", -red_data_type; MPI_FLOAT when it does not say)."""
    op = _IMB_OPS[name]
    np_ = next((int(p.group(1)) for line in lines[i + 1:i + 6]
                if (p := _IMB_PROCESSES.match(line))), None)
    header = next((j for j in range(i + 1, min(len(lines), i + 10))
                   if "t_avg[usec]" in lines[j]), None)
    if np_ is None or header is None:
        raise ResultFormatError(f"{path}:{i + 1}: IMB {name} without its #processes or its "
                                "t_min/t_max/t_avg header")
    names = lines[header].replace("#", "").split()
    element = None if op == "barrier" else (red_element if op in ("allreduce", "reduce",
                                                                "reduce_scatter") else 1)
    zero = 0
    for k in range(header + 1, min(len(lines), header + 1 + MAX_ROWS)):
        tokens = lines[k].split()
        if not tokens or not _NUMERIC.match(tokens[0]):
            break
        if len(tokens) != len(names):
            raise ResultFormatError(f"{path}:{k + 1}: {len(tokens)} columns in an IMB table "
                                    f"of {len(names)}")
        row = {n: _num(path, k + 1, t) for n, t in zip(names, tokens, strict=True)}
        size = int(row.get("bytes", 1))
        if size == 0:
            zero += 1
            continue
        found.points.setdefault(np_, []).append(_point(
            op, size, element, row["t_avg[usec]"], row.get("t_min[usec]"),
            row.get("t_max[usec]"), int(row.get("repetitions", 0)), 0, 0))
    return zero


def _imb(path: Path, lines: list[str]) -> _Found:
    version = next((m.group(1) for line in lines[:40]
                    if (m := re.search(r"Intel\(R\) MPI Benchmarks\s+([\d.]+)", line))), None)
    found = _Found("IMB-MPI1", version)
    red = next((r.group(1) for line in lines[:60] if (r := _IMB_RED_TYPE.match(line))),
               "MPI_FLOAT")
    skipped, zero = [], 0
    for i, line in enumerate(lines):
        m = _IMB_SECTION.match(line)
        if m and m.group(1) in _IMB_OPS:
            zero += _imb_section(path, lines, i, m.group(1), found, _ELEMENT.get(red))
        elif m:
            skipped.append(m.group(1))
    if skipped:
        found.notes.append(f"IMB benchmarks not collectives read here: {', '.join(skipped)}")
    if zero:
        found.notes.append("the rows of 0 bytes are left out")
    if not found.points:
        raise ResultFormatError(f"{path}: IMB output without a collective beoperf reads")
    return found


def read(path: Path, np_: int | None = None) -> _Found:
    """One OSU or IMB collective output (ResultFormatError: one line naming the file)."""
    lines = _read_text(path).splitlines()
    if any(_OSU_TITLE.match(line) for line in lines):
        return _osu(path, lines, np_)
    if any(_IMB_SECTION.match(line) for line in lines):
        return _imb(path, lines)
    raise ResultFormatError(f"{path}: not an OSU collective or IMB-MPI1 output")


def series_of(path: Path, found: _Found) -> list[Series]:
    out = []
    for np_, points in sorted(found.points.items()):
        launch: JsonObject = {"started_by": "imported", "file": str(path),
                              "tool": found.tool, "version": found.version,
                              "notes": list(found.notes)}
        out.append(Series(ranks_per_node=0, np=np_, nodes=[], ranks=[], launch=launch, mpi={},
                          transport=None, environment=None, warnings=[],
                          collectives=points))
    return out


def import_files(paths: list[Path], np_: int | None, label: str | None,
                 command_line: list[str]) -> Document:
    """The files as one cluster-coll document (one series per file and process count)."""
    series = [s for p in paths for s in series_of(p, read(p, np_))]
    ops = list(dict.fromkeys(p.op for s in series for p in s.collectives or []))
    sizes = sorted({p.size for s in series for p in s.collectives or []})
    tools = sorted({str(s.launch["tool"]) for s in series})
    sync = "; ".join(SYNC["osu" if t.startswith("OSU") else "imb"] for t in tools)
    run = MpiRun(COLL_KIND, label or "imported", series,
                 CollSettings(ops, sizes, 0, False, sync, STATISTIC))
    return run.to_document(make_meta(command_line, imported=[str(p) for p in paths]))

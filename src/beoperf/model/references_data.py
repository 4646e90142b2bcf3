"""Reference systems: published HPCC figures to put beside a run.

A reference *system* has a name, a description and one or more *points*: a process
count (None when the source does not say) and figures keyed by HPCC summary key, in the
key's own unit (HPL_Tflops in TFLOP/s, latencies in us ...).

Sources, all read bounded and validated (a reference file may be crafted):

- the files shipped in ``beoperf/model/references/`` (the 2007 evaluation's Table 3 and
  Table 4: see the README there), found by :func:`built_in`;
- a user's CSV file in the same layout (:func:`read_csv`): header ``metric,unit,COLUMN...``,
  each COLUMN ``NAME (DESCRIPTION; N procs)`` or ``npN`` (one system, named after the
  file, at N processes); a metric is an HPCC key or its short name (HPL, MPIFFT ...), its
  unit one ``beoperf.units`` knows and of the same kind as the key's (GFLOPS for a
  GFLOP/s key), each figure finite and positive, or empty;
- a beoperf cluster or scaling document (:func:`from_document`): its run or its points'
  means.

Points of one name merge into one system (Medusa is at 12 processes in Table 4 and at 2, 6
and 12 in Table 3); the same count twice keeps the first.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from beoperf import safeio, units
from beoperf.model import hpcc

MAX_BYTES = 1024 * 1024
MAX_COLUMNS = 64
MAX_ROWS = 1000
MAX_CELL = 200
# (file, the system its npN columns belong to, that system's description)
BUILT_IN = (("hpcc-systems.csv", None, None),
            ("hpcc-medusa-scaling.csv", "Medusa", "Opteron; 100 Mbit Ethernet"))
_PROCS = re.compile(r"(\d+)\s*procs?\b")
_NP = re.compile(r"np(\d+)", re.IGNORECASE)
_NAME = re.compile(r"\s*([^()]+?)\s*(?:\((.*)\))?\s*")


class ReferenceError(ValueError):
    """A reference file or name that cannot be used; the message names it and says why."""


@dataclass
class Point:
    np: int | None
    metrics: dict[str, float]


@dataclass
class System:
    name: str
    description: str
    source: str
    points: list[Point] = field(default_factory=list)

    def point_near(self, np_: int | None) -> Point:
        """The point at ``np_`` processes if there is one, else the largest count."""
        for point in self.points:
            if np_ is not None and point.np == np_:
                return point
        return max(self.points, key=lambda p: p.np or 0)


def _column(header: str, file_system: str | None, file_description: str,
            source: str) -> tuple[str, str, int | None]:
    """(system name, description, process count) of one column header."""
    text = header.strip()
    found = _NP.fullmatch(text)
    if found:
        if not file_system:
            raise ReferenceError(f"{source}: column {text!r} names no system")
        return file_system, file_description, int(found.group(1))
    match = _NAME.fullmatch(text)
    if not match or not match.group(1):
        raise ReferenceError(f"{source}: column {text!r} is not 'NAME (DESCRIPTION; N procs)' "
                             "or 'npN'")
    description = match.group(2) or ""
    procs = _PROCS.search(description)
    if procs:  # the count belongs to the point, not to the system
        description = "; ".join(p.strip() for p in description.split(";")
                                if not _PROCS.search(p))
    return match.group(1), description, int(procs.group(1)) if procs else None


def _figure(cell: str, source: str, line: int) -> float | None:
    text = cell.strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ReferenceError(f"{source}: line {line}: {text[:40]!r} is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise ReferenceError(f"{source}: line {line}: {text[:40]!r} must be finite and above 0")
    return value


def _metric(name: str, unit: str, source: str, line: int) -> tuple[str, str]:
    """(HPCC key, the unit the file uses) of one row, checked against each other."""
    key = hpcc.key_of(name)
    if key is None:
        raise ReferenceError(f"{source}: line {line}: {name[:60]!r} is not an HPCC summary "
                             "key or its short name (HPL, PTRANS, MPIFFT, StarSTREAM_Triad ...)")
    want = hpcc.info(key).unit
    try:
        units.convert(1.0, unit, want)
    except (ValueError, KeyError):
        raise ReferenceError(f"{source}: line {line}: unit {unit[:20]!r} does not fit {key} "
                             f"(in {want})") from None
    return key, unit


def _rows(text: str, source: str) -> list[list[str]]:
    """The CSV's rows; a line may end in LF, CRLF or a bare CR (an old Mac's files),
    and what the csv module refuses is a ReferenceError naming the line, not a traceback."""
    rows: list[list[str]] = []
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        for row in reader:
            _check_row(row, rows, source)
    except csv.Error as exc:
        raise ReferenceError(f"{source}: line {reader.line_num}: not CSV ({exc})") from None
    if not rows:
        raise ReferenceError(f"{source}: empty file")
    return rows


def _check_row(row: list[str], rows: list[list[str]], source: str) -> None:
    if len(rows) >= MAX_ROWS:
        raise ReferenceError(f"{source}: over {MAX_ROWS} rows")
    if any(len(cell) > MAX_CELL for cell in row):
        raise ReferenceError(f"{source}: line {len(rows) + 1}: a cell over {MAX_CELL} "
                             "characters")
    if row and not (len(row) == 1 and not row[0].strip()):
        rows.append(row)


def parse_csv(text: str, source: str, system: str | None = None,
              description: str = "") -> list[System]:
    """The systems of a reference CSV (see the module's docstring)."""
    rows = _rows(text, source)
    header = [c.strip() for c in rows[0]]
    if len(header) < 3 or [h.lower() for h in header[:2]] != ["metric", "unit"]:
        raise ReferenceError(f"{source}: the header must be 'metric,unit,SYSTEM...'")
    if len(header) > MAX_COLUMNS:
        raise ReferenceError(f"{source}: over {MAX_COLUMNS} columns")
    columns = [_column(h, system, description, source) for h in header[2:]]
    points = [Point(np_, {}) for _, _, np_ in columns]
    for line, row in enumerate(rows[1:], 2):
        if len(row) != len(header):
            raise ReferenceError(f"{source}: line {line}: {len(row)} cells, the header has "
                                 f"{len(header)}")
        key, unit = _metric(row[0], row[1], source, line)
        for point, cell in zip(points, row[2:], strict=True):
            value = _figure(cell, source, line)
            if value is not None:
                point.metrics[key] = units.convert(value, unit, hpcc.info(key).unit)
    systems: dict[str, System] = {}
    for (name, desc, _), point in zip(columns, points, strict=True):
        found = systems.setdefault(name, System(name, desc, source))
        found.points.append(point)
    return list(systems.values())


def read_csv(path: str | Path) -> list[System]:
    """A user's reference CSV, read bounded; its npN columns name the file's stem."""
    text = safeio.read_text(path, MAX_BYTES, "a reference file")
    return parse_csv(text, str(path), system=Path(path).stem)


def built_in() -> list[System]:
    """The reference systems beoperf ships (merged by name)."""
    found: list[System] = []
    for name, system, description in BUILT_IN:
        text = resources.files("beoperf.model").joinpath("references", name).read_text(
            encoding="utf-8")
        found.extend(parse_csv(text, f"built-in {name}", system, description or ""))
    return merge(found)


def merge(systems: list[System]) -> list[System]:
    """One system per name (case-insensitive), its points ordered by process count."""
    out: dict[str, System] = {}
    for system in systems:
        kept = out.setdefault(system.name.lower(), System(system.name, system.description,
                                                          system.source))
        if not kept.description:
            kept.description = system.description
        for point in system.points:
            if all(p.np != point.np or point.np is None for p in kept.points):
                kept.points.append(point)
    for system in out.values():
        system.points.sort(key=lambda p: (p.np is None, p.np or 0))
    return list(out.values())


def find(systems: list[System], name: str) -> System:
    """The system called ``name`` (any case; or the one whose name starts with it)."""
    wanted = name.strip().lower()
    exact = [s for s in systems if s.name.lower() == wanted]
    if exact:
        return exact[0]
    starts = [s for s in systems if s.name.lower().startswith(wanted)] if wanted else []
    if len(starts) == 1:
        return starts[0]
    known = ", ".join(s.name for s in systems)
    what = "matches several" if starts else "is not a reference system"
    raise ReferenceError(f"--reference {name!r} {what} (known: {known})")


def from_document(kind: str, body: dict, source: str) -> System:
    """A beoperf cluster or scaling document as a reference system (its label names it)."""
    name = str(body.get("label") or Path(source).stem)
    if kind == "cluster":
        figures = {k: float(e["value"]) for k, e in body["metrics"].items()
                   if isinstance(e.get("value"), int | float) and k in hpcc.KEYS
                   and not isinstance(e.get("value"), bool) and e["value"] > 0}
        return System(name, f"beoperf run {body.get('label', '')}".strip(), source,
                      [Point(body.get("np") or None, figures)])
    if kind == "scaling":
        series = body["points"][0]["series"] if body["points"] else ""
        points = [Point(p["np"], {k: s["mean"] for k, s in p["metrics"].items()
                                  if k in hpcc.KEYS})
                  for p in body["points"] if p["series"] == series and p["metrics"]]
        return System(name, "beoperf scaling study", source, points)
    raise ReferenceError(f"{source}: a {kind} document is not a reference (give a cluster "
                         "or scaling document, or a CSV)")

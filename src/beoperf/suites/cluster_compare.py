"""`beoperf compare` of HPCC results: runs and reference systems side by side, per metric,
with the ratio of the first (the baseline) to each of the others.

A column is a cluster document (its run), a scaling document (its largest process count:
the means and standard deviations of the runs that passed), each run of an HPCC output
file, or a reference system (its point at the baseline's process count if it has one,
else its largest).  Ratios compare the means: baseline / column, so 0.01 reads "the
baseline reaches a hundredth of it" (for latencies, lower is better).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from beoperf import errors, safeio
from beoperf.analysis import effect
from beoperf.analysis.scaling import largest_point, ratio
from beoperf.model import cluster, document, hpcc
from beoperf.model.document import Document, DocumentError, make_meta
from beoperf.suites.cluster_import import read_runs
from beoperf.suites.cluster_refs import systems_for

STATEMENT = ("ratio = the baseline (first column) / the column, of the means; HPCC's units "
             "(GB/s = 10^9 B/s, GUP/s = 10^9 updates/s); latency: lower is better; verdict: "
             "the column against the baseline, each run one replicate, the spread between "
             "runs from the runs' standard deviations or 10%, all metrics one family "
             "(docs/STATISTICS.md)")
SNIFF_BYTES = 4096


@dataclass(frozen=True)
class Spec:
    files: tuple[str, ...]
    labels: tuple[str, ...] | None = None
    references: tuple[str, ...] = ()
    reference_files: tuple[str, ...] = ()
    command_line: tuple[str, ...] = ()


@dataclass
class Column:
    label: str
    np: int | None
    kind: str
    source: str
    runs: int | None
    values: dict[str, float]
    stdevs: dict[str, float]


def _head(path: str) -> bytes:
    try:
        return safeio.read_bytes(path, safeio.LIMITS["result"], "a result")[:SNIFF_BYTES * 16]
    except safeio.FileInputError as exc:
        raise errors.InputError(str(exc)) from None


def is_hpcc(path: str) -> bool:
    """Whether a result file is HPCC's: its output, or a cluster or scaling document (a
    file that is neither is left to the ping-pong comparison, which says what it is)."""
    head = _head(path)
    if head.lstrip().startswith(b"{"):
        try:
            return document.load(path).kind in ("cluster", "scaling")
        except DocumentError:
            return False
    return hpcc.BEGIN.encode() in head or b"HPC Challenge" in head


def _doc_column(doc: Document, source: str) -> Column:
    if doc.kind == "cluster":
        run = cluster.ClusterRun.from_document(doc)
        values = {k: v for k in run.metrics if (v := run.number(k)) is not None}
        return Column(run.label, run.np or None, "run", source,
                      1 if run.status == "ok" else 0, values, {})
    if doc.kind == "scaling":
        study = cluster.ScalingStudy.from_document(doc)
        point = largest_point(study)
        if point is None:
            raise errors.InputError(f"{source}: no run of this study passed")
        return Column(f"{study.label} (np {point.np})", point.np, "run", source,
                      point.runs, {k: s.mean for k, s in point.metrics.items()},
                      {k: s.stdev for k, s in point.metrics.items() if s.stdev is not None})
    raise errors.InputError(f"{source}: a {doc.kind} document; compare HPCC results with "
                            "HPCC results")


def columns_of(path: str) -> list[Column]:
    """The columns one file gives (an HPCC output file: one per run in it)."""
    if _head(path).lstrip().startswith(b"{"):
        try:
            return [_doc_column(document.load(path), path)]
        except DocumentError as exc:
            raise errors.InputError(str(exc)) from None
    runs, _ = read_runs(path)
    stem = Path(path).stem if Path(path).name != "hpccoutf.txt" else Path(path).parent.name
    out = []
    for i, run in enumerate(runs, 1):
        body = cluster.cluster_body(run, label=stem if len(runs) == 1 else f"{stem}-run{i}",
                                    output=None, source="import")
        out.append(_doc_column(Document(cluster.CLUSTER_KIND, body), path))
    return out


def _verdict(columns: list[Column], values: list[float | None], key: str, i: int,
             family: int) -> effect.Effect | None:
    """Column i against the baseline on one metric (None where either has no figure or
    failed its checks)."""
    base, col = columns[0], columns[i]
    base_value, value = values[0], values[i]
    if base_value is None or value is None or 0 in (base.runs, col.runs):
        return None
    return effect.compare_summaries(
        (base_value, base.stdevs.get(key), base.runs or 1),
        (value, col.stdevs.get(key), col.runs or 1),
        higher_is_better=hpcc.info(key).role != "latency", family=family)


def _rows(columns: list[Column]) -> list[cluster.HpccRow]:
    present = {k for c in columns for k in c.values}
    keys = [k for k in hpcc.performance_keys() if k in present]
    rows = []
    for key in keys:
        values = [c.values.get(key) for c in columns]
        values = [v if v is None or not (v < 0) else None for v in values]  # HPCC's -1
        tests = [None, *(_verdict(columns, values, key, i, len(keys))
                         for i in range(1, len(columns)))]
        rows.append(cluster.HpccRow(
            metric=key, unit=hpcc.info(key).unit, role=hpcc.info(key).role, values=values,
            stdevs=[c.stdevs.get(key) for c in columns],
            ratios=[None, *(ratio(values[0], v) for v in values[1:])],
            verdicts=[t.verdict if t else None for t in tests],
            intervals=[list(p) if t is not None and (p := t.interval_pct()) is not None
                       else None for t in tests]))
    return rows


def run(spec: Spec) -> Document:
    if spec.labels is not None and len(spec.labels) != len(spec.files):
        raise errors.BadSpec(f"{len(spec.labels)} --label for {len(spec.files)} file(s)")
    columns: list[Column] = []
    for i, path in enumerate(spec.files):
        found = columns_of(path)
        if spec.labels is not None:
            for column in found:
                column.label = spec.labels[i]
        columns.extend(found)
    if not columns:
        raise errors.BadSpec("nothing to compare")
    np_ = columns[0].np
    for system in systems_for(spec.references, spec.reference_files):
        point = system.point_near(np_)
        columns.append(Column(system.name, point.np, "reference", system.source, None,
                              dict(point.metrics), {}))
    body = cluster.HpccComparison(
        [cluster.HpccColumn(c.label, c.np, c.kind, c.source, c.runs) for c in columns],
        _rows(columns), STATEMENT).body()
    return Document(cluster.COMPARISON_KIND, body, make_meta(list(spec.command_line)))

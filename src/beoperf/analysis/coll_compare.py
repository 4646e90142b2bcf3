"""Collectives compared across runs, MPI libraries and process counts (`beoperf compare`
of cluster-coll documents): every series of every file is a column, the first the
baseline; a row is a (collective, size) that every column measured; each cell is the
column's t_avg and its verdict against the baseline's from analysis/effect.py (each
series one run, one replicate: the spread between runs the stated default unless runs
given the same label repeat a column; the figures' own 95% intervals as the
uncertainty inside a run; every cell of the table one family, Bonferroni; lower is
better).  An imported figure has no interval: its verdict rests on the spread between
runs alone.

Two series measured with other process counts are compared all the same (that is the
point of comparing them: how t_avg grows with the ranks); the columns' labels say
which MPI, how many ranks and where they came from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from beoperf.analysis import effect
from beoperf.model.cluster_mpi import CollPoint, Series

STATEMENT = ("t_avg in us; verdict of each column against the first (the baseline), lower "
             "is better: each series one run, the spread between runs from repeated runs "
             "(columns given the same label) or the default 10%, the runs' own 95% "
             "intervals inside them, every cell of the table one family "
             "(docs/STATISTICS.md)")


@dataclass
class Column:
    """A label and its runs (one series each; several when labels repeat)."""

    label: str
    runs: list[Series]


@dataclass
class Row:
    """A (collective, size) every column has: each column's t_avg (s, the mean of its
    runs' medians) and its effect against the baseline (None for the baseline)."""

    op: str
    size: int
    values: list[float]
    effects: list[effect.Effect | None]


def columns_of(named: Sequence[tuple[str, Series]]) -> list[Column]:
    """Series with the same label are one column's repeated runs, in first-seen order."""
    out: dict[str, Column] = {}
    for label, series in named:
        out.setdefault(label, Column(label, [])).runs.append(series)
    return list(out.values())


def _points(column: Column) -> dict[tuple[str, int], list[CollPoint]]:
    found: dict[tuple[str, int], list[CollPoint]] = {}
    for s in column.runs:
        for p in s.collectives or []:
            found.setdefault((p.op, p.size), []).append(p)
    return found


def _replicates(points: list[CollPoint]) -> list[effect.Replicate]:
    return [effect.Replicate(p.t_avg_s.median,
                             effect.log_sd_from_interval(p.t_avg_s.ci_low, p.t_avg_s.ci_high))
            for p in points]


def compare(columns: Sequence[Column], margin: float = effect.DEFAULT_MARGIN
            ) -> tuple[list[Row], list[tuple[str, int]]]:
    """The rows every column has, and the (collective, size) some column lacks."""
    by_column = [_points(c) for c in columns]
    keys = [k for k in by_column[0] if all(k in b for b in by_column[1:])] if by_column else []
    missing = sorted({k for b in by_column for k in b} - set(keys))
    family = max(1, len(keys) * (len(columns) - 1))
    rows = []
    for op, size in keys:
        reps = [_replicates(b[(op, size)]) for b in by_column]
        values = [sum(r.value for r in side) / len(side) for side in reps]
        effects: list[effect.Effect | None] = [None]
        effects += [effect.compare(reps[0], side, higher_is_better=False, family=family,
                                   margin=margin) for side in reps[1:]]
        rows.append(Row(op, size, values, effects))
    return rows, missing

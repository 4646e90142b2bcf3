"""A scaling study from HPCC runs: statistics per process count, speedup, parallel
efficiency, the metrics that stopped scaling, and reference systems beside it.

Runs are grouped by *series* (one ranks-per-node setting: "1 per node", "2 per node",
"spread" ...) and process count.  Only runs that passed (Success=1, HPL's residual
check) count; the others are listed with their reasons and left out.  Per point, every
numeric summary key gets the mean, the sample standard deviation (n - 1; null for one
run), minimum and maximum.

Against the series' smallest process count p0 (figure m0), at p processes (figure m),
for the performance keys (their role: beoperf.model.hpcc):

==============  ====================  ========================  =========================
role            ideal                 speedup                   parallel efficiency
==============  ====================  ========================  =========================
aggregate       m = m0 p / p0         m / m0                    (m / m0) / (p / p0)
per-process     m = m0                (m p) / (m0 p0)           m / m0
single          m = m0                (not defined)             m / m0
latency         m = m0                (not defined)             m0 / m
==============  ====================  ========================  =========================

A metric *stopped scaling* at p (from the count q before it in its series) when

- aggregate: the step from q to p gained less than STEP_GAIN (half) of the ideal gain:
  (m_p / m_q - 1) / (p / q - 1) < STEP_GAIN;
- per-process, single, latency: its efficiency against p0 fell below EFFICIENCY (three
  quarters: a quarter of the per-process figure lost).

Only the first count where that happens is named, per metric and series.  The rules
read the means; the spread is in the table beside them.

p is the metric's *own* process count, as HPCC reports it (hpcc.OWN_PROCESSES): HPL and
PTRANS on their P x Q grid, MPI FFT on MPIFFT_Procs, every other figure on the job's
CommWorldProcs.  HPL on a 1 x 1 grid inside a 4-process job is a 1-process figure: a
step between two counts of the job where the metric's own count did not grow is no
scaling step and is not judged.  A count of the series where a metric has no figure (it
was not measured, or no run passed there) is skipped: the step is judged from the last
count that has one, and the verdict names the counts between.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

from beoperf.model import hpcc
from beoperf.model.cluster import (
    ClusterRun,
    ReferencePoint,
    Rules,
    RunRow,
    ScalingPoint,
    ScalingStudy,
    Stopped,
    Summary,
)
from beoperf.model.document import JsonObject
from beoperf.model.references_data import System

SENTINEL_ROLES = (*hpcc.PERFORMANCE, "time")  # where HPCC's -1 means "not measured"
STEP_GAIN = 0.5
EFFICIENCY = 0.75
RULES_STATEMENT = (
    f"aggregate metrics (HPL, PTRANS, MPI FFT, MPI RandomAccess) stopped scaling where a "
    f"step to more processes gained less than {STEP_GAIN:g} of the ideal (linear) gain; "
    f"per-process, single-process and latency metrics where they kept less than "
    f"{EFFICIENCY:g} of their figure at the smallest count (latency: the inverse); "
    f"each by the processes the figure ran on (HPL and PTRANS: their P x Q grid, MPI FFT: "
    f"MPIFFT_Procs, the others: the job's), a count without the figure named and skipped")


@dataclass(frozen=True)
class RunRef:
    """A run's document body and the file it was written to (None: not written)."""

    body: JsonObject
    document: str | None = None

    @cached_property
    def run(self) -> ClusterRun:
        """The body, typed (a value of the wrong type: DocumentError)."""
        return ClusterRun.from_body(self.body)


def stat(values: Sequence[float]) -> Summary:
    """Mean, sample standard deviation (None below 2 values), min, max, n."""
    return Summary(mean=statistics.fmean(values),
                   stdev=statistics.stdev(values) if len(values) > 1 else None,
                   min=min(values), max=max(values), n=len(values))


def _point_stats(runs: list[ClusterRun]) -> dict[str, Summary]:
    """Statistics of every numeric key but the build's (sizeof, machine constants: the
    same in every run of one binary, and near the limits of a double).  A negative
    performance figure or time is HPCC's "not measured" (-1: no pairs for ping-pong at
    one process, a test that did not run) and is left out."""
    keys: list[str] = []
    for run in runs:
        keys.extend(k for k in run.metrics if k not in keys)
    out = {}
    for key in keys:
        role = hpcc.info(key).role
        values = [v for v in (r.number(key) for r in runs)
                  if v is not None and not (v < 0 and role in SENTINEL_ROLES)]
        if not values or role == "build":
            continue
        try:
            found = stat(values)
        except OverflowError:
            continue
        if all(math.isfinite(v) for v in (found.mean, found.stdev or 0.0)):
            out[key] = found
    return out


def ratios(role: str, m: float, m0: float, p: int, p0: int) -> tuple[float | None, float | None]:
    """(speedup, efficiency) of figure m at p processes against m0 at p0 (table above);
    None where it is not defined or not a finite number (1e308 against 1e-300 overflows,
    and a document holds no infinity)."""
    if not (m0 > 0 and m > 0):
        return None, None
    speedup, efficiency = _ratios(role, m, m0, p, p0)
    return _finite(speedup), _finite(efficiency)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _ratios(role: str, m: float, m0: float, p: int, p0: int) -> tuple[float | None, float | None]:
    if role == "aggregate":
        return m / m0, (m / m0) / (p / p0)
    if role == "per-process":
        return (m * p) / (m0 * p0), m / m0
    if role == "single":
        return None, m / m0
    if role == "latency":
        return None, m0 / m
    return None, None


def _single_value(values: Iterable[int | None]) -> int | None:
    found = {v for v in values}
    return found.pop() if len(found) == 1 else None


def _points(refs: list[RunRef]) -> list[ScalingPoint]:
    groups: dict[tuple[str, int], list[ClusterRun]] = {}
    for ref in refs:
        groups.setdefault((ref.run.series, ref.run.np), []).append(ref.run)
    points = []
    for (series, np_), runs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        ok = [r for r in runs if r.status == "ok"]
        nodes = _single_value(len(r.nodes) if r.nodes else None for r in runs)
        points.append(ScalingPoint(
            series=series, np=np_,
            ranks_per_node=_single_value(r.ranks_per_node for r in runs), nodes=nodes,
            runs=len(ok), failed=len(runs) - len(ok), metrics=_point_stats(ok)))
    return points


def base_point(chain: list[ScalingPoint], key: str) -> ScalingPoint | None:
    """The smallest count of a series that measured ``key`` (ping-pong and ring figures
    need two processes: a study from one process compares them from two)."""
    return next((p for p in chain if key in p.metrics), None)


def chain_of(points: list[ScalingPoint], series: str) -> list[ScalingPoint]:
    """A series' points that have runs that passed, in the stored order."""
    return [p for p in points if p.series == series and p.runs > 0]


def own_processes(point: ScalingPoint, key: str) -> int | None:
    """The processes ``key``'s figure at this point ran on, as HPCC reports them (HPL's
    P x Q, PTRANS's, MPIFFT_Procs: hpcc.OWN_PROCESSES), else the job's count; None when
    the runs of the point disagree or report no positive count."""
    factors = hpcc.OWN_PROCESSES.get(key)
    if factors is None or not all(f in point.metrics for f in factors):
        return point.np
    count = 1
    for factor in factors:
        st = point.metrics[factor]
        if st.min != st.max or not st.min >= 1 or not float(st.min).is_integer():
            return None
        count *= int(st.min)
    return count


def _relative(points: list[ScalingPoint]) -> None:
    """Speedup and efficiency of each point against its series' smallest count that
    measured the metric, by the metric's own process counts."""
    for series in {p.series for p in points}:
        chain = chain_of(points, series)
        for key in hpcc.performance_keys():
            base = base_point(chain, key)
            if base is None:
                continue
            role, p0 = hpcc.info(key).role, own_processes(base, key)
            for point in chain[chain.index(base):]:
                st, p = point.metrics.get(key), own_processes(point, key)
                if st is None or p is None or p0 is None:
                    continue
                speedup, efficiency = ratios(role, st.mean, base.metrics[key].mean, p, p0)
                point.speedup[key] = speedup
                point.efficiency[key] = efficiency


def processes(n: int) -> str:
    """'1 process', '12 processes'."""
    return f"{n} process" + ("es" if n != 1 else "")


def _counts_text(key: str, before: ScalingPoint, point: ScalingPoint, q: int, p: int) -> str:
    """'2 -> 4 processes', or, when the metric ran on a part of the job, its own counts
    and where they come from."""
    if (q, p) == (before.np, point.np):
        return f"{before.np} -> {point.np} processes"
    return (f"{hpcc.short_name(key)} on {q} -> {p} processes ({hpcc.own_count_name(key)}; "
            f"the job's {before.np} -> {point.np})")


def _gap_text(series_points: list[ScalingPoint], before: ScalingPoint,
              point: ScalingPoint) -> str:
    """'; no figure at np 4, 8' for the counts of the series between two that have one."""
    between = [p.np for p in series_points if before.np < p.np < point.np]
    return f"; no figure at np {', '.join(map(str, between))}" if between else ""


def _aggregate_step(key: str, before: ScalingPoint, point: ScalingPoint,
                    series_points: list[ScalingPoint]) -> Stopped | None:
    """The step from ``before`` to ``point`` if it gained less than STEP_GAIN of the
    ideal, by the metric's own counts (not judged when that count did not grow)."""
    q, p = own_processes(before, key), own_processes(point, key)
    m, m_before = point.metrics[key].mean, before.metrics[key].mean
    if q is None or p is None or not p > q or not m_before > 0:
        return None
    gain = (m / m_before - 1) / (p / q - 1)
    if gain >= STEP_GAIN:
        return None
    return Stopped(key, point.series, point.np, before.np, point.efficiency.get(key), gain,
                   f"{_counts_text(key, before, point, q, p)}: x{m / m_before:.3g} (ideal "
                   f"x{p / q:.3g}){_gap_text(series_points, before, point)}")


def _stopped_in(chain: list[ScalingPoint], key: str, role: str,
                series_points: list[ScalingPoint] | None = None) -> Stopped | None:
    """The first count of the chain where ``key`` stopped scaling: each count with a
    figure against the last one before it that has a figure (a count without one, in
    ``series_points`` or the chain, is named, never a reason to skip the step)."""
    measured = [p for p in chain if key in p.metrics]
    around = series_points if series_points is not None else chain
    for before, point in zip(measured, measured[1:], strict=False):
        if role == "aggregate":
            hit = _aggregate_step(key, before, point, around)
            if hit:
                return hit
            continue
        efficiency = point.efficiency.get(key)
        if efficiency is not None and efficiency < EFFICIENCY:
            base = measured[0]
            kept = "kept" if role != "latency" else "kept (latency: inverse)"
            return Stopped(key, point.series, point.np, base.np, efficiency, None,
                           f"{kept} {efficiency:.0%} of its figure at {processes(base.np)}"
                           f"{_gap_text(around, before, point)}")
    return None


def stopped_scaling(points: list[ScalingPoint]) -> list[Stopped]:
    """The first count at which each performance metric stopped scaling, per series."""
    found = []
    for series in sorted({p.series for p in points}):
        chain = chain_of(points, series)
        mine = [p for p in points if p.series == series]
        for key in hpcc.performance_keys():
            hit = _stopped_in(chain, key, hpcc.info(key).role, mine)
            if hit:
                found.append(hit)
    return found


def _run_row(ref: RunRef) -> RunRow:
    r = ref.run
    return RunRow(document=ref.document, label=r.label, series=r.series, np=r.np,
                  ranks_per_node=r.ranks_per_node, repeat=r.repeat, status=r.status,
                  failures=list(r.failures), elapsed_s=r.elapsed_s)


def reference_points(systems: Sequence[System]) -> list[ReferencePoint]:
    """Every point of each reference system (tables use the one nearest the run's count,
    plots all of them)."""
    return [ReferencePoint(name=system.name, description=system.description, np=point.np,
                           source=system.source, metrics=dict(point.metrics))
            for system in systems for point in system.points]


def reference_rows(systems: Sequence[System]) -> list[JsonObject]:
    """reference_points as a scaling document stores them."""
    return [r.to_dict() for r in reference_points(systems)]


MAX_NAMED = 6  # hosts or versions named in one warning


def _printable(text: str) -> str:
    """A name read from a file, safe to print (control characters as '?')."""
    return "".join(c if c.isprintable() else "?" for c in text)


def _pooled(series: str, what: str, found: dict[str, set[int]]) -> str | None:
    """The warning for one series whose runs name several values of ``what``."""
    if len(found) < 2:
        return None
    named = [f"{_printable(name)} (np {', '.join(map(str, sorted(counts)))})"
             for name, counts in sorted(found.items())]
    more = len(named) - MAX_NAMED
    shown = "; ".join(named[:MAX_NAMED]) + (f"; and {more} more" if more > 0 else "")
    return (f"series {_printable(series)}: runs of {len(found)} {what} pooled in one "
            f"series: {shown}; its speedups and stopped-scaling verdicts compare them")


def pooled_warnings(runs: list[RunRef]) -> list[str]:
    """Per series, a warning when its runs name more than one host (HPCC's Hostname: the
    host of rank 0) or HPCC version, naming each with its process counts.  The runs are
    kept in their series (rank 0's host may differ between runs on one cluster, and a
    series may be meant to compare versions): the warning says what the figures mix."""
    out = []
    for series in sorted({r.run.series for r in runs}):
        mine = [r.run for r in runs if r.run.series == series]
        for what, names in (("hosts", [r.hpcc.hostname for r in mine]),
                            ("HPCC versions", [r.hpcc.version for r in mine])):
            found: dict[str, set[int]] = {}
            for run, name in zip(mine, names, strict=True):
                if name is not None:
                    found.setdefault(name, set()).add(run.np)
            warning = _pooled(series, what, found)
            if warning:
                out.append(warning)
    return out


def mixed_count_warnings(points: list[ScalingPoint]) -> list[str]:
    """A warning per point and figure whose runs ran it on different process counts (HPL
    on a 1 x 1 grid in one run, 2 x 2 in another): its mean is shown, never scaled."""
    out = []
    for point in points:
        for key, factors in hpcc.OWN_PROCESSES.items():
            if key not in point.metrics or own_processes(point, key) is not None:
                continue
            ranges = ", ".join(f"{f} {_span(point.metrics.get(f))}" for f in factors)
            out.append(f"series {_printable(point.series)}, np {point.np}: "
                       f"{hpcc.short_name(key)} ran on different process counts in its runs "
                       f"({ranges}): its mean mixes them and is not scaled")
    return out


def mixed_size_warnings(points: list[ScalingPoint]) -> list[str]:
    """A warning per point and HPCC test whose runs ran it at different problem sizes
    (HPL_N 10000 in one run, 80000 in another): a mean over them is no figure of one
    problem, so the warning names the sizes; each run's own figure stays in the run rows."""
    out = []
    for point in points:
        for test, size_key in hpcc.TEST_SIZES.items():
            size = point.metrics.get(size_key)
            if size is None or size.min == size.max:
                continue
            out.append(f"series {_printable(point.series)}, np {point.np}: {test} ran at "
                       f"different problem sizes in its runs ({size_key} {_span(size)}): "
                       f"its mean mixes them")
    return out


def _span(st: Summary | None) -> str:
    return "?" if st is None else f"{st.min:g}" if st.min == st.max else f"{st.min:g}..{st.max:g}"


def study(runs: list[RunRef], label: str, systems: Sequence[System] = ()) -> ScalingStudy:
    """The scaling study from run documents (any order)."""
    points = _points(runs)
    _relative(points)
    keys = {k for r in runs for k in r.run.metrics}
    return ScalingStudy(label=label, runs=[_run_row(r) for r in runs], points=points,
                        units={k: hpcc.info(k).unit for k in sorted(keys)},
                        roles={k: hpcc.info(k).role for k in sorted(keys)},
                        stopped_scaling=stopped_scaling(points),
                        rules=Rules(STEP_GAIN, EFFICIENCY, RULES_STATEMENT),
                        references=reference_points(systems),
                        warnings=(pooled_warnings(runs) + mixed_count_warnings(points)
                                  + mixed_size_warnings(points)))


def scaling_body(runs: list[RunRef], label: str,
                 systems: Sequence[System] = ()) -> JsonObject:
    """The scaling document's body from run documents (any order)."""
    return study(runs, label, systems).body()


# --------------------------------------------------------------------------- references


def ratio(ours: float | None, theirs: float | None) -> float | None:
    """ours / theirs (None when either is missing or not positive)."""
    if ours is None or theirs is None or not (ours > 0 and theirs > 0):
        return None
    value = ours / theirs
    return value if math.isfinite(value) else None


def nearest_reference(references: list[ReferencePoint], name: str,
                      np_: int | None) -> ReferencePoint | None:
    """A stored reference system's point at ``np_`` processes, else its largest count."""
    mine = [r for r in references if r.name == name]
    if not mine:
        return None
    same = [r for r in mine if np_ is not None and r.np == np_]
    return same[0] if same else max(mine, key=lambda r: r.np or 0)


def reference_names(references: list[ReferencePoint]) -> list[str]:
    return list(dict.fromkeys(r.name for r in references))


def largest_point(study: ScalingStudy, series: str | None = None) -> ScalingPoint | None:
    """The point with the most processes (of ``series``, else of any) that has runs."""
    points = [p for p in study.points if p.runs > 0
              and (series is None or p.series == series)]
    return max(points, key=lambda p: p.np) if points else None

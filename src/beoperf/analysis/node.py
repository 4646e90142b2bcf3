"""What node documents derive: the cache level of a loop length and the drop between
levels, a fleet's outlier nodes, and two or more node runs compared.

Outliers (``robust_z``): per metric, each node's figure (the median of its repetitions,
so that one disturbed repetition does not make a node an outlier) against the fleet's
median, in units
of the median absolute deviation scaled to a standard deviation (MAD / 0.6745, as
Iglewicz and Hoaglin's modified z-score).  A node is an outlier when |z| > ``threshold``
(3.5, their recommendation).  The MAD is floored at ``MAD_FLOOR`` (5%) of the median: a
fleet of near-identical nodes has a tiny MAD, and without the floor a 1% difference from
noise on a shared machine would score as an outlier.  Every metric is a rate (higher is
better), so a low z is a slow node.

Comparison (``compare_rows``): for each metric present in the baseline, each
configuration's mean (the median over its runs; runs given the same label are repeated runs
of one configuration), its change in % and a verdict with the interval of the change
(beoperf.analysis.effect): each node run is one replicate of the machine's state, its
repetitions give the run's own uncertainty, the spread between runs comes from repeated
runs or the stated default; the metrics compared form one family (Bonferroni).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TypedDict

from beoperf.analysis import effect
from beoperf.analysis.effect import DEFAULT_MARGIN, Effect, Replicate
from beoperf.model.node import ComparisonRow, FleetMethod, FleetMetric, LevelRate, Metric, NodeRun

if TYPE_CHECKING:
    from beoperf.sysinfo.node import Cache

THRESHOLD = 3.5
MAD_FLOOR = 0.05
MAD_TO_SIGMA = 0.6745

DropRow = dict[str, str | float | None]  # kernel from to from_mflops to_mflops change_pct


# --------------------------------------------------------------------------- caches


def level_of(nbytes: int, caches: Sequence[Cache]) -> str:
    """The smallest data cache (sysfs cpu0: "L1", "L2", "L3") that holds ``nbytes``;
    "memory" past the largest, "unknown" without cache sizes."""
    data = sorted((c["level"], size) for c in caches
                   if c.get("type") != "Instruction" and (size := c.get("size")))
    if not data:
        return "unknown"
    for level, size in data:
        if nbytes <= size:
            return f"L{level}"
    return "memory"


def drops(rows: Sequence[LevelRate]) -> list[DropRow]:
    """For each kernel, the change of the median MFLOP/s from one cache level to the next
    (rows: kernel, length, level, mflops, in length order)."""
    out: list[DropRow] = []
    kernels = list(dict.fromkeys(r["kernel"] for r in rows))
    for kernel in kernels:
        levels: dict[str, list[float]] = {}
        for r in rows:
            if r["kernel"] == kernel:
                levels.setdefault(r["level"], []).append(r["mflops"])
        names = list(levels)
        for a, b in zip(names, names[1:], strict=False):
            before, after = statistics.median(levels[a]), statistics.median(levels[b])
            out.append({"kernel": kernel, "from": a, "to": b, "from_mflops": before,
                        "to_mflops": after,
                        "change_pct": (after - before) / before * 100.0 if before else None})
    return out


# --------------------------------------------------------------------------- fleets


class RobustZ(TypedDict):
    """A metric across a fleet: median, MAD, the scale of z, each node's z, the outliers."""

    median: float
    mad: float
    scale: float
    z: dict[str, float]
    outliers: list[str]


def robust_z(values: Mapping[str, float], threshold: float = THRESHOLD,
             floor: float = MAD_FLOOR) -> RobustZ:
    """Median, MAD, the scale used (max(MAD, floor x |median|) / 0.6745), each node's z
    and the nodes with |z| > threshold (lowest first)."""
    xs = list(values.values())
    median = statistics.median(xs)
    mad = statistics.median(abs(x - median) for x in xs)
    scale = max(mad, floor * abs(median)) / MAD_TO_SIGMA
    z = {node: (x - median) / scale if scale > 0 else 0.0 for node, x in values.items()}
    out = sorted((n for n, v in z.items() if abs(v) > threshold), key=lambda n: z[n])
    return {"median": median, "mad": mad, "scale": scale, "z": z, "outliers": out}


def fleet_metrics(per_node: Mapping[str, Mapping[str, Metric]],
                  threshold: float = THRESHOLD,
                  floor: float = MAD_FLOOR) -> list[FleetMetric]:
    """node -> metric id -> metric  =>  one entry per metric measured on at least three
    nodes (fewer have no median to stand against), with each node's figure (the median of
    its samples) and z."""
    ids: dict[str, str] = {}
    for metrics in per_node.values():
        for mid, m in metrics.items():
            ids.setdefault(mid, m.unit)
    out = []
    for mid, unit in ids.items():
        values = {node: float(statistics.median(ms[mid].samples))
                  for node, ms in per_node.items() if mid in ms}
        if len(values) < 3:
            continue
        out.append(FleetMetric(mid, unit, values, **robust_z(values, threshold, floor)))
    return out


def outlier_nodes(metrics: Sequence[FleetMetric]) -> dict[str, list[str]]:
    """node -> the metrics it is an outlier in."""
    found: dict[str, list[str]] = {}
    for m in metrics:
        for node in m.outliers:
            found.setdefault(node, []).append(m.id)
    return dict(sorted(found.items()))


def method(threshold: float = THRESHOLD, floor: float = MAD_FLOOR) -> FleetMethod:
    statement = (f"Outlier: |z| > {threshold:g}, z = (node's median - fleet median) / "
                 f"(max(MAD, {floor * 100:g}% of the median) / {MAD_TO_SIGMA}) per metric "
                 "(modified z-score, Iglewicz and Hoaglin); metrics measured on fewer than 3 "
                 "nodes are not judged.")
    return FleetMethod(threshold, floor, statement)


# --------------------------------------------------------------------------- comparing


def _replicate(metric: Metric) -> Replicate:
    samples = [float(v) for v in metric.samples]
    return Replicate(float(metric.mean), effect.mean_log_sd(samples))


def _groups(runs: Sequence[NodeRun], labels: Sequence[str],
            ) -> dict[str, list[dict[str, Metric]]]:
    """label -> the runs (each: metric id -> metric), in first-seen order."""
    found: dict[str, list[dict[str, Metric]]] = {}
    for run, label in zip(runs, labels, strict=True):
        found.setdefault(label, []).append({m.id: m for m in run.metrics})
    return found


def _column(runs: list[dict[str, Metric]], mid: str) -> list[Metric]:
    return [r[mid] for r in runs if mid in r]


def compare_rows(runs: Sequence[NodeRun], labels: Sequence[str],
                 baseline: str, margin: float = DEFAULT_MARGIN) -> list[ComparisonRow]:
    """One row per metric of the baseline: each configuration's mean (the median over its
    runs), change in %, its interval and verdict (None for the baseline itself; "missing"
    for a configuration without the metric)."""
    groups = _groups(runs, labels)
    base_runs = groups[baseline]
    ids = list(dict.fromkeys(mid for run in base_runs for mid in run))
    rows = []
    for mid in ids:
        base = _column(base_runs, mid)
        row = ComparisonRow(mid, base[0].unit)
        for label, found_runs in groups.items():
            found = _column(found_runs, mid)
            row.means.append(statistics.median(m.mean for m in found) if found else None)
            test = None if label == baseline or not found else effect.compare(
                [_replicate(m) for m in base], [_replicate(m) for m in found],
                higher_is_better=True, family=len(ids), margin=margin)
            _add(row, test, present=bool(found))
        rows.append(row)
    return rows


def _add(row: ComparisonRow, test: Effect | None, present: bool) -> None:
    row.changes.append(None if test is None else test.change_pct)
    interval = None if test is None else test.interval_pct()
    row.intervals.append(None if interval is None else list(interval))
    row.verdicts.append(test.verdict if test else (None if present else "missing"))


def describe_test(margin: float = DEFAULT_MARGIN) -> dict[str, str | float]:
    statement = ("Verdicts: each node run is one replicate; the ratio of the means with an "
                 "interval from each run's repetitions and the spread between runs "
                 "(repeated runs given one label, else "
                 f"{effect.DEFAULT_BETWEEN_SD:.0%}), all metrics as one family (Bonferroni); "
                 "better or worse: the interval excludes no change; no difference shown: it "
                 f"lies within +-{margin:.0%}; cannot tell: wider.  docs/STATISTICS.md.")
    return {"name": "ratio of run means, runs as replicates", "alpha": effect.ALPHA,
            "margin": margin, "default_between_sd": effect.DEFAULT_BETWEEN_SD,
            "correction": "Bonferroni over the metrics", "statement": statement}

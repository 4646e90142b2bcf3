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

Comparison (``compare_rows``): for each metric present in the baseline, each run's change
of the mean in % and whether it is significant: two-sided Mann-Whitney U over the
repetitions' samples (beoperf.analysis.compare.mann_whitney_u), p < 0.05 AND a change
larger than ``min_change``; with fewer than ``MIN_SAMPLES`` (4) samples on a side no
two-sided p below 0.05 exists, and the verdict is "too few samples".
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from beoperf.analysis.compare import ALPHA, mann_whitney_u

THRESHOLD = 3.5
MAD_FLOOR = 0.05
MAD_TO_SIGMA = 0.6745
MIN_SAMPLES = 4
DEFAULT_MIN_CHANGE = 0.02


# --------------------------------------------------------------------------- caches


def level_of(nbytes: int, caches: Sequence[Mapping[str, Any]]) -> str:
    """The smallest data cache (sysfs cpu0: "L1", "L2", "L3") that holds ``nbytes``;
    "memory" past the largest, "unknown" without cache sizes."""
    data = sorted((c for c in caches if c.get("type") != "Instruction" and c.get("size")),
                  key=lambda c: (c["level"], c["size"]))
    if not data:
        return "unknown"
    for c in data:
        if nbytes <= c["size"]:
            return f"L{c['level']}"
    return "memory"


def drops(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """For each kernel, the change of the median MFLOP/s from one cache level to the next
    (rows: kernel, length, level, mflops, in length order)."""
    out = []
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


def robust_z(values: Mapping[str, float], threshold: float = THRESHOLD,
             floor: float = MAD_FLOOR) -> dict[str, Any]:
    """Median, MAD, the scale used (max(MAD, floor x |median|) / 0.6745), each node's z
    and the nodes with |z| > threshold (lowest first)."""
    xs = list(values.values())
    median = statistics.median(xs)
    mad = statistics.median(abs(x - median) for x in xs)
    scale = max(mad, floor * abs(median)) / MAD_TO_SIGMA
    z = {node: (x - median) / scale if scale > 0 else 0.0 for node, x in values.items()}
    out = sorted((n for n, v in z.items() if abs(v) > threshold), key=lambda n: z[n])
    return {"median": median, "mad": mad, "scale": scale, "z": z, "outliers": out}


def fleet_metrics(per_node: Mapping[str, Mapping[str, Mapping[str, Any]]],
                  threshold: float = THRESHOLD,
                  floor: float = MAD_FLOOR) -> list[dict[str, Any]]:
    """node -> metric id -> metric  =>  one entry per metric measured on at least three
    nodes (fewer have no median to stand against), with each node's figure (the median of
    its samples) and z."""
    ids: dict[str, str] = {}
    for metrics in per_node.values():
        for mid, m in metrics.items():
            ids.setdefault(mid, m["unit"])
    out = []
    for mid, unit in ids.items():
        values = {node: float(statistics.median(ms[mid]["samples"]))
                  for node, ms in per_node.items() if mid in ms}
        if len(values) < 3:
            continue
        out.append({"id": mid, "unit": unit, "values": values,
                    **robust_z(values, threshold, floor)})
    return out


def outlier_nodes(metrics: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """node -> the metrics it is an outlier in."""
    found: dict[str, list[str]] = {}
    for m in metrics:
        for node in m["outliers"]:
            found.setdefault(node, []).append(m["id"])
    return dict(sorted(found.items()))


def method(threshold: float = THRESHOLD, floor: float = MAD_FLOOR) -> dict[str, Any]:
    statement = (f"Outlier: |z| > {threshold:g}, z = (node's median - fleet median) / "
                 f"(max(MAD, {floor * 100:g}% of the median) / {MAD_TO_SIGMA}) per metric "
                 "(modified z-score, Iglewicz and Hoaglin); metrics measured on fewer than 3 "
                 "nodes are not judged.")
    return {"threshold": threshold, "mad_floor": floor, "statement": statement}


# --------------------------------------------------------------------------- comparing


def verdict(samples: Sequence[float], base: Sequence[float], change_pct: float | None,
            min_change: float) -> tuple[str, float | None]:
    """(verdict, p) of one metric against the baseline's."""
    if min(len(samples), len(base)) < MIN_SAMPLES:
        return f"too few samples ({len(samples)} vs {len(base)})", None
    _u, p = mann_whitney_u(list(samples), list(base))
    big = change_pct is not None and abs(change_pct) > min_change * 100.0
    return ("significant" if p < ALPHA and big else "not significant"), p


def compare_rows(bodies: Sequence[Mapping[str, Any]], baseline: int = 0,
                 min_change: float = DEFAULT_MIN_CHANGE) -> list[dict[str, Any]]:
    """One row per metric of the baseline: each run's mean, change in % and verdict
    (None for the baseline itself and for runs without the metric)."""
    by_id = [{m["id"]: m for m in b["metrics"]} for b in bodies]
    rows = []
    for mid, base in by_id[baseline].items():
        means, changes, verdicts, ps = [], [], [], []
        for i, metrics in enumerate(by_id):
            m = metrics.get(mid)
            means.append(m["mean"] if m else None)
            if i == baseline or m is None:
                changes.append(None)
                verdicts.append(None if m else "missing")
                ps.append(None)
                continue
            change = (m["mean"] - base["mean"]) / base["mean"] * 100.0 if base["mean"] else None
            text, p = verdict(m["samples"], base["samples"], change, min_change)
            changes.append(change)
            verdicts.append(text)
            ps.append(p)
        rows.append({"id": mid, "unit": base["unit"], "means": means, "changes": changes,
                     "verdicts": verdicts, "p": ps})
    return rows


def describe_test(min_change: float = DEFAULT_MIN_CHANGE) -> dict[str, Any]:
    statement = ("Test: two-sided Mann-Whitney U (normal approximation, tie- and "
                 "continuity-corrected) on each metric's repetitions; significant = p < "
                 f"{ALPHA:g} and the means differ by more than {min_change * 100:g}%; fewer "
                 f"than {MIN_SAMPLES} repetitions on a side: too few samples.")
    return {"name": "Mann-Whitney U, two-sided", "alpha": ALPHA,
            "min_change_pct": min_change * 100.0, "min_samples": MIN_SAMPLES,
            "statement": statement}

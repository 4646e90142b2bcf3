"""What the cluster's own MPI tests derive from their trials: HPCC's ring figures, the
slow nodes and links of an all-pairs matrix, and the aggregates of N pairs at once.

**Rings** (HPCC 1.5's ``bench_lat_bw``).  A ring is an order of the ranks; each rank
exchanges a message with both neighbours per step (two MPI_Sendrecv, or two receives and
two sends waited for together: each rank keeps the faster of the two).  One trial's
figure is the slowest rank's time per step divided by 2 (two messages each way): HPCC
reduces with MPI_MAX over the ranks.  A ring's figure is the *minimum* over its trials
(HPCC's "minimal measurement", of as many as HPCC makes: 8 at 8 B, 3 at 2,000,000 B);
the naturally ordered ring's is the natural latency, the
*geometric mean* over the random rings the random one; a bandwidth is the message size
divided by that latency (each process's bytes per second, HPCC's GB/s = 10^9 B/s).  The
random rings are drawn as HPCC draws them: each rank in turn takes a uniformly random
position, or the next free one after it.

**Slow nodes and links** of an all-pairs matrix.  A node's figure is its best pair (the
highest bandwidth, the lowest latency): a slow node has no fast pair, a fast node has at
least one while two fast nodes exist.  A node is slow when its figure is a robust outlier
among the nodes' figures (the modified z-score of Iglewicz and Hoaglin, 0.6745 (x -
median) / MAD, over the logarithms, beyond Z_LIMIT) *and* worse than their median by
more than the relative threshold (without which a matrix of near-equal figures, whose MAD
is tiny, would flag noise) even at the end of its pairs' 95% intervals most favourable to
it (so that a busy spell that left a pair's trials spread out names nothing).  A pair is
expected to reach the worse of its two nodes' figures; a link is slow when it falls short
of that by more than the threshold, at the favourable end of its interval too, and its
ratio is a robust outlier among the pairs' ratios.  A slow node thus explains its own
pairs, and a slow link is one its two nodes do not explain.  Three nodes at least.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from beoperf import units
from beoperf.analysis.stats import median_ci
from beoperf.model.cluster import Summary
from beoperf.model.cluster_mpi import Repeat, SlowLink, SlowNode, Stat
from beoperf.model.document import JsonObject, JsonValue

HPCC_KEYS = ("NaturallyOrderedRingLatency_usec", "RandomlyOrderedRingLatency_usec",
             "NaturallyOrderedRingBandwidth_GBytes", "RandomlyOrderedRingBandwidth_GBytes")
HPCC_UNITS = {"NaturallyOrderedRingLatency_usec": "usec",
              "RandomlyOrderedRingLatency_usec": "usec",
              "NaturallyOrderedRingBandwidth_GBytes": "GB/s",
              "RandomlyOrderedRingBandwidth_GBytes": "GB/s"}
Z_LIMIT = 3.5
RELATIVE = 0.25
MIN_NODES = 3


# --------------------------------------------------------------------------- rings


def random_rings(n: int, count: int, seed: int,
                 rng: random.Random | None = None) -> list[list[int]]:
    """``count`` orders of ranks 0..n-1, drawn as HPCC draws them (see the docstring),
    from ``seed`` (or ``rng``)."""
    rng = rng or random.Random(seed)
    rings = []
    for _ in range(count):
        slots = [-1] * n
        for rank in range(n):
            j = min(n - 1, int(rng.random() * n))
            while slots[j] != -1:
                j = (j + 1) % n
            slots[j] = rank
        rings.append(slots)
    return rings


def neighbours(order: Sequence[int], rank: int) -> tuple[int, int]:
    """(left, right) of ``rank`` in a ring order."""
    i = list(order).index(rank)
    n = len(order)
    return order[(i - 1) % n], order[(i + 1) % n]


def trial_latency(per_rank: Mapping[int, tuple[int, int]], reps: int) -> float:
    """One ring trial's latency in seconds: per rank the faster variant's time per step
    (``per_rank``: rank -> (Sendrecv ns, non-blocking ns) for ``reps`` steps), then the
    slowest rank, halved (two messages each way per step)."""
    worst = max(min(sr, nb) for sr, nb in per_rank.values())
    return worst / reps / 2 / 1e9


def geomean(values: Iterable[float]) -> float | None:
    vals = [v for v in values if v is not None and v > 0]
    return math.exp(statistics.fmean(math.log(v) for v in vals)) if vals else None


def ring_times(latencies: Sequence[float], measurements: int | None = None
               ) -> tuple[float, float, tuple[float, float] | None]:
    """A ring's trials, in the order measured: HPCC's figure (the minimum of the first
    ``measurements``, as many as HPCC makes: the least of more trials would be lower),
    the median of them all and its 95% interval (None: none above 0)."""
    first = latencies[:measurements] if measurements else latencies
    arr = np.sort(np.asarray(latencies, dtype=float))
    return float(min(first)), float(np.median(arr)), _positive(median_ci(arr))


def ring_stat(latencies: Sequence[float], measurements: int | None = None) -> JsonObject:
    """:func:`ring_times` as a ring stores them (``hpcc_s``, ``median_s``, ``ci_s``)."""
    hpcc_s, median_s, ci = ring_times(latencies, measurements)
    return {"hpcc_s": hpcc_s, "median_s": median_s,
            "ci_s": [ci[0], ci[1]] if ci is not None else None}


def _positive(ci: tuple[float, float] | None) -> tuple[float, float] | None:
    """An interval of a time or a rate, if its bounds are above 0 (order statistics of
    trials that are all positive always are; a trial of 0 s leaves no interval)."""
    return ci if ci is not None and ci[0] > 0 else None


def ring_figures(rings: Sequence[Mapping[str, Any]], latency_bytes: int,
                 bandwidth_bytes: int, field: str = "hpcc_s") -> dict[str, float | None]:
    """HPCC's four ring figures from the rings' ``field`` ("hpcc_s": the minimum over
    trials, as HPCC; "median_s": the median): latencies in us, bandwidths in 10^9 B/s."""

    def of(kind: str, size: int) -> list[float]:
        return [r[field] for r in rings if r["kind"] == kind and r["size"] == size
                and r.get(field) is not None]

    nat_l, rnd_l = of("natural", latency_bytes), geomean(of("random", latency_bytes))
    nat_b, rnd_b = of("natural", bandwidth_bytes), geomean(of("random", bandwidth_bytes))
    return {
        "NaturallyOrderedRingLatency_usec": nat_l[0] * 1e6 if nat_l else None,
        "RandomlyOrderedRingLatency_usec": rnd_l * 1e6 if rnd_l else None,
        "NaturallyOrderedRingBandwidth_GBytes": bandwidth_bytes / nat_b[0] / 1e9
        if nat_b else None,
        "RandomlyOrderedRingBandwidth_GBytes": bandwidth_bytes / rnd_b / 1e9 if rnd_b else None,
    }


def summary(values: Sequence[float | None]) -> Summary | None:
    """Mean, sample standard deviation (None below 2), min, max and n of the values
    present; None if there are none."""
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return Summary(mean=statistics.fmean(vals),
                   stdev=statistics.stdev(vals) if len(vals) > 1 else None,
                   min=min(vals), max=max(vals), n=len(vals))


def ring_summary(repeats: Sequence[Repeat]) -> dict[str, Summary | None]:
    """Each HPCC figure over the repeats (None where no repeat has it)."""
    return {key: summary([r.figures.get(key) for r in repeats]) for key in HPCC_KEYS}


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b not in (None, 0) else None


# --------------------------------------------------------------------------- pairs


def stat_of(values: Sequence[float]) -> Stat | None:
    """A pair's trials (seconds or B/s): the median, its 95% interval, the best of them
    (lowest for times is the caller's ``min``), and their count."""
    if not values:
        return None
    arr = np.sort(np.asarray(values, dtype=float))
    ci = _positive(median_ci(arr))
    return Stat(median=float(np.median(arr)), ci_low=ci[0] if ci else None,
                ci_high=ci[1] if ci else None, min=float(arr[0]), max=float(arr[-1]),
                trials=len(arr))


def modified_z(values: Sequence[float]) -> list[float]:
    """Iglewicz and Hoaglin's modified z-scores of the logarithms of positive values:
    0.6745 (x - median) / MAD; with a MAD of zero, +-inf for values off the median."""
    logs = np.log(np.asarray(values, dtype=float))
    med = float(np.median(logs))
    mad = float(np.median(np.abs(logs - med)))
    out = []
    for x in logs:
        d = float(x) - med
        out.append(0.6745 * d / mad if mad > 0 else (0.0 if abs(d) < 1e-12 else math.copysign(
            math.inf, d)))
    return out


METRICS = {"bandwidth": ("bandwidth_Bps", 1), "latency": ("latency_s", -1)}  # +1: more is better


def host_matrix(pairs: Sequence[Mapping[str, Any]], nodes: Sequence[str], field: str,
                bound: int = 0) -> list[list[float | None]]:
    """The node x node matrix of a pair figure (``field``: "latency_s" or
    "bandwidth_Bps"): the median over the rank pairs between two nodes; on the diagonal
    the pairs within a node (several ranks per node); None where none was measured.
    ``bound`` +1: instead the highest upper end of their 95% intervals, -1: the lowest
    lower end (the median where a pair has no interval): the most favourable figure the
    measurements leave possible."""
    index = {n: i for i, n in enumerate(nodes)}
    cells: dict[tuple[int, int], list[float]] = {}
    for p in pairs:
        st = p.get(field)
        if st is None:
            continue
        i, j = sorted((index[p["node_a"]], index[p["node_b"]]))
        end = st["ci_high"] if bound > 0 else st["ci_low"] if bound < 0 else None
        cells.setdefault((i, j), []).append(st["median"] if end is None else end)
    out: list[list[float | None]] = [[None] * len(nodes) for _ in nodes]
    for (i, j), vals in cells.items():
        v = max(vals) if bound > 0 else min(vals) if bound < 0 else float(np.median(vals))
        out[i][j] = out[j][i] = v
    return out


def _node_figures(matrix: list[list[float | None]], nodes: Sequence[str], sign: int
                  ) -> dict[str, float]:
    """Each node's best pair with another node (None-free)."""
    out = {}
    for i, node in enumerate(nodes):
        row = [v for j, v in enumerate(matrix[i]) if j != i and v is not None]
        if row:
            out[node] = max(row) if sign > 0 else min(row)
    return out


def _worse(sign: int, value: float, reference: float, relative: float) -> bool:
    """Worse than ``reference`` by more than ``relative`` (less for bandwidth, more for
    latency)."""
    return value < reference * (1 - relative) if sign > 0 else value > reference * (1 + relative)


def slow_nodes(figures: Mapping[str, float], best: Mapping[str, float], metric: str, sign: int,
               relative: float, z_limit: float) -> list[JsonObject]:
    """``figures``: each node's best pair (medians); ``best``: the same from the ends of
    the intervals most favourable to the node (it is named only if even those are worse
    than the threshold)."""
    names = list(figures)
    values = [figures[n] for n in names]
    z = modified_z(values)
    med = float(np.median(values))
    return [{"node": n, "metric": metric, "value": v, "median": med, "ratio": v / med,
             "z": zz if math.isfinite(zz) else None}
            for n, v, zz in zip(names, values, z, strict=True)
            if _worse(sign, best.get(n, v), med, relative) and -sign * zz > z_limit]


def slow_links(matrix: list[list[float | None]], bounds: list[list[float | None]],
               nodes: Sequence[str], figures: Mapping[str, float], metric: str, sign: int,
               relative: float, z_limit: float) -> list[JsonObject]:
    links = []
    for i in range(len(nodes)):
        for j in range(i + 1, len(nodes)):
            v = matrix[i][j]
            if v is None or nodes[i] not in figures or nodes[j] not in figures:
                continue
            a, b = figures[nodes[i]], figures[nodes[j]]
            expected = min(a, b) if sign > 0 else max(a, b)
            links.append((nodes[i], nodes[j], v, expected, bounds[i][j]))
    if not links:
        return []
    z = modified_z([v / e for _, _, v, e, _ in links])
    return [{"a": a, "b": b, "metric": metric, "value": v, "expected": e, "ratio": v / e,
             "z": zz if math.isfinite(zz) else None}
            for (a, b, v, e, end), zz in zip(links, z, strict=True)
            if _worse(sign, v if end is None else end, e, relative) and -sign * zz > z_limit]


def rule(relative: float, z_limit: float) -> str:
    return (f"a node's figure is its best pair with another node; a node is slow when its "
            f"figure is worse than the nodes' median by more than {relative:.0%} (even at the "
            f"end of the 95% intervals most favourable to it) and its modified z-score "
            f"(0.6745 x deviation / MAD, on logarithms) is beyond {z_limit:g}; a pair is "
            f"expected to reach the worse of its two nodes' figures, and a link is slow when "
            f"it falls short of that by more than {relative:.0%} (so does the favourable end "
            f"of its interval) with its ratio's modified z-score beyond {z_limit:g}")


def findings(pairs: Sequence[Mapping[str, Any]], nodes: Sequence[str],
             relative: float = RELATIVE, z_limit: float = Z_LIMIT) -> JsonObject:
    """The host matrices, each node's figures, and the slow nodes and links (see the
    module's docstring), as a pairs series stores them."""
    matrices: JsonObject = {}
    node_figures: JsonObject = {}
    found_nodes: list[JsonValue] = []
    found_links: list[JsonValue] = []
    for metric, (field, sign) in METRICS.items():
        matrix = host_matrix(pairs, nodes, field)
        bounds = host_matrix(pairs, nodes, field, bound=sign)
        figures = _node_figures(matrix, nodes, sign)
        matrices[field] = [list[JsonValue](row) for row in matrix]
        node_figures[field] = dict[str, JsonValue](figures)
        if len(figures) < MIN_NODES:
            continue
        best = _node_figures(bounds, nodes, sign)
        found_nodes += slow_nodes(figures, best, metric, sign, relative, z_limit)
        found_links += slow_links(matrix, bounds, nodes, figures, metric, sign, relative,
                                  z_limit)
    note = None
    if len(nodes) < MIN_NODES:
        plural = "s" if len(nodes) != 1 else ""
        note = (f"{len(nodes)} node{plural}: slow nodes and links are named from "
                f"{MIN_NODES} nodes on (with two, a slow pair cannot be told from a slow node)")
    return {"rule": rule(relative, z_limit), "relative": relative, "z_limit": z_limit,
            "nodes": list(nodes), "matrix": matrices, "node_figures": node_figures,
            "slow_nodes": found_nodes, "slow_links": found_links, "note": note}


def named(found: Mapping[str, Any]) -> list[str]:
    """One line per slow node and link of findings as stored, for a reader."""
    return (named_nodes([SlowNode.from_dict(s) for s in found["slow_nodes"]])
            + named_links([SlowLink.from_dict(s) for s in found["slow_links"]]))


def named_nodes(slow: Sequence[SlowNode]) -> list[str]:
    """One line per slow node."""
    return [f"slow node {s.node}: {s.metric} {_figure(s.metric, s.value)}, {s.ratio:.2f} x "
            f"the nodes' median ({_figure(s.metric, s.median)})" for s in slow]


def named_links(slow: Sequence[SlowLink]) -> list[str]:
    """One line per slow link."""
    return [f"slow link {s.a} - {s.b}: {s.metric} {_figure(s.metric, s.value)}, "
            f"{s.ratio:.2f} x what its nodes reach ({_figure(s.metric, s.expected)})"
            for s in slow]


def _figure(metric: str, value: float) -> str:
    return units.format_time(value) if metric == "latency" else \
        units.format_byte_rate(value)


# --------------------------------------------------------------------------- pairs at once


def pairings(pairs: int) -> list[tuple[int, int]]:
    """osu_mbw_mr's pairs: rank i sends to rank i + pairs, for i < pairs."""
    return [(i, i + pairs) for i in range(pairs)]


def default_pair_counts(np_: int) -> tuple[int, ...]:
    """1, 2, 4 ... up to np / 2, and np / 2 itself."""
    top = np_ // 2
    counts = {top} | {1 << k for k in range(top.bit_length()) if 1 << k <= top}
    return tuple(sorted(c for c in counts if c >= 1))

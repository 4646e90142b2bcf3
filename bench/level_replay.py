#!/usr/bin/env python3
"""Would judging each size against the run's level make its precision reachable, and
would that precision hold in the next run?  A replay on measured sweeps (issue 11).

Each trial of a sweep ran in one pass; the trials of one pass share the machine's state
of that moment.  A pass's *common factor* for one of its trials is the median, over the
pass's other trials, of (trial median / that size's median).  Dividing every trial by
its factor takes the state common to all sizes out of each size: what is left is the
size *against the run's level*, and its interval (order statistics over the normalized
trial medians, widened by sqrt 2 for a repeat run: the "shape" interval) is what more
trials of that size can narrow.  The level itself is known only as well as the mean of
the passes' factors (lag-1 autocorrelation -> effective passes, Student's t).

For consecutive sweeps A, B of one setup (both ways) this prints:
- within: how often B's median is in the interval the command stated for A within the
  run (``ci95_within_run_us`` or ``ci95_us``), and its median half-width;
- shape <= P: the sizes of A whose shape interval is within the precision P;
- shape holds: how often B's normalized median, after the median level ratio of B to A
  over all sizes is taken out, is in A's shape interval;
- level +-: A's level interval; factored: how often B's normalized median is in A's
  shape interval widened by the level (hypot, then sqrt 2), and that interval's median
  half-width.

Needs result files with ``trial_passes`` (beoperf after 74ea7f2).

    python bench/level_replay.py [--precision 0.02] RUN.json RUN.json ...   (time order)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
from beoperf.analysis.stats import median_ci  # noqa: E402
from beoperf.sweep.precision import MIN_AUTOCORRELATION_PASSES  # noqa: E402

MIN_OTHERS = 5  # a pass needs this many other trials for a factor (else 1)
Z95 = 1.96


def t95(dof: float) -> float:
    """Student's t, two-sided 95%, by the Cornish-Fisher expansion (dof >= 2)."""
    n, z = max(2.0, dof), Z95
    return (z + (z**3 + z) / (4 * n) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * n**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * n**3))


def factors(sizes: list[dict]) -> tuple[list[np.ndarray], list[float]]:
    """Each trial's common factor (its own size left out), and each pass's factor."""
    meds = [float(np.median(s["trial_medians_us"])) for s in sizes]
    by_pass: dict[int, list[tuple[int, int, float]]] = {}
    for i, s in enumerate(sizes):
        if s.get("trial_passes") is None:
            raise SystemExit("level_replay: a result without trial_passes (older beoperf)")
        for j, (k, v) in enumerate(zip(s["trial_passes"], s["trial_medians_us"], strict=True)):
            by_pass.setdefault(k, []).append((i, j, v / meds[i]))
    out = [np.ones(len(s["trial_medians_us"])) for s in sizes]
    series = []
    for k in sorted(by_pass):
        entries = by_pass[k]
        if len(entries) <= MIN_OTHERS:
            continue
        ratios = np.array([e[2] for e in entries])
        for q, (i, j, _) in enumerate(entries):
            out[i][j] = float(np.median(np.delete(ratios, q)))
        series.append(float(np.median(ratios)))
    return out, series


def level(series: list[float]) -> float:
    """95% half-width of the run's level, relative."""
    logs = np.log(np.asarray(series))
    n = len(logs)
    if n < 2:
        return 0.0
    sd = float(np.std(logs, ddof=1))
    c = logs - logs.mean()
    r = float(c[:-1] @ c[1:] / (c @ c)) if n >= MIN_AUTOCORRELATION_PASSES and c @ c else 0.0
    eff = n if r <= 0 else max(2.0, n * (1 - min(r, 0.9)) / (1 + r))
    return t95(eff - 1) * sd / math.sqrt(eff)


def replayed(path: str) -> dict:
    body = json.loads(Path(path).read_text())["body"]
    sizes = body["sizes"]
    fac, series = factors(sizes)
    lev = level(series)
    rows = []
    for s, f in zip(sizes, fac, strict=True):
        x = np.sort(np.asarray(s["trial_medians_us"]) / f)
        m = float(np.median(x))
        lo, hi = median_ci(x)
        shape = (math.sqrt(2) * (m - lo), math.sqrt(2) * (hi - m))
        full = tuple(math.sqrt(2) * math.hypot(d / math.sqrt(2), lev * m) for d in shape)
        within = s.get("ci95_within_run_us") or s["ci95_us"]
        rows.append({"size": s["size"], "median": s["time_us"]["median"], "within": within,
                     "norm": m, "shape": shape, "full": full})
    return {"path": path, "rows": rows, "level": lev}


def compare(a: dict, b: dict, precision: float) -> dict:
    pairs = [(x, y) for x in a["rows"] for y in b["rows"] if x["size"] == y["size"]]
    ratio = float(np.median([math.log(y["norm"] / x["norm"]) for x, y in pairs]))
    within = np.mean([x["within"][0] <= y["median"] <= x["within"][1] for x, y in pairs])
    shape_ok = np.mean([sum(x["shape"]) / 2 / x["norm"] <= precision for x, _ in pairs])
    holds = np.mean([x["norm"] - x["shape"][0] <= y["norm"] / math.exp(ratio)
                     <= x["norm"] + x["shape"][1] for x, y in pairs])
    factored = np.mean([x["norm"] - x["full"][0] <= y["norm"] <= x["norm"] + x["full"][1]
                        for x, y in pairs])
    return {"within": within,
            "within_half": np.median([(x["within"][1] - x["within"][0]) / 2 / x["median"]
                                      for x, _ in pairs]),
            "shape_ok": shape_ok, "holds": holds, "level": a["level"], "factored": factored,
            "factored_half": np.median([sum(x["full"]) / 2 / x["norm"] for x, _ in pairs])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--precision", type=float, default=0.02)
    ap.add_argument("runs", nargs="+", help="result files of one setup, in time order")
    args = ap.parse_args()
    runs = [replayed(p) for p in args.runs]
    print(f"| A -> B | within holds | within +- | shape <= {args.precision:.0%} | "
          "shape holds | level +- | factored holds | factored +- |")
    print("|---|---|---|---|---|---|---|---|")
    for i in range(len(runs) - 1):
        for a, b, name in ((i, i + 1, f"{i + 1} -> {i + 2}"), (i + 1, i, f"{i + 2} -> {i + 1}")):
            c = compare(runs[a], runs[b], args.precision)
            print(f"| {name} | {c['within']:.2f} | {c['within_half']:.1%} | "
                  f"{c['shape_ok']:.2f} | {c['holds']:.2f} | {c['level']:.1%} | "
                  f"{c['factored']:.2f} | {c['factored_half']:.1%} |")


if __name__ == "__main__":
    main()

"""Replay the history of earlier runs on the sweeps of earlier benchmark runs.

For each link of each ``bench/out/results-*.json`` given, takes the beoperf sweeps'
per-size medians and within-run intervals (``within``, or ``intervals`` in files made
before the history existed), and asks: had a sweep's interval been widened by the spread
between it and the sweeps before it (beoperf.sweep.history, the code the command uses),
at what share of the sizes would it have held the next sweep's median?

- "in order": sweep k (k >= 1) with sweeps 0..k-1 as its history, against sweep k+1;
- "any order" (three sweeps or more): every ordered triple (h, c, n) of distinct sweeps,
  h as c's only earlier run, against n (the sweeps of one benchmark run are exchangeable
  as far as the machine's level is concerned; n never takes part in c's interval).

Usage::

    python bench/coverage_replay.py bench/out/results-20261126T*.json
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_pingpong import coverage as held  # noqa: E402

from beoperf.sweep.history import Run, between_run_sd, widen  # noqa: E402


def coverage(cur: list, nxt: list, earlier: list[list]) -> float | None:
    """bench_pingpong's coverage of ``cur``'s intervals, widened by the spread between
    ``cur`` and ``earlier`` as the command widens them, over ``nxt``'s medians."""
    sd = between_run_sd({size: med for size, med, *_ in cur},
                        [Run("", {s: m for s, m, *_ in e}) for e in earlier])
    if sd is not None:
        cur = [[size, med, *widen(med, (lo, hi), sd)] if lo is not None else [size, med, lo, hi]
               for size, med, lo, hi in cur]
    return held(cur, nxt)


def main(paths: list[str]) -> int:
    for path in paths:
        doc = json.loads(Path(path).read_text())
        for link, res in doc.get("links", {}).items():
            sweeps = [s.get("within") or s["intervals"]
                      for s in (res.get("sweep") or {}).get("beoperf", []) if "intervals" in s]
            if len(sweeps) < 3:
                continue
            own = [coverage(c, n, []) for c, n in zip(sweeps, sweeps[1:], strict=False)]
            ordered = [coverage(sweeps[k], sweeps[k + 1], sweeps[:k])
                       for k in range(1, len(sweeps) - 1)]
            anyorder = [coverage(sweeps[c], sweeps[n], [sweeps[h]])
                        for h, c, n in itertools.permutations(range(len(sweeps)), 3)]
            fmt = lambda xs: ", ".join(f"{x:.2f}" for x in xs if x is not None)  # noqa: E731
            share = sum(x >= 0.9 for x in anyorder if x is not None) / len(anyorder)
            print(f"{Path(path).name} {link}: within-run {fmt(own)} | in order {fmt(ordered)}"
                  f" | any order: {share:.2f} of {len(anyorder)} at >= 0.90, median "
                  f"{sorted(anyorder)[len(anyorder) // 2]:.2f}, min {min(anyorder):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

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

With ``--host``: the spread of the host's other setups as well (beoperf.sweep.history:
``spread_within``, ``pooled_sd``), each link's taken from the other links' sweeps of the
same benchmark run, and only "in order", from sweep 0 (which then has the host's alone):
before -> after for each sweep, and the count at >= 0.90 by the number of earlier sweeps.

Usage::

    python bench/coverage_replay.py bench/out/results-20261126T*.json
    python bench/coverage_replay.py --host bench/out/results-20261126T*.json
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_pingpong import coverage as held  # noqa: E402

from beoperf.sweep.history import (  # noqa: E402
    Run,
    between_run_sd,
    pooled_sd,
    spread_within,
    widen,
)


def runs_of(sweeps: list[list]) -> list[Run]:
    return [Run("", {s: m for s, m, *_ in e}) for e in sweeps]


def coverage(cur: list, nxt: list, earlier: list[list],
             host: float | None = None) -> float | None:
    """bench_pingpong's coverage of ``cur``'s intervals, widened by the spread between
    ``cur`` and ``earlier`` (pooled with the host's, if given) as the command widens them,
    over ``nxt``'s medians."""
    own = between_run_sd({size: med for size, med, *_ in cur}, runs_of(earlier))
    sd = pooled_sd(own, len(earlier), host)
    if sd is not None:
        cur = [[size, med, *widen(med, (lo, hi), sd)] if lo is not None else [size, med, lo, hi]
               for size, med, lo, hi in cur]
    return held(cur, nxt)


def sweeps_of(res: dict) -> list[list]:
    return [s.get("within") or s["intervals"]
            for s in (res.get("sweep") or {}).get("beoperf", []) if "intervals" in s]


def host_replay(paths: list[str]) -> int:
    """Each link's sweeps in order, from sweep 0, with the host's spread taken from the
    other links of the same benchmark run (the root mean square of their own spreads)."""
    tally: dict[int, list[tuple[float, float]]] = {}
    for path in paths:
        links = {link: sweeps_of(res)
                 for link, res in json.loads(Path(path).read_text()).get("links", {}).items()}
        for link, sweeps in links.items():
            spreads = [sd for other, s in links.items() if other != link
                       and (sd := spread_within(runs_of(s))) is not None]
            host = (sum(x * x for x in spreads) / len(spreads)) ** 0.5 if spreads else None
            row = []
            for k in range(len(sweeps) - 1):
                before = coverage(sweeps[k], sweeps[k + 1], sweeps[:k])
                after = coverage(sweeps[k], sweeps[k + 1], sweeps[:k], host)
                if before is None or after is None:
                    continue
                row.append(f"{before:.2f} -> {after:.2f}")
                tally.setdefault(k, []).append((before, after))
            shown = f"{host:.3f}" if host is not None else "none"
            print(f"{Path(path).name} {link}: host {shown}: {', '.join(row)}")
    for k, pairs in sorted(tally.items()):
        print(f"{k} earlier sweep(s): >= 0.90 in {sum(b >= 0.9 for b, _ in pairs)} of "
              f"{len(pairs)} before, {sum(a >= 0.9 for _, a in pairs)} after")
    return 0


def main(paths: list[str]) -> int:
    if paths[:1] == ["--host"]:
        return host_replay(paths[1:])
    for path in paths:
        doc = json.loads(Path(path).read_text())
        for link, res in doc.get("links", {}).items():
            sweeps = sweeps_of(res)
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

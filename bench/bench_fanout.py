"""beoperf's remote-host layer against ClusterShell's own ``clush``, side by side (issue 26).

Both run one short command on N hosts reached through an exec template (no network: each
"host" is a local ``env NODE=<name> true``), at most ``--fanout`` at a time, and the two
alternate ``--rounds`` times so that a busy neighbour weighs on both alike.  What is timed
is the whole fan-out from a ready process: ``beoperf.launch.remote.run`` in this process
(its per-host results, timeouts and output bounds included) against one ``clush -R exec``
process (its start-up included, about a Python start).  The ratio is beoperf's median
over clush's.

Usage::

    python bench/bench_fanout.py [--hosts 256] [--fanout 64] [--rounds 5] [--command true]

Prints one Markdown table and the load average before and after.  Results: bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time

from ClusterShell.NodeSet import NodeSet

from beoperf.launch import remote
from beoperf.launch.base import LaunchSpec


def _beoperf(hosts: list[str], fanout: int, command: list[str]) -> float:
    spec = LaunchSpec(tuple(command), hosts=tuple(hosts), agent="exec env NODE=%h")
    start = time.monotonic()
    results = remote.run(spec, timeout=120, fanout=fanout)
    elapsed = time.monotonic() - start
    bad = [h for h, r in results.items() if not r.ok]
    if bad:
        raise SystemExit(f"bench_fanout: beoperf: {len(bad)} hosts failed, e.g. "
                         f"{bad[0]}: {results[bad[0]].error}")
    return elapsed


def _clush(hosts: list[str], fanout: int, command: list[str]) -> float:
    argv = [shutil.which("clush") or "clush", "-R", "exec", "-f", str(fanout), "-q", "-w",
            str(NodeSet.fromlist(hosts)), "env", "NODE=%h", *command]
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, timeout=600, check=False)
    elapsed = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"bench_fanout: clush exited {done.returncode}: "
                         f"{done.stderr.decode(errors='replace')[-300:]}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=256)
    parser.add_argument("--fanout", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--command", default="true")
    args = parser.parse_args(argv)
    if shutil.which("clush") is None:
        print("bench_fanout: clush not found (pip install ClusterShell)", file=sys.stderr)
        return 2
    hosts = [f"n{i:04d}" for i in range(args.hosts)]
    command = shlex.split(args.command)
    before = os.getloadavg()[0]
    ours, theirs = [], []
    for _ in range(args.rounds):
        ours.append(_beoperf(hosts, args.fanout, command))
        theirs.append(_clush(hosts, args.fanout, command))
    after = os.getloadavg()[0]
    a, b = statistics.median(ours), statistics.median(theirs)
    print(f"{args.hosts} hosts, fanout {args.fanout}, {args.rounds} rounds, "
          f"`{args.command}`; load average {before:.2f} before, {after:.2f} after\n")
    print("| | median s | min s | max s |\n|---|---|---|---|")
    print(f"| beoperf remote.run | {a:.3f} | {min(ours):.3f} | {max(ours):.3f} |")
    print(f"| clush -R exec | {b:.3f} | {min(theirs):.3f} | {max(theirs):.3f} |")
    print(f"\nratio beoperf/clush (medians): {a / b:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

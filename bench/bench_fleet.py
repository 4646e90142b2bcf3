"""Wall time of the fleet audit (`beoperf audit -w NODESET`) over network-namespace hosts.

For each size N, builds N namespace hosts with tests/netns.py (a veth pair for N <= 2,
a bridge otherwise; N = 1 uses the first host of a pair), then times, ROUNDS times,

    beoperf audit -w <the N namespaces> --exec-template 'ip netns exec %h'
                  --interface eth0 --json [--fanout F]

as a subprocess (ClusterShell's ExecWorker starts one `python -m beoperf audit` per
namespace).  Namespaces are removed on exit.  Needs root.

Usage::

    sudo python bench/bench_fleet.py [--sizes 1,8,32] [--rounds 3] [--fanout 64]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from ClusterShell.NodeSet import NodeSet

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import netns  # noqa: E402


def fleet_argv(nodes: NodeSet, fanout: int) -> list[str]:
    return [sys.executable, "-m", "beoperf", "audit", "-w", str(nodes),
            "--exec-template", "ip netns exec %h", "--interface", "eth0", "--json",
            "--fanout", str(fanout), "--remote-command", f"{sys.executable} -m beoperf"]


def time_once(argv: list[str], expected: int) -> float:
    """Seconds for one fleet audit; raises if not every node answered."""
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=600)
    elapsed = time.perf_counter() - t0
    doc = json.loads(proc.stdout)
    if len(NodeSet(doc["answered"])) != expected:
        raise RuntimeError(f"not every node answered: {doc['no_answer']}")
    return elapsed


def bench_size(n: int, rounds: int, fanout: int) -> dict:
    with netns.VethPair(max(n, 2)) as topo:
        nodes = NodeSet.fromlist([h.name for h in topo.hosts[:n]])
        argv = fleet_argv(nodes, fanout)
        times = [time_once(argv, n) for _ in range(rounds)]
    return {"nodes": n, "fanout": fanout, "rounds": rounds,
            "median_s": statistics.median(times), "min_s": min(times), "max_s": max(times)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,8,32", help="numbers of hosts (default %(default)s)")
    ap.add_argument("--rounds", type=int, default=3, help="runs per size (default %(default)s)")
    ap.add_argument("--fanout", type=int, default=64, help="--fanout (default %(default)s)")
    args = ap.parse_args()
    ok, reason = netns.can_use_netns()
    if not ok:
        print(f"bench_fleet: {reason}", file=sys.stderr)
        return 1
    print("| nodes | fanout | median s | min s | max s |")
    print("|---:|---:|---:|---:|---:|")
    for n in (int(s) for s in args.sizes.split(",")):
        r = bench_size(n, args.rounds, args.fanout)
        print(f"| {n} | {r['fanout']} | {r['median_s']:.2f} | {r['min_s']:.2f} "
              f"| {r['max_s']:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

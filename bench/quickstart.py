"""The README's quick start, run for real: the five questions an admin comes with, each
answered by one command on a small cluster of network-namespace hosts, and the first
lines each prints (issue 25, item 10).

The cluster: four namespace hosts behind one bridge (tests/netns.py), node01-node04 as
198.18.0.1-4, every link held to 1 Gbit/s by ``tc tbf`` and node04's to 100 Mbit/s
(the slow node), ``beoperf serve`` on each.  The commands run from node01:

1. is my network delivering what the hardware promises?  ``beoperf pingpong node02``
2. what should I change?  ``beoperf audit --peer node02``
3. is one node slow?  ``beoperf cluster pairs --hosts node01,...,node04`` (Open MPI)
4. did my change help?  ``beoperf compare`` of runs before and after a change (MTU 1500
   against 9000 on both ends of node01-node02, three runs each)
5. how is the link to the other cluster?  ``beoperf monitor`` (the published cycle,
   for ``--monitor-seconds``), then ``beoperf monitor report``

Usage (root)::

    python bench/quickstart.py [--lines 12] [--out bench/out/quickstart]

Prints each command and the first ``--lines`` lines of its output (stdout then stderr),
and keeps every file under ``--out``.  Figures depend on the machine; the README quotes
one run (bench/RESULTS.md, Q-run).
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import netns  # noqa: E402
from mpi_helpers import write_agent  # noqa: E402

PY = sys.executable
SUBNET = f"{netns.NET4_PREFIX}0/{netns.NET4_PREFIXLEN}"


def beoperf(*args: str) -> list[str]:
    return [PY, "-m", "beoperf", *args]


def shown(title: str, argv: list[str], host: netns.Host, lines: int, timeout: float = 900,
          ) -> subprocess.CompletedProcess:
    """Run ``argv`` on ``host``; print the command as a user types it and its first
    lines."""
    typed = shlex.join(["beoperf", *argv[3:]]) if argv[:3] == beoperf() else shlex.join(argv)
    res = subprocess.run(host.argv(argv), capture_output=True, text=True, timeout=timeout)
    out = (res.stdout + res.stderr).splitlines()
    print(f"\n### {title}\n\n$ {typed}")
    print("\n".join(out[:lines]) + ("\n..." if len(out) > lines else ""))
    print(f"(exit status {res.returncode})")
    return res


def shape(topo: netns.VethPair, rate: str, slow: str) -> None:
    for host in topo.hosts:
        host.set_rate(rate)
    topo.hosts[-1].set_rate(slow)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lines", type=int, default=12)
    p.add_argument("--out", default=str(REPO / "bench" / "out" / "quickstart"))
    p.add_argument("--monitor-seconds", type=float, default=240)
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with netns.VethPair(4) as topo:
        shape(topo, "1gbit", "100mbit")
        n1, n2 = topo.hosts[0], topo.hosts[1]
        servers = [h.popen(beoperf("serve"), stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL) for h in topo.hosts]
        time.sleep(1.0)
        try:
            questions(topo, n1, n2, out, args)
        finally:
            for proc in servers:
                proc.terminate()
    return 0


def questions(topo: netns.VethPair, n1: netns.Host, n2: netns.Host, out: Path,
              args: argparse.Namespace) -> None:
    env = ["env", f"BEOPERF_HISTORY={out / 'history'}", f"BEOPERF_RUNS={out / 'runs'}"]
    shown("1. Is my network delivering what the hardware promises?",
          [*env, *beoperf("pingpong", n2.addr4, "--time-budget", "1min", "-o",
                          str(out / "n01-n02"))], n1, args.lines)
    shown("2. What should I change?",
          beoperf("audit", "--peer", n2.addr4, "--profile", "throughput"), n1, args.lines)
    agent = write_agent(out / "agent", topo.hosts)
    shown("3. Is one node slow?",
          beoperf("cluster", "pairs", "--hosts", ",".join(h.addr4 for h in topo.hosts),
                  "--bandwidth-size", "500000", "--mpi-agent", agent, "--mpi-interface",
                  SUBNET, "--mpi-env", "OMPI_MCA_btl=tcp,self", "-o",
                  str(out / "pairs.json")), n1, args.lines + 8)
    files = []
    for mtu, tag in ((1500, "before"), (9000, "after")):
        for host in (n1, n2):  # the bridge's ports take 65535 already
            host.set_mtu(mtu)
        for i in range(3):
            name = out / f"{tag}{i + 1}"
            subprocess.run(n1.argv([*env, *beoperf("pingpong", n2.addr4, "--end", "4M",
                                                   "-o", str(name))]),
                           capture_output=True, timeout=300, check=True)
            files.append(f"{name}.json")
    for host in (n1, n2):  # the lab as it was (at 9000 against 1500 large packets are lost)
        host.set_mtu(1500)
    labels = [x for tag in ("before", "after") for x in ("--label", tag) * 3]
    shown("4. Did my change help? (MTU 1500 -> 9000 on node01 and node02, three runs each)",
          beoperf("compare", *files, *labels), n1, args.lines)
    db = out / "link.db"
    log = out / "monitor.log"
    with open(log, "w") as sink:
        monitor = subprocess.Popen(n1.argv(beoperf("monitor", topo.hosts[3].addr4, "--db",
                                                   str(db), "--budget", "1%", "--link-speed",
                                                   "100M")),
                                   stdout=sink, stderr=subprocess.STDOUT)
        time.sleep(args.monitor_seconds)
        monitor.terminate()
        monitor.wait(30)
    print(f"\n(the monitor's own output: {log})")
    shown("5. How is the link to the other cluster?",
          beoperf("monitor", "report", str(db)), n1, args.lines)


if __name__ == "__main__":
    sys.exit(main())

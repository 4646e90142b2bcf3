"""B1 (issue 27): what a study costs beyond its measurements, and whether its verdict
agrees with the same effect measured by hand.

The MTU preset (1500 against 9000) on 2 `beoperf lab` hosts whose links are held to
``--rate`` by tbf, run in this process through ``suites.study.run`` with the hosts'
control plane timed call by call:

* overhead = (wall - the blocks' measuring ``duration_s``) / wall (goal: < 5%), in parts:
  arm, applying levels (and their settle), the MTU path checks, finish (every host
  restored), the analysis and the rest (the controller's own starts of each remote
  measurement, between blocks);
* in the same lab, NPtcp by hand at each level (both hosts' MTU set with ``ip``, then put
  back), interleaved ``--rounds`` times: the ratio of the plateaus (the mean of the
  largest sizes' throughput) at 9000 and 1500, which must lie inside the study's interval
  of the goodput effect, itself at most 2 points wide.

Usage (root)::

    python bench/bench_study.py [--rate 200M] [--repeats 6] [--block-time 2] [--rounds 3]
                                [--settle 1]

Prints the figures; bench/RESULTS.md records a run with the load average.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import netns  # noqa: E402
from beoperf import units  # noqa: E402
from beoperf.model.study import Study  # noqa: E402
from beoperf.suites import study as suite  # noqa: E402
from beoperf.suites import study_spec as specs  # noqa: E402

PORT = 5202
PLATEAU_SIZES = 4  # NPtcp's largest sizes averaged as its plateau


class Timed:
    """A study's Control with the wall time of each kind of call added up."""

    def __init__(self, inner) -> None:
        self.inner, self.spent = inner, {}

    def __getattr__(self, name):
        method = getattr(self.inner, name)

        def timed(*args, **kw):
            start = time.monotonic()
            try:
                return method(*args, **kw)
            finally:
                self.spent[name] = self.spent.get(name, 0.0) + time.monotonic() - start

        return timed


def study_spec(hosts, args) -> suite.Spec:
    names = ",".join(h.name for h in hosts)
    study = specs.StudySpec(
        "mtu", specs.HostsSpec(nodes=names, exec_template="ip netns exec %h",
                               remote_command=f"{sys.executable} -m beoperf", port=PORT,
                               data_address=tuple((h.name, h.addr4) for h in hosts)),
        (specs.FactorSpec("mtu", ("1500", "9000")),), (specs.pingpong_measure(),),
        specs.DesignSpec(repeats=args.repeats, margin=0.01, seed=7,
                         block_time=args.block_time, settle=args.settle))
    return suite.Spec(study, apply=True)


def run_study(hosts, args) -> tuple[Study, float, dict]:
    spec = study_spec(hosts, args)
    checked = suite.check(spec)
    control = Timed(suite.host_control(checked))
    start = time.monotonic()
    doc = suite.run(spec, None, None, control)
    wall = time.monotonic() - start
    return Study.from_document(doc), wall, control.spent


def nptcp_plateau(server, client, out: Path) -> float:
    """One NPtcp run from ``client`` to ``server``: the mean throughput (bit/s) of its
    largest sizes."""
    receiver = server.popen(["NPtcp", "-l", str(64 << 10), "-u", str(4 << 20), "-p", "0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        client.run(["NPtcp", "-h", server.addr4, "-l", str(64 << 10), "-u", str(4 << 20),
                    "-p", "0", "-o", str(out)], timeout=300)
    finally:
        receiver.kill()
        receiver.wait()
    rows = [line.split() for line in out.read_text().splitlines() if line.strip()]
    mbps = [float(r[1]) for r in rows[-PLATEAU_SIZES:]]
    return 1e6 * sum(mbps) / len(mbps)


def by_hand(hosts, rounds: int, tmp: Path) -> list[float]:
    """NPtcp's plateau ratio 9000/1500 per round, the levels interleaved."""
    ratios = []
    for r in range(rounds):
        plateau = {}
        for mtu in (1500, 9000) if r % 2 == 0 else (9000, 1500):
            for h in hosts:
                h.set_mtu(mtu)
            time.sleep(1.0)
            plateau[mtu] = nptcp_plateau(hosts[0], hosts[1], tmp / f"np-{r}-{mtu}.out")
        for h in hosts:
            h.set_mtu(1500)
        ratios.append(plateau[9000] / plateau[1500])
    return ratios


def report(study: Study, wall: float, spent: dict, ratios: list[float]) -> None:
    measuring = sum(b.duration_s for b in study.blocks)
    print(f"load average {os.getloadavg()[0]:.2f}; wall {wall:.1f} s, measuring "
          f"{measuring:.1f} s in {len(study.blocks)} blocks")
    print(f"overhead {(wall - measuring) / wall:.1%}")
    parts = {"arm": spent.get("arm", 0.0), "apply+settle": spent.get("set_level", 0.0),
             "path checks": spent.get("probe", 0.0), "finish": spent.get("finish", 0.0),
             "read, Slurm": spent.get("read", 0.0) + spent.get("check_slurm", 0.0)}
    parts["the rest (remote starts, analysis)"] = wall - measuring - sum(parts.values())
    for name, seconds in parts.items():
        print(f"  {name:36s} {seconds:6.1f} s  {seconds / wall:6.1%} of the wall time")
    c9000 = next(c.id for c in study.configurations if c.levels == {"mtu": "9000"})
    eff = next(e.effect for e in study.effects
               if e.config == c9000 and e.figure == "goodput_bps@1M" and e.pair is None)
    print(f"study: goodput 9000/1500 = {eff['ratio']:.4f} [{eff['low']:.4f}, "
          f"{eff['high']:.4f}] ({eff['verdict']}; {(eff['high'] - eff['low']) * 100:.2f} "
          "points wide)")
    mean = sum(ratios) / len(ratios)
    inside = eff["low"] <= mean <= eff["high"]
    print(f"NPtcp by hand: plateau ratios {', '.join(f'{r:.4f}' for r in ratios)}; mean "
          f"{mean:.4f} ({'inside' if inside else 'OUTSIDE'} the study's interval)")
    print("verdicts:", *study.verdicts, sep="\n  ")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rate", default="200M")
    p.add_argument("--repeats", type=int, default=6)
    p.add_argument("--block-time", type=float, default=2.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--settle", type=float, default=1.0,
                   help="the study's wait after each MTU change (veth resets no link: 0 "
                        "shows what the study's own machinery costs)")
    args = p.parse_args()
    rate = units.parse_rate(args.rate)
    with netns.lab_hosts(2, rate=rate, sshd=False, controller=False) as lab, \
            tempfile.TemporaryDirectory() as tmp:
        hosts = list(lab)
        serve = hosts[0].popen([sys.executable, "-m", "beoperf", "serve", "--port", PORT],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        serve.stdout.readline()
        study, wall, spent = run_study(hosts, args)
        ratios = by_hand(hosts, args.rounds, Path(tmp))
        report(study, wall, spent, ratios)


if __name__ == "__main__":
    main()

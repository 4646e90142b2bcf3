"""`beoperf cluster ring` against HPCC's own ring figures, on the same hosts.

The hosts are network namespaces joined by a bridge (tests/netns.py), each link limited
with ``tc tbf`` (``--rate``, 100 Mbit/s by default: the published cluster's Fast
Ethernet), one rank per host, Open MPI over TCP (``btl tcp,self`` on the test subnet,
``--bind-to none``, an rsh agent that enters the namespaces), in one run:

- HPCC 1.5 (Debian's ``hpcc``, a small HPL: ``--n``) through ``mpirun.openmpi`` with one
  rank per host; its four ring figures read from the summary of ``hpccoutf.txt``
  (``NaturallyOrderedRingLatency_usec``, ``RandomlyOrderedRingLatency_usec``,
  ``NaturallyOrderedRingBandwidth_GBytes``, ``RandomlyOrderedRingBandwidth_GBytes``);
- ``beoperf cluster ring`` with its defaults (HPCC's sizes, rings and loop lengths; the
  precision loop decides the trials), through the same mpirun, agent and variables.

They alternate for ``--rounds`` rounds (HPCC, beoperf, then beoperf, HPCC ...: ABBA), so
that a busy spell of the shared machine hits both alike; the figures are medians over
the rounds, reported with beoperf / HPCC.  The 1-minute load average is sampled.

``--hosts 0`` runs both on this host instead (``--ranks`` ranks, shared memory).

Usage::

    python bench/bench_ring.py [--hosts 2 | --hosts 0 --ranks 2] [--rate 100mbit|none]
                               [--rounds 3] [--n 400] [--beoperf-arg=--min-trials=3]
                               [--out bench/out]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests"), str(HERE)]

from bench_pingpong import LoadSampler  # noqa: E402

import netns  # noqa: E402
from beoperf.model import hpcc  # noqa: E402
from helpers import child_env  # noqa: E402
from mpi_helpers import write_agent  # noqa: E402

KEYS = ("NaturallyOrderedRingLatency_usec", "RandomlyOrderedRingLatency_usec",
        "NaturallyOrderedRingBandwidth_GBytes", "RandomlyOrderedRingBandwidth_GBytes")
SUBNET = f"{netns.NET4_PREFIX}0/{netns.NET4_PREFIXLEN}"
TIMEOUT_S = 1800


def mpirun_prefix(hosts: list[netns.Host] | None, agent: str, ranks: int) -> list[str]:
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    if hosts is None:  # this host: shared memory
        return ["mpirun.openmpi", "-np", str(ranks), "--host", f"localhost:{ranks}",
                "--bind-to", "none", *root]
    return ["mpirun.openmpi", "-np", str(len(hosts)), "--host",
            ",".join(f"{h.addr4}:1" for h in hosts), "--bind-to", "none", *root,
            "--mca", "plm_rsh_agent", agent, "--mca", "btl", "tcp,self",
            "--mca", "btl_tcp_if_include", SUBNET, "--mca", "oob_tcp_if_include", SUBNET]


def here(hosts: list[netns.Host] | None, argv: list[str]) -> list[str]:
    """argv run in the first host's namespace (or here, without hosts)."""
    return hosts[0].argv(argv) if hosts else argv


def run_hpcc(hosts: list[netns.Host] | None, agent: str, ranks: int, n: int,
             work: Path) -> dict[str, float]:
    work.mkdir(parents=True)
    p, q = hpcc.square_grid(ranks)
    (work / "hpccinf.txt").write_text(hpcc.Input(n, 80, p, q).text())
    argv = here(hosts, [*mpirun_prefix(hosts, agent, ranks), "hpcc"])
    subprocess.run(argv, cwd=work, check=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   start_new_session=True)
    run = hpcc.parse_runs((work / "hpccoutf.txt").read_text(errors="replace"))[-1]
    return {k: float(run.summary[k]) for k in KEYS}


def run_beoperf(hosts: list[netns.Host] | None, agent: str, ranks: int, extra: list[str],
                out: Path) -> dict[str, float]:
    where = ["--hosts", ",".join(h.addr4 for h in hosts), "--mpi-agent", agent,
             "--mpi-interface", SUBNET, "--mpi-env", "OMPI_MCA_btl=tcp,self"] if hosts else \
        ["--ranks-per-node", str(ranks)]
    argv = here(hosts, [sys.executable, "-m", "beoperf", "cluster", "ring", *where, *extra,
                        "-o", str(out), "--format", "json"])
    proc = subprocess.run(argv, check=False, timeout=TIMEOUT_S, capture_output=True, text=True,
                          env=child_env(), start_new_session=True)
    if proc.returncode != 0:
        raise RuntimeError(f"beoperf cluster ring failed ({proc.returncode}): "
                           f"{proc.stderr[-2000:]}")
    series = json.loads(proc.stdout)["body"]["series"][0]
    assert series["status"] == "complete", series["status_reason"]
    return dict(series["repeats"][0]["figures"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=2,
                    help="namespace hosts, one rank each; 0: this host (shared memory)")
    ap.add_argument("--ranks", type=int, default=2, help="ranks on this host (--hosts 0)")
    ap.add_argument("--rate", default="100mbit", help="tbf rate of each link; 'none': unshaped")
    ap.add_argument("--beoperf-arg", action="append", default=[],
                    help="passed to beoperf cluster ring (e.g. --min-trials=3)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=400, help="HPL's N for the HPCC runs")
    ap.add_argument("--out", default=str(HERE / "out"))
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-ring-"))
    figures: dict[str, list[dict[str, float]]] = {"hpcc": [], "beoperf": []}
    seconds: dict[str, list[float]] = {"hpcc": [], "beoperf": []}
    print(f"load before: {os.getloadavg()}", flush=True)
    topo = netns.VethPair(args.hosts) if args.hosts else contextlib.nullcontext()
    with LoadSampler() as load, topo:
        hosts = topo.hosts if args.hosts else None
        ranks = len(hosts) if hosts else args.ranks
        for h in hosts or []:
            if args.rate != "none":
                h.set_rate(args.rate)
        agent = write_agent(work / "agent", hosts) if hosts else ""
        for r in range(args.rounds):
            order = ("hpcc", "beoperf") if r % 2 == 0 else ("beoperf", "hpcc")
            for tool in order:
                t0 = time.monotonic()
                got = run_hpcc(hosts, agent, ranks, args.n, work / f"hpcc-{r}") \
                    if tool == "hpcc" else run_beoperf(hosts, agent, ranks, args.beoperf_arg,
                                                       work / f"ring-{r}.json")
                seconds[tool].append(time.monotonic() - t0)
                figures[tool].append(got)
                print(f"round {r + 1} {tool}: {got} ({seconds[tool][-1]:.0f} s)", flush=True)
    print(f"load after: {os.getloadavg()}; sampled: {load.summary()}")
    print(f"\n| figure | HPCC (median of {args.rounds}) | beoperf | beoperf / HPCC |")
    print("|---|---:|---:|---:|")
    result = {}
    for key in KEYS:
        h = statistics.median(f[key] for f in figures["hpcc"])
        b = statistics.median(f[key] for f in figures["beoperf"])
        result[key] = {"hpcc": h, "beoperf": b, "ratio": b / h}
        print(f"| {key} | {h:.6g} | {b:.6g} | {b / h:.3f} |")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    path = out / f"ring-results-{stamp}.json"
    path.write_text(json.dumps({"args": vars(args), "figures": figures, "seconds": seconds,
                                "summary": result, "load": load.summary()}, indent=1))
    print(f"\nraw figures: {path}; the runs: {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

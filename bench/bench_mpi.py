"""Side-by-side benchmark of ``beoperf pingpong --transport mpi`` against NetPIPE's NPmpi.

For each link (``shm``: both ranks on this host; ``veth``: one rank in each of two network
namespaces joined by a veth pair, tests/netns.py) and each MPI (Open MPI with Debian's
``NPopenmpi``, MPICH with ``NPmpich2``), in one run:

1. latency at 16 B: beoperf (``--sizes 16``) and NPmpi (``-l 16 -u 16 -p 0``),
   alternating for ``--rounds`` rounds; figures are medians over the rounds (NPmpi's
   time from its bit rate column: its time column has 10 ns steps);
2. peak throughput: one full NPmpi run (1 B to 8 MiB, its default schedule) and one
   beoperf sweep of the same range, beoperf's peak both from its median (its own figure)
   and from its fastest trial (NetPIPE's statistic).

Both tools are started by the same launcher command (beoperf's launch layer builds it:
``--bind-to core`` on one host, ``--bind-to none`` with an rsh agent, ``btl tcp,self``
or ``UCX_TLS=tcp,self`` and the test interface across the veth).  The load average is
sampled during the run (the machine is shared).

Usage::

    python bench/bench_mpi.py [--links shm,veth] [--impls openmpi,mpich] [--rounds 3]
                              [--out bench/out]

Prints a Markdown table and writes the raw figures to OUT/mpi-results-<UTC>.json.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from bench_pingpong import LoadSampler, parse_netpipe  # noqa: E402

import netns  # noqa: E402
from beoperf.launch.base import LaunchSpec  # noqa: E402
from beoperf.launch.mpirun import Mpich, OpenMpi  # noqa: E402
from mpi_helpers import write_agent  # noqa: E402

NETPIPE = {"openmpi": "NPopenmpi", "mpich": "NPmpich2"}
LAT_SIZE = 16
ENV = {"openmpi": {"OMPI_MCA_btl": "tcp,self"},
       "mpich": {"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "eth0"}}


class Place:
    """Where the ranks go: this host, or two namespace hosts with an agent."""

    def __init__(self, name: str, hosts: list[Any] | None = None, agent: str | None = None):
        self.name, self.hosts, self.agent = name, hosts, agent

    def mpirun(self, impl: str, argv: Sequence[str]) -> list[str]:
        """The launcher command for a 2-rank program, as beoperf's launch layer makes it."""
        launcher = OpenMpi() if impl == "openmpi" else Mpich()
        if self.hosts is None:
            spec = LaunchSpec(tuple(argv), ranks_per_host=2, bind="core")
        else:
            spec = LaunchSpec(tuple(argv), hosts=tuple(h.addr4 for h in self.hosts),
                              bind="none", agent=self.agent, interface="eth0", env=ENV[impl])
        made = launcher.command(spec)
        for key, value in made.env.items():
            os.environ[key] = value  # Open MPI exports -x VAR from its own environment
        return self.wrap(list(made.argv))

    def wrap(self, argv: list[str]) -> list[str]:
        return argv if self.hosts is None else self.hosts[0].argv(argv)

    def beoperf(self, impl: str, args: Sequence[str]) -> list[str]:
        argv = [sys.executable, "-m", "beoperf", "pingpong", "--transport", "mpi", "--mpi", impl]
        if self.hosts is not None:
            argv += ["--hosts", ",".join(h.addr4 for h in self.hosts), "--bind-to", "none",
                     "--mpi-agent", self.agent, "--mpi-interface", "eth0"]
            for key, value in ENV[impl].items():
                argv += ["--mpi-env", f"{key}={value}"]
        return self.wrap([*argv, *args])


HUNG: list[str] = []  # commands ended at their timeout (MPICH's MPI_Finalize hang)


def run(argv: list[str], timeout: float, cwd: Path) -> tuple[int, float]:
    """Run in a process group of its own; at the timeout the group is killed and noted
    (the caller then reads what the tool wrote, if it wrote it)."""
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=cwd, start_new_session=True)
    try:
        _out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _out, err = proc.communicate()
        HUNG.append(" ".join(argv))
        return -9, time.monotonic() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:8])}... exited {proc.returncode}: {err[-800:]}")
    return proc.returncode, time.monotonic() - started


def netpipe(place: Place, impl: str, opts: Sequence[str], out: Path) -> dict:
    argv = place.mpirun(impl, [f"/usr/bin/{NETPIPE[impl]}", *opts, "-o", str(out)])
    _rc, wall = run(argv, 60 if opts else 600, out.parent)
    return {"rows": parse_netpipe(out), "cmd": argv, "wall_s": wall}


def beoperf(place: Place, impl: str, args: Sequence[str], prefix: Path) -> dict:
    argv = place.beoperf(impl, [*args, "-o", str(prefix)])
    _rc, wall = run(argv, 600, prefix.parent)
    return {"doc": json.loads(prefix.with_suffix(".json").read_text())["body"], "cmd": argv,
            "wall_s": wall}


def latency_round(place: Place, impl: str, raw: Path, k: int) -> dict:
    np_ = netpipe(place, impl, ["-l", str(LAT_SIZE), "-u", str(LAT_SIZE), "-p", "0"],
                  raw / f"{place.name}-{impl}-np-lat-{k}.np")
    row = next(r for r in np_["rows"] if r[0] == LAT_SIZE)
    bo = beoperf(place, impl, ["--sizes", str(LAT_SIZE), "--trial-time", "0.05",
                               "--precision", "0.005", "--time-budget", "5"],
                 raw / f"{place.name}-{impl}-beoperf-lat-{k}")
    size = bo["doc"]["sizes"][0]
    # NetPIPE prints its time in seconds to 8 decimals (10 ns: 9% of a 0.11 us latency);
    # its bit rate has the digits, and it is size * 8 / that same time.
    return {"netpipe_us": LAT_SIZE * 8 / row[1] * 1e6, "netpipe_printed_us": row[2] * 1e6,
            "beoperf_us": size["time_us"]["median"],
            "beoperf_best_trial_us": size["time_us"]["best_trial_mean"],
            "netpipe_cmd": np_["cmd"], "beoperf_cmd": bo["cmd"]}


def peaks(place: Place, impl: str, raw: Path) -> dict:
    np_ = netpipe(place, impl, [], raw / f"{place.name}-{impl}-np-sweep.np")
    best = max(np_["rows"], key=lambda r: r[1])
    bo = beoperf(place, impl, ["--end", "8M", "--time-budget", "40"],
                 raw / f"{place.name}-{impl}-beoperf-sweep")
    sizes = bo["doc"]["sizes"]
    med = max(sizes, key=lambda s: s["throughput_bps"]["from_median"])
    fast = max(sizes, key=lambda s: s["throughput_bps"]["from_best_trial"])
    return {"netpipe_bps": best[1], "netpipe_size": best[0], "netpipe_wall_s": np_["wall_s"],
            "beoperf_bps": med["throughput_bps"]["from_median"], "beoperf_size": med["size"],
            "beoperf_best_trial_bps": fast["throughput_bps"]["from_best_trial"],
            "beoperf_best_trial_size": fast["size"], "beoperf_wall_s": bo["wall_s"],
            "netpipe_cmd": np_["cmd"], "beoperf_cmd": bo["cmd"]}


def bench(place: Place, impl: str, rounds: int, raw: Path) -> dict:
    lat = [latency_round(place, impl, raw, k) for k in range(rounds)]
    out = {"latency_rounds": lat,
           "netpipe_us": statistics.median(r["netpipe_us"] for r in lat),
           "beoperf_us": statistics.median(r["beoperf_us"] for r in lat),
           "beoperf_best_trial_us": statistics.median(r["beoperf_best_trial_us"] for r in lat)}
    out.update(peaks(place, impl, raw))
    return out


@contextlib.contextmanager
def place_of(name: str, raw: Path) -> Iterator[Place]:
    if name == "shm":
        yield Place("shm")
        return
    with netns.VethPair(2) as topo:
        yield Place("veth", topo.hosts, write_agent(raw / "agent", topo.hosts))


def markdown(results: dict) -> str:
    lines = ["| link | MPI | 16 B one-way: NPmpi us | beoperf median us | ratio | beoperf "
             "best trial us | ratio | peak: NPmpi Mbit/s | beoperf median Mbit/s | ratio | "
             "beoperf best trial Mbit/s | ratio |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for key, r in results["runs"].items():
        link, impl = key.split("/")
        lines.append(
            f"| {link} | {impl} | {r['netpipe_us']:.3f} | {r['beoperf_us']:.3f} | "
            f"{r['beoperf_us'] / r['netpipe_us']:.3f} | {r['beoperf_best_trial_us']:.3f} | "
            f"{r['beoperf_best_trial_us'] / r['netpipe_us']:.3f} | "
            f"{r['netpipe_bps'] / 1e6:.0f} ({r['netpipe_size']} B) | "
            f"{r['beoperf_bps'] / 1e6:.0f} ({r['beoperf_size']} B) | "
            f"{r['beoperf_bps'] / r['netpipe_bps']:.3f} | "
            f"{r['beoperf_best_trial_bps'] / 1e6:.0f} ({r['beoperf_best_trial_size']} B) | "
            f"{r['beoperf_best_trial_bps'] / r['netpipe_bps']:.3f} |")
    load = results["load_average"]
    lines.append(f"\nLoad average (1 min) during the run: {min(load):.2f}-{max(load):.2f}, "
                 f"median {statistics.median(load):.2f}.")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--links", default="shm,veth")
    p.add_argument("--impls", default="openmpi,mpich")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", default=str(REPO / "bench" / "out"))
    p.add_argument("--report", metavar="JSON", help="print an earlier run's table")
    args = p.parse_args(argv)
    if args.report:
        print(markdown(json.loads(Path(args.report).read_text())))
        return 0
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    raw = Path(args.out).resolve() / f"mpi-raw-{stamp}"
    raw.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"utc_start": stamp, "runs": {}, "argv": sys.argv}
    with LoadSampler() as load:
        for link in args.links.split(","):
            with place_of(link, raw) as place:
                for impl in args.impls.split(","):
                    results["runs"][f"{link}/{impl}"] = bench(place, impl, args.rounds, raw)
                    print(f"done {link}/{impl}", file=sys.stderr, flush=True)
    results["load_average"] = load.samples
    results["hung_and_killed"] = HUNG
    path = Path(args.out) / f"mpi-results-{stamp}.json"
    path.write_text(json.dumps(results, indent=1))
    print(markdown(results))
    print(f"raw figures: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

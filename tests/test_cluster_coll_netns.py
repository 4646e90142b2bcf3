"""`beoperf cluster coll` across three network-namespace hosts joined by a bridge, each
host's egress limited to RATE with tc tbf; Open MPI (mpirun through an rsh agent, TCP
only) and MPICH (hydra through the same agent, UCX held to TCP), ``--bind-to none``.

What must hold, whatever this machine's speed: every collective's result is checked by
every rank and found right; t_min <= t_avg <= t_max, all above zero; and a large
allreduce or alltoall takes at least the time the tbf lets through the bytes that must
leave a host (algorithm-independent): in an allreduce of n bytes each rank's result
depends on all n bytes of every other rank's vector, so n bytes of each host's data
must leave it, through its shaped egress, before another rank's call can end; in an
alltoall of blocks of b bytes, each rank receives b bytes from each other host, each
through that host's egress.  Those bytes leave a host only once its rank's call has
started, so the call of the rank that started first lasts at least (n - BURST) / rate
(BURST: what a full bucket lets through at once), whatever the algorithm: each trial's
longest call does.  One rank per host: three ranks on two CPUs, whose speed no
assertion relies on.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mpi_helpers import beoperf, require_mpi, run_bounded, write_agent

sys.path.insert(0, str(Path(__file__).resolve().parent))
import netns  # noqa: E402

pytestmark = [pytest.mark.netns, pytest.mark.tools("tc")]

RATE = "100mbit"
LINK = netns.rate_bytes_per_sec(RATE)
BURST = netns.tbf_burst(RATE)
BIG = 262144  # 256 KiB: 21 ms a call at 100 Mbit/s, against a bucket of BURST bytes
MARGIN = 1.05  # what a measurement may fall short of its bound by (clock, rounding)
TIMEOUT_S = 240
MPI_ENV = {"openmpi": ("--mpi-env", "OMPI_MCA_btl=tcp,self"),
           "mpich": ("--mpi-env", "UCX_TLS=tcp,self", "--mpi-env", "UCX_NET_DEVICES=eth0")}
OPS = ("allreduce", "allgather", "alltoall", "bcast", "reduce", "reduce_scatter", "gather",
       "scatter", "barrier")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    ok, reason = netns.can_use_netns()
    if not ok:
        pytest.skip(f"needs network namespaces: {reason}")
    tmp = tmp_path_factory.mktemp("clustercoll")
    with netns.VethPair(3) as topo:
        for host in topo.hosts:
            host.set_rate(RATE)
        yield {"hosts": topo.hosts, "agent": write_agent(tmp / "agent", topo.hosts),
               "tmp": tmp}


def run(cluster, impl: str, name: str, *args: str) -> dict:
    """`beoperf cluster coll ARGS` from the first host with IMPL, one rank a host; its
    JSON document (schema-checked)."""
    require_mpi(impl)
    hosts = cluster["hosts"]
    argv = beoperf("cluster", "coll", "--mpi", impl, "--hosts",
                   ",".join(h.addr4 for h in hosts), "--mpi-agent", cluster["agent"],
                   "--mpi-interface", hosts[0].ifname, *MPI_ENV[impl], "--quiet",
                   "--format", "json", "-o", str(cluster["tmp"] / f"{name}.json"), *args)
    return run_bounded(hosts[0].argv(argv), TIMEOUT_S).document()


@pytest.mark.parametrize("impl", ["openmpi", "mpich"])
def test_every_collective_checked_right_across_three_hosts(cluster, impl):
    doc = run(cluster, impl, f"all-{impl}", "--sizes", "8,4K", "--min-trials", "2",
              "--time-budget", "2")
    (series,) = doc["body"]["series"]
    assert series["status"] == "complete" and series["np"] == 3
    assert series["mpi"]["implementation"] == impl
    assert len({r["net_namespace"] for r in series["ranks"]}) == 3
    points = series["collectives"]
    assert {(p["op"], p["size"]) for p in points} == \
        {(op, s) for op in OPS for s in (8, 4096) if op != "barrier"} | {("barrier", 8)}
    for p in points:
        assert p["checked"] == 3 and p["corrupt"] == 0, p
        low, avg, high = (p[k]["median"] for k in ("t_min_s", "t_avg_s", "t_max_s"))
        assert 0 < low <= avg <= high, p
    by = {(p["op"], p["size"]): p for p in points}
    assert by[("allreduce", 4096)]["count"] == 512 and by[("allreduce", 4096)]["bytes"] == 4096
    assert by[("reduce_scatter", 4096)]["count"] == 4096 // 8 // 3


@pytest.mark.parametrize("impl", ["openmpi", "mpich"])
def test_large_allreduce_and_alltoall_no_faster_than_the_shaped_links(cluster, impl):
    doc = run(cluster, impl, f"big-{impl}", "--ops", "allreduce,alltoall", "--sizes",
              str(BIG), "--min-trials", "3", "--time-budget", "2")
    (series,) = doc["body"]["series"]
    assert series["status"] == "complete"
    bound = (BIG - BURST) / LINK  # the bytes that must leave a host, at its rate
    for p in series["collectives"]:
        assert p["corrupt"] == 0 and p["checked"] == 3, p
        assert p["bytes"] == BIG  # allreduce's vector, alltoall's block per rank
        # the rank that starts a call first waits for all the bytes the others must send
        # it, which leave them only once their own call has started: that rank's call,
        # so each trial's longest, lasts at least the bound (a rank that starts late may
        # find data already sent, so no per-rank mean is bounded so)
        assert p["longest_s"]["min"] * MARGIN >= bound, (p, bound)

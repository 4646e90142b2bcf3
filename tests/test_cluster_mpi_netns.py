"""`beoperf cluster pairs | ring | mbw` on a real cluster of namespace hosts: four hosts
joined by a bridge, each link limited to 100 Mbit/s with tc tbf, the last host's link
slowed to SLOW_RATE in both directions (its own egress and the switch port toward it),
Open MPI's mpirun in the first host's namespace reaching the others through an rsh agent,
TCP only on the test subnet, ``--bind-to none``.

What must hold, from the configuration alone (never this machine's speed): the all-pairs
matrix names that host, and nothing else; every figure stays within what its links can
carry (the tbf rate, plus the bucket a message can find full after the link was idle:
BURST bytes); the rings, each through the slow host, run at its link's rate; N pairs at
once carry at most the sum of their senders' links, with one or two ranks per node.
Each command runs once for the module, with small sizes and few trials (about a minute
in all); every job is bounded and leaves nothing behind (mpi_helpers.run_bounded).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mpi_helpers import beoperf, require_mpi, run_bounded, write_agent

sys.path.insert(0, str(Path(__file__).resolve().parent))
import netns  # noqa: E402

pytestmark = [pytest.mark.netns, pytest.mark.tools("mpirun.openmpi", "tc")]

RATE, SLOW_RATE = "100mbit", "30mbit"
LINK = netns.rate_bytes_per_sec(RATE)
SLOW = netns.rate_bytes_per_sec(SLOW_RATE)
BURST = max(netns.tbf_burst(RATE), netns.tbf_burst(SLOW_RATE))
SIZE = 500_000  # the bandwidth size of pairs and rings (HPCC's 2,000,000 takes too long)
MBW_SIZE, WINDOW = 65536, 8
SUBNET = f"{netns.NET4_PREFIX}0/{netns.NET4_PREFIXLEN}"
TIMEOUT_S = 240
MARGIN = 1.05  # what a measurement may exceed its bound by (the clock, rounding)


def ceiling(rate: float, burst_per: int) -> float:
    """The most a link of ``rate`` B/s can seem to carry when every ``burst_per`` bytes
    may find the tbf bucket full."""
    return rate * (1 + BURST / burst_per) * MARGIN


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    ok, reason = netns.can_use_netns()
    if not ok:
        pytest.skip(f"needs network namespaces: {reason}")
    require_mpi("openmpi")
    tmp = tmp_path_factory.mktemp("clustermpi")
    with netns.VethPair(4) as topo:
        for host in topo.hosts:
            host.set_rate(RATE)
        slow = topo.hosts[-1]
        slow.set_rate(SLOW_RATE)
        tbf = ["tbf", "rate", SLOW_RATE, "burst", str(netns.tbf_burst(SLOW_RATE)), "latency",
               "50ms"]
        subprocess.run(["ip", "netns", "exec", topo.switch, "tc", "qdisc", "replace", "dev",
                        f"p{len(topo.hosts) - 1}", "root", *tbf], check=True, timeout=30)
        agent = write_agent(tmp / "agent", topo.hosts)
        yield {"hosts": topo.hosts, "agent": agent, "tmp": tmp, "slow": slow.addr4}


def run(cluster, test: str, *args: str) -> dict:
    """`beoperf cluster TEST ARGS` from the first host, its JSON document (schema-checked;
    also kept beside the module's other files)."""
    argv = beoperf("cluster", test, *args, "--hosts",
                   ",".join(h.addr4 for h in cluster["hosts"]), "--mpi-agent", cluster["agent"],
                   "--mpi-interface", SUBNET, "--mpi-env", "OMPI_MCA_btl=tcp,self",
                   "--format", "json", "-o", str(cluster["tmp"] / f"{test}.json"))
    return run_bounded(cluster["hosts"][0].argv(argv), TIMEOUT_S).document()


@pytest.fixture(scope="module")
def pairs(cluster):
    png = cluster["tmp"] / "pairs.png"
    doc = run(cluster, "pairs", "--bandwidth-size", str(SIZE), "--min-trials", "6",
              "--time-budget", "5", "--plot", str(png))
    return doc, png


@pytest.fixture(scope="module")
def ring(cluster):
    return run(cluster, "ring", "--bandwidth-size", str(SIZE), "--random-rings", "2,2",
               "--min-trials", "2", "--time-budget", "3")


@pytest.fixture(scope="module")
def mbw(cluster):
    return run(cluster, "mbw", "--sizes", str(MBW_SIZE), "--window", str(WINDOW),
               "--pairs", "1,2,4", "--ranks-per-node", "1,2", "--min-trials", "3",
               "--time-budget", "3")


# --------------------------------------------------------------------------- pairs


def test_pairs_name_exactly_the_slowed_host(pairs, cluster):
    doc, _ = pairs
    (series,) = doc["body"]["series"]
    assert series["status"] == "complete"
    assert series["nodes"] == [h.addr4 for h in cluster["hosts"]]
    assert len(series["pairs"]) == 6 and all(p["latency_s"] and p["bandwidth_Bps"]
                                             for p in series["pairs"])
    found = series["findings"]
    by_bandwidth = [s["node"] for s in found["slow_nodes"] if s["metric"] == "bandwidth"]
    assert by_bandwidth == [cluster["slow"]], found
    assert not [s for s in found["slow_links"] if s["metric"] == "bandwidth"], found
    # latency is not asserted: the slowed host differs by its rate only, and in a busy
    # parallel phase a 16 B round trip between two other hosts can read 25% slow (a CI
    # run named such a link); what the rate limits, bandwidth, names that host alone
    assert "25%" in found["rule"] and "3.5" in found["rule"]


def test_pairs_bandwidth_is_what_the_links_carry(pairs, cluster):
    doc, _ = pairs
    (series,) = doc["body"]["series"]
    for p in series["pairs"]:
        through_slow = cluster["slow"] in (p["node_a"], p["node_b"])
        limit = ceiling(SLOW if through_slow else LINK, SIZE)
        assert p["bandwidth_Bps"]["median"] <= limit, p
        assert p["bandwidth_Bps"]["median"] > 0.4 * (SLOW if through_slow else LINK), p
    matrix = series["findings"]["matrix"]["bandwidth_Bps"]
    assert all(matrix[i][j] == matrix[j][i] for i in range(4) for j in range(4))
    assert all(matrix[i][i] is None for i in range(4))  # one rank per node: no pair within


def test_pairs_heat_map_and_renderings(pairs):
    doc, png = pairs
    assert png.read_bytes().startswith(b"\x89PNG") and png.stat().st_size > 20000
    from beoperf import model, report

    loaded = model.from_json(doc)
    text = report.render(loaded, "text")
    assert "slow node 198.18.0.4: bandwidth" in text and "Bandwidth (MB/s" in text
    html = report.render(loaded, "html")
    assert html.count('data-key="body.series.0.findings.matrix.bandwidth_Bps.') == 12
    assert report.render(loaded, "csv").count("\n") == 7  # a header and six pairs


# --------------------------------------------------------------------------- rings


def test_rings_run_at_the_slow_links_rate(ring, cluster):
    (series,) = ring["body"]["series"]
    assert series["status"] == "complete" and series["np"] == 4
    (repeat,) = series["repeats"]
    names = sorted({(r["name"], r["size"]) for r in repeat["rings"]})
    assert names == sorted((n, s) for n in ("natural", "random 1", "random 2")
                           for s in (8, SIZE))
    for r in repeat["rings"]:
        assert sorted(r["order"]) == [0, 1, 2, 3]
        assert all(t["reps"] == (5 if r["size"] == 8 else 2) for t in r["trials"])
    figures = repeat["figures"]
    for key in ("NaturallyOrderedRingBandwidth_GBytes", "RandomlyOrderedRingBandwidth_GBytes"):
        # every ring passes through the slowed host: each process sends as fast as its
        # link lets the slowest one send
        assert figures[key] * 1e9 <= ceiling(SLOW, 2 * SIZE), (key, figures)
        assert figures[key] * 1e9 > 0.4 * SLOW, (key, figures)
    # HPCC's figure is the minimum over the trials, the median's figure cannot beat it
    lat = next(r for r in repeat["rings"] if r["name"] == "natural" and r["size"] == 8)
    assert len(lat["trials"]) >= 8 and figures["NaturallyOrderedRingLatency_usec"] == \
        pytest.approx(min(t["latency_s"] for t in lat["trials"][:8]) * 1e6)
    natural = next(r for r in repeat["rings"] if r["name"] == "natural" and r["size"] == SIZE)
    # HPCC's figure: the least of its 3 measurements at the bandwidth size
    assert figures["NaturallyOrderedRingBandwidth_GBytes"] == pytest.approx(
        SIZE / min(t["latency_s"] for t in natural["trials"][:3]) / 1e9)


def test_ring_records_the_launch_and_the_ranks(ring, cluster):
    (series,) = ring["body"]["series"]
    argv = series["launch"]["argv"]
    assert argv[0].endswith("mpirun.openmpi") and argv[-1] == "PLAN"
    assert argv[argv.index("--host") + 1] == ",".join(f"{h.addr4}:1" for h in cluster["hosts"])
    assert series["launch"]["environment"]["OMPI_MCA_btl"] == "tcp,self"
    assert series["environment"]["OMPI_MCA_btl"] == "tcp,self"
    namespaces = {r["net_namespace"] for r in series["ranks"]}
    assert len(namespaces) == 4 and [r["node"] for r in series["ranks"]] == series["nodes"]
    assert "tcp" in series["transport"]["btl"]


# --------------------------------------------------------------------------- N pairs


def test_pairs_at_once_carry_at_most_their_links(mbw, cluster):
    one, two = mbw["body"]["series"]
    assert (one["ranks_per_node"], two["ranks_per_node"]) == (1, 2)
    assert one["pair_counts"] == [1, 2] and one["skipped_pair_counts"] == [4]
    assert two["pair_counts"] == [1, 2, 4]
    rate = {h.addr4: LINK for h in cluster["hosts"]} | {cluster["slow"]: SLOW}
    for series in (one, two):
        node = [r["node"] for r in series["ranks"]]
        for p in series["points"]:
            pairs = [(node[i], node[i + p["pairs"]]) for i in range(p["pairs"])]
            if any(a == b for a, b in pairs):  # within a node (shared memory): no link
                continue
            senders = {a for a, _ in pairs}
            receivers = {b for _, b in pairs}
            limit = min(sum(rate[a] for a in senders), sum(rate[b] for b in receivers))
            limit = ceiling(limit, WINDOW * MBW_SIZE)
            # all bytes of a trial over its slowest pair's time: what the links carried
            # (pairs x the slowest pair's rate; the slowest over every trial is lower)
            assert p["pairs"] * p["pair_Bps"]["min"] <= limit, (series["ranks_per_node"], p)
            if len(senders) == len(receivers) == p["pairs"]:
                # no link shared: osu_mbw_mr's aggregate (bytes over the senders' MEAN
                # time) is bounded too; with a shared link a pair that finished early
                # makes the mean shorter than the time the link was busy
                assert p["bandwidth_Bps"]["median"] <= limit, (series["ranks_per_node"], p)
            assert p["pair_Bps"]["min"] <= min(rate[b] for _, b in pairs) * (
                1 + BURST / (WINDOW * MBW_SIZE)) * MARGIN


def test_two_ranks_per_node_share_the_nodes_links(mbw, cluster):
    """Four pairs from two sending nodes (two ranks each) carry no more than the two pairs
    of one rank per node between the same nodes; the rate of messages is osu's."""
    one, two = mbw["body"]["series"]
    by_one = next(p for p in one["points"] if p["pairs"] == 2)
    by_two = next(p for p in two["points"] if p["pairs"] == 4)
    # what the shared links carried (pairs x the slowest pair: see the test above)
    assert by_two["pairs"] * by_two["pair_Bps"]["min"] <= \
        by_one["bandwidth_Bps"]["median"] * 1.25
    for p in (by_one, by_two):
        assert p["rate_per_s"]["median"] == pytest.approx(
            p["bandwidth_Bps"]["median"] / MBW_SIZE, rel=1e-9)
    from beoperf import model, report

    text = report.render(model.from_json(mbw), "text")
    assert "2 ranks per node (8 ranks)" in text and "0->4 (198.18.0.1 -> 198.18.0.3)" in text

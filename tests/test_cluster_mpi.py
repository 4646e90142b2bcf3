"""`beoperf cluster ring | pairs | mbw`: the definitions (HPCC's rings, the slow-node and
slow-link rule, osu_mbw_mr's pairs), the C loops they add (HPCC's ring step, warm-up and
barrier) with real Open MPI and MPICH on this host, the commands launched by beoperf and
by the user's mpirun, Ctrl-C, and bad input.  Every MPI job is bounded
(mpi_helpers.run_bounded) and leaves nothing behind."""

from __future__ import annotations

import itertools
import json
import math
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from beoperf import model, report
from beoperf.analysis import cluster_mpi as A
from beoperf.suites.cluster_pairs import round_robin
from mpi_helpers import PYTHON, beoperf, kill_group, require_mpi, run_bounded

FIXTURES = Path(__file__).parent / "fixtures" / "documents"
QUIET = ("--mpi-env", "OMPI_MCA_mpi_yield_when_idle=1")  # ranks > cores here: yield


# --------------------------------------------------------------------------- rings


class Fixed(random.Random):
    """A generator that returns the values given, in turn."""

    def __init__(self, values):
        super().__init__(0)
        self.values = iter(values)

    def random(self):
        return next(self.values)


def test_random_rings_are_drawn_as_hpcc_draws_them():
    """Each rank in turn takes the position a uniform draw names, or the next free one
    after it (bench_lat_bw_1.5.2.c: j = rand() * size / RAND_MAX, then j = (j + 1) % size
    while taken)."""
    assert A.random_rings(4, 1, 0, Fixed([0.0] * 4)) == [[0, 1, 2, 3]]
    assert A.random_rings(4, 1, 0, Fixed([0.9] * 4)) == [[1, 2, 3, 0]]
    assert A.random_rings(4, 1, 0, Fixed([0.5, 0.5, 0.1, 0.99])) == [[2, 3, 0, 1]]
    rings = A.random_rings(7, 50, 1234)
    assert all(sorted(r) == list(range(7)) for r in rings)
    assert rings == A.random_rings(7, 50, 1234) and rings != A.random_rings(7, 50, 1235)
    assert A.neighbours([2, 0, 3, 1], 0) == (2, 3) and A.neighbours([2, 0, 3, 1], 2) == (1, 0)


def test_a_ring_trial_is_the_slowest_ranks_faster_variant_halved():
    per_rank = {0: (1000, 800), 1: (900, 1200), 2: (500, 700)}  # ns for 5 steps
    assert A.trial_latency(per_rank, 5) == pytest.approx(900 / 5 / 2 / 1e9)


def test_ring_figures_are_the_minimum_and_the_geometric_mean():
    def ring(kind, size, trials):
        return {"kind": kind, "size": size} | A.ring_stat(trials)

    rings = [ring("natural", 8, [3e-6, 2e-6, 4e-6]),
             ring("random", 8, [4e-6, 5e-6]), ring("random", 8, [9e-6, 10e-6]),
             ring("natural", 1000, [1e-3, 2e-3]), ring("random", 1000, [4e-3])]
    got = A.ring_figures(rings, 8, 1000)
    assert got["NaturallyOrderedRingLatency_usec"] == pytest.approx(2.0)
    assert got["RandomlyOrderedRingLatency_usec"] == pytest.approx(math.sqrt(4 * 9))
    assert got["NaturallyOrderedRingBandwidth_GBytes"] == pytest.approx(1000 / 1e-3 / 1e9)
    assert got["RandomlyOrderedRingBandwidth_GBytes"] == pytest.approx(1000 / 4e-3 / 1e9)
    # as many as HPCC measures: the least of the first ones, the median of all
    assert A.ring_stat([5.0, 4.0, 3.0, 2.0, 1.0], 3)["hpcc_s"] == 3.0
    assert A.ring_stat([5.0, 4.0, 3.0, 2.0, 1.0], 3)["median_s"] == 3.0
    assert A.ring_stat([5.0, 4.0, 3.0, 2.0, 1.0])["hpcc_s"] == 1.0
    medians = A.ring_figures(rings, 8, 1000, "median_s")
    assert medians["NaturallyOrderedRingLatency_usec"] == pytest.approx(3.0)
    assert A.ring_figures([], 8, 1000) == dict.fromkeys(A.HPCC_KEYS)


# --------------------------------------------------------------------------- slow nodes


def pair(a, b, lat, bw, nodes, spread=0.01):
    def st(v, s):
        return {"median": v, "ci_low": v * (1 - s), "ci_high": v * (1 + s), "min": v,
                "max": v, "trials": 6}

    return {"a": a, "b": b, "node_a": nodes[a], "node_b": nodes[b], "latency_s": st(lat, spread),
            "bandwidth_Bps": st(bw, spread)}


def matrix(values, nodes, lat=10e-6, spread=0.01):
    """Pairs of one rank per node, with bandwidth values[(a, b)] (default 12e6)."""
    return [pair(a, b, lat, values.get((a, b), 12e6), nodes, spread)
            for a, b in itertools.combinations(range(len(nodes)), 2)]


NODES = ["n1", "n2", "n3", "n4"]


class RingLeader:
    """Two ranks that answer each ring order at once; a trial "takes" ``step_s`` of the
    fake clock per timed step, a cold one (after a pause of the ranks) ``cold`` times
    as long."""

    size = 2

    def __init__(self, clock, step_s=1e-5, cold=1.5):
        self.clock, self.step_s, self.cold, self.calls = clock, step_s, cold, []
        self.per_step_clock = set()  # whether any order asked for each step's time

    def execute(self, orders):
        from beoperf.engines.mpi_group import Result
        order = next(iter(orders.values()))
        paused = self.clock.last is None or self.clock.now - self.clock.last > 1e-3
        took = order.reps * self.step_s * (self.cold if paused else 1.0)
        self.calls.append((order.size, paused))
        self.per_step_clock |= {o.samples for o in orders.values()}
        self.clock.now += took
        self.clock.last = self.clock.now
        ns = int(took * 1e9)
        return {r: Result(r, ns, None, None, 0, 0, ns) for r in orders}


class Clock:
    def __init__(self):
        self.now, self.last = 100.0, None

    def __call__(self):
        return self.now


def test_a_ring_trial_after_a_pause_follows_untimed_warm_trials():
    from beoperf.sweep.cluster_mpi import FIRST_WARM_S, REWARM_S, RingMeasurer
    clock = Clock()
    leader = RingLeader(clock)
    m = RingMeasurer(leader, [[0, 1], [1, 0]], {8: 5, 2_000_000: 2}, clock=clock)
    first = m.trial((0, 8), 5)
    assert m.warm_trials == pytest.approx(FIRST_WARM_S / (5 * leader.step_s), abs=2)
    assert leader.calls[0][1] and not leader.calls[-1][1]  # the timed trial was warm
    assert first[0] == pytest.approx(5e3)  # ns: 10 us a step, halved, not the cold 15
    before = m.warm_trials
    m.trial((1, 8), 5)  # right after: no warm-up
    assert m.warm_trials == before
    clock.now += 0.5  # rank 0's bookkeeping between passes
    m.trial((0, 8), 5)
    assert m.warm_trials - before == pytest.approx(REWARM_S / (5 * leader.step_s), abs=2)
    assert [t["latency_s"] for t in m.log[(0, 8)]] == [pytest.approx(5e-6)] * 2
    # a long trial is not worth warming: one warm trial finds it long, none after that
    leader.step_s = 0.1
    clock.now += 0.5
    before = m.warm_trials
    m.trial((0, 2_000_000), 2)
    assert m.warm_trials == before + 1
    clock.now += 0.5
    m.trial((0, 2_000_000), 2)
    assert m.warm_trials == before + 1
    # as HPCC, the clock is read around each loop only (each step's two reads of ~20 ns
    # were a fifth of the 0.1 us a message over shared memory)
    assert leader.per_step_clock == {False}


def test_a_slow_node_explains_its_own_pairs():
    found = A.findings(matrix({(0, 3): 4e6, (1, 3): 4.1e6, (2, 3): 3.9e6}, NODES), NODES)
    assert [(s["node"], s["metric"]) for s in found["slow_nodes"]] == [("n4", "bandwidth")]
    assert found["slow_links"] == [] and found["note"] is None
    assert found["node_figures"]["bandwidth_Bps"]["n4"] == 4.1e6
    assert "25%" in found["rule"] and "3.5" in found["rule"]
    assert A.named(found)[0].startswith("slow node n4: bandwidth 4.1 MB/s")


def test_a_slow_link_is_one_its_nodes_do_not_explain():
    found = A.findings(matrix({(0, 1): 5e6}, NODES), NODES)
    assert found["slow_nodes"] == []
    assert [(s["a"], s["b"], s["metric"]) for s in found["slow_links"]] == \
        [("n1", "n2", "bandwidth")]
    assert found["slow_links"][0]["expected"] == 12e6


def test_three_nodes_suffice_and_two_do_not():
    three = NODES[:3]
    found = A.findings(matrix({(0, 2): 4e6, (1, 2): 4e6}, three), three)
    assert [s["node"] for s in found["slow_nodes"]] == ["n3"]
    two = A.findings(matrix({(0, 1): 4e6}, NODES[:2]), NODES[:2])
    assert two["slow_nodes"] == two["slow_links"] == [] and "2 nodes" in two["note"]


def test_noise_within_the_threshold_or_the_interval_names_nothing():
    # 20% slower: within the 25% threshold
    assert A.findings(matrix({(0, 3): 9.6e6, (1, 3): 9.6e6, (2, 3): 9.6e6}, NODES),
                      NODES)["slow_nodes"] == []
    # a pair whose trials spread from fast to very slow (a busy spell): its median is
    # far off, but its interval reaches the others'
    pairs = matrix({}, NODES)
    pairs[0]["latency_s"] = {"median": 1e-3, "ci_low": 9e-6, "ci_high": 2e-3, "min": 9e-6,
                             "max": 2e-3, "trials": 6}
    found = A.findings(pairs, NODES)
    assert found["slow_links"] == [] and found["slow_nodes"] == []
    pairs[0]["latency_s"]["ci_low"] = 0.9e-3  # the same, measured tightly: named
    assert [(s["a"], s["b"], s["metric"]) for s in A.findings(pairs, NODES)["slow_links"]] \
        == [("n1", "n2", "latency")]
    # the threshold is the caller's
    assert A.findings(matrix({(0, 3): 9.6e6, (1, 3): 9.6e6, (2, 3): 9.6e6}, NODES), NODES,
                      relative=0.1)["slow_nodes"][0]["node"] == "n4"


def test_several_ranks_per_node_fill_the_diagonal():
    nodes = ["a", "a", "b", "b", "c", "c"]  # the node of each rank
    pairs = [pair(x, y, 1e-6 if nodes[x] == nodes[y] else 10e-6, 12e6, nodes)
             for x, y in itertools.combinations(range(6), 2)]
    m = A.host_matrix(pairs, ["a", "b", "c"], "latency_s")
    assert [m[i][i] for i in range(3)] == [1e-6] * 3 and m[0][1] == 10e-6
    assert A.findings(pairs, ["a", "b", "c"])["slow_nodes"] == []


def test_modified_z_scores():
    z = A.modified_z([1.0, 1.0, 1.0, 2.0])
    assert z[:3] == [0.0, 0.0, 0.0] and z[3] == math.inf
    z = A.modified_z([1.0, 1.1, 0.9, 1.05, 3.0])
    assert abs(z[0]) < 1 and z[4] > 3.5


def test_rounds_hold_every_pair_once_and_each_rank_once_a_round():
    for n in range(2, 10):
        rounds = round_robin(n)
        seen = [p for r in rounds for p in r]
        assert sorted(seen) == list(itertools.combinations(range(n), 2))
        for r in rounds:
            ranks = [x for p in r for x in p]
            assert len(ranks) == len(set(ranks))


def test_osu_pairs():
    assert A.pairings(2) == [(0, 2), (1, 3)]
    assert A.default_pair_counts(8) == (1, 2, 4)
    assert A.default_pair_counts(6) == (1, 2, 3)
    assert A.default_pair_counts(2) == (1,)


# --------------------------------------------------------------------------- documents


@pytest.mark.parametrize("kind", ["cluster-ring", "cluster-pairs", "cluster-mbw"])
def test_fixtures_render_in_every_format(kind):
    doc = model.load(FIXTURES / f"{kind}-v1-issue14.json")
    for fmt in ("text", "markdown", "csv", "html", "title"):
        assert report.render(doc, fmt).strip()
    assert set(report.formats(kind)) == {"text", "markdown", "csv", "json"}


def test_the_ring_table_compares_the_series():
    doc = model.load(FIXTURES / "cluster-ring-v1-issue14.json")
    assert len(doc.body["series"]) == 2
    text = report.render(doc, "text")
    assert "3/2 per node" in text and "natural ring latency (us)" in text
    assert "median of trials" in text


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(("argv", "message"), [
    (["ring", "--random-rings", "3"], "expected L,B"),
    (["ring"], "two ranks at least"),
    (["ring", "--ranks-per-node", "0"], "counts from 1"),
    (["pairs", "--threshold", "1.5", "--ranks-per-node", "2"], "--threshold: fraction"),
    (["mbw", "--integrity", "--window", "8", "--ranks-per-node", "2"], "own buffer"),
    (["mbw", "--sizes", "8,1Q"], "--sizes"),
    (["pairs", "--hosts", "a,-oProxy=x"], "is not a host name"),
    (["ring", "--hosts", "a,b", "--hostfile", "/nonexistent"], "not both"),
    (["ring", "--precision", "2"], "--precision"),
])
def test_bad_options_are_one_line_errors(argv, message):
    from helpers import cli

    res = cli("cluster", *argv)
    assert res.status == 2, res.stderr
    assert message in res.stderr and res.stderr.count("\n") == 1 and "Traceback" not in \
        res.stderr


# --------------------------------------------------------------------------- the C loops

LOOPS = r"""
import json
import sys
import numpy as np
from beoperf.launch import ranks
ranks.prepare(ranks.implementation_here())
from beoperf.engines import mpi
from beoperf.engines.mpi_group import Member, Order
s = mpi.Session.open()
ranks.remove_shim()
m, n, r = Member(s), s.size, s.rank
left, right = (r - 1) % n, (r + 1) % n
out = {}
for role in ("ring-sendrecv", "ring-nonblocking"):
    res = m.run(Order(role, size=4096, reps=50, warmup=3, barrier=True, left=left, right=right,
                      window=2, integrity=True, seq0=7))
    raw = s.lib.run(role, s.handle(), s.byte, m.pool, 50, size=4096, to=(right,),
                    from_=(left,), tag=7)
    total = int(np.frombuffer(raw[0], dtype=np.uint64).sum())
    out[role] = [res.samples, res.corrupt, total <= raw[1], res.median_ns > 0]
# HPCC's sequence as the rings measure it: the clock read only around each loop
res = m.run(Order("ring", size=8, reps=40, warmup=1, barrier=True, left=left, right=right,
                  window=2, integrity=True, seq0=9, samples=False))
out["ring"] = [res.samples, res.median_ns, res.corrupt, res.elapsed_ns > 0,
               (res.elapsed2_ns or 0) > 0]
# a ping-pong between the last two ranks and a stream from 0 to 1, the others in the barrier
a, b = n - 2, n - 1
pp = {a: Order("pingpong-initiator", peer=b, size=64, reps=20, warmup=2, barrier=True,
               integrity=True),
      b: Order("pingpong-responder", peer=a, size=64, reps=20, warmup=2, barrier=True,
               integrity=True)}
res = m.run(pp.get(r, Order("barrier")))
out["pingpong"] = [res.samples, res.corrupt]
st = {0: Order("stream-send", peer=1, size=1024, reps=16, warmup=4, barrier=True, window=2,
               integrity=True),
      1: Order("stream-recv", peer=0, size=1024, reps=16, warmup=4, barrier=True, window=2,
               integrity=True)}
res = m.run(st.get(r, Order("barrier")))
out["stream"] = [res.corrupt, res.elapsed_ns > 0]
with open(f"{sys.argv[1]}/rank{r}.json", "w") as f:
    json.dump({"rank": r, **out}, f)
s.finalize()
"""


@pytest.mark.parametrize(("impl", "np_"), [("openmpi", 2), ("openmpi", 3), ("mpich", 3)])
def test_the_ring_loop_with_warm_up_barrier_and_integrity(impl, np_, tmp_path):
    """HPCC's ring step in both variants (a ring of two, where left and right are the
    same rank, and of three), with a warm-up and a barrier, every message verified; a
    ping-pong and a stream with a warm-up and the barrier while the other ranks wait in
    it; for both MPI ABIs (Open MPI's pointer handles, MPICH's int handles)."""
    require_mpi(impl)
    launcher = {"openmpi": ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe",
                            "--bind-to", "none", "-x", "BEOPERF_MPI=openmpi"],
                "mpich": ["mpirun.mpich", "-bind-to", "none", "-genv", "BEOPERF_MPI",
                          "mpich"]}[impl]
    got = run_bounded([*launcher, "-np", str(np_), PYTHON, "-c", LOOPS, str(tmp_path)], 90)
    assert got.returncode == 0, got.stderr[-2000:]
    lines = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(np_)]
    assert [x["rank"] for x in lines] == list(range(np_))
    for x in lines:
        for role in ("ring-sendrecv", "ring-nonblocking"):
            assert x[role] == [50, 0, True, True], (role, x)
        assert x["ring"] == [0, None, 0, True, True], x
        if x["rank"] == np_ - 2:
            assert x["pingpong"] == [20, 0]
        if x["rank"] == 1:
            assert x["stream"] == [0, True]


# --------------------------------------------------------------------------- commands


def test_pairs_on_this_host_with_three_ranks(tmp_path):
    """Launched by beoperf: three ranks here (shared memory), the diagonal holds the
    pairs within the node, the document and the heat map are written."""
    require_mpi("openmpi")
    out, png = tmp_path / "pairs.json", tmp_path / "pairs.png"
    got = run_bounded(beoperf("cluster", "pairs", "--ranks-per-node", "3", "--bandwidth-size",
                              "64K", "--min-trials", "3", "--time-budget", "2", "-o", str(out),
                              "--plot", str(png), *QUIET), 90)
    assert got.returncode == 0, got.stderr[-2000:]
    doc = model.load(out).to_json()
    (series,) = doc["body"]["series"]
    assert series["np"] == 3 and series["ranks_per_node"] == 3 and len(series["nodes"]) == 1
    assert [(p["a"], p["b"]) for p in series["pairs"]] == [(0, 1), (0, 2), (1, 2)]
    assert series["findings"]["matrix"]["latency_s"][0][0] is not None
    assert "1 node: slow nodes and links are named from 3" in got.stdout
    assert png.read_bytes().startswith(b"\x89PNG")
    assert series["launch"]["argv"][series["launch"]["argv"].index("--host") + 1] == \
        "localhost:3"
    # the conditions around the jobs, on this host (the MPI library owns the sockets)
    conditions = doc["meta"]["conditions"]
    assert conditions["start"]["load"] and conditions["end"]["cpus"] >= 1
    assert conditions["network"]["socket_retransmissions"] is None
    assert "\nmachine    load " in got.stdout


def test_started_by_the_users_mpirun_rank_0_reports(tmp_path):
    require_mpi("openmpi")
    got = run_bounded(["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-np", "4",
                       "--bind-to", "none", "-x", "OMPI_MCA_mpi_yield_when_idle=1",
                       *beoperf("cluster", "mbw", "--sizes", "8,4K", "--window", "4",
                                "--min-trials", "3", "--time-budget", "2", "--format", "json")],
                      90, env={"TMPDIR": str(tmp_path)})
    assert got.returncode == 0, got.stderr[-2000:]
    assert got.stdout.count('"format": "beoperf"') == 1  # rank 0's only
    doc = got.document()
    (series,) = doc["body"]["series"]
    assert series["np"] == 4 and series["launch"]["started_by"] == "openmpi"
    assert series["pair_counts"] == [1, 2]
    assert doc["meta"]["conditions"]["start"]["load"]  # rank 0 watched its host
    assert [(p["pairs"], p["size"]) for p in series["points"]] == [(1, 8), (1, 4096), (2, 8),
                                                                   (2, 4096)]


def test_mpich_ring_launched_by_beoperf():
    require_mpi("mpich")
    got = run_bounded(beoperf("cluster", "ring", "--mpi", "mpich", "--ranks-per-node", "2",
                              "--random-rings", "1,1", "--bandwidth-size", "64K",
                              "--min-trials", "2", "--time-budget", "1", "--format", "json"), 120)
    doc = got.document()
    (series,) = doc["body"]["series"]
    assert series["mpi"]["implementation"] == "mpich" and series["status"] == "complete"
    assert series["launch"]["argv"][0].endswith("mpirun.mpich")
    assert all(v > 0 for v in series["repeats"][0]["figures"].values())


@pytest.mark.parametrize("sig, status, why", [
    (signal.SIGINT, 130, "interrupted by the user"),
    (signal.SIGTERM, 143, "terminated by SIGTERM")])
def test_ctrl_c_or_sigterm_keeps_what_was_measured(tmp_path, sig, status, why):
    """The series is kept and says what stopped it: a SIGTERM is not the user's Ctrl-C
    (rank 0 saw SIGUSR1 either way)."""
    require_mpi("openmpi")
    out = tmp_path / "cut.json"
    proc = subprocess.Popen(beoperf("cluster", "ring", "--ranks-per-node", "2",
                                    "--precision", "0.0001", "--time-budget", "120",
                                    "--bandwidth-size", "64K", "-o", str(out)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        time.sleep(8)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            kill_group(proc)
    assert proc.returncode == status, err[-2000:]
    (series,) = model.load(out).body["series"]
    assert series["status"] == "interrupted" and series["status_reason"] == why
    assert series["repeats"] and series["repeats"][0]["rings"]


def test_ranks_outnumbering_their_hosts_cpus_are_warned_of():
    """Three ranks that may run on CPUs 0 and 1 of one host name (namespaces of one
    machine share it) are one warning naming 3 ranks and 2 CPUs; two ranks on two CPUs,
    or ranks of unknown affinity, are none."""
    from beoperf.suites.cluster_mpi import oversubscribed

    three = [{"host": "vm", "cpus": [0, 1], "net_namespace": f"ns{i}"} for i in range(3)]
    (warning,) = oversubscribed(three)
    assert "3 ranks on vm's 2 CPU(s)" in warning and "at most 2 rank(s)" in warning
    assert oversubscribed(three[:2]) == []
    assert oversubscribed([{"host": "a", "cpus": [0]}, {"host": "b", "cpus": [0]}]) == []
    assert oversubscribed([{"host": "vm", "cpus": None}] * 4) == []

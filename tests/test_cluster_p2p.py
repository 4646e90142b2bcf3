"""`beoperf cluster bibw | incast | bisect`: the flows each pattern makes, the figures
computed from a trial's times, the pairs a user gives, the C loops (csrc/mpipat.c) with
real Open MPI and MPICH on this host, the rendered document and bad input.  Every MPI job
is bounded (mpi_helpers.run_bounded)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from beoperf import errors, model, report
from beoperf.model.cluster_mpi import RankPlace, Series
from beoperf.suites import cluster_p2p as P
from mpi_helpers import PYTHON, beoperf, require_mpi, run_bounded

FIXTURES = Path(__file__).parent / "fixtures" / "documents"
QUIET = ("--mpi-env", "OMPI_MCA_mpi_yield_when_idle=1")  # ranks > cores here: yield


def series(nodes: list[str], per_node: int) -> Series:
    """A series of len(nodes) x per_node ranks placed by node."""
    ranks = [RankPlace(i, None, None, None, None, None, nodes[i // per_node])
             for i in range(len(nodes) * per_node)]
    return Series(per_node, len(ranks), list(nodes), ranks, {}, {}, None, None, [])


def params(pattern: str, counts=None, pairs=None) -> P.Params:
    return P.Params(pattern, [1024], 8, counts, pairs)


# --------------------------------------------------------------------------- flows


def test_bibw_pairs_rank_i_with_rank_i_plus_n():
    flows, counts = P.plan_flows(params("bibw"), series(["a", "b", "c", "d"], 1))
    assert flows == [(0, 2), (1, 3)] and counts == [1, 2]
    flows, counts = P.plan_flows(params("bibw", [1, 3]), series(["a", "b", "c", "d"], 1))
    assert flows == [(0, 1)] and counts == [1]  # 3 pairs need 6 ranks
    with pytest.raises(errors.BadSpec, match="at most 2 pairs"):
        P.plan_flows(params("bibw", [3]), series(["a", "b", "c", "d"], 1))


def test_incast_senders_come_from_the_other_nodes_first():
    s = series(["r", "x", "y"], 2)  # ranks 0, 1 on r; 2, 3 on x; 4, 5 on y
    flows, counts = P.plan_flows(params("incast"), s)
    assert flows == [(2, 0), (3, 0), (4, 0), (5, 0), (1, 0)]
    assert counts == [1, 2, 4, 5]
    _, counts = P.plan_flows(params("incast", [2, 9]), s)
    assert counts == [2]


def test_bisect_pairs_the_halves_or_the_nodes_given():
    s = series(["a", "b", "c", "d"], 2)
    flows, counts = P.plan_flows(params("bisect"), s)
    assert flows == [(0, 4), (1, 5), (2, 6), (3, 7)] and counts == [4]
    flows, _ = P.plan_flows(params("bisect", pairs=[("a", "d"), ("1", "c")]), s)
    assert flows == [(0, 6), (1, 7), (2, 4), (3, 5)]  # by name and by index
    with pytest.raises(errors.BadSpec, match="no node e"):
        P.plan_flows(params("bisect", pairs=[("a", "e")]), s)
    with pytest.raises(errors.BadSpec, match="in two pairs"):
        P.plan_flows(params("bisect", pairs=[("a", "b"), ("0", "c")]), s)
    with pytest.raises(errors.BadSpec, match="even count"):
        P.plan_flows(params("bisect"), series(["a", "b", "c"], 1))


def test_pairs_are_read_from_a_list_or_a_file(tmp_path):
    assert P.parse_pairs("a:b, c:d") == (("a", "b"), ("c", "d"))
    f = tmp_path / "pairs"
    f.write_text("# node pairs\nn01 n05\nn02:n06  # second\n\n")
    assert P.parse_pairs(str(f)) == (("n01", "n05"), ("n02", "n06"))
    f.write_text("n01 n05 n06\n")
    with pytest.raises(errors.BadSpec, match="not a pair"):
        P.parse_pairs(str(f))
    with pytest.raises(errors.BadSpec, match="neither"):
        P.parse_pairs(str(tmp_path / "missing"))


# --------------------------------------------------------------------------- figures


class Log:
    """A measurer's log, as FlowMeasurer keeps it."""

    def __init__(self, pattern: str, log: dict) -> None:
        self.pattern, self.log = pattern, log


def test_a_pairs_rate_counts_both_ways_over_its_slower_end_and_the_aggregate_sums_them():
    trials = [{"reps": 100, "elapsed_ns": [1_000_000, 4_000_000], "receiver_ns": None}] * 3
    p = P.point(Log("bibw", {(2, 1000): trials}), 2, 1000)
    assert p.flow_Bps[0].median == pytest.approx(2 * 1000 * 100 / 1e-3)
    assert p.flow_Bps[1].median == pytest.approx(2 * 1000 * 100 / 4e-3)
    assert p.aggregate_Bps.median == pytest.approx(p.flow_Bps[0].median + p.flow_Bps[1].median)
    assert p.slowest == 1 and p.trials == 3 and p.messages == 100


def test_an_incasts_aggregate_is_the_receivers():
    trials = [{"reps": 50, "elapsed_ns": [3_000_000, 2_000_000, 2_500_000],
               "receiver_ns": 2_000_000}] * 2
    p = P.point(Log("incast", {(3, 4096): trials}), 3, 4096)
    assert p.aggregate_Bps.median == pytest.approx(3 * 4096 * 50 / 2e-3)
    assert p.flow_Bps[0].median == pytest.approx(4096 * 50 / 3e-3) and p.slowest == 0


# --------------------------------------------------------------------------- documents


def test_the_fixture_renders_the_answer_first_in_every_format():
    doc = model.load(FIXTURES / "cluster-p2p-v1-issue29.json")
    for fmt in ("text", "markdown", "csv", "html", "title"):
        assert report.render(doc, fmt).strip()
    assert set(report.formats("cluster-p2p")) == {"text", "markdown", "csv", "json"}
    text = report.render(doc, "text")
    answer = text.split("\n\n")[1]
    assert "aggregate, 3 senders at 64 KiB; slowest sender 3->0 (198.18.0.4 -> 198.18.0.1)" \
        in answer, text
    rows = report.render(doc, "csv").splitlines()
    assert rows[0].startswith("pattern,ranks_per_node")
    assert len(rows) == 1 + 4 * 1 + 2 * 1 + 2 * 3  # per point its aggregate and flows
    assert sum(r.split(",")[13] == "1" for r in rows[1:]) == 4  # one slowest per point


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(("argv", "message"), [
    (["bisect", "--pairs", "a:b,a:c", "--ranks-per-node", "2"], "in two pairs"),
    (["bisect", "--pairs", "/nonexistent/pairs"], "neither A:B pairs nor a file"),
    (["incast", "--senders", "0", "--ranks-per-node", "2"], "counts from 1"),
    (["bibw", "--window", "0", "--ranks-per-node", "2"], "--window 0"),
    (["bibw", "--sizes", "8,1Q"], "--sizes"),
    (["incast", "--integrity", "--window", "8", "--ranks-per-node", "2"], "own buffer"),
])
def test_bad_options_are_one_line_errors(argv, message):
    from helpers import cli

    res = cli("cluster", *argv)
    assert res.status == 2, res.stderr
    assert message in res.stderr and res.stderr.count("\n") == 1 and "Traceback" not in \
        res.stderr


def test_an_odd_bisection_found_by_rank_0_is_a_one_line_error():
    require_mpi("openmpi")
    got = run_bounded(beoperf("cluster", "bisect", "--ranks-per-node", "3", "--quiet",
                              *QUIET), 90)
    assert got.returncode == 2 and "even count" in got.stderr, got.stderr[-2000:]
    assert "Traceback" not in got.stderr


# --------------------------------------------------------------------------- the C loops

LOOPS = r"""
import json
import sys
from beoperf.launch import ranks
ranks.prepare(ranks.implementation_here())
from beoperf.engines import mpi
from beoperf.engines.mpi_group import Member, Order
s = mpi.Session.open()
ranks.remove_shim()
m, n, r = Member(s), s.size, s.rank
out = {}
# bibw between 0 and 1, the others in the barrier; windows of 4, a last one short
common = dict(size=3000, reps=18, warmup=4, barrier=True, window=4, integrity=True, seq0=5)
orders = {0: Order("bibw", peer=1, **common), 1: Order("bibw", peer=0, **common)}
res = m.run(orders.get(r, Order("barrier")))
out["bibw"] = [res.corrupt, res.elapsed_ns > 0]
# incast: every other rank streams to 0
senders = tuple(range(1, n))
orders = {0: Order("incast-recv", senders=senders, **common)}
res = m.run(orders.get(r, Order("stream-send", peer=0, **common)))
out["incast"] = [res.corrupt, res.elapsed_ns > 0]
with open(f"{sys.argv[1]}/rank{r}.json", "w") as f:
    json.dump({"rank": r, **out}, f)
s.finalize()
"""


@pytest.mark.parametrize("impl", ["openmpi", "mpich"])
def test_the_pattern_loops_deliver_every_message_intact(impl, tmp_path):
    """bibw both ways and an incast of two senders, every message filled and verified,
    with a warm-up and the barrier, for both MPI ABIs (Open MPI's pointer handles,
    MPICH's int handles)."""
    require_mpi(impl)
    launcher = {"openmpi": ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe",
                            "--bind-to", "none", "-x", "BEOPERF_MPI=openmpi",
                            "-x", "OMPI_MCA_mpi_yield_when_idle=1"],
                "mpich": ["mpirun.mpich", "-bind-to", "none", "-genv", "BEOPERF_MPI",
                          "mpich"]}[impl]
    got = run_bounded([*launcher, "-np", "3", PYTHON, "-c", LOOPS, str(tmp_path)], 90)
    assert got.returncode == 0, got.stderr[-2000:]
    lines = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(3)]
    for x in lines:
        assert x["incast"] == [0, True], x
        if x["rank"] < 2:
            assert x["bibw"] == [0, True], x


def test_a_corrupted_message_is_counted(tmp_path):
    """The receiving side verifies: a sender filling other sequence numbers is caught."""
    require_mpi("openmpi")
    script = LOOPS.replace('orders = {0: Order("incast-recv", senders=senders, **common)}',
                           'orders = {0: Order("incast-recv", senders=senders, '
                           '**(common | {"seq0": 6}))}')
    got = run_bounded(["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe",
                       "--bind-to", "none", "-x", "BEOPERF_MPI=openmpi", "-np", "3", PYTHON,
                       "-c", script, str(tmp_path)], 90)
    assert got.returncode == 0, got.stderr[-2000:]
    receiver = json.loads((tmp_path / "rank0.json").read_text())
    assert receiver["incast"][0] == 2 * (4 + 18)  # every message of both senders


def test_mpich_incast_launched_by_beoperf():
    require_mpi("mpich")
    got = run_bounded(beoperf("cluster", "incast", "--mpi", "mpich", "--ranks-per-node", "3",
                              "--sizes", "4K", "--window", "2", "--min-trials", "2",
                              "--time-budget", "1", "--integrity", "--format", "json"), 120)
    (s,) = got.document()["body"]["series"]
    assert s["mpi"]["implementation"] == "mpich" and s["status"] == "complete"
    assert s["flow_counts"] == [1, 2] and [f["b"] for f in s["flows"]] == [0, 0]
    assert all(p["aggregate_Bps"]["median"] > 0 for p in s["flow_points"])

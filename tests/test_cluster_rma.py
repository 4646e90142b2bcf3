"""`beoperf cluster rma`: one-sided MPI_Put and MPI_Get with fence and passive-target
synchronisation between rank 0 and rank 1, with real Open MPI and MPICH on this host
(shared memory: two ranks on one node), and on two namespace hosts joined by a
tbf-limited veth (tests/netns.py).  What must hold: every (op, sync, size) asked is
measured, with positive times and intervals; each trial's data was checked by both
ranks (a put that did not land, or a get that did not return what the target holds,
fails the run); the check itself fails on wrong data; across the shaped link, a large
put takes at least the time its bytes need at the link's rate; bad input is one line
and exit 2.  Every MPI job is bounded (mpi_helpers.run_bounded)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from beoperf import errors, model, report
from beoperf.analysis.cluster_rma import fastest, vs_two_sided
from beoperf.engines import mpi_rma
from beoperf.model.cluster_mpi import MpiRun, Series
from beoperf.report.cluster_mpi import num
from beoperf.suites import cluster_rma
from beoperf.suites.cluster_mpi import LoopSettings, Plan
from helpers import checked, cli
from mpi_helpers import beoperf, require_mpi, run_bounded, write_agent

sys.path.insert(0, str(Path(__file__).resolve().parent))
import netns  # noqa: E402

FIXTURE = Path(__file__).parent / "fixtures" / "documents" / "cluster-rma-v1-issue29.json"
QUIET = {"openmpi": ("--mpi-env", "OMPI_MCA_mpi_yield_when_idle=1"), "mpich": ()}
SHM_SIZES = (8, 65536)
SYNCS = ("fence", "lock", "flush", "lock_all")
OPS = ("put", "get", "put_bw", "get_bw")


# --------------------------------------------------------------------------- the check


class FakeWin:
    """A window's local side: counts lock and unlock of its own rank."""

    def __init__(self):
        self.locks = []

    def Lock(self, rank, kind):  # noqa: N802 - mpi4py's name
        self.locks.append(("lock", rank, kind))

    def Unlock(self, rank):  # noqa: N802
        self.locks.append(("unlock", rank))


def side():
    s = mpi_rma.RmaSide.__new__(mpi_rma.RmaSide)
    s.MPI = type("MPI", (), {"LOCK_EXCLUSIVE": 99})
    return s


@pytest.mark.parametrize("op,sync,origin", [(o, s, side) for o in ("put", "get")
                                            for s in ("fence", "lock") for side in (True, False)])
def test_the_check_passes_what_arrived_and_fails_what_did_not(op, sync, origin):
    """Before a trial a put's source holds the trial's pattern and its destination (the
    window) zeros; a get's source (the window) the pattern and its destination zeros.
    After it, the destination must hold the pattern: a block that did not arrive, or
    that came from another trial, fails."""
    s, win, role = side(), FakeWin(), mpi_rma.Role(op, sync, origin)
    memory, local = np.full(64, 7, np.uint8), np.full(64, 7, np.uint8)
    s._prepare(role, win, memory, local, 64, 5, 0)
    expected = mpi_rma.pattern(64, 5)
    uses_window, uses_buffer = sync == "fence" or not origin, sync == "fence" or origin
    source, arrived = (local, memory) if op == "put" else (memory, local)
    source_used, arrived_used = (uses_buffer, uses_window) if op == "put" else \
        (uses_window, uses_buffer)
    if source_used:
        assert np.array_equal(source, expected)
    if arrived_used:
        assert not arrived.any()
        assert s._check(role, win, memory, local, 64, 5, 0) == 1  # nothing moved yet
        arrived[:] = expected
        assert s._check(role, win, memory, local, 64, 5, 0) == 0
        arrived[:] = mpi_rma.pattern(64, 6)  # another trial's block
        assert s._check(role, win, memory, local, 64, 5, 0) == 1
    else:  # the data arrives on the other rank: nothing to check here
        assert s._check(role, win, memory, local, 64, 5, 0) == 0
    # passive target: the window's memory touched only under a lock of its own rank
    assert bool(win.locks) == (sync != "fence" and uses_window)
    assert all(entry[1] == 0 for entry in win.locks)


@pytest.mark.parametrize("op,sync,origin", [(o, s, side) for o in ("put_bw", "get_bw")
                                            for s in ("fence", "flush") for side in (True, False)])
def test_a_bandwidth_burst_goes_one_way_even_with_fence(op, sync, origin):
    """osu_put_bw's fence loop: only the origin operates, so only the target's window
    (put) or the origin's buffer (get) receives, and only there is the data checked."""
    role = mpi_rma.Role(op, sync, origin)
    assert not role.two_way and role.base == op[:3]
    s, win = side(), FakeWin()
    memory, local = np.full(96, 7, np.uint8), np.full(96, 7, np.uint8)
    s._prepare(role, win, memory, local, 96, 3, 0)
    receives = (op == "put_bw") != origin
    assert s._check(role, win, memory, local, 96, 3, 0) == int(receives)


def test_roles_and_patterns():
    assert mpi_rma.Role.of("rma-get-lock_all-target") == mpi_rma.Role("get", "lock_all", False)
    assert mpi_rma.role_name("put", "flush", True) == "rma-put-flush-origin"
    with pytest.raises(ValueError):
        mpi_rma.Role.of("rma-put-pscw-origin")
    assert not np.array_equal(mpi_rma.pattern(300, 0), mpi_rma.pattern(300, 1))
    assert mpi_rma.pattern(300, 0)[251] == 0  # modulo the prime
    assert mpi_rma.capacity_for(1) == 4096 and mpi_rma.capacity_for(65537) == 131072


def test_the_answer_compares_with_two_sided_from_the_fixture():
    run = MpiRun.from_document(model.load(FIXTURE))
    (s,) = run.series
    points = s.rma_points
    two = {p.size: p for p in points if p.op == "two-sided"}
    for p in points:
        ratio = vs_two_sided(p, points)
        if p.op == "two-sided":
            assert ratio is None
        else:
            assert ratio == pytest.approx(p.time_s.median / two[p.size].time_s.median)
    best = fastest(points, "put", 8)
    assert best.time_s.median == min(p.time_s.median for p in points
                                     if p.op == "put" and p.size == 8)
    text = report.render(model.load(FIXTURE), "text")
    first = text.splitlines()[2]  # the answer first, under the title
    assert "fastest synchronisation" in first or "WARN" in first
    assert f"put {num(best.time_s.median * 1e6)} us ({best.sync}" in text
    csv_rows = report.render(model.load(FIXTURE), "csv").splitlines()
    assert len(csv_rows) == 1 + len(points) and csv_rows[0].startswith("ranks_per_node,")


class FailingLeader:
    """Rank 0's side whose every order fails, as a window MPI cannot make does."""

    size = 2

    def execute(self, orders):
        raise errors.Failed("an MPI loop failed: rank 0: MPI_ERR_WIN: invalid window")


def test_a_window_that_cannot_be_made_fails_the_series_and_keeps_the_document():
    doc = model.load(FIXTURE)
    series = Series.from_dict(doc.body["series"][0])
    series.rma_points, series.loop = None, None
    plan = Plan("rma", cluster_rma.params(cluster_rma.Spec()).to_dict(),
                LoopSettings(0.05, 3, 0.01, 2.0, None), [], 0, False, None, [])
    error, interrupt = cluster_rma.measure(FailingLeader(), plan, series)
    assert interrupt is None and isinstance(error, errors.Failed)
    assert "osc" in error.hint and "MPI_ERR_WIN" in str(error)
    assert series.status == "failed" and series.rma_points == []
    failed = cluster_rma.body(plan.params, None, [series]).to_document(doc.meta)
    checked(failed.to_json())  # a series that failed before its loop: loop null
    text = report.render(failed, "text")
    assert text.splitlines()[2].startswith("FAIL") and "nothing measured" in text


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("args,words", [
    (["--op", "put,swap"], "--op swap"),
    (["--sync", "fence,pscw"], "--sync pscw"),
    (["--sizes", "0"], "--sizes"),
    (["--sizes", "1G"], "--sizes"),
    (["--integrity"], "--integrity"),
    (["--op", "put_bw", "--sizes", "64M", "--bw-burst", "32"], "at most 1 GiB"),
    (["--bw-burst", "0"], "--bw-burst 0"),
])
def test_bad_input_is_one_line_and_exit_2(args, words):
    result = cli("cluster", "rma", "--ranks-per-node", "2", *args)
    assert result.status == 2, result.stderr
    assert words in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) <= 2  # the error and its hint


# --------------------------------------------------------------------------- shared memory


def check_series(doc: dict, sizes, syncs, ops=("put", "get")) -> dict:
    """The one series, complete, every point asked with positive times and intervals,
    the bandwidth the trials' size / time; its points by (op, sync, size)."""
    (series,) = doc["body"]["series"]
    assert series["status"] == "complete", series["status_reason"]
    found = {(p["op"], p["sync"], p["size"]): p for p in series["rma_points"]}
    wanted = {(o, s, n) for o in ops for s in syncs for n in sizes} | \
        {("two-sided", "pingpong", n) for n in sizes}
    assert set(found) == wanted
    for p in found.values():
        t = p["time_s"]
        assert 0 < t["min"] <= t["median"] <= t["max"]
        assert t["ci_low"] is None or 0 < t["ci_low"] <= t["median"] <= t["ci_high"]
        bw = p["bandwidth_Bps"]
        assert bw["max"] == pytest.approx(p["size"] / t["min"])
        assert bw["min"] == pytest.approx(p["size"] / t["max"])
    assert series["rma_pair"]["sender"] == 0 and series["rma_pair"]["receiver"] == 1
    return found


@pytest.mark.parametrize("impl", ["openmpi", "mpich"])
def test_shared_memory_puts_and_gets_with_every_synchronisation(impl, tmp_path):
    """Two ranks on this host: every synchronisation of every operation (latency and
    bandwidth loops), each trial's data checked by both ranks (a failed check would fail
    the run)."""
    require_mpi(impl)
    out = tmp_path / "rma.json"
    argv = beoperf("cluster", "rma", "--mpi", impl, "--ranks-per-node", "2",
                   "--sizes", ",".join(map(str, SHM_SIZES)), "--sync", ",".join(SYNCS),
                   "--op", ",".join(OPS), "--bw-burst", "8",
                   "--min-trials", "3", "--time-budget", "2", "--trial-time", "0.02",
                   "--quiet", *QUIET[impl], "--format", "json", "-o", str(out))
    doc = run_bounded(argv, 180).document()
    found = check_series(doc, SHM_SIZES, SYNCS, OPS)
    assert doc["body"]["bw_burst"] == 8
    assert found[("put_bw", "flush", 8)]["operations"] >= 1
    mpi = doc["body"]["series"][0]["mpi"]
    assert mpi["implementation"] == impl
    assert mpi["handles"] == ("pointers" if impl == "openmpi" else "ints")
    assert json.loads(out.read_text())["kind"] == "cluster-rma"


def test_the_job_s_other_ranks_stay_out_of_the_pair(tmp_path):
    """Three ranks: the window's communicator is rank 0 and rank 1's alone
    (MPI_Comm_create_group), so the fence and the barriers never wait for rank 2."""
    require_mpi("openmpi")
    argv = beoperf("cluster", "rma", "--ranks-per-node", "3", "--sizes", "8",
                   "--op", "put,get_bw", "--sync", "fence,lock", "--min-trials", "2",
                   "--time-budget", "1", "--trial-time", "0.02", "--quiet", *QUIET["openmpi"],
                   "--format", "json")
    doc = run_bounded(argv, 120).document()
    check_series(doc, (8,), ("fence", "lock"), ("put", "get_bw"))
    assert doc["body"]["series"][0]["np"] == 3


# --------------------------------------------------------------------------- namespace hosts

RATE = "50mbit"
BIG = 256 * 1024
BURST = 4  # put_bw's operations per synchronisation: 1 MiB between two


@pytest.mark.netns
@pytest.mark.tools("mpirun.openmpi", "tc")
def test_a_large_put_across_a_shaped_link_takes_what_its_bytes_need(tmp_path):
    """Two namespace hosts, each link shaped to RATE by tbf (Open MPI: TCP, and
    osc pt2pt: both hosts have one host name, and Open MPI would take them for one node
    and make shared-memory windows): a put or get of BIG bytes
    cannot take less than BIG / the rate (less the bucket it may find full), nor a
    burst of BURST puts of BIG less than BURST times that."""
    ok, reason = netns.can_use_netns()
    if not ok:
        pytest.skip(f"needs network namespaces: {reason}")
    require_mpi("openmpi")
    link = netns.rate_bytes_per_sec(RATE)
    burst = netns.tbf_burst(RATE)
    with netns.VethPair(2) as topo:
        for host in topo.hosts:
            host.set_rate(RATE)
        a, b = topo.hosts
        agent = write_agent(tmp_path / "agent", topo.hosts)
        argv = beoperf("cluster", "rma", "--hosts", f"{a.addr4},{b.addr4}",
                       "--mpi-agent", agent, "--mpi-interface", a.ifname,
                       "--mpi-env", "OMPI_MCA_btl=tcp,self", "--mpi-env",
                       "OMPI_MCA_osc=pt2pt", "--sizes", f"8,{BIG}",
                       "--sync", "fence,lock", "--op", "put,get,put_bw",
                       "--bw-burst", str(BURST), "--min-trials", "3", "--time-budget", "4",
                       "--quiet", "--format", "json", "-o", str(tmp_path / "rma.json"))
        doc = run_bounded(a.argv(argv), 240).document()
    found = check_series(doc, (8, BIG), ("fence", "lock"), ("put", "get", "put_bw"))
    series = doc["body"]["series"][0]
    assert series["ranks"][0]["net_namespace"] != series["ranks"][1]["net_namespace"]
    for key, p in found.items():
        if key[2] != BIG:
            continue
        moved = BIG * (BURST if key[0] == "put_bw" else 1)  # bytes between two syncs
        floor = (moved - burst) / link / (moved // BIG)  # a block's share, bucket full
        assert p["time_s"]["min"] >= floor * 0.95, (key, p["time_s"], floor)
        assert p["bandwidth_Bps"]["max"] <= link * moved / (moved - burst) * 1.05


def test_subcommand_help_names_the_synchronisations():
    out = subprocess.run(beoperf("cluster", "rma", "--help"), capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0
    for word in ("fence", "lock_all", "flush", "MPI_Win_allocate", "two-sided"):
        assert word in out.stdout

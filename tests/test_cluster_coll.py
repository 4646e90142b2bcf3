"""`beoperf cluster coll` on this host (shared memory) and its parts: the check of each
collective's result (simulated here, then spoilt), what a size means per collective,
bad input, the renderers and the answer."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from beoperf import model, report
from beoperf.engines import mpi_coll as C
from beoperf.model.document import Document
from mpi_helpers import beoperf, require_mpi, run_bounded

FIXTURE = Path(__file__).parent / "fixtures" / "documents" / "cluster-coll-v2-issue29.json"
NP = 3


def simulate(op: str, root: int, count: int, sends: list[np.ndarray]) -> list[np.ndarray]:
    """What each rank's buffer holds after the collective, by MPI's definition (the
    receive buffer; bcast's one buffer)."""
    n, op = len(sends), C.base(op)
    if op in C.REDUCTIONS:
        total = sum(s.view(np.float64) for s in sends)
        if op == "reduce_scatter":
            return [total[r * count:(r + 1) * count].view(np.uint8) for r in range(n)]
        return [total.view(np.uint8) if op == "allreduce" or r == root else
                np.full(count * 8, C.STALE, np.uint8) for r in range(n)]
    if op in ("allgather", "gather"):
        whole = np.concatenate(sends)
        return [whole if op == "allgather" or r == root else
                np.full(count * n, C.STALE, np.uint8) for r in range(n)]
    if op == "alltoall":
        return [np.concatenate([s[r * count:(r + 1) * count] for s in sends])
                for r in range(n)]
    if op == "scatter":
        return [sends[root][r * count:(r + 1) * count] for r in range(n)]
    return [sends[root].copy() for _ in range(n)]  # bcast


@pytest.mark.parametrize("op", [o for o in C.OPERATIONS if C.base(o) != "barrier"])
@pytest.mark.parametrize("size", [1, 24, 1000])
def test_the_check_accepts_the_collective_and_counts_each_wrong_element(op, size):
    root = 1
    order = C.CollOrder(op, size, reps=1, root=root, check=True, seq=5)
    count = C.count_of(op, size, NP)
    sends = []
    for r in range(NP):
        buf = np.zeros(C.buffer_bytes(op, count, NP)[0], np.uint8)
        C.fill(order, r, NP, count, buf)
        sends.append(buf)
    got = simulate(op, root, count, sends)
    assert [C.wrong(order, r, NP, count, got[r].copy()) for r in range(NP)] == [0] * NP
    checked = [r for r in range(NP) if C.expected(order, r, NP, count) is not None]
    assert checked == ([root] if C.base(op) in ("reduce", "gather") else list(range(NP)))
    for r in checked:  # one element spoilt: one counted
        bad = got[r].copy()
        if C.base(op) in C.REDUCTIONS:
            bad.view(np.float64)[-1] += 1.0
        else:
            bad[-1] ^= 0x5A
        assert C.wrong(order, r, NP, count, bad) == 1
    # a block from the wrong rank is wrong (alltoall: blocks swapped)
    if C.base(op) == "alltoall":
        swapped = got[0].copy()
        swapped[:count], swapped[count:2 * count] = got[0][count:2 * count], got[0][:count]
        assert C.wrong(order, 0, NP, count, swapped) > 0


def test_what_a_size_means_per_collective():
    assert C.count_of("allreduce", 4096, 4) == 512 and C.count_of("allreduce", 3, 4) == 1
    assert C.count_of("alltoall", 4096, 4) == 4096
    assert C.count_of("reduce_scatter", 4096, 4) == 128  # the whole vector over 4 ranks
    assert C.buffer_bytes("alltoall", 100, 4) == (400, 400)
    assert C.buffer_bytes("gather", 100, 4) == (100, 400)
    assert C.buffer_bytes("scatter", 100, 4) == (400, 100)
    assert C.buffer_bytes("barrier", 0, 4) == (0, 0)
    assert C.base("iallreduce") == "allreduce" and C.count_of("ireduce_scatter", 4096, 4) == 128
    assert C.buffer_bytes("ialltoall", 100, 4) == (400, 400)
    with pytest.raises(ValueError, match="unknown collective"):
        C.CollOrder("allreduce_x", 8, 1)


@pytest.mark.parametrize("args, words", [
    (("--ops", "allreduce,sendrecv"), "--ops sendrecv: choose from allreduce"),
    (("--sizes", "128M"), "--sizes: from 1 B to 64 MiB"),
    (("--integrity",), "--integrity: the collectives check their result"),
    (("--root", "-1"), "--root -1: a rank")])
def test_bad_input_is_one_line_and_exit_2(args, words):
    got = run_bounded(beoperf("cluster", "coll", "--ranks-per-node", "2", *args), 60)
    assert got.returncode == 2 and words in got.stderr, got.stderr
    assert "Traceback" not in got.stderr and len(got.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("impl", ["openmpi", "mpich"])
def test_three_ranks_here_nocache_and_another_root(impl, tmp_path):
    """Launched by beoperf with each MPI: the rooted collectives at root 2, buffers not
    reused, blocking and non-blocking; every rank checked every point and found it right;
    the answer names the slowest collective at the largest size."""
    require_mpi(impl)
    out = tmp_path / "coll.json"
    got = run_bounded(beoperf("cluster", "coll", "--mpi", impl, "--ranks-per-node", "3",
                              "--ops", "allreduce,alltoall,bcast,reduce,gather,scatter,"
                              "iallreduce,ialltoall,ibcast,igather,ibarrier",
                              "--sizes", "8,1K", "--root", "2", "--nocache", "--min-trials",
                              "2", "--time-budget", "1", "--quiet", "-o", str(out)), 120)
    assert got.returncode == 0, got.stderr[-2000:]
    doc = model.load(out)
    body = doc.body
    assert body["root"] == 2 and body["nocache"] is True and "MPI_Barrier" in body["sync"]
    (series,) = body["series"]
    assert series["mpi"]["implementation"] == impl and series["np"] == 3
    assert len(series["collectives"]) == 12 + 8 + 1  # the barrier at one size
    for p in series["collectives"]:
        assert p["checked"] == 3 and p["corrupt"] == 0, p
        assert 0 < p["t_min_s"]["median"] <= p["t_avg_s"]["median"] <= p["t_max_s"]["median"]
    top = max((p for p in series["collectives"] if p["size"] == 1024),
              key=lambda p: p["t_avg_s"]["median"])
    assert f"slowest at the largest size: {top['op']} at 1 KiB: t_avg" in got.stdout
    assert got.stdout.index("slowest at the largest size") < got.stdout.index("collective ")


def test_wrong_elements_are_a_fail_first_and_every_format_renders():
    stored = model.load(FIXTURE)
    spoilt = copy.deepcopy(stored.to_json())
    point = spoilt["body"]["series"][0]["collectives"][1]
    point["corrupt"] = 7
    doc = model.from_json(json.loads(json.dumps(spoilt)))
    text = report.render(doc, "text")
    first = next(line for line in text.splitlines() if line.startswith(("FAIL", "WARN", "OK")))
    assert first.startswith("FAIL") and f"{point['op']} at" in first and "(7 elements)" in first
    csv_rows = report.render(stored, "csv").splitlines()
    assert csv_rows[0].startswith("ranks_per_node,np,op,size,count,bytes,t_avg_s")
    assert len(csv_rows) == 1 + sum(len(s["collectives"]) for s in stored.body["series"])
    html = report.render(stored, "html")
    first_avg = stored.body["series"][0]["collectives"][0]["t_avg_s"]["median"]
    assert 'data-key="body.series.0.collectives.0.t_avg_s.median"' in html
    assert f'data-value="{first_avg!r}"' in html or str(first_avg)[:8] in html
    assert isinstance(doc, Document) and "wrong results" in text
    assert report.render(stored, "markdown").startswith("## MPI collectives")
    assert set(report.formats("cluster-coll")) == {"text", "markdown", "csv", "json"}


# --------------------------------------------------------------------------- importing

OSU_FULL = """
# OSU MPI Allreduce Latency Test v7.3
# Datatype: MPI_FLOAT.
# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations
4                       2.10              1.90              2.40        1000
1048576               812.50            790.00            830.25         100
"""
OSU_CHECKED = """# OSU MPI All-to-All Personalized Exchange Latency Test v7.5
# Datatype: MPI_CHAR.
# Size       Avg Latency(us)        Validation
1                      12.46              Pass
2                      12.05              Fail
"""
IMB = """#    Intel(R) MPI Benchmarks 2021.7, MPI-1 part
#----------------------------------------------------------------
# Benchmarking Allreduce
# #processes = 2
# ( 2 additional processes waiting in MPI_Barrier)
#----------------------------------------------------------------
       #bytes #repetitions  t_min[usec]  t_max[usec]  t_avg[usec]
            0         1000         0.03         0.04         0.03
         1024         1000         2.10         2.62         2.36

#----------------------------------------------------------------
# Benchmarking Barrier
# #processes = 4
#----------------------------------------------------------------
 #repetitions  t_min[usec]  t_max[usec]  t_avg[usec]
         1000         5.01         5.30         5.15
"""


def test_osu_and_imb_collectives_import_into_one_document(tmp_path):
    files = []
    for name, text in (("osu_allreduce.txt", OSU_FULL), ("osu_alltoall.txt", OSU_CHECKED),
                       ("imb.out", IMB)):
        files.append(tmp_path / name)
        files[-1].write_text(text)
    out = tmp_path / "imported.json"
    got = run_bounded(beoperf("cluster", "coll", *(a for f in files for a in ("--import", str(f))),
                              "--np", "4", "-o", str(out)), 60)
    assert got.returncode == 0, got.stderr
    body = model.load(out).body  # schema-checked
    series = body["series"]
    assert [(s["launch"]["file"].rsplit("/", 1)[1], s["np"]) for s in series] == [
        ("osu_allreduce.txt", 4), ("osu_alltoall.txt", 4), ("imb.out", 2), ("imb.out", 4)]
    big = series[0]["collectives"][1]
    assert (big["op"], big["size"], big["count"], big["calls"]) == ("allreduce", 1 << 20,
                                                                    1 << 18, 100)
    assert big["t_avg_s"]["median"] == pytest.approx(812.5e-6)
    assert big["t_min_s"]["median"] == pytest.approx(790e-6)
    assert big["t_avg_s"]["ci_low"] is None and "one figure" in big["t_avg_s"]["interval_note"]
    checked = series[1]["collectives"]
    assert [(p["checked"], p["corrupt"], p["t_min_s"]) for p in checked] == [(1, 0, None),
                                                                             (1, 1, None)]
    imb2, imb4 = series[2]["collectives"], series[3]["collectives"]
    assert [(p["op"], p["size"]) for p in imb2] == [("allreduce", 1024)]  # 0 B left out
    assert imb4[0]["op"] == "barrier" and imb4[0]["t_max_s"]["median"] == pytest.approx(5.3e-6)
    assert got.stdout.splitlines()[2].startswith("FAIL") and "alltoall at 2 B" in got.stdout
    assert "slowest at the largest size: allreduce at 1 MiB: t_avg 812.5 us" in got.stdout


def test_imb_reductions_count_the_datatype_its_header_names(tmp_path):
    """IMB 2019 on sums -red_data_type (MPI_FLOAT unless told): the element count of an
    imported reduction follows its header's "MPI_Datatype for reductions"."""
    counts = {}
    for red in ("MPI_DOUBLE", None):
        header = f"# MPI_Datatype for reductions    :   {red} \n" if red else ""
        f = tmp_path / f"imb-{red}.out"
        f.write_text(IMB.replace("#------", header + "#------", 1))
        out = tmp_path / f"imb-{red}.json"
        got = run_bounded(beoperf("cluster", "coll", "--import", str(f), "-o", str(out)), 60)
        assert got.returncode == 0, got.stderr
        (point,) = model.load(out).body["series"][0]["collectives"]
        counts[red] = (point["op"], point["bytes"], point["count"])
    assert counts == {"MPI_DOUBLE": ("allreduce", 1024, 128), None: ("allreduce", 1024, 256)}


@pytest.mark.parametrize("text, args, words", [
    (OSU_FULL, (), "OSU does not print how many processes ran: give it with --np N"),
    (OSU_FULL.replace("Allreduce", "Non-blocking Allreduce"), ("--np", "4"),
     "'Non-blocking Allreduce' is not read"),
    (OSU_FULL.replace("1000\n", "1000 7\n", 1), ("--np", "4"), "columns in an OSU table")])
def test_an_import_it_cannot_read_is_one_line(tmp_path, text, args, words):
    f = tmp_path / "osu.txt"
    f.write_text(text)
    got = run_bounded(beoperf("cluster", "coll", "--import", str(f), *args), 60)
    assert got.returncode != 0 and words in got.stderr, got.stderr
    assert "Traceback" not in got.stderr and len(got.stderr.strip().splitlines()) == 1


# --------------------------------------------------------------------------- comparing


def scaled(factor: float) -> dict:
    """The fixture's first series alone, every t_avg (and its interval) times factor."""
    doc = json.loads(FIXTURE.read_text())
    doc["body"]["series"] = doc["body"]["series"][:1]
    for p in doc["body"]["series"][0]["collectives"]:
        st = p["t_avg_s"]
        st["median"] = 1e-5 * factor
        st["ci_low"], st["ci_high"] = 0.98e-5 * factor, 1.02e-5 * factor
    return doc


def test_compare_gives_each_column_its_verdict_against_the_first(tmp_path):
    files = []
    for name, factor in (("base", 1.0), ("slow", 3.0), ("fast", 1 / 3)):
        files.append(tmp_path / f"{name}.json")
        files[-1].write_text(json.dumps(scaled(factor)))
    got = run_bounded(beoperf("compare", *map(str, files)), 60)
    assert got.returncode == 0, got.stderr
    rows = [line.split() for line in got.stdout.splitlines()
            if line.startswith(("allreduce", "alltoall", "bcast", "barrier"))]
    ops = {p["op"] for p in scaled(1)["body"]["series"][0]["collectives"]}
    assert len(rows) == len(scaled(1)["body"]["series"][0]["collectives"]) and \
        {r[0] for r in rows} == ops
    for r in rows:
        text = " ".join(r)
        assert "worse (+200.0%" in text and "better (-66.7%" in text, text
    assert "base: openmpi 2 ranks (2/node) us" in got.stdout
    assert "each series one run" in got.stdout
    # a ping-pong file among them: one line, exit 2
    mixed = run_bounded(beoperf("compare", str(files[0]), str(FIXTURE.parent /
                                                             "pingpong-v5-before-issue29.json")),
                        60)
    assert mixed.returncode == 2 and "every FILE a cluster-coll document" in mixed.stderr

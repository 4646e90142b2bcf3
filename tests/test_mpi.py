"""`beoperf pingpong --transport mpi` with real MPI: both ranks on this host (shared
memory), Open MPI and MPICH, launched by beoperf or by the user's mpirun; the C loops'
timing contract; a job that hangs ended at its deadline.  Every job is bounded
(mpi_helpers.run_bounded) and checked to leave no process behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from mpi_helpers import PYTHON, beoperf, kill_group, require_mpi, run_bounded

SIZES = "16,4K,256K"
# sizes that keep a sweep going for its whole budget at --precision 0.0001: a small size's
# trial medians can all be equal (the clock's steps), the large ones' never are
LONG = "16,1K,1M,4M"


def sweep(impl: str, *extra: str, timeout: float = 90) -> dict:
    require_mpi(impl)
    got = run_bounded(beoperf("pingpong", "--transport", "mpi", "--mpi", impl, "--sizes", SIZES,
                              "--time-budget", "2", "--json", *extra), timeout)
    return got.document()


@pytest.mark.parametrize("impl", ["openmpi", "mpich"])
def test_shared_memory_sweep_records_the_library_and_placement(impl):
    doc = sweep(impl)
    body, meta = doc["body"], doc["meta"]
    assert body["status"] == "complete"
    assert [s["size"] for s in body["sizes"]] == [16, 4096, 262144]
    assert all(s["trials"] >= 6 and s["samples"] > 0 for s in body["sizes"])
    params = body["parameters"]
    assert params["transport"] == "mpi" and params["mpi"] == impl
    assert params["window"] == 64 and params["recv"] == "blocking" and params["bind"] == "core"
    mpi = body["local"]["mpi"]
    assert mpi["library_version"].startswith("Open MPI" if impl == "openmpi" else "MPICH")
    assert mpi["mpi4py"] and mpi["handles"] == ("pointers" if impl == "openmpi" else "ints")
    placement = body["local"]["placement"]
    assert [p["rank"] for p in placement] == [0, 1]
    # --bind-to core: each rank on one CPU of its own
    assert all(len(p["cpus"]) == 1 for p in placement), placement
    assert placement[0]["cpus"] != placement[1]["cpus"]
    chosen = body["local"]["transport"]
    if impl == "openmpi":
        assert "ob1" in chosen["pml"] or "ucx" in chosen["pml"], chosen
    else:
        assert chosen["device"].startswith("ch"), chosen
    launch = meta["launch"]
    assert launch["started_by"] == "beoperf" and launch["launcher"] == impl
    assert launch["argv"][0].endswith(f"mpirun.{impl}")
    if impl == "openmpi" and os.geteuid() == 0:
        assert "--allow-run-as-root" in launch["argv"]
        assert any("--allow-run-as-root" in n for n in launch["notes"])
    # shared memory: a 16-byte message is far faster than any network's
    assert body["summary"]["latency_median_us"] < 20


def test_variants_stream_bidir_sync_nonblocking_integrity():
    """Every loop of the C module through the CLI: stream with a window, bidir with
    synchronous sends and pre-posted receives, all with every message verified."""
    stream = sweep("openmpi", "--mode", "stream", "--window", "2", "--integrity")["body"]
    assert stream["parameters"]["mode"] == "stream" and stream["parameters"]["window"] == 2
    assert all(s["corrupt"] == 0 for s in stream["sizes"])
    bidir = sweep("mpich", "--mode", "bidir", "--sync", "--recv", "nonblocking",
                  "--integrity")["body"]
    assert bidir["parameters"]["sync"] and bidir["parameters"]["recv"] == "nonblocking"
    assert all(s["corrupt"] == 0 for s in bidir["sizes"])
    # bidir moves the message both ways per sample: throughput counts both directions
    s = bidir["sizes"][-1]
    assert s["throughput_bps"]["from_median"] == pytest.approx(
        2 * s["size"] * 8 / (s["time_us"]["median"] * 1e-6))


def test_an_mpich_sync_run_has_only_intervals_above_zero():
    """The run of issue 25 that gave [-0.097, 5644] us (MPICH, --sync), on this machine:
    whatever the spread of its trials, every interval of every size is above zero (its
    document validates, and the schema says so), each size carries this run's own part
    (ci95_within_run_us), and the run says it has no spread between runs."""
    doc = sweep("mpich", "--sync")
    body = doc["body"]
    assert body["parameters"]["sync"] is True and body["sizes"]
    for s in body["sizes"]:
        for name in ("ci95_us", "ci95_median_us", "ci95_within_run_us"):
            assert s[name] is None or 0 < s[name][0] <= s["time_us"]["median"] <= s[name][1]
        assert s["ci95_within_run_us"] == s["ci95_us"]
    facts = body["sweep"]["between_runs"]
    assert facts["source"] == "none" and facts["why_none"] == "no history is kept for MPI runs"


def test_np_output_and_text_summary(tmp_path):
    require_mpi("openmpi")
    prefix = tmp_path / "run"
    got = run_bounded(beoperf("pingpong", "--transport", "mpi", "--sizes", "16,64K",
                              "--time-budget", "1", "-o", str(prefix)), 90)
    assert got.returncode == 0, got.stderr
    assert "MPI rank 1 on" in got.stdout and "latency" in got.stdout
    rows = [line.split() for line in (tmp_path / "run.np").read_text().splitlines()]
    assert [int(r[0]) for r in rows] == [16, 65536]
    doc = json.loads((tmp_path / "run.json").read_text())
    assert doc["body"]["parameters"]["transport"] == "mpi"
    # the conditions around the job, on this host: the MPI library owns its sockets
    conditions = doc["meta"]["conditions"]
    assert conditions["network"]["socket_retransmissions"] is None
    assert conditions["start"]["load"] and conditions["end"]["cpus"] >= 1
    assert "\nmachine    load " in got.stdout or "\n  machine    load " in got.stdout


@pytest.mark.parametrize("impl", ["openmpi", "mpich"])
def test_started_by_the_users_mpirun_runs_as_ranks(impl, tmp_path):
    """`mpirun -np 2 beoperf pingpong --transport mpi`: rank 0 writes, rank 1 is silent;
    under MPICH the rank makes mpi4py find Debian's libmpich itself (and cleans up)."""
    require_mpi(impl)
    launcher = [f"mpirun.{impl}", "-np", "2"] + (
        ["--allow-run-as-root", "--bind-to", "none"] if impl == "openmpi" else [])
    env = {"TMPDIR": str(tmp_path)}
    got = run_bounded([*launcher, *beoperf("pingpong", "--transport", "mpi", "--sizes", "16,8K",
                                           "--time-budget", "1", "--json")], 90, env=env)
    doc = got.document()
    assert doc["meta"]["launch"]["started_by"] in ("openmpi", "mpich", "pmix")
    assert doc["body"]["local"]["mpi"]["implementation"] == impl
    # rank 0 watched its host (the job's ranks here are its own: its launcher's tree)
    assert doc["meta"]["conditions"]["start"]["load"]
    assert doc["meta"]["conditions"]["network"]["socket_retransmissions"] is None
    assert got.stdout.count('"format": "beoperf"') == 1  # one document: rank 0's
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("beoperf-mpich-")]


def test_the_c_loops_time_each_message_within_the_trial():
    """The samples of a trial are disjoint pieces of it: they add up to at most the
    trial's elapsed time (a loop that timed each sample from the trial's start would
    exceed it); the stream loop times the whole trial only."""
    require_mpi("openmpi")
    script = r"""
import json, sys
from beoperf.launch import ranks
ranks.prepare("openmpi")
from beoperf.engines import mpi
import numpy as np
s = mpi.Session.open()
pool = mpi.make_pool(1 << 16, False)
out = {}
for mode in ("pingpong", "bidir", "stream"):
    order = dict(mode=mode, size=1 << 16, reps=200, seq0=0, window=8, recv="blocking",
                 integrity=False, sync=False)
    samples, elapsed, corrupt = mpi.run_loop(s, pool, order, s.rank == 0, 1 - s.rank)
    if s.rank == 0:
        arr = np.frombuffer(samples, dtype=np.uint64) if samples else np.array([0])
        out[mode] = [int(arr.sum()), int(elapsed), int(np.median(arr)), len(arr)]
if s.rank == 0:
    print(json.dumps(out))
s.finalize()
"""
    got = run_bounded(["mpirun.openmpi", "--allow-run-as-root", "-np", "2", "--bind-to", "none",
                       PYTHON, "-c", script], 60)
    assert got.returncode == 0, got.stderr
    out = json.loads(got.stdout)
    for mode in ("pingpong", "bidir"):
        total, elapsed, median, count = out[mode]
        assert count == 200 and 0 < total <= elapsed, out
        assert median > 0
    assert out["stream"][0] == 0 and out["stream"][1] > 0  # no samples, an elapsed time


def test_a_job_past_its_deadline_is_ended_with_a_clear_error():
    """A job that cannot finish in time (a sweep longer than --deadline) is ended, ranks
    and all, and the error says so; nothing is left running."""
    require_mpi("openmpi")
    got = run_bounded(beoperf("pingpong", "--transport", "mpi", "--sizes", LONG,
                              "--time-budget", "60", "--precision", "0.0001", "--deadline", "4"),
                      60)
    assert got.returncode == 1, got.stderr
    assert "did not finish within 4 s" in got.stderr
    assert got.seconds < 30


@pytest.mark.parametrize("sig, status, why", [
    (signal.SIGINT, 130, "interrupted by the user"),
    (signal.SIGTERM, 143, "terminated by SIGTERM")])
def test_ctrl_c_or_sigterm_keeps_what_rank_0_measured(tmp_path, sig, status, why):
    """SIGINT or SIGTERM to beoperf: rank 0 is asked (SIGUSR1 through mpirun) to stop
    after its trial and send what it has; the result is written, the status is 128 + the
    signal, and the document says which (a scheduler's SIGTERM is not the user's Ctrl-C,
    though rank 0 saw SIGUSR1 either way)."""
    require_mpi("openmpi")
    proc = subprocess.Popen(beoperf("pingpong", "--transport", "mpi", "--sizes", LONG,
                                    "--time-budget", "60", "--precision", "0.0001",
                                    "-o", str(tmp_path / "cut")),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        time.sleep(6)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            kill_group(proc)
    assert proc.returncode == status, err
    doc = json.loads((tmp_path / "cut.json").read_text())
    assert doc["body"]["status"] == "interrupted"
    assert doc["body"]["status_reason"] == why
    assert f"the sweep is interrupted: {why}" in err
    assert len(doc["body"]["sizes"]) == 4 and doc["body"]["sizes"][0]["trials"] >= 1


def test_bad_mpi_options_are_one_line_errors():
    from helpers import cli

    res = cli("pingpong", "--transport", "mpi", "--hosts", "a,b,c")
    assert res.status == 2 and "a ping-pong runs between two ranks" in res.stderr
    res = cli("pingpong", "--transport", "mpi", "--mpi-env", "NOEQUALS")
    assert res.status == 2 and "expected KEY=VALUE" in res.stderr
    res = cli("pingpong", "--transport", "mpi", "--mode", "stream", "--integrity", "--window", "8")
    assert res.status == 2 and "own buffer" in res.stderr


def test_sweep_of_an_mpi_variable_moves_the_switch(tmp_path):
    """`--sweep mpi-env:OMPI_MCA_btl_vader_eager_limit=4096,32768`: one run each, the
    comparison and the per-size overhead written, and each run's eager/rendezvous switch
    found at its own limit."""
    require_mpi("openmpi")
    prefix = tmp_path / "eager"
    got = run_bounded(beoperf("pingpong", "--transport", "mpi", "--start", "1K", "--end", "128K",
                              "--perturbation", "0", "--time-budget", "6",
                              "--sweep", "mpi-env:OMPI_MCA_btl_vader_eager_limit=4096,32768",
                              "-o", str(prefix)), 120)
    assert got.returncode == 0, got.stderr
    for limit in (4096, 32768):
        doc = json.loads((tmp_path / f"eager-mpi-env-OMPI_MCA_btl_vader_eager_limit-{limit}"
                          ".json").read_text())
        switch = doc["body"]["summary"]["protocol_switch"]
        curve = [(x["size"], round(x["time_us"]["median"], 2)) for x in doc["body"]["sizes"]]
        assert switch["value_bytes"] == limit and switch["threshold"] == limit, \
            f"thresholds {switch['thresholds']}, curve {curve}"
    assert "eager/rendezvous switch at 4096 B" in got.stdout
    overhead = (tmp_path / "eager-overhead.md").read_text()
    assert "| 8192 |" in overhead
    assert (tmp_path / "eager-plots" / "overhead.png").stat().st_size > 10000


def test_the_exchange_loop_is_a_ring_step_between_any_ranks():
    """The C exchange serves more than bidir (issue 14's rings): three ranks, each sending
    to its right neighbour and receiving from its left, both directions at once, with
    every message verified; and a ping-pong between ranks 0 and 2 while rank 1 waits."""
    require_mpi("openmpi")
    script = r"""
import json
from beoperf.launch import ranks
ranks.prepare("openmpi")
from beoperf import _core
from beoperf.engines import mpi
s = mpi.Session.open()
n, r = s.size, s.rank
left, right = (r - 1) % n, (r + 1) % n
pool = _core.Pool(4096, 4 * 4096)  # a send slot and two receive slots at least
lib, comm = s.lib, s.handle()
one = lib.run("exchange", comm, s.byte, pool, 50, size=4096, integrity=True, to=(right,),
              from_=(left,))
both = lib.run("exchange", comm, s.byte, pool, 50, size=4096, integrity=True,
               to=(left, right), from_=(left, right))
pp = None
if r in (0, 2):
    pp = lib.run("pingpong-initiator" if r == 0 else "pingpong-responder", comm, s.byte,
                 pool, 100, peer=2 - r, size=8, integrity=True)
lib.run("barrier", comm, s.byte, pool, 1)
print(json.dumps({"rank": r, "corrupt": [one[2], both[2], pp[2] if pp else 0],
                  "samples": [len(one[0]) // 8, len(both[0]) // 8]}))
s.finalize()
"""
    got = run_bounded(["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-np", "3",
                       "--bind-to", "none", PYTHON, "-c", script], 60)
    assert got.returncode == 0, got.stderr
    # mpirun forwards each rank's output as it comes: two ranks' records can share a line
    # ('{"rank": 1, ...}{"rank": 2, ...}' seen under CI), so each record is decoded where
    # it starts
    decoder = json.JSONDecoder()
    starts = [i for i in range(len(got.stdout)) if got.stdout.startswith('{"rank"', i)]
    lines = sorted((decoder.raw_decode(got.stdout, i)[0] for i in starts),
                   key=lambda x: x["rank"])
    assert [x["rank"] for x in lines] == [0, 1, 2]
    for x in lines:
        assert x["corrupt"] == [0, 0, 0] and x["samples"] == [50, 50]

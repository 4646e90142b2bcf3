"""`beoperf cluster hpcc` under a real Slurm started by the test (tests/slurm.py): munged,
slurmctld in the first namespace host, slurmd on two more, all killed by PID afterwards.

Inside an allocation (``salloc``) beoperf finds ``SLURM_JOB_ID``, takes its nodes and
launches hpcc with ``srun --mpi=pmix`` (Debian's hpcc is built against Open MPI); N is
sized from the nodes' memory, read through srun.  The same hpcc through mpirun gives the
same summary keys.  Slurm is started once for the module (about 20 s).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid

import pytest

import netns
from beoperf.launch.plan import local_memory
from beoperf.model import hpcc
from beoperf.model import load as load_document
from helpers import child_env, wait_for
from mpi_helpers import cmdline, comm, named, survivors
from slurm import SlurmCluster

pytestmark = [pytest.mark.netns,
              pytest.mark.tools("hpcc", "mpirun.openmpi", "slurmctld", "slurmd", "munged",
                                "salloc", "srun", "nsenter")]

N_TARGET = 400  # the N a one-node run should get from --memory-fraction


def fraction_text() -> str:
    """A --memory-fraction whose matrix on one node is N_TARGET + NB/2 (so that rounding
    the fraction cannot move N across a multiple of NB)."""
    return f"{8 * (N_TARGET + NB // 2) ** 2 / local_memory():.12f}"
NB = 80
TIMEOUT_S = 300


def beoperf_argv(*argv: str) -> list[str]:
    return [sys.executable, "-m", "beoperf", *argv]


def source_env(env: dict[str, str]) -> dict[str, str]:
    return child_env(env)


@pytest.fixture(scope="module")
def slurm():
    ok, reason = netns.can_use_netns()
    if not ok:
        pytest.skip(f"needs network namespaces: {reason}")
    with netns.VethPair(3) as topo, SlurmCluster(topo.hosts[0], topo.hosts[1:]) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def in_allocation(slurm, tmp_path_factory):
    """`salloc -N 2 beoperf cluster hpcc --np 1,2` (N from the nodes' memory)."""
    out = tmp_path_factory.mktemp("slurm") / "study"
    proc = slurm.controller.run(
        ["salloc", "-N", "2", *beoperf_argv(
            "cluster", "hpcc", "--np", "1,2", "--memory-fraction", fraction_text(),
            "--nb", str(NB), "-o", str(out), "--format", "json", "--timeout", str(TIMEOUT_S))],
        env=source_env(slurm.env), check=False, timeout=TIMEOUT_S + 60)
    assert proc.returncode == 0, proc.stderr[-3000:] + slurm.logs()
    return json.loads(proc.stdout), out, proc.stderr


def test_inside_an_allocation_srun_runs_hpcc_on_its_nodes(in_allocation):
    doc, out, stderr = in_allocation
    assert [(p["np"], p["runs"], p["failed"]) for p in doc["body"]["points"]] == \
        [(1, 1, 0), (2, 1, 0)]
    assert doc["meta"]["launcher"] == "srun"
    assert doc["meta"]["hosts"].startswith("Slurm allocation ")
    run2 = load_document(out / "runs" / "np2-r1.json").body
    argv = run2["launch"]["argv"]
    assert argv[:1] == ["srun"] and "--mpi=pmix" in argv
    assert argv[argv.index("--nodelist") + 1] == "n1,n2"
    assert run2["nodes"] == ["n1", "n2"] and run2["ranks_per_node"] == 1
    job = run2["launch"]["allocation"]
    assert job["job_id"].isdigit() and job["nodelist"] == "n[1-2]"
    assert run2["launch"]["environment"]["SLURM_JOB_ID"] == job["job_id"]
    assert any("inside Slurm allocation" in n for n in run2["launch"]["notes"])
    assert "run 2/2" in stderr and "left" in stderr


def test_n_comes_from_the_nodes_memory_read_through_srun(in_allocation):
    _, out, _ = in_allocation
    for name, nodes in (("np1-r1", 1), ("np2-r1", 2)):
        body = load_document(out / "runs" / f"{name}.json").body
        # the namespace nodes share this machine's memory
        expected = hpcc.n_for_memory(float(fraction_text()) * nodes * local_memory(), NB)
        assert body["input"]["n"] == expected
        assert body["metrics"]["HPL_N"]["value"] == expected
        assert f"of {nodes} x {local_memory() // 2**20} MiB" in body["input"]["n_from"]
    assert load_document(out / "runs" / "np1-r1.json").body["input"]["n"] == N_TARGET


def test_srun_and_mpirun_give_the_same_keys(in_allocation, tmp_path):
    doc, out, _ = in_allocation
    by_srun = load_document(out / "runs" / "np1-r1.json").body["metrics"]
    env = source_env(dict(os.environ))
    for name in ("SLURM_JOB_ID", "SLURM_JOBID", "SLURM_JOB_NODELIST", "SLURM_NODELIST"):
        env.pop(name, None)
    import subprocess

    proc = subprocess.run(beoperf_argv("cluster", "hpcc", "--np", "1", "--n", str(N_TARGET),
                                       "-o", str(tmp_path / "mpirun"), "--quiet",
                                       "--format", "json"),
                          capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["meta"]["launcher"] == "openmpi"
    by_mpirun = load_document(tmp_path / "mpirun" / "runs" / "np1-r1.json").body["metrics"]
    assert list(by_srun) == list(by_mpirun) == list(hpcc.KEYS_1_5_0)
    assert {k: e["unit"] for k, e in by_srun.items()} == \
        {k: e["unit"] for k, e in by_mpirun.items()}


def test_srun_with_named_nodes_outside_an_allocation(slurm, tmp_path):
    """--launcher srun --hosts: srun makes its own allocation on those nodes."""
    proc = slurm.controller.run(
        beoperf_argv("cluster", "hpcc", "--np", "2", "--n", "240", "--launcher", "srun",
                     "--hosts", "n[1-2]", "-o", str(tmp_path / "named"), "--quiet",
                     "--format", "json"),
        env=source_env(slurm.env), check=False, timeout=TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    body = load_document(tmp_path / "named" / "runs" / "np2-r1.json").body
    assert body["status"] == "ok" and body["launch"]["allocation"] is None
    assert body["launch"]["argv"][:8] == ["srun", "-N", "2", "-n", "2", "--ntasks-per-node",
                                          "1", "--nodelist"]


def test_the_ring_of_beoperfs_own_mpi_loops_runs_through_srun(slurm):
    """`beoperf cluster ring` inside an allocation: one rank on each node through
    ``srun --mpi=pmix`` (beoperf's ranks are mpi4py over Open MPI), the nodes named by the
    allocation, the launch recorded."""
    proc = slurm.controller.run(
        ["salloc", "-N", "2", *beoperf_argv(
            "cluster", "ring", "--bandwidth-size", "64K", "--random-rings", "1,1",
            "--min-trials", "2", "--time-budget", "2", "--format", "json")],
        env=source_env(slurm.env), check=False, timeout=TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-3000:] + slurm.logs()
    doc = json.loads(proc.stdout)
    assert doc["meta"]["hosts"].startswith("Slurm allocation ")
    (series,) = doc["body"]["series"]
    assert series["status"] == "complete" and series["np"] == 2
    assert series["nodes"] == ["n1", "n2"]
    assert len({r["net_namespace"] for r in series["ranks"]}) == 2
    argv = series["launch"]["argv"]
    assert argv[:1] == ["srun"] and "--mpi=pmix" in argv and argv[-1] == "PLAN"
    assert series["launch"]["launcher"] == "srun"
    figures = series["repeats"][0]["figures"]
    assert all(v is not None and v > 0 for v in figures.values())


def test_the_collectives_run_through_srun(slurm):
    """`beoperf cluster coll` inside an allocation: one rank on each node through srun,
    every result checked right."""
    proc = slurm.controller.run(
        ["salloc", "-N", "2", *beoperf_argv(
            "cluster", "coll", "--ops", "allreduce,alltoall,barrier", "--sizes", "8,4K",
            "--min-trials", "2", "--time-budget", "2", "--format", "json")],
        env=source_env(slurm.env), check=False, timeout=TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-3000:] + slurm.logs()
    (series,) = json.loads(proc.stdout)["body"]["series"]
    assert series["status"] == "complete" and series["nodes"] == ["n1", "n2"]
    assert series["launch"]["launcher"] == "srun"
    assert len(series["collectives"]) == 5
    assert all(p["checked"] == 2 and p["corrupt"] == 0 and p["t_avg_s"]["median"] > 0
               for p in series["collectives"])


def steps(slurm) -> list[str]:
    """The job steps Slurm knows of (``JOBID.STEPID``)."""
    done = slurm.controller.run(["squeue", "-s", "-h", "-o", "%i"], env=source_env(slurm.env),
                                check=False, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def hpcc_under_salloc(slurm, token: str, tmp_path) -> tuple[subprocess.Popen, int, list[str]]:
    """`salloc -N 2 sh -c 'beoperf cluster hpcc --np 2 ...; sleep 60'` (an allocation that
    outlives beoperf) once both hpcc ranks run: salloc, beoperf's PID, the new steps."""
    before = set(steps(slurm))
    script = (f"{sys.executable} -m beoperf cluster hpcc --np 2 --n 6000 --quiet -o "
              f"{tmp_path / 'killed'}; sleep 60")
    env = {**source_env(slurm.env), "BEOPERF_TEST_TOKEN": token}
    salloc = slurm.controller.popen(["salloc", "-N", "2", "sh", "-c", script], env=env,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
    created: list[str] = []
    try:
        assert wait_for(lambda: len(named(token, "hpcc")) == 2, 120), slurm.logs()
        (beoperf,) = [p for p in survivors(token) if "-m beoperf cluster" in cmdline(p)
                      and comm(p).startswith("python")]
        assert named(token, "srun"), "hpcc runs under srun"
        created = sorted(set(steps(slurm)) - before)
        assert len(created) == 1, created
    except BaseException:
        end_salloc(slurm, salloc, token, created)
        raise
    return salloc, beoperf, created


def end_salloc(slurm, salloc: subprocess.Popen, token: str, created: list[str]) -> None:
    """salloc and what is left of its token killed, its allocation cancelled and gone
    (the nodes free for the next test)."""
    salloc.kill()
    salloc.wait()
    for pid in survivors(token):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    jobs = sorted({step.split(".")[0] for step in created})
    slurm.controller.run(["scancel", *jobs], env=source_env(slurm.env), check=False,
                         timeout=30)
    wait_for(lambda: not set(jobs) & set(listed_jobs(slurm)), 60)


def listed_jobs(slurm) -> list[str]:
    done = slurm.controller.run(["squeue", "-h", "-o", "%i"], env=source_env(slurm.env),
                                check=False, timeout=30)
    return done.stdout.split()


def test_sigkill_of_beoperf_ends_its_srun_step(slurm, tmp_path):
    """Issue 26, item 10: beoperf killed with SIGKILL inside an allocation that lives on
    (the shell goes on after it): the srun step it created and its hpcc ranks end within
    seconds (the guard's SIGTERM to srun, and scancel of the step), nothing is left and
    Slurm no longer lists the step."""
    token = uuid.uuid4().hex
    salloc, beoperf, created = hpcc_under_salloc(slurm, token, tmp_path)
    try:
        os.kill(beoperf, signal.SIGKILL)
        wait_for(lambda: not named(token, "hpcc") and not named(token, "srun")
                 and not set(created) & set(steps(slurm)), 20)
        left = [(p, comm(p)) for p in named(token, "hpcc") + named(token, "srun")]
        listed = sorted(set(created) & set(steps(slurm)))
    finally:
        end_salloc(slurm, salloc, token, created)
    assert left == []
    assert listed == []


def test_a_step_whose_srun_is_stuck_is_cancelled_all_the_same(slurm, tmp_path):
    """srun stopped (SIGSTOP: it can neither end its step nor be ended by SIGTERM), then
    beoperf killed with SIGKILL: the step's hpcc ranks end while srun is still there,
    stopped, before the guard's grace is out (the guard cancels the step with scancel;
    ending srun's tree alone would end the ranks only once srun is killed, 5 s later);
    Slurm drops the step once srun is gone."""
    token = uuid.uuid4().hex
    salloc, beoperf, created = hpcc_under_salloc(slurm, token, tmp_path)
    try:
        sruns = named(token, "srun")  # srun, and the srun it forks
        for pid in sruns:
            os.kill(pid, signal.SIGSTOP)
        os.kill(beoperf, signal.SIGKILL)
        ranks_gone = wait_for(lambda: not named(token, "hpcc"), 20)
        srun_there = {state(pid) for pid in sruns}
        wait_for(lambda: not named(token, "srun") and not set(created) & set(steps(slurm)),
                 30)
        left = [(p, comm(p)) for p in named(token, "hpcc") + named(token, "srun")]
        listed = sorted(set(created) & set(steps(slurm)))
    finally:
        end_salloc(slurm, salloc, token, created)
    assert ranks_gone, slurm.logs()
    assert srun_there == {"T"}  # stopped still: what ended the ranks was not srun
    assert left == []
    assert listed == []


def state(pid: int) -> str:
    """A process's state letter ('' once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""

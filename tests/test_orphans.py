"""No orphans, even after SIGKILL (issue 26, item 10): beoperf killed with SIGKILL in the
middle of a command leaves no process it started (mpirun, the ranks, hpcc, the embedded
server) and no scratch file, a few seconds later.

Processes are found by a token in their environment, which every process beoperf starts
inherits (mpirun passes its environment on to the ranks it starts here): nothing is ever
signalled here but what carries this test's token.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import child_env, scratch_open, wait_for
from mpi_helpers import cmdline, comm, named, require_mpi, survivors

GONE_WITHIN_S = 10.0  # the guard's SIGTERM, and SIGKILL 5 s later at the latest
START_WITHIN_S = 90.0


def kill_midway(args: list[str], ready: Callable[[str], bool], tmp_path: Path,
                children: bool = True) -> list[tuple[int, str]]:
    """Start `beoperf ARGS`, wait until ``ready(token)``, kill beoperf with SIGKILL; the
    processes of its token still alive GONE_WITHIN_S later (killed then: ours)."""
    token = uuid.uuid4().hex
    proc = subprocess.Popen([sys.executable, "-m", "beoperf", *args], cwd=tmp_path,
                            env=child_env({**os.environ, "BEOPERF_TEST_TOKEN": token}),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        started = wait_for(lambda: ready(token) or proc.poll() is not None, START_WITHIN_S)
        if not started or proc.poll() is not None:
            # its stderr is read only once it has ended: a live beoperf holds the pipe open
            proc.kill()
            proc.wait()
            why = "ended" if started else f"was not ready within {START_WITHIN_S:g} s"
            pytest.fail(f"beoperf {why}: {proc.stderr.read().decode()[-2000:]}")
        assert not children or len(survivors(token)) > 1, "beoperf started no child"
        proc.kill()
        proc.wait()
        wait_for(lambda: not survivors(token), GONE_WITHIN_S)
        left = [(pid, comm(pid)) for pid in survivors(token)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in survivors(token):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        proc.stderr.close()
    return left


def is_rank(pid: int) -> bool:
    """A rank itself (``python -m beoperf.cli.rank ...``), not the guard or mpirun, whose
    command lines carry the ranks' (counting those once killed beoperf before the ranks
    started, and under load never saw two)."""
    return cmdline(pid).split(" ")[1:3] == ["-m", "beoperf.cli.rank"]


@pytest.mark.tools("hpcc", "mpirun.openmpi")
def test_sigkill_of_cluster_hpcc_leaves_neither_mpirun_nor_ranks(tmp_path):
    left = kill_midway(["cluster", "hpcc", "--np", "2", "--n", "2000", "--launcher",
                        "openmpi", "-o", str(tmp_path / "study")],
                       lambda token: len(named(token, "hpcc")) == 2, tmp_path)
    assert left == []


@pytest.mark.parametrize("impl, budget", [("openmpi", "30"), ("openmpi", "none"),
                                          ("mpich", "none")])
def test_sigkill_of_pingpong_over_mpi_leaves_no_rank(tmp_path, impl, budget):
    """Open MPI puts each rank in a process group of its own, MPICH's hydra in a session
    of its own: neither is found by its group or session, both by the guard's tree."""
    require_mpi(impl)
    left = kill_midway(["pingpong", "--transport", "mpi", "--mpi", impl,
                        "--precision", "0.0001", "--time-budget", budget, "-o",
                        str(tmp_path / "pp")],
                       lambda token: len([p for p in survivors(token) if is_rank(p)]) == 2,
                       tmp_path)
    assert left == []


def test_sigkill_of_pingpong_leaves_no_embedded_server(tmp_path):
    left = kill_midway(["pingpong", "--precision", "0.0001", "--time-budget", "30", "-o",
                        str(tmp_path / "pp")],
                       lambda token: any(" serve " in cmdline(p) for p in survivors(token)),
                       tmp_path)
    assert left == []



def test_sigkill_of_node_io_leaves_no_scratch_file(tmp_path):
    io_dir = tmp_path / "io"
    io_dir.mkdir()
    left = kill_midway(["node", "io", "--dir", str(io_dir), "--file-size", "32M", "--block",
                        "4K", "--repeat", "50", "--no-progress", "--warm-cache", "-o",
                        str(tmp_path / "out.json")],
                       lambda token: any(scratch_open(p, io_dir) for p in survivors(token)),
                       tmp_path, children=False)
    assert left == []
    assert list(io_dir.iterdir()) == []


def test_the_job_runner_ends_a_tree_that_ignores_sigterm(tmp_path):
    """A child that ignores SIGTERM, and its child, are killed after the grace; a child
    that ends by itself is not touched, and its status and output come back."""
    from beoperf.launch import job

    done = job.run(["sh", "-c", "echo out; echo err >&2; exit 3"], 30)
    assert (done.returncode, done.stopped) == (3, False)
    assert (done.stdout_text(), done.stderr_text()) == ("out\n", "err\n")
    marker = tmp_path / "pids"
    started = time.monotonic()
    stuck = job.run(["sh", "-c", f"trap '' TERM; sleep 60 & echo $$ $! > {marker}; wait"],
                    1.0, grace=1.0)
    assert stuck.stopped and stuck.returncode == -signal.SIGKILL
    assert time.monotonic() - started < 1.0 + 1.0 + 5.0
    pids = [int(p) for p in marker.read_text().split()]
    assert wait_for(lambda: not any(alive(p) for p in pids), 5)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_a_child_that_cannot_start_is_an_oserror():
    from beoperf.launch import job

    with pytest.raises(FileNotFoundError):
        job.run(["/nonexistent/beoperf-test"], 5)


ON_STOP = ("import sys, time; time.sleep(0.5); "  # outlives the tree's SIGTERM: spared
           "open(sys.argv[1], 'a').write(sys.argv[2] + '\\n')")


def test_a_stopped_job_runs_its_on_stop_command_with_the_childs_pid(tmp_path):
    """on_stop runs when the job is stopped (told to, or its owner SIGKILLed: the guard
    sees the lifeline close), with the child's PID, spared from the signals that end the
    tree; not when the child ends by itself."""
    from beoperf.launch import job

    record = tmp_path / "on-stop"
    hook = [sys.executable, "-c", ON_STOP, str(record), "{pid}"]
    assert job.run(["true"], 30, on_stop=hook).returncode == 0
    assert not record.exists()  # ended by itself: nothing to run
    stopped = job.Job(["sleep", "60"], on_stop=hook).start()
    (child, _guard), *_ = guard_children(stopped.pid)
    stopped.stop()
    assert stopped.stopped and record.read_text().split() == [str(child)]

    record.unlink()
    owner = subprocess.Popen([sys.executable, "-c", OWNER, repr(hook)], env=child_env(),
                             stdout=subprocess.PIPE, text=True)
    orphan = int(owner.stdout.readline())
    owner.kill()
    owner.wait()
    owner.stdout.close()
    assert wait_for(lambda: record.exists() and record.read_text().endswith("\n"), 10)
    assert record.read_text().split() == [str(orphan)]
    assert wait_for(lambda: not alive(orphan), 5)


OWNER = """import sys, ast
from beoperf.launch import job
j = job.Job(["sleep", "60"], on_stop=ast.literal_eval(sys.argv[1])).start()
from beoperf.launch.guard import descendants
print([p for p, _ in descendants(j.pid)][0], flush=True)
import time; time.sleep(60)
"""


def guard_children(guard: int) -> list[tuple[int, int]]:
    from beoperf.launch.guard import descendants

    return descendants(guard)


def test_srun_jobs_have_their_steps_cancelled_on_stop():
    """The default on_stop of a job running srun: the script that cancels the steps whose
    srun was that PID on this host, read from `scontrol -o show step`."""
    from beoperf.launch import slurm_step, srun

    listing = ("StepId=7.0 UserId=0 State=RUNNING Name=hpcc SrunHost:Pid=vm:4242\n"
               "StepId=7.1 UserId=0 State=RUNNING Name=hpcc SrunHost:Pid=vm:4343\n"
               "StepId=8.0 UserId=0 State=RUNNING Name=x SrunHost:Pid=other:4242\n"
               "StepId=9.2 UserId=0 SrunHost:Pid=vm.example.org:4242\n")
    assert slurm_step.steps_of(listing, "vm", 4242) == ["7.0", "9.2"]
    assert slurm_step.steps_of("No job steps in the system\n", "vm", 4242) == []
    assert srun.step_canceller(["mpirun", "-np", "2", "x"]) == ()
    canceller = srun.step_canceller(["/usr/bin/srun", "-N", "2", "x"])
    if shutil.which("scancel") is None:
        assert canceller == ()
    else:
        assert canceller == (sys.executable, "-I", "-S", srun.STEP_SCRIPT, "{pid}")

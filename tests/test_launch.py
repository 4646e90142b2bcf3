"""Launchers: the argv and environment each one makes of the same request, the registry,
finding the MPI implementation, and a Slurm allocation.  No MPI or Slurm is needed: the
commands are strings here (local processes and the clush fan-out really run)."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from beoperf import launch
from beoperf.launch import local, mpirun, srun
from beoperf.launch.base import LaunchSpec

CMD = ("./osu_latency", "-m", "8:8")
SPEC = LaunchSpec(CMD, hosts=("a", "b"), ranks_per_host=2, env={"UCX_TLS": "tcp"},
                  interface="eth1")


def test_registry_names_every_launcher():
    assert launch.names() == ["clush", "local", "mpich", "mpirun", "openmpi", "srun"]
    assert isinstance(launch.get("srun"), srun.Srun)
    with pytest.raises(KeyError, match="no launcher 'pbsdsh' .there are clush, local"):
        launch.get("pbsdsh")


def test_a_new_launcher_is_one_registered_class():
    @launch.register("echo-test")
    class Echo(launch.Launcher):
        def available(self) -> bool:
            return True

        def command(self, spec: LaunchSpec) -> launch.Launch:
            return launch.Launch(("echo", *spec.argv))

    try:
        assert launch.get("echo-test").command(LaunchSpec(("x",))).argv == ("echo", "x")
        assert Echo.name == "echo-test"
    finally:
        del launch.LAUNCHERS["echo-test"]


@pytest.mark.parametrize("fields, message", [
    ({"argv": ()}, "needs a command"), ({"argv": ("a", "")}, "needs a command"),
    ({"ranks_per_host": 0}, "at least 1"), ({"bind": "numa"}, "choose none, core, socket"),
    ({"env": {"A B": "1"}}, "not a valid name"),
])
def test_a_spec_is_checked(fields, message):
    with pytest.raises(ValueError, match=message):
        LaunchSpec(**{"argv": CMD, **fields})


def test_ranks_counts_every_host():
    assert SPEC.ranks == 4 and LaunchSpec(CMD, ranks_per_host=3).ranks == 3


# --------------------------------------------------------------------------- mpirun


def test_open_mpi_argv_and_environment():
    got = mpirun.OpenMpi("mpirun.openmpi", is_root=lambda: False).command(SPEC)
    assert got.argv == (
        "mpirun.openmpi", "-np", "4", "--host", "a:2,b:2", "--bind-to", "none",
        "-x", "UCX_TLS",
        "--mca", "btl_tcp_if_include", "eth1", "--mca", "oob_tcp_if_include", "eth1", *CMD)
    assert got.env == {"UCX_TLS": "tcp"}  # -x exports it from mpirun's environment


def test_open_mpi_as_root_with_an_agent():
    spec = LaunchSpec(CMD, hosts=("a",), bind="core", agent="ssh -p 2222", extra=("-v",))
    got = mpirun.OpenMpi("mpirun.openmpi", is_root=lambda: True).command(spec)
    assert got.argv == ("mpirun.openmpi", "-np", "1", "--host", "a:1", "--bind-to", "core",
                        "--allow-run-as-root", "--mca", "plm_rsh_agent", "ssh -p 2222",
                        "-v", *CMD)


def test_mpich_hydra_argv():
    got = mpirun.Mpich("mpirun.mpich").command(
        LaunchSpec(CMD, hosts=("a", "b"), ranks_per_host=2, env={"UCX_TLS": "tcp"},
                   interface="eth1", agent="/usr/bin/ssh"))
    assert got.argv == (
        "mpirun.mpich", "-np", "4", "-hosts", "a,b", "-ppn", "2", "-bind-to", "none",
        "-genv", "UCX_TLS", "tcp", "-launcher", "ssh", "-launcher-exec", "/usr/bin/ssh",
        "-iface", "eth1", *CMD)
    assert got.env == {}


def test_mpirun_on_this_host_only():
    spec = LaunchSpec(CMD, ranks_per_host=2)
    assert mpirun.Mpich("mpiexec").command(spec).argv == (
        "mpiexec", "-np", "2", "-bind-to", "none", *CMD)
    assert mpirun.OpenMpi("mpirun", is_root=lambda: False).command(spec).argv == (
        "mpirun", "-np", "2", "--bind-to", "none", *CMD)


def fake_mpi(directory: Path, name: str, version_text: str) -> None:
    script = directory / name
    script.write_text(f"#!/bin/sh\nprintf '%s\\n' '{version_text}'\n")  # PATH has no cat
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


OPEN_MPI = "mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/"
HYDRA = "HYDRA build details:\n    Version:                                 4.0.2"


@pytest.fixture
def path_dir(tmp_path, monkeypatch):
    """An empty directory as the whole PATH; the version cache emptied."""
    monkeypatch.setenv("PATH", str(tmp_path))
    mpirun.implementation_of.cache_clear()
    yield tmp_path
    mpirun.implementation_of.cache_clear()


def test_debian_names_come_first(path_dir):
    assert not mpirun.OpenMpi().available() and not mpirun.Mpich().available()
    assert mpirun.OpenMpi().executable() == "mpirun.openmpi"  # what to install
    fake_mpi(path_dir, "mpirun.mpich", HYDRA)
    fake_mpi(path_dir, "mpirun", OPEN_MPI)
    assert mpirun.Mpich().executable() == str(path_dir / "mpirun.mpich")
    assert mpirun.OpenMpi().executable() == str(path_dir / "mpirun")  # says Open MPI
    assert isinstance(mpirun.Mpirun().chosen, mpirun.OpenMpi)  # the system's mpirun


def test_generic_mpirun_is_what_its_version_says(path_dir):
    fake_mpi(path_dir, "mpiexec", HYDRA)
    assert mpirun.implementation_of(str(path_dir / "mpiexec")) == "mpich"
    assert mpirun.Mpich().available() and not mpirun.OpenMpi().available()
    assert mpirun.Mpich().command(LaunchSpec(("x",))).argv[0] == str(path_dir / "mpiexec")
    assert isinstance(mpirun.Mpirun().chosen, mpirun.Mpich)
    fake_mpi(path_dir, "mpirun", "something else 1.0")
    mpirun.implementation_of.cache_clear()
    assert mpirun.implementation_of(str(path_dir / "mpirun")) is None


# --------------------------------------------------------------------------- srun


def test_srun_for_named_nodes():
    got = srun.Srun().command(LaunchSpec(CMD, hosts=("a", "b"), ranks_per_host=2,
                                         env={"UCX_TLS": "tcp", "LIST": "x,y"}))
    assert got.argv == ("srun", "-N", "2", "-n", "4", "--ntasks-per-node", "2",
                        "--nodelist", "a,b", "--mpi=pmix", "--cpu-bind=none",
                        "--export=ALL,UCX_TLS=tcp,LIST", *CMD)
    assert got.env == {"LIST": "x,y"}  # a comma cannot go in --export: set, exported by name


def test_srun_inside_an_allocation():
    env = {"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "n[01-04]", "SLURM_JOB_NUM_NODES": "4"}
    job = srun.allocation(env)
    assert job == srun.Allocation("42", "n[01-04]", 4)
    got = srun.Srun(mpi="pmi2", environ=env).command(LaunchSpec(CMD, ranks_per_host=8,
                                                                bind="core"))
    assert got.argv == ("srun", "-N", "4", "-n", "32", "--ntasks-per-node", "8", "--mpi=pmi2",
                        "--cpu-bind=cores", "--export=ALL", *CMD)
    assert srun.allocation({"SLURM_JOB_ID": "42"}) is None
    with pytest.raises(ValueError, match="inside a Slurm allocation"):
        srun.Srun(environ={}).command(LaunchSpec(CMD))


@pytest.mark.parametrize("fields", [{"agent": "ssh"}, {"interface": "eth1"}])
def test_srun_refuses_what_it_cannot_do(fields):
    with pytest.raises(ValueError, match="the srun launcher cannot honour"):
        srun.Srun().command(LaunchSpec(CMD, hosts=("a",), **fields))
    with pytest.raises(ValueError, match="--mpi"):
        srun.Srun(mpi="openmpi")


# --------------------------------------------------------------------------- local


def test_local_runs_each_rank_with_its_number():
    spec = LaunchSpec((sys.executable, "-c", "import os; print(os.environ['BEOPERF_RANK'], "
                       "os.environ['BEOPERF_RANKS'], os.environ['X'])"),
                      hosts=("localhost",), ranks_per_host=3, env={"X": "y"})
    jobs = local.start(spec)
    for job in jobs:
        assert job.wait(30) == 0
        job.close()
    outs = sorted(job.stdout_text().strip() for job in jobs)
    assert outs == ["0 3 y", "1 3 y", "2 3 y"]
    assert local.Local().command(LaunchSpec(CMD, env={"X": "y"})) == launch.Launch(
        CMD, {"X": "y", "BEOPERF_RANK": "0", "BEOPERF_RANKS": "1"})


@pytest.mark.parametrize("fields, message", [
    ({"hosts": ("elsewhere",)}, "this host only"), ({"agent": "ssh"}, "agent"),
    ({"bind": "core"}, "bind"), ({"ranks_per_host": 2}, "several local processes")])
def test_local_refuses_what_it_cannot_do(fields, message):
    with pytest.raises(ValueError, match=message):
        local.Local().command(LaunchSpec(CMD, **fields))


def test_every_launcher_takes_the_same_request():
    """One spec, every launcher: each gives an argv ending with the command, or says
    why it cannot (never a silent drop of hosts, ranks or environment)."""
    spec = LaunchSpec(CMD, hosts=("a", "b"), env={"UCX_TLS": "tcp"})
    made = {}
    for name in launch.names():
        try:
            made[name] = launch.get(name).command(spec)
        except ValueError as exc:
            made[name] = str(exc)
    assert made["local"] == "the local launcher runs on this host only, not on 'a'"
    for name in ("clush", "openmpi", "mpich", "mpirun", "srun"):
        argv = " ".join(made[name].argv)
        assert "UCX_TLS" in argv + " ".join(made[name].env), name
        assert argv.endswith(" ".join(CMD)) and "a" in argv, name
    assert os.environ.get("UCX_TLS") != "tcp"  # nothing was set here


OMPI_EXIT = """\
--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
--------------------------------------------------------------------------
mpirun.openmpi detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[25743,1],0]
  Exit code:    3
--------------------------------------------------------------------------
"""


@pytest.mark.parametrize("stderr, why", [
    (OMPI_EXIT, "mpirun.openmpi detected that one or more processes exited with non-zero "
                "status, thus causing"),
    ("Traceback (most recent call last):\n  File \"app.py\", line 3\nValueError: bad\n"
     + OMPI_EXIT, "ValueError: bad"),
    ("oops\n----\n\n", "oops"),
    ("-" * 74 + "\nORTE was unable to reliably start one or more daemons.\nThis usually is "
     "caused by:\n\n* not finding the required libraries\n" + "-" * 74 + "\n",
     "ORTE was unable to reliably start one or more daemons."),
    ("", ""), ("\n  \n" + "-" * 74 + "\n" + "-" * 74 + "\n", ""),
    ("x" * 500, "x" * 300),
])
def test_a_failed_commands_error_is_the_line_that_says_why(stderr, why):
    """Not the rule of dashes that closes Open MPI's messages (a study's failed mpirun
    once read 'exit status 3: ------...'), nor the advice below their headline."""
    from beoperf.launch import job

    assert job.said(stderr) == why

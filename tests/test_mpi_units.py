"""The MPI transport's pieces that need no MPI job: where a process is in a job, the
MPICH library name mpi4py needs, hosts, the spec the ranks get, sweeps of MPI settings,
and what a real MPI run's curve says (fixtures from real Open MPI runs)."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
from pathlib import Path

import pytest

from beoperf import _mpi, errors
from beoperf.analysis.mpi import overhead, protocol_switch
from beoperf.launch import channel, ranks
from beoperf.model.mpi_options import MpiOptions
from beoperf.model.pingpong import load_json
from beoperf.suites import mpi_pingpong
from beoperf.suites.pingpong import Spec

FIXTURES = Path(__file__).with_name("fixtures") / "mpi"


@pytest.mark.parametrize("env, expected", [
    ({}, None),
    ({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"}, ranks.RankInfo(1, 2, "openmpi")),
    ({"PMI_RANK": "0", "PMI_SIZE": "4"}, ranks.RankInfo(0, 4, "mpich")),
    ({"PMIX_RANK": "3", "SLURM_STEP_NUM_TASKS": "8"}, ranks.RankInfo(3, 8, "pmix")),
    ({"SLURM_STEP_ID": "0", "SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "2"},
     ranks.RankInfo(1, 2, "slurm")),
    # a batch script is not a rank, nor a one-task step
    ({"SLURM_JOB_ID": "7", "SLURM_PROCID": "0"}, None),
    ({"SLURM_STEP_ID": "0", "SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "1"}, None),
])
def test_rank_of_reads_each_launchers_variables(env, expected):
    assert ranks.rank_of(env) == expected


@pytest.mark.parametrize("env, impl", [
    ({}, "openmpi"), ({"PMI_RANK": "0", "PMI_FD": "5"}, "mpich"),
    ({"OMPI_COMM_WORLD_RANK": "0", "PMI_RANK": "0"}, "openmpi"),
    ({"BEOPERF_MPI": "mpich"}, "mpich"), ({"MPI4PY_MPIABI": "impi"}, "mpich"),
    ({"MPI4PY_MPIABI": "open-mpi"}, "openmpi"),
])
def test_implementation_here(env, impl):
    assert ranks.implementation_here(env) == impl


@pytest.mark.skipif(not ranks.loadable(ranks.MPICH_DEBIAN), reason="needs libmpich12")
def test_mpich_shim_is_private_and_removed_only_when_it_is_ours(monkeypatch, tmp_path):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    changes = ranks.mpich_environment({"LD_LIBRARY_PATH": "/opt/x"})
    assert changes is not None and changes["MPI4PY_MPIABI"] == "mpich"
    shim = Path(changes[ranks.SHIM_VAR])
    assert shim.parent == tmp_path and shim.name.startswith("beoperf-mpich-")
    assert stat.S_IMODE(shim.stat().st_mode) == 0o700 and shim.stat().st_uid == os.geteuid()
    link = shim / ranks.MPICH_SONAME
    assert "libmpich.so.12" in os.readlink(link)
    assert changes["LD_LIBRARY_PATH"] == f"{shim}:/opt/x"
    # a directory that holds anything else is not removed
    (shim / "planted").write_text("x")
    monkeypatch.setenv(ranks.SHIM_VAR, str(shim))
    ranks.remove_shim()
    assert link.is_symlink()
    (shim / "planted").unlink()
    monkeypatch.setenv(ranks.SHIM_VAR, str(shim))
    ranks.remove_shim()
    assert not shim.exists() and ranks.SHIM_VAR not in os.environ


def test_hosts_from_lists_node_sets_and_hostfiles(tmp_path):
    assert mpi_pingpong.hosts_from("b,a", None) == ("b", "a")  # rank 0 on the first
    assert mpi_pingpong.hosts_from("node[01-02]", None) == ("node01", "node02")
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# cluster\nn1 slots=4\nn2:2\n\nn1\n")
    assert mpi_pingpong.hosts_from(None, str(hostfile)) == ("n1", "n2")
    with pytest.raises(errors.BadSpec, match="not both"):
        mpi_pingpong.hosts_from("a", str(hostfile))
    with pytest.raises(errors.BadSpec):
        mpi_pingpong.hosts_from("node[", None)
    with pytest.raises(errors.BadSpec, match="is not a host name"):
        mpi_pingpong.hosts_from("-oProxyCommand=x", None)
    with pytest.raises(errors.InputError):
        mpi_pingpong.hosts_from(None, str(tmp_path / "missing"))


def test_the_spec_survives_the_trip_to_the_ranks():
    spec = Spec(sizes=(16, 1024), mode="stream", time_budget=None, command_line=("beoperf", "x"),
                transport="mpi", mpi=MpiOptions(hosts=("a", "b"), window=8, sync=True,
                                                env=(("UCX_TLS", "tcp,self"),),
                                                launcher_args=("-v",)))
    assert mpi_pingpong.spec_from_text(mpi_pingpong.spec_text(spec)) == spec


@pytest.mark.parametrize("key, value", [("sizes", "16"), ("sizes", [16, "x"]), ("port", "1"),
                                        ("integrity", 1), ("precision", None),
                                        ("command_line", [1])])
def test_a_spec_whose_json_is_not_one_is_refused_naming_the_key(key, value):
    """The ranks' plan is read value by value: a value of another type is a ValueError
    naming its key (the rank says BadSpec: not a plan), never a Spec holding it."""
    plan = json.loads(mpi_pingpong.spec_text(Spec(sizes=(16,), transport="mpi",
                                                  mpi=MpiOptions(hosts=("a", "b")))))
    plan[key] = value
    with pytest.raises(ValueError, match=rf"^{key}(\[\d+\])?: expected"):
        mpi_pingpong.spec_from_plan(plan)
    plan = json.loads(mpi_pingpong.spec_text(Spec(sizes=(16,), transport="mpi",
                                                  mpi=MpiOptions(hosts=("a", "b")))))
    plan["mpi"]["env"] = [["UCX_TLS"]]
    with pytest.raises(ValueError, match="'env'"):
        mpi_pingpong.spec_from_plan(plan)


def test_the_replay_spec_survives_the_trip_to_the_ranks():
    from beoperf.suites import mpi_replay, replay

    spec = replay.Spec(profile="p.csv", transport="mpi", repeats=2, timeout=5,
                       command_line=("beoperf", "replay"), mpi="mpich")
    text = json.dumps(dataclasses.asdict(spec))
    assert mpi_replay.spec_from_plan(json.loads(text)) == spec
    with pytest.raises(ValueError, match="^repeats: expected an integer"):
        mpi_replay.spec_from_plan({**json.loads(text), "repeats": "2"})


def test_sweep_configurations():
    base = Spec(sizes=(16,), transport="tcp",
                mpi=MpiOptions(hosts=("a", "b"), env=(("UCX_TLS", "tcp"),)))
    tcp = mpi_pingpong.configure(base, "transport", "tcp")
    assert tcp.transport == "tcp" and tcp.host == "b"  # the second MPI host's server
    assert mpi_pingpong.configure(base, "transport", "mpi").host is None
    given = Spec(sizes=(16,), host="c", mpi=MpiOptions(hosts=("a", "b")))
    assert mpi_pingpong.configure(given, "transport", "tcp").host == "c"
    assert mpi_pingpong.configure(given, "transport", "mpi").host is None
    with pytest.raises(errors.BadSpec, match="give --hosts c"):
        mpi_pingpong.validate_mpi(Spec(sizes=(16,), host="c", transport="mpi"))
    env = mpi_pingpong.configure(base, "mpi-env:UCX_TLS", "shm,self")
    assert env.transport == "mpi" and env.mpi.env == (("UCX_TLS", "shm,self"),)
    with pytest.raises(errors.BadSpec):
        mpi_pingpong.configure(base, "transport", "udp")
    assert mpi_pingpong.is_mpi_sweep(base, "mpi-env:X") and not mpi_pingpong.is_mpi_sweep(
        base, "sndbuf")


def test_errors_cross_from_rank_0_by_kind():
    text = channel.error_text(errors.IntegrityError("2 corrupted", "check the NICs"))
    import json

    back = channel.error_of(json.loads(text))
    assert type(back) is errors.IntegrityError and back.hint == "check the NICs"
    assert type(channel.error_of({"class": "SystemExit", "message": "x"})) is errors.Failed


@pytest.mark.parametrize("limit", [4096, 32768])
def test_eager_limit_moves_the_protocol_threshold(limit):
    """Real Open MPI runs over shared memory with btl_vader_eager_limit at 4096 and 32768
    (`--mpi-env OMPI_MCA_btl_vader_eager_limit=...`): the piecewise fit puts a threshold
    at the limit, and it is named as the eager/rendezvous switch with that setting."""
    run = load_json(FIXTURES / f"openmpi-shm-vader-eager-{limit}.json")
    switch = protocol_switch(run)
    assert switch is not None
    assert switch.setting == "OMPI_MCA_btl_vader_eager_limit"
    assert switch.value_bytes == limit and switch.value_source == "environment"
    assert switch.threshold == limit
    assert "moves it" in switch.text()
    # the time jumps at the switch: the rendezvous handshake costs a round trip more
    times = {s.size: s.central_time_us() for s in run.sizes}
    below = max(s for s in times if s < limit)
    assert times[limit] > 1.5 * times[below]


def test_protocol_switch_only_for_mpi_runs_and_overhead_per_size():
    a = load_json(FIXTURES / "openmpi-shm-vader-eager-4096.json")
    b = load_json(FIXTURES / "openmpi-shm-vader-eager-32768.json")
    rows = overhead(a, b)
    assert [r.size for r in rows] == [s.size for s in a.sizes]
    at = {r.size: r for r in rows}
    # between the two limits the 32K run is still eager: faster than the 4K run
    assert at[8192].ratio < 0.7 and at[8192].added_us < 0
    a.parameters = {**a.parameters, "transport": "tcp"}
    assert protocol_switch(a) is None


def test_the_mpi_loops_build_without_mpi_headers():
    """`pip install .` must work where no MPI is installed: the C sources include no MPI
    header and setup.py links no MPI library (the library is bound at run time)."""
    root = Path(__file__).resolve().parent.parent
    sources = [root / "src/beoperf/_mpi.c", *sorted((root / "src/beoperf/csrc").glob("*.[ch]"))]
    for source in sources:
        includes = [line for line in source.read_text().splitlines()
                    if line.lstrip().startswith("#include")]
        assert not [i for i in includes if "mpi.h" in i.replace("beo_mpi.h", "")], source
    code = [line for line in (root / "setup.py").read_text().splitlines()
            if not line.lstrip().startswith("#")]
    assert not [line for line in code if "mpicc" in line or "libmpi" in line or '"mpi"' in line]
    assert any('libraries=["dl"]' in line for line in code)


@pytest.mark.parametrize("make", [
    lambda path, size: _mpi.Library(path, size, 8, 24),
    lambda path, size: _mpi.Collectives(path, size),
    lambda path, size: _mpi.Rma(path, size)], ids=["Library", "Collectives", "Rma"])
def test_each_binding_refuses_odd_handles_and_a_library_not_loaded(make, tmp_path):
    """The three bindings share one opening step: a handle neither a pointer nor an int is
    a ValueError, a library this process has not loaded an OSError naming it (nothing is
    loaded by the binding itself: RTLD_NOLOAD)."""
    with pytest.raises(ValueError, match="neither a pointer nor an int"):
        make("libc.so.6", 3)
    missing = str(tmp_path / "libnot-mpi.so")
    with pytest.raises(OSError, match="not loaded in this process"):
        make(missing, 8)

"""What `beoperf cluster hpcc` decides before running: hosts (list, node set, hostfile,
Slurm allocation), placement and ranks per node, N and the grid, and the launcher."""

from __future__ import annotations

import pytest

from beoperf import errors
from beoperf.cli.cluster import parse_counts
from beoperf.launch import binary, hosts, plan
from beoperf.launch.mpirun import Mpich, OpenMpi
from beoperf.launch.srun import Srun

ALLOCATION = {"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "node[03-05],gpu1",
              "SLURM_JOB_NUM_NODES": "4"}


# --------------------------------------------------------------------------- hosts


def test_lists_and_node_sets_keep_the_order_given():
    assert hosts.expand("b,a,node[1-3],a") == ["b", "a", "node1", "node2", "node3"]
    assert hosts.expand("n[01-02,07]") == ["n01", "n02", "n07"]


@pytest.mark.parametrize("text, message", [
    ("a,-np", "is not a host name"), ("a b", "is not a host name"),
    ("a;reboot", "is not a host name"), ("n[1-", "is not a node set"), (",", "no host"),
    ("a\x1b[2J", "is not a host name"),
])
def test_names_that_would_reach_argv_as_options_are_refused(text, message):
    with pytest.raises(hosts.HostError, match=message):
        hosts.expand(text)


def test_hostfiles_of_open_mpi_and_mpich():
    found = hosts.parse_hostfile("# cluster\nnode1 slots=2 max_slots=4\nnode2:4\n\nnode3\n"
                                 "node1\n", "hf")
    assert found.names == ("node1", "node2", "node3") and found.slots == (2, 4, None)
    with pytest.raises(hosts.HostError, match="line 1: 'node1:x' is not host:N"):
        hosts.parse_hostfile("node1:x\n", "hf")
    with pytest.raises(hosts.HostError, match="line 2: 'cpus=3' is not slots=N"):
        hosts.parse_hostfile("a\nb cpus=3\n", "hf")
    with pytest.raises(hosts.HostError, match="no host"):
        hosts.parse_hostfile("# nothing\n", "hf")


def test_a_hostfile_is_read_bounded(tmp_path):
    big = tmp_path / "hosts"
    with open(big, "wb") as f:
        f.truncate(hosts.MAX_HOSTFILE_BYTES + 1)
    with pytest.raises(ValueError, match="limit"):
        hosts.read_hostfile(big)
    with pytest.raises(ValueError, match="not a regular file"):
        hosts.read_hostfile(tmp_path)


def test_the_allocation_gives_the_hosts_when_none_are_named():
    found = hosts.resolve(None, None, ALLOCATION)
    assert found.names == ("node03", "node04", "node05", "gpu1")
    assert found.source == "Slurm allocation 42"
    assert hosts.resolve("x", None, ALLOCATION).names == ("x",)  # named ones win
    assert hosts.resolve(None, None, {}) is None
    with pytest.raises(hosts.HostError, match="not both"):
        hosts.resolve("a", "f", {})


# --------------------------------------------------------------------------- placement


@pytest.mark.parametrize("np_, available, per_node", [(2, 6, 1), (6, 6, 1), (12, 6, 2),
                                                      (7, 6, 7), (8, 3, 4), (1, 1, 1)])
def test_spread_uses_as_few_ranks_per_node_as_the_hosts_allow(np_, available, per_node):
    assert plan.spread(np_, available) == per_node


def test_the_published_layout():
    """2 and 6 processes one per node, 12 two per node, on 6 nodes."""
    names = tuple(f"n{i}" for i in range(1, 7))
    got = [plan.place(np_, None, names) for np_ in (2, 6, 12)]
    assert [(c.ranks_per_node, c.nodes) for c in got] == [(1, names[:2]), (1, names),
                                                          (2, names)]
    assert {c.series for c in got} == {"spread"} and got[2].name == "np12"


def test_given_ranks_per_node():
    names = ("a", "b", "c", "d")
    c = plan.place(4, 2, names)
    assert (c.nodes, c.series, c.name) == (("a", "b"), "2 per node", "np4-2pn")
    with pytest.raises(errors.BadSpec, match="must be a multiple"):
        plan.place(3, 2, names)
    with pytest.raises(errors.BadSpec, match="need 5 hosts; 4 given"):
        plan.place(5, 1, names)
    with pytest.raises(errors.BadSpec, match="needs 2 hosts; give --hosts"):
        plan.place(4, 2, ())
    assert plan.place(4, None, ()).nodes == () and plan.place(4, 4, ()).ranks_per_node == 4


def test_n_grid_and_their_reasons():
    config = plan.place(6, None, ("a", "b", "c"))
    sized = plan.problem(config, n=None, nb=80, grid=None, fraction=0.5,
                         node_memory=4 * 2**30)
    assert (sized.input.p, sized.input.q) == (2, 3)
    n, memory = sized.input.n, 0.5 * 3 * 4 * 2**30
    assert n == 28320 and 8 * n**2 <= memory < 8 * (n + 80) ** 2
    assert "0.5 of 3 x 4096 MiB" in sized.n_from
    given = plan.problem(config, n=1000, nb=100, grid="1x6", fraction=0.5, node_memory=None)
    assert (given.input.n, given.input.nb, given.input.p, given.input.q) == (1000, 100, 1, 6)
    with pytest.raises(errors.BadSpec, match="2 x 2 is not 6"):
        plan.grid_of("2x2", 6)
    with pytest.raises(errors.BadSpec, match="expected PxQ"):
        plan.grid_of("two", 6)


def test_counts():
    assert parse_counts("12,2,6,2") == (2, 6, 12)
    for bad in ("", "0", "a", "-2", "1,2x"):
        with pytest.raises(errors.BadSpec):
            parse_counts(bad)


def test_meminfo():
    assert plan.memory_of("MemFree: 1 kB\nMemTotal:       24681396 kB\n") == 24681396 * 1024
    assert plan.memory_of("nothing") is None


# --------------------------------------------------------------------------- launcher


def linked(mpi: str | None) -> binary.Linked:
    return binary.Linked("/usr/bin/hpcc", mpi, None, None)


def test_inside_an_allocation_auto_is_srun_with_the_pmi_of_hpccs_mpi():
    chosen = plan.choose("auto", linked("openmpi"), None, ALLOCATION)
    assert isinstance(chosen.launcher, Srun) and chosen.launcher.mpi == "pmix"
    assert chosen.why == "inside Slurm allocation 42; --mpi=pmix"
    assert plan.choose("auto", linked("mpich"), None, ALLOCATION).launcher.mpi == "pmi2"
    assert plan.choose("srun", linked("mpich"), "pmix", ALLOCATION).launcher.mpi == "pmix"


def test_outside_auto_is_mpirun_of_hpccs_mpi(monkeypatch):
    monkeypatch.setattr(OpenMpi, "available", lambda self: True)
    monkeypatch.setattr(Mpich, "available", lambda self: True)
    assert isinstance(plan.choose("auto", linked("openmpi"), None, {}).launcher, OpenMpi)
    assert isinstance(plan.choose("auto", linked("mpich"), None, {}).launcher, Mpich)
    forced = plan.choose("mpich", linked("openmpi"), None, ALLOCATION)
    assert isinstance(forced.launcher, Mpich) and forced.why == "--launcher"
    with pytest.raises(errors.BadSpec, match="choose auto"):
        plan.choose("pbs", linked(None), None, {})


def test_the_mpi_and_blas_of_a_binary_from_ldd(monkeypatch):
    monkeypatch.setattr(binary, "libraries", lambda path: {
        "libblas.so.3": "/lib/x86_64-linux-gnu/libblas.so.3",
        "libmpich.so.12": "/lib/x86_64-linux-gnu/libmpich.so.12"})
    monkeypatch.setattr(binary.os.path, "realpath", lambda p: p.replace(
        "/lib/x86_64-linux-gnu/libblas.so.3",
        "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3"))
    found = binary.inspect("/opt/hpcc")
    assert found.mpi == "mpich" and found.blas["kind"] == "OpenBLAS"
    monkeypatch.setattr(binary, "libraries", lambda path: {})
    static = binary.inspect("/opt/hpcc-static")
    assert static.mpi is None and static.blas is None


def test_debians_hpcc_is_open_mpi_with_the_reference_blas():
    path = binary.which("hpcc")
    if path is None:
        pytest.skip("needs hpcc (apt-get install hpcc)")
    found = binary.inspect(path)
    assert found.mpi == "openmpi" and found.blas["library"] == "libblas.so.3"
    assert found.blas["kind"] in {kind for _, kind in binary.BLAS_KINDS} | {"unknown"}

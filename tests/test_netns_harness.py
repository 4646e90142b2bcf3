"""Tests of the namespace test harness (tests/netns.py) and the CI no-skip rule."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import netns

TOOLS = ["ping", "python"] if shutil.which("ping") else ["python"]

_skip_without_netns = pytest.mark.skipif(
    not netns.can_use_netns()[0], reason=f"needs network namespaces: {netns.can_use_netns()[1]}"
)


def needs_netns(test):
    """Mark a test that builds namespaces itself (no fixture): netns marker + skip rule."""
    return pytest.mark.netns(_skip_without_netns(test))


def root_links() -> list[tuple[int, str]]:
    """Interfaces of the root namespace (read only)."""
    out = subprocess.run(["ip", "-j", "link", "show"], capture_output=True, text=True, check=True)
    return sorted((link["ifindex"], link["ifname"]) for link in json.loads(out.stdout))


def wait_dead(pid: int, timeout: float = 5) -> bool:
    deadline = time.monotonic() + timeout
    while netns._pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


# ------------------------------------------------------------------ pure helpers


def test_can_use_netns_reports_bool_and_reason():
    ok, reason = netns.can_use_netns()
    assert isinstance(ok, bool) and isinstance(reason, str)
    assert ok or reason
    assert not [ns for ns in netns.list_namespaces() if ns.startswith("bptprobe")]


@pytest.mark.parametrize(
    ("rate", "bytes_per_sec", "burst"),
    [
        ("100mbit", 12.5e6, 64 * 1024),
        ("10gbit", 1.25e9, 5_000_000),
        ("1MBps", 1e6, 64 * 1024),
        ("8000", 1000, 64 * 1024),
    ],
)
def test_rate_parsing(rate, bytes_per_sec, burst):
    assert netns.rate_bytes_per_sec(rate) == pytest.approx(bytes_per_sec)
    assert netns.tbf_burst(rate) == burst


@pytest.mark.parametrize("bad", ["", "fast", "10 furlongs", "0mbit"])
def test_rate_parsing_rejects(bad):
    with pytest.raises(ValueError):
        netns.rate_bytes_per_sec(bad)


def test_bad_topologies_rejected():
    with pytest.raises(ValueError):
        netns.VethPair(1)
    with pytest.raises(ValueError):
        netns.VethPair(2, prefix="Bad-Prefix")


# ------------------------------------------------------------------ two hosts


@pytest.mark.parametrize("tool", TOOLS)
def test_pair_pings_v4_and_v6(netns_pair, tool):
    a, b = netns_pair
    for src, dst in ((a, b), (b, a)):
        assert src.ping(dst.addr4, tool=tool), f"{src.name} -> {dst.addr4}"
        assert src.ping(dst.addr6, tool=tool), f"{src.name} -> {dst.addr6}"
    assert not a.ping("198.18.0.77", wait=1, tool=tool)


def test_mtu_9000(netns_pair):
    a, b = netns_pair
    a.set_mtu(9000)
    shown = json.loads(a.run(["ip", "-j", "link", "show", "dev", a.ifname]).stdout)[0]
    assert shown["ifname"] == a.ifname and shown["mtu"] == 9000
    assert b.link()["mtu"] == 1500
    # A 9000-byte frame is dropped by the peer until its MTU matches.
    assert not a.ping(b.addr4, size=8972, wait=1)
    b.set_mtu(9000)
    assert a.ping(b.addr4, size=8972)
    assert a.ping(b.addr6, size=8952)


def test_set_rate_installs_and_clears_tbf(netns_pair):
    a, _ = netns_pair

    def kinds():
        out = a.run(["tc", "-j", "qdisc", "show", "dev", a.ifname]).stdout
        return [q["kind"] for q in json.loads(out)]

    a.set_rate("100mbit")
    assert "tbf" in kinds()
    a.set_rate("1gbit")  # replace, not add
    assert kinds().count("tbf") == 1
    a.clear_rate()
    assert "tbf" not in kinds()


def test_link_down_and_up(netns_pair):
    a, b = netns_pair
    a.link_down()
    assert a.link()["operstate"] == "DOWN"
    assert not a.ping(b.addr4, wait=1)
    a.link_up()
    assert a.ping(b.addr4)
    assert a.ping(b.addr6)


@pytest.mark.parametrize("family", ["addr4", "addr6"])
def test_tcp_between_hosts(netns_pair, family):
    server, client = netns_pair
    addr, port = getattr(server, family), 5201
    serve = textwrap.dedent("""
        import socket, sys
        fam = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
        with socket.create_server((sys.argv[1], int(sys.argv[2])), family=fam) as srv:
            conn, _ = srv.accept()
            with conn:
                conn.sendall(conn.recv(100).upper())
    """)
    connect = textwrap.dedent("""
        import socket, sys, time
        for _ in range(100):
            try:
                s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2)
                break
            except ConnectionRefusedError:
                time.sleep(0.05)
        s.sendall(b"hello")
        print(s.recv(100).decode())
    """)
    proc = server.popen([sys.executable, "-c", serve, addr, port])
    assert client.run([sys.executable, "-c", connect, addr, port]).stdout.strip() == "HELLO"
    assert proc.wait(5) == 0


# ------------------------------------------------------------------ lifecycle


@needs_netns
def test_namespaces_removed_after_exit():
    with netns.VethPair(2) as topo:
        names = topo.namespaces
        assert set(names) <= set(netns.list_namespaces())
    assert not set(names) & set(netns.list_namespaces())


@needs_netns
def test_namespaces_removed_when_block_raises():
    with pytest.raises(RuntimeError, match="boom"):
        with netns.veth_hosts(2) as hosts:
            names = [h.name for h in hosts]
            assert set(names) <= set(netns.list_namespaces())
            raise RuntimeError("boom")
    assert not set(names) & set(netns.list_namespaces())


@needs_netns
def test_processes_killed_on_cleanup():
    with netns.VethPair(2) as topo:
        a, b = topo
        tracked = a.popen(["sleep", "60"])
        stubborn = b.popen(["sh", "-c", "trap '' TERM; sleep 60 & wait"])
        untracked = int(a.run(["sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"]).stdout)
        assert netns._pid_alive(untracked)
    assert tracked.returncode is not None and stubborn.returncode is not None
    assert wait_dead(untracked)


@needs_netns
def test_three_hosts_reach_each_other_and_root_namespace_untouched():
    before = root_links()
    with netns.VethPair(3) as topo:
        assert topo.switch in netns.list_namespaces()
        h0, _, h2 = topo.hosts
        assert h0.ping(h2.addr4) and h0.ping(h2.addr6)
        assert h2.ping(h0.addr4)
        assert root_links() == before
        names = topo.namespaces
    assert not set(names) & set(netns.list_namespaces())
    assert root_links() == before


def test_netns_hosts_factory(netns_hosts):
    before = root_links()
    pair = netns_hosts()
    trio = netns_hosts(3)
    assert len(pair) == 2 and len(trio) == 3
    assert trio[0].ping(trio[1].addr4)
    assert pair[1].ping(pair[0].addr6)
    assert root_links() == before


@needs_netns
def test_stale_namespaces_of_dead_processes_are_reaped():
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = f"bpt{dead.pid}-0-0"
    subprocess.run(["ip", "netns", "add", stale], check=True)
    try:
        assert stale in netns.reap_stale()
    finally:
        subprocess.run(["ip", "netns", "del", stale], capture_output=True)
    assert stale not in netns.list_namespaces()


# ------------------------------------------------------------------ CI rule


def test_ci_turns_skips_into_failures(tmp_path: Path):
    here = Path(__file__).resolve().parent
    for name in ("conftest.py", "netns.py"):
        shutil.copy(here / name, tmp_path / name)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_skips.py").write_text(
        textwrap.dedent("""
        import pytest

        def test_call():
            pytest.skip("no widget")

        @pytest.mark.skip(reason="marked")
        def test_marked():
            pass

        @pytest.mark.xfail(reason="known", run=False)
        def test_xfail():
            pass

        def test_ok():
            pass
    """)
    )
    (tmp_path / "test_module.py").write_text(
        'import pytest\npytest.skip("module gone", allow_module_level=True)\n'
    )
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", str(tmp_path)]

    plain = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert plain.returncode == 0, plain.stdout
    assert "1 passed, 3 skipped, 1 xfailed" in plain.stdout

    ci = subprocess.run(
        [*cmd, "--continue-on-collection-errors"],
        cwd=tmp_path,
        env={**env, "CI": "true"},
        capture_output=True,
        text=True,
    )
    assert ci.returncode != 0, ci.stdout
    for reason in ("no widget", "marked", "module gone"):
        assert f"skipped under CI: {reason}" in ci.stdout
    assert " skipped" not in ci.stdout.splitlines()[-1]

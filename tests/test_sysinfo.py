"""Tests for beoperf.sysinfo: fake sysfs trees for parsing, real loopback for live facts."""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from beoperf import sysinfo

needs_ip = pytest.mark.skipif(shutil.which("ip") is None, reason="iproute2 `ip` not installed")


# --------------------------------------------------------------------------- fake sysfs


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def _cache_index(root: Path, n: int, level: int, size: str, kind: str) -> None:
    index = root / "devices" / "system" / "cpu" / "cpu0" / "cache" / f"index{n}"
    _write(index / "level", str(level))
    _write(index / "size", size)
    _write(index / "type", kind)


def test_llc_picks_highest_level_in_kib(tmp_path: Path) -> None:
    _cache_index(tmp_path, 0, 1, "32K", "Data")
    _cache_index(tmp_path, 1, 1, "32K", "Instruction")
    _cache_index(tmp_path, 2, 2, "512K", "Unified")
    _cache_index(tmp_path, 3, 3, "32768K", "Unified")
    assert sysinfo.llc_bytes(root=str(tmp_path)) == 32768 * 1024


def test_llc_parses_megabytes(tmp_path: Path) -> None:
    _cache_index(tmp_path, 0, 1, "48K", "Data")
    _cache_index(tmp_path, 1, 2, "1M", "Unified")
    assert sysinfo.llc_bytes(root=str(tmp_path)) == 1024 * 1024


def test_llc_ignores_instruction_cache(tmp_path: Path) -> None:
    # A (contrived) higher-level instruction cache must not be reported as the LLC.
    _cache_index(tmp_path, 0, 1, "32K", "Data")
    _cache_index(tmp_path, 1, 2, "4M", "Instruction")
    assert sysinfo.llc_bytes(root=str(tmp_path)) == 32 * 1024


def test_llc_missing_dir_is_none(tmp_path: Path) -> None:
    assert sysinfo.llc_bytes(root=str(tmp_path)) is None
    assert sysinfo.llc_bytes(root=str(tmp_path / "does-not-exist")) is None


def test_llc_garbage_size_is_skipped(tmp_path: Path) -> None:
    _cache_index(tmp_path, 0, 1, "32K", "Data")
    _cache_index(tmp_path, 1, 3, "lots", "Unified")
    assert sysinfo.llc_bytes(root=str(tmp_path)) == 32 * 1024


def _fake_netdev(root: Path, name: str, speed: str | None) -> Path:
    netdir = root / "class" / "net" / name
    _write(netdir / "mtu", "9000")
    if speed is not None:
        _write(netdir / "speed", speed)
    _write(netdir / "duplex", "full")
    _write(netdir / "operstate", "up")
    return netdir


def test_interface_facts_fake_sysfs(tmp_path: Path) -> None:
    netdir = _fake_netdev(tmp_path, "fake0", speed="-1")
    drivers = tmp_path / "bus" / "pci" / "drivers" / "e1000e"
    drivers.mkdir(parents=True)
    (netdir / "device").mkdir()
    os.symlink(os.path.relpath(drivers, netdir / "device"), netdir / "device" / "driver")
    _write(tmp_path / "module" / "e1000e" / "version", "3.2.6-k")

    facts = sysinfo.interface_facts("fake0", root=str(tmp_path))

    assert facts["name"] == "fake0"
    assert facts["mtu"] == 9000
    assert facts["speed_mbps"] is None
    assert facts["duplex"] == "full"
    assert facts["operstate"] == "up"
    assert facts["driver"] == "e1000e"
    assert facts["driver_version"] == "3.2.6-k"
    assert facts["firmware_version"] is None
    assert facts["bus_info"] is None


def test_interface_facts_fake_speed_and_no_driver(tmp_path: Path) -> None:
    _fake_netdev(tmp_path, "fake1", speed="10000")
    facts = sysinfo.interface_facts("fake1", root=str(tmp_path))
    assert facts["speed_mbps"] == 10000
    assert facts["driver"] is None
    assert facts["driver_version"] is None


def test_interface_facts_missing_interface(tmp_path: Path) -> None:
    facts = sysinfo.interface_facts("nosuch0", root=str(tmp_path))
    assert facts["name"] == "nosuch0"
    assert all(facts[k] is None for k in facts if k != "name")


def test_interface_facts_real_lo() -> None:
    facts = sysinfo.interface_facts("lo")
    assert facts["name"] == "lo"
    assert isinstance(facts["mtu"], int) and facts["mtu"] > 0
    assert facts["speed_mbps"] is None or facts["speed_mbps"] >= 0
    for key in ("driver", "driver_version", "firmware_version", "bus_info"):
        assert facts[key] is None or isinstance(facts[key], str)


# --------------------------------------------------------------------------- host/clock


def test_host_facts_shape() -> None:
    facts = sysinfo.host_facts()
    assert set(facts) == {"hostname", "kernel", "os", "cpu_model", "cpus", "llc_bytes", "python"}
    assert facts["hostname"] == socket.gethostname()
    assert facts["kernel"] == os.uname().release
    assert facts["cpus"] == os.cpu_count()
    assert facts["python"].count(".") == 2
    assert facts["llc_bytes"] is None or facts["llc_bytes"] > 0


def test_clock_facts() -> None:
    facts = sysinfo.clock_facts()
    assert facts["source"] == "CLOCK_MONOTONIC"
    assert isinstance(facts["resolution_ns"], int)
    assert 0 < facts["resolution_ns"] < 1_000_000_000


# --------------------------------------------------------------------------- routing


@needs_ip
def test_route_interface_loopback() -> None:
    route = sysinfo.route_interface("127.0.0.1")
    assert route is not None
    assert route["dev"] == "lo"


def test_route_interface_rejects_non_address() -> None:
    assert sysinfo.route_interface("not-an-address") is None
    assert sysinfo.route_interface("-h") is None


def test_route_interface_without_ip(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sysinfo, "_find_ip", lambda: None)
    assert sysinfo.route_interface("127.0.0.1") is None


# --------------------------------------------------------------------------- live sockets


@pytest.fixture()
def tcp_pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A connected loopback TCP pair (client, server); client has SO_SNDBUF and NODELAY set."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        client.connect(listener.getsockname())
        server, _ = listener.accept()
    try:
        yield client, server
    finally:
        client.close()
        server.close()


def test_socket_facts_loopback(tcp_pair: tuple[socket.socket, socket.socket]) -> None:
    client, server = tcp_pair
    facts = sysinfo.socket_facts(client)
    assert facts["sndbuf"] >= 65536
    assert isinstance(facts["rcvbuf"], int) and facts["rcvbuf"] > 0
    assert isinstance(facts["mss"], int) and facts["mss"] > 0
    assert facts["nodelay"] is True
    assert facts["family"] == "ipv4"
    host, port = client.getsockname()
    assert facts["local"] == f"{host}:{port}"
    assert facts["peer"] == f"127.0.0.1:{server.getsockname()[1]}"

    server.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)
    assert sysinfo.socket_facts(server)["nodelay"] is False


def test_socket_facts_unconnected_socket() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        facts = sysinfo.socket_facts(sock)
    assert facts["peer"] is None
    assert facts["family"] == "ipv4"


@needs_ip
def test_endpoint_facts_loopback(tcp_pair: tuple[socket.socket, socket.socket]) -> None:
    client, _ = tcp_pair
    facts = sysinfo.endpoint_facts(client)
    assert set(facts) == {"host", "socket", "interface"}
    assert facts["host"]["cpus"] == os.cpu_count()
    assert facts["socket"]["nodelay"] is True
    assert facts["interface"] is not None
    assert facts["interface"]["name"] == "lo"
    assert facts["interface"]["mtu"] > 0


def test_endpoint_facts_unconnected_socket_does_not_raise() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        facts = sysinfo.endpoint_facts(sock)
    assert facts["interface"] is None
    assert facts["socket"]["peer"] is None


def test_socket_facts_ipv6_format() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 support in this Python build")
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as listener:
        try:
            listener.bind(("::1", 0))
        except OSError as exc:
            pytest.skip(f"IPv6 loopback unavailable: {exc}")
        listener.listen(1)
        port = listener.getsockname()[1]
        with socket.create_connection(("::1", port)) as client:
            server, _ = listener.accept()
            with server:
                facts = sysinfo.socket_facts(client)
    assert facts["family"] == "ipv6"
    assert facts["peer"] == f"[::1]:{port}"
    assert facts["local"].startswith("[::1]:")

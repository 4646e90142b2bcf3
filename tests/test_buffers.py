"""Socket-buffer advice: the BDP arithmetic, and a real RTT between namespace hosts."""

from __future__ import annotations

import json
import sys

import pytest

from beoperf import units
from beoperf.audit.buffers import advise, next_power_of_two
from beoperf.model.document import validate


@pytest.mark.parametrize("text,bps", [("10G", 10e9), ("1gbit", 1e9), ("100M", 100e6),
                                      ("2.5Gbps", 2.5e9), ("40g", 40e9), ("10GB/s", 80e9)])
def test_link_speeds_in_the_one_grammar(text, bps):
    """What --link-speed accepted before issue 10 means the same (bit/s), except a capital
    B, which is bytes now as everywhere (10GB/s = 8e10 bit/s, not 1e10)."""
    assert units.parse_rate(text) == pytest.approx(bps, rel=1e-12)


def test_bdp_arithmetic_and_commands_for_the_limits_that_are_too_small():
    current = {"net.core.rmem_max": "212992", "net.core.wmem_max": "16777216",
               "net.ipv4.tcp_rmem": "4096 131072 6291456",
               "net.ipv4.tcp_wmem": "4096 16384 4194304"}
    a = advise(10e9, 10_000.0, 500, current)  # 10 Gbit/s x 10 ms
    assert a.bdp_bytes == 12_500_000
    assert a.recommended_bytes == next_power_of_two(25_000_000) == 33_554_432
    assert a.sufficient == {"net.core.rmem_max": False, "net.core.wmem_max": False,
                            "net.ipv4.tcp_rmem": False, "net.ipv4.tcp_wmem": False}
    assert "sysctl -w net.core.rmem_max=33554432" in a.commands
    assert 'sysctl -w net.ipv4.tcp_rmem="4096 131072 33554432"' in a.commands
    assert any("12,500,000 bytes" in line for line in a.arithmetic)


def test_no_change_advised_when_the_limits_suffice():
    current = {"net.core.rmem_max": "4194304", "net.ipv4.tcp_rmem": "4096 131072 6291456"}
    a = advise(1e9, 50.0, 1000, current)  # 6,250 bytes in flight
    assert a.recommended_bytes == 65536
    assert all(a.sufficient.values())
    assert not any(c.startswith("sysctl") for c in a.commands)


def test_audit_measures_the_rtt_to_a_peer_between_namespace_hosts(netns_pair):
    server, client = netns_pair
    proc = server.popen([sys.executable, "-m", "beoperf", "serve", "--port", "5202"],
                        stdout=__import__("subprocess").PIPE, text=True)
    assert "port 5202" in proc.stdout.readline()
    res = client.run([sys.executable, "-m", "beoperf", "audit", "--peer", server.addr4,
                      "--link-speed", "10G", "--json"], check=False, timeout=120)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    validate("audit", doc)
    advice = doc["body"]["buffer_advice"]
    assert advice["rtt_samples"] >= 6 and 1 < advice["rtt_us"] < 10_000
    assert advice["bdp_bytes"] == int(10e9 * advice["rtt_us"] * 1e-6 / 8)
    assert advice["recommended_bytes"] >= 2 * advice["bdp_bytes"]

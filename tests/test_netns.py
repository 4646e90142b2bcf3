"""Multi-host tests: two namespace hosts joined by a veth pair, made by each test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PORT = 5202
ABUSE = Path(__file__).with_name("server_abuse.py")


def start_server(host, *extra: str, log: Path | None = None) -> subprocess.Popen:
    """`beoperf serve` inside a namespace host; returns once it listens."""
    err = open(log, "w") if log else subprocess.DEVNULL  # noqa: SIM115 - closed with the proc
    proc = host.popen([sys.executable, "-m", "beoperf", "serve", "--port", PORT, *extra],
                      stdout=subprocess.PIPE, stderr=err, text=True)
    line = proc.stdout.readline()
    assert f"port {PORT}" in line, line
    return proc


def pingpong(host, *args: str, timeout: float = 300) -> dict:
    res = host.run([sys.executable, "-m", "beoperf", "pingpong", *args, "--json"],
                   check=False, timeout=timeout)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["body"]


def shape(host, rate: str = "100mbit", peak: str = "101mbit") -> None:
    """tbf shaped like a wire of `rate`. In ping-pong each direction idles while
    the other sends, so a plain token bucket refills and lets the first `burst`
    bytes of every message through at veth speed (a 64 KiB message then seemed
    to cross at 124 Mbit/s); a peak rate just above the rate stops that for
    messages much larger than the buckets. A message that fits in one bucket
    (up to a few KiB) still crosses without serialisation delay, so tbf cannot
    emulate a 100 Mbit/s wire for those: the sweep starts at 64 KiB."""
    host.run(["tc", "qdisc", "replace", "dev", host.ifname, "root", "tbf", "rate", rate,
              "burst", "16kb", "latency", "50ms", "peakrate", peak, "mtu", "1600"])


def goodput_limit_mbps(rate_mbit: float, mss: int, mtu: int) -> float:
    """TCP payload rate through a shaper of ``rate_mbit`` on an Ethernet link: each
    full segment carries ``mss`` payload bytes in a frame of mtu + 14 bytes."""
    return rate_mbit * mss / (mtu + 14)


def test_rate_limited_link_peak_is_the_limit(netns_pair):
    """The peak of a sweep over a 100 Mbit/s shaped link is that link's TCP goodput:
    never above what the shaper's peak rate lets through, and not far below it. Each
    message also pays a round trip and TCP's restart after the other direction's turn,
    which a busy machine stretches (83-87 Mbit/s seen under load against a goodput
    limit of 95.6), so the lower bound is 3/4 of the limit: an unshaped veth gives
    tens of Gbit/s, a broken shaper or measurement is far outside either bound."""
    server, client = netns_pair
    shape(server, "100mbit", "101mbit")
    shape(client, "100mbit", "101mbit")
    start_server(server)
    doc = pingpong(client, server.addr4, "--start", "64K", "--end", "2M", "--perturbation", "0")
    peak_mbps = doc["summary"]["peak_throughput_bps"] / 1e6
    mss, mtu = doc["local"]["socket"]["mss"], doc["local"]["interface"]["mtu"]
    assert 0.75 * goodput_limit_mbps(100, mss, mtu) <= peak_mbps, doc["summary"]
    assert peak_mbps <= 1.01 * goodput_limit_mbps(101, mss, mtu), doc["summary"]
    assert doc["summary"]["peak_size"] >= 64 * 1024
    assert doc["local"]["interface"]["name"] == client.ifname


def test_jumbo_mtu_is_recorded_at_both_ends(netns_pair):
    server, client = netns_pair
    server.set_mtu(9000)
    client.set_mtu(9000)
    start_server(server)
    doc = pingpong(client, server.addr4, "--sizes", "16,64K")
    for end in ("local", "remote"):
        assert doc[end]["interface"]["mtu"] == 9000, doc[end]
        assert doc[end]["interface"]["driver"] == "veth"
        assert doc[end]["socket"]["mss"] > 8000  # jumbo frames carry jumbo segments
    assert doc["remote"]["socket"]["peer"].startswith(client.addr4)


def test_ipv6_between_hosts(netns_pair):
    server, client = netns_pair
    start_server(server)
    doc = pingpong(client, "-6", server.addr6, "--sizes", "16,4K", "--time-budget", "2")
    assert doc["local"]["socket"]["family"] == "ipv6"
    assert doc["status"] == "complete"


def test_server_survives_abuse_between_hosts(netns_pair, tmp_path):
    server, client = netns_pair
    log = tmp_path / "serve.log"
    proc = start_server(server, "--handshake-timeout", "1", "--idle-timeout", "2", log=log)
    res = client.run([sys.executable, str(ABUSE), server.addr4, str(PORT)], check=False,
                     timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads(res.stdout)
    assert report["normal"]["corrupt_messages"] == 0
    assert report["normal"]["sizes_measured"] == 3
    assert proc.poll() is None, "the server died"
    lines = log.read_text().splitlines()
    sessions = [line for line in lines if " session " in line]
    assert any(line.endswith(" ok") for line in sessions)  # the normal client
    assert any("disconnected" in line for line in sessions)  # the one that left mid-test
    assert any("went silent" in line for line in sessions)  # the one that stopped talking
    assert any("rejected" in line for line in lines)


@pytest.mark.parametrize("mode", ["stream", "bidir"])
def test_modes_between_hosts(netns_pair, mode):
    server, client = netns_pair
    start_server(server)
    doc = pingpong(client, server.addr4, "--mode", mode, "--sizes", "1,64K,1M",
                   "--time-budget", "4")  # every size measured; the default's 20 s not needed
    assert doc["status"] == "complete" and len(doc["sizes"]) == 3


def test_compare_sees_a_rate_limit_as_worse(netns_pair, tmp_path):
    """A run over the bare veth against one over a 100 Mbit/s shaped veth: compare
    calls the peak worse, one run a side, and says what its interval holds."""
    server, client = netns_pair
    start_server(server)
    sizes = ["--sizes", "64K,256K,1M", "--max-time", "4"]
    free, shaped = tmp_path / "free", tmp_path / "shaped"
    pingpong(client, server.addr4, *sizes, "-o", str(free))
    shape(server)
    shape(client)
    pingpong(client, server.addr4, *sizes, "-o", str(shaped))
    res = client.run([sys.executable, "-m", "beoperf", "compare", f"{free}.json",
                      f"{shaped}.json", "--format", "json"], check=False)
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)["body"]["rows"]
    test = rows[1]["peak_test"]
    assert test["verdict"] == "worse", test
    assert test["high"] < 1 and "no repeated runs" in test["spread_source"]
    assert rows[1]["peak_change_pct"] < -50


def tbf(host, rate: str) -> None:
    """A plain token bucket as clouds and policed links have: a 256 KB burst, then rate."""
    host.run(["tc", "qdisc", "replace", "dev", host.ifname, "root", "tbf", "rate", rate,
              "burst", "256kb", "latency", "100ms"])


@pytest.mark.parametrize("rate_mbit", [100, 1000])
def test_stream_through_a_shaper_measures_its_rate_not_its_burst(netns_pair, rate_mbit):
    """Stream mode outlasts the burst: the payload rate is within 3% of what the shaper
    lets through (its rate times the payload's share of a full frame), the burst is
    reported, and the wire rate beside it."""
    server, client = netns_pair
    tbf(server, f"{rate_mbit}mbit")
    tbf(client, f"{rate_mbit}mbit")
    start_server(server)
    doc = pingpong(client, server.addr4, "--mode", "stream", "--sizes", "1M",
                   "--time-budget", "10")
    (size,) = doc["sizes"]
    mss, mtu = doc["local"]["socket"]["mss"], doc["local"]["interface"]["mtu"]
    limit = goodput_limit_mbps(rate_mbit, mss, mtu)
    assert size["throughput_bps"]["from_median"] / 1e6 == pytest.approx(limit, rel=0.03)
    shaper = doc["sweep"]["shaper"]
    assert shaper and 64 * 1024 <= shaper["burst_bytes"] <= 512 * 1024, \
        (shaper, doc["sweep"]["stream_rates"], doc["sweep"]["stream_rates_repeat"])
    note = next(w for w in doc["warnings"] if "pass at line rate" in w)
    assert f"{mtu + 14}-byte frames carrying {mss} bytes" in note


def test_ping_pong_through_a_shaper_explains_its_doubled_figure(netns_pair):
    server, client = netns_pair
    tbf(server, "100mbit")
    tbf(client, "100mbit")
    start_server(server)
    doc = pingpong(client, server.addr4, "--sizes", "64K,1M", "--time-budget", "5")
    peak = doc["summary"]["peak_throughput_bps"] / 1e6
    assert peak > 1.3 * goodput_limit_mbps(100, doc["local"]["socket"]["mss"],
                                           doc["local"]["interface"]["mtu"])
    assert any("token bucket refills while the other direction" in w for w in doc["warnings"]), \
        (doc["sweep"].get("stream_rates"), doc["sweep"].get("stream_rates_repeat"),
         doc["sweep"].get("shaper_check"), doc["warnings"])


def test_no_shaper_is_reported_on_a_plain_link(netns_pair):
    server, client = netns_pair
    start_server(server)
    doc = pingpong(client, server.addr4, "--sizes", "64K,1M", "--time-budget", "3")
    assert doc["sweep"]["shaper"] is None
    assert not any("shaper" in w or "token bucket" in w for w in doc["warnings"])


def test_efficiency_through_a_shaper_at_the_given_link_speed(netns_pair):
    """--link-speed equal to a 100 Mbit/s tbf's rate: the stream's peak is the share of
    the link a full segment's payload has of the frame tbf counts (MSS / (MTU + 14)), and
    against the goodput limit, which counts a real wire's 38 bytes a frame, (MTU + 38) /
    (MTU + 14) of it (3% bands, as the stream test above holds the rate to that share).
    The text says which link it was judged against."""
    from beoperf.model.pingpong import from_json
    from beoperf.report.pingpong import text

    server, client = netns_pair
    tbf(server, "100mbit")
    tbf(client, "100mbit")
    start_server(server)
    res = client.run([sys.executable, "-m", "beoperf", "pingpong", server.addr4, "--mode",
                      "stream", "--sizes", "1M", "--time-budget", "10", "--link-speed",
                      "100M", "--json"], check=False, timeout=300)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    body = doc["body"]
    eff = body["summary"]["efficiency"]
    mss, mtu = body["local"]["socket"]["mss"], body["local"]["interface"]["mtu"]
    assert (eff["link_bps"], eff["link_source"], eff["unknown"]) == (1e8, "--link-speed", None)
    assert (eff["payload_bytes"], eff["frame_bytes"]) == (mss, mtu + 38)
    measured = body["summary"]["peak_throughput_bps"] / 1e8
    assert eff["peak_of_link"] == pytest.approx(measured)
    assert eff["peak_of_link"] == pytest.approx(mss / (mtu + 14), rel=0.03), eff
    assert eff["peak_of_goodput"] == pytest.approx((mtu + 38) / (mtu + 14), rel=0.03), eff
    line = next(x for x in text(from_json(doc)).splitlines() if "efficiency" in x)
    assert "of the 100 Mbit/s link (--link-speed)" in line
    assert f"{mss} B of TCP payload per {mtu + 38} B of line time" in line


def test_efficiency_over_veth_without_a_link_speed_is_unknown_with_the_reason(netns_pair):
    server, client = netns_pair
    start_server(server)
    doc = pingpong(client, server.addr4, "--sizes", "64K", "--time-budget", "2")
    eff = doc["summary"]["efficiency"]
    assert eff["link_bps"] is None and eff["peak_of_link"] is None
    iface = doc["local"]["interface"]
    assert iface["speed_mbps"] and iface["virtual"]  # veth says 10000 Mb/s: nominal
    assert eff["unknown"].startswith(f"{iface['virtual']}; its {iface['speed_mbps']} Mb/s is "
                                     "nominal; give --link-speed"), eff

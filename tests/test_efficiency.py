"""Efficiency: the peak as a share of the link speed and of its TCP goodput limit
(analysis.efficiency), from --link-speed or the slower end's NIC, unknown for virtual
NICs; in the summary, the text, compare and the HTML report.  Crafted documents: the
version 4 loopback fixture with crafted interface facts (the tests/test_netns.py ones
measure through a real shaper)."""

from __future__ import annotations

import csv
import io
import json
import os

import pytest

from beoperf import model, sysinfo
from beoperf.analysis.efficiency import efficiency, link_speed, text
from beoperf.model.pingpong import RunResult, from_json
from helpers import cli
from test_documents import FIXTURES

PEAK = 471998156.2572021  # the fixture's peak (1024 B, from the median)
BEST = 552801594.7030379  # its best trial there


def nic(name: str, mbps: int | None, driver: str | None = "e1000e",
        virtual: str | None = None, mtu: int = 1500) -> dict:
    return {"name": name, "mtu": mtu, "speed_mbps": mbps, "driver": driver,
            "virtual": virtual}


def crafted(local: dict | None, remote: dict | None, mss: int = 1448,
            link_speed_bps: float | None = None, mode: str = "pingpong") -> dict:
    """The version 4 loopback fixture (1, 64, 1024 B) with crafted NIC facts."""
    doc = model.load(FIXTURES / "pingpong-v4-before-issue28.json").to_json()
    body = doc["body"]
    body["local"]["interface"] = local
    body["remote"]["interface"] = remote
    body["local"]["socket"]["mss"] = mss
    body["parameters"]["mode"] = mode
    if link_speed_bps is not None:
        body["parameters"]["link_speed_bps"] = link_speed_bps
    return doc


def run_of(doc: dict) -> RunResult:
    return from_json(json.loads(json.dumps(doc)))


def test_the_link_speed_given_wins_and_the_goodput_limit_counts_the_whole_frame():
    doc = crafted(nic("eth0", 10000), nic("eth0", 10000), link_speed_bps=1e9)
    e = efficiency(run_of(doc), PEAK, 1024)
    assert (e.link_bps, e.link_source, e.unknown) == (1e9, "--link-speed", None)
    assert (e.payload_bytes, e.frame_bytes) == (1448, 1500 + 14 + 24)
    assert e.goodput_limit_bps == pytest.approx(1e9 * 1448 / 1538)
    assert e.peak_of_link == pytest.approx(PEAK / 1e9)
    assert e.peak_of_goodput == pytest.approx(PEAK / (1e9 * 1448 / 1538))
    assert e.best_trial_of_link == pytest.approx(BEST / 1e9)
    line = text(e)
    assert line.startswith("47.2% of the 1 Gbit/s link (--link-speed), 50.1% of its goodput "
                           "limit 941.5 Mbit/s (1448 B of TCP payload per 1538 B")
    assert "best trial (NetPIPE's figure) 55.3%, 58.7%" in line


def test_the_slower_nic_of_the_two_ends_is_the_link():
    e = efficiency(run_of(crafted(nic("eth0", 1000), nic("enp1s0", 100))), PEAK, 1024)
    assert e.link_bps == 1e8 and e.link_source == "the peer's NIC enp1s0 (100 Mb/s)"
    assert e.peak_of_link == pytest.approx(PEAK / 1e8) and e.peak_of_link > 1
    assert "above the link's speed" in text(e)
    e = efficiency(run_of(crafted(nic("eth0", 1000), nic("eth1", 10000))), PEAK, 1024)
    assert e.link_bps == 1e9 and e.link_source == "this end's NIC eth0 (1000 Mb/s)"


def test_a_peer_without_nic_facts_leaves_this_ends_and_says_so():
    link = link_speed(run_of(crafted(nic("eth0", 1000), None)))
    assert link.bps == 1e9 and link.note == \
        "the peer's NIC speed is not known: this end's is used"
    assert "this end only" in link.source


@pytest.mark.parametrize("local, remote, reason", [
    (nic("veth1", 10000, "veth", "veth1 is a virtual NIC (driver veth)"), nic("eth0", 1000),
     "veth1 is a virtual NIC (driver veth); its 10000 Mb/s is nominal; give --link-speed"),
    # written before interfaces recorded "virtual": judged by the driver
    ({k: v for k, v in nic("veth1", 10000, "veth").items() if k != "virtual"},
     nic("eth0", 1000),
     "veth1 is a virtual NIC (driver veth); its 10000 Mb/s is nominal"),
    (nic("eth0", 1000), nic("br0", None, None, "br0 has no device under it (a virtual "
                                               "interface)"),
     "br0 has no device under it (a virtual interface); give --link-speed"),
    (nic("lo", None, None), None, "lo is loopback; give --link-speed"),
    (nic("eth0", None), nic("eth0", 1000), "eth0 reports no link speed; give --link-speed"),
    (None, None, "no network interface recorded for this end"),
])
def test_a_virtual_or_silent_nic_makes_the_link_unknown_with_the_reason(local, remote,
                                                                        reason):
    e = efficiency(run_of(crafted(local, remote)), PEAK, 1024)
    assert e.link_bps is None and e.peak_of_link is None and e.peak_of_goodput is None
    assert e.unknown is not None and e.unknown.startswith(reason), e.unknown
    assert text(e) == f"unknown: {e.unknown}"


def test_bidir_counts_both_directions_and_a_short_mss_has_no_goodput_limit():
    e = efficiency(run_of(crafted(nic("eth0", 1000), nic("eth0", 1000), mode="bidir")),
                   PEAK, 1024)
    assert e.directions == 2 and e.peak_of_link == pytest.approx(PEAK / 2e9)
    assert "(both directions: twice the link)" in text(e)
    e = efficiency(run_of(crafted(nic("lo", 1000, mtu=65536), None, mss=32768,
                                  link_speed_bps=1e10)), PEAK, 1024)
    assert e.goodput_limit_bps is None and e.peak_of_link is not None
    assert e.goodput_unknown == ("the MSS (32768 B) does not fill the MTU (65536 B): segment "
                                 "headers not known")


def test_virtual_reason_reads_the_device_and_the_driver(tmp_path):
    net = tmp_path / "class" / "net"
    (net / "eth0" / "device").mkdir(parents=True)
    (net / "veth0").mkdir()
    (net / "lo").mkdir()
    assert sysinfo.virtual_reason("eth0", "e1000e", str(tmp_path)) is None
    assert sysinfo.virtual_reason("eth0", "virtio_net", str(tmp_path)) == \
        "eth0 is a virtual NIC (driver virtio_net)"
    assert sysinfo.virtual_reason("veth0", None, str(tmp_path)) == \
        "veth0 has no device under it (a virtual interface)"
    assert sysinfo.virtual_reason("lo", None, str(tmp_path)) == \
        "lo has no device under it (loopback)"
    assert sysinfo.virtual_reason("gone0", "veth", str(tmp_path)) is None  # not there
    if os.path.isdir("/sys/class/net/lo"):
        assert sysinfo.interface_facts("lo")["virtual"] == \
            "lo has no device under it (loopback)"


def write(tmp_path, name: str, doc: dict):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_the_summary_text_compare_and_html_show_the_efficiency(tmp_path):
    known = write(tmp_path, "known.json", crafted(nic("eth0", 1000), nic("eth0", 1000)))
    veth = write(tmp_path, "veth.json", crafted(
        nic("veth1", 10000, "veth", "veth1 is a virtual NIC (driver veth)"), None))
    from beoperf.analysis.pingpong import summary
    from beoperf.report.pingpong import text as run_text
    run = run_of(json.loads(known.read_text()))
    assert summary(run)["efficiency"]["peak_of_link"] == pytest.approx(PEAK / 1e9)
    assert "  efficiency 47.2% of the 1 Gbit/s link (this end's NIC eth0 (1000 Mb/s))" \
        in run_text(run)
    res = cli("compare", str(known), str(veth))
    assert res.status == 0, res.stderr
    header = next(x for x in res.stdout.splitlines() if x.startswith("run "))
    assert "peak of link" in header
    assert "47.2% (50.1% of goodput)" in res.stdout
    assert ("Link speed unknown (pingpong 127.0.0.1 mtu1500 (veth.json)): veth1 is a "
            "virtual NIC (driver veth); its 10000 Mb/s is nominal; give --link-speed.") \
        in res.stdout
    records = list(csv.DictReader(io.StringIO(cli("compare", str(known), str(veth),
                                                  "--format", "csv").stdout)))
    assert float(records[0]["peak_of_link"]) == pytest.approx(PEAK / 1e9)
    assert float(records[0]["link_Mbit_s"]) == 1000 and records[1]["peak_of_link"] == ""
    assert records[1]["efficiency_unknown"].startswith("veth1 is a virtual NIC")
    doc = cli("compare", str(known), str(veth), "--format", "json").json
    assert doc["schema_version"] == 3
    assert doc["body"]["rows"][0]["peak_of_link"] == pytest.approx(PEAK / 1e9)
    (tmp_path / "dir").mkdir()
    known.rename(tmp_path / "dir" / "known.json")
    res = cli("report", str(tmp_path / "dir"), "-o", str(tmp_path / "r.html"))
    assert res.status == 0, res.stderr
    html = (tmp_path / "r.html").read_text()
    assert "47.2% of the 1 Gbit/s link" in html and "50.1% of the goodput limit" in html


@pytest.mark.parametrize("value", ["abc", "0", "1e400G", "", "10 parsecs"])
def test_a_bad_link_speed_is_one_line_and_exit_2(value):
    res = cli("pingpong", "--link-speed", value, "--sizes", "1")
    assert res.status == 2 and len(res.error_lines) == 1, res.stderr
    assert res.error_lines[0].startswith("beoperf: usage error: --link-speed: ")

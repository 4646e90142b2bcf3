"""`beoperf monitor` over namespace links, judged by its report: a link taken down is one
outage; a bulk flow through a 10 Mbit/s shaper is one congestion event; probes within and
beyond a shaper's burst.  Paced by the clock and the shaped links (tests/conftest.py
PACED_FILES); apart from test_monitor.py so that the paced phase's two workers share the
monitor's long tests."""

from __future__ import annotations

import json
import re
import shutil
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from tests.helpers import cli
from tests.test_monitor import monitor_argv, start_serve, wait_until_monitoring
from tests.test_monitor_report import bandwidth_cells, build_report, report_document

from beoperf import report as renderers

# --------------------------------------------------------------------------- reports


def test_netns_link_down_is_one_outage_and_availability_adds_up(netns_pair, tmp_path):
    server, client = netns_pair
    db = tmp_path / "m.db"
    period, longest_window = 0.25, 0.1  # the schedule below: slots at 0, .05, .1 and .15 s
    mon = client.popen(monitor_argv(server.addr4, "--db", db, "--step", "8:3:0.05",
                                    "--step", "1000:1:0.1", "--start-offset", "0"),
                       stdout=subprocess.PIPE, text=True)
    try:
        wait_until_monitoring(mon)
        time.sleep(3.0)
        t_down0 = time.time()
        server.link_down()
        t_down1 = time.time()
        time.sleep(3.0)
        t_up0 = time.time()
        server.link_up()
        t_up1 = time.time()
        time.sleep(3.0)
    finally:
        mon.send_signal(signal.SIGTERM)
        mon.communicate(timeout=20)
    document = report_document(db)
    doc = document.body
    assert len(doc["outages"]) == 1, doc["outages"]
    out = doc["outages"][0]
    con = sqlite3.connect(db)
    max_rtt = con.execute("SELECT max(rtt_us) FROM probes").fetchone()[0] / 1e6
    # it starts with the first cycle that got no answer: one sent after the link went down
    # (or just before, within a round trip), at the latest the first one to start after it
    assert t_down0 - max_rtt <= out["start_utc"] <= t_down1 + 2 * period, (t_down0, out)
    # it ends with the first answer after the link came back: a probe is due at least
    # every longest_window; the path may take up to a period to carry it again
    assert t_up0 - period <= out["end_utc"] <= t_up1 + period + longest_window, (t_up1, out)
    assert out["duration_s"] == pytest.approx(out["end_utc"] - out["start_utc"], abs=1e-3)
    assert out["kind"] in ("timeout", "unreachable") and not out["open"]
    rows, ok = con.execute("SELECT count(*), sum(outcome = 'ok') FROM probes").fetchone()
    s = doc["summary"]
    assert (s["probes"], s["answered"]) == (rows, ok)
    assert s["answered_pct"] == pytest.approx(100 * ok / rows, abs=0.001)
    assert s["uptime_pct"] == pytest.approx(100 * (1 - s["outage_s"] / s["monitored_s"]),
                                            abs=0.01)
    md = renderers.render(document, "markdown")
    assert "Outages" in md and f"{s['answered_pct']:.3f}"[:5] in md


def shape(host, rate: str = "10mbit") -> None:
    # a bucket of about one frame, so that a 20,000-byte probe crosses at the rate
    host.run(["tc", "qdisc", "replace", "dev", host.ifname, "root", "tbf", "rate", rate,
              "burst", "1600", "latency", "20ms"])


@pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 not installed (apt-get "
                    "install iperf3): it makes the congestion")
def test_netns_congestion_is_found_and_bandwidth_measured(netns_pair, tmp_path):
    server, client = netns_pair
    shape(server)
    shape(client)
    db = tmp_path / "m.db"
    iperf = server.popen(["iperf3", "-s", "-1", "-B", server.addr4],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    mon = client.popen(monitor_argv(server.addr4, "--db", db, "--step", "8:6:0.05",
                                    "--step", "20000:1:0.2", "--start-offset", "0"),
                       stdout=subprocess.PIPE, text=True)
    try:
        wait_until_monitoring(mon)
        time.sleep(20.0)
        bulk = (time.time(), 0.0)
        client.run(["iperf3", "-c", server.addr4, "-t", "12"], stdout=subprocess.DEVNULL)
        bulk = (bulk[0], time.time())
        time.sleep(14.0)
    finally:
        mon.send_signal(signal.SIGTERM)
        mon.communicate(timeout=20)
        if iperf.poll() is None:
            iperf.kill()
        iperf.wait()
    doc = build_report(db, baseline_windows=8)
    hits = [e for e in doc["congestion"]
            if e["start_utc"] < bulk[1] and e["end_utc"] > bulk[0]]
    assert hits, (bulk, doc["congestion"])
    # one event, its edges within 2 windows of the flow's, nothing in the quiet parts
    assert len(doc["congestion"]) == 1, (bulk, doc["congestion"])
    assert abs(hits[0]["start_utc"] - bulk[0]) < 4, (bulk, hits)
    assert abs(hits[0]["end_utc"] - bulk[1]) < 4, (bulk, hits)
    assert hits[0]["ratio"] > 10 and hits[0]["dispersion_ratio"] > 10
    quiet = build_report(db, t_to=bulk[0] - 1, baseline_windows=8)
    bps = quiet["summary"]["bandwidth_bps"]["median"]
    assert 8e6 <= bps <= 12e6, bps


RATE_BPS, BURST_B = 10e6, 32 * 1024  # tc's "10mbit" and "32kb" (kb: 1024 bytes)
ETH, IP4, TCP_HDR, TCP_PREFIX, MSS = 14, 20, 32, 4, 1448  # MSS: MTU 1500 - IP - TCP


def shape_with_burst(host) -> None:
    """A 10 Mbit/s token bucket with a 32 KB burst, as the issue's shaped link."""
    host.run(["tc", "qdisc", "replace", "dev", host.ifname, "root", "tbf", "rate", "10mbit",
              "burst", "32kb", "latency", "100ms"])


def run_monitor_for(client, argv: list, seconds: float) -> None:
    mon = client.popen(monitor_argv(*argv), stdout=subprocess.PIPE, text=True)
    try:
        wait_until_monitoring(mon)
        time.sleep(seconds)
    finally:
        mon.send_signal(signal.SIGTERM)
        mon.communicate(timeout=20)
    assert mon.returncode == 0


def test_netns_probes_within_a_shapers_burst_give_no_bandwidth_figure(netns_pair, tmp_path):
    """The issue's link: 10 Mbit/s tbf with a 32 KB burst on both ends, the default cycle's
    sizes at a short spacing, --link-speed 10M.  Each 20,000-byte probe passes within the
    burst at veth speed (the report said 4,022 Mbit/s): now no bandwidth above 10 Mbit/s
    is a figure, and the report says why and which probe size would measure the rate."""
    server, client = netns_pair
    shape_with_burst(server)
    shape_with_burst(client)
    db = tmp_path / "m.db"
    run_monitor_for(client, [server.addr4, "--db", db, "--step", "8:3:0.1", "--step",
                             "20000:1:0.2", "--start-offset", "0", "--link-speed", "10M",
                             "--budget", "5%"], 10.0)
    config = json.loads(sqlite3.connect(db).execute("SELECT config FROM runs").fetchone()[0])
    assert config["link_bps"] == RATE_BPS
    res = cli("monitor", "report", str(db), "--baseline-windows", "2")
    assert res.status == 0, res.stderr
    cells = bandwidth_cells(res.stdout)
    assert cells, res.stdout
    for cell in cells:  # every one "above link (N of M)", or a rate within the link
        assert cell.startswith("above link (") or float(cell.split()[0]) <= 10.0, cell
    doc = json.loads(cli("monitor", "report", str(db), "--baseline-windows", "2",
                         "--json").stdout)["body"]
    b = doc["summary"]["bandwidth_bps"]
    assert (b["status"], b["median"], b["link_bps"]) == ("above_link", None, RATE_BPS), b
    (warning,) = [w for w in doc["warnings"] if w.startswith("bandwidth:")]
    assert warning in res.stdout
    assert "above the 10 Mbit/s link (--link-speed): probes pass within a shaper's burst" \
        in warning
    assert "passed within the burst, so the burst is at least that" in warning
    assert re.search(r"SIZE of [\d,]+ B or more with --transport tcp \(ICMP and UDP "
                     r"probes carry at most 65,507 B\)", warning), warning


def tcp_message_on_the_wire(n: int) -> int:
    """Bytes a shaper counts for one TCP echo message of n payload bytes: the length
    prefix, and per full segment the Ethernet, IP and TCP (timestamps) headers."""
    data = n + TCP_PREFIX
    return data + -(-data // MSS) * (ETH + IP4 + TCP_HDR)


def monitor_tcp(client, server, db: Path, n: int, period: float, budget: str,
                seconds: float) -> None:
    """Probe with three 8-byte TCP echoes 0.1 s apart and one of n bytes per period."""
    with start_serve(server, 5301) as srv:
        try:
            run_monitor_for(client, [server.addr4, "--db", db, "--transport", "tcp", "--port",
                                     "5301", "--step", "8:3:0.1", "--step",
                                     f"{n}:1:{period - 0.3:g}", "--period", f"{period:g}",
                                     "--budget", budget, "--timeout", "3",
                                     "--start-offset", "0"], seconds)
        finally:
            srv.terminate()


def test_netns_a_probe_larger_than_the_burst_and_the_size_the_report_suggests(
        netns_pair, tmp_path):
    """A 200,000-byte TCP probe through the same link: the part beyond each end's burst
    crosses at the rate, but the burst itself (refilled while the small probes run) still
    passes at line rate, both ways.  The extra time is 2 x 8 x (wire - burst) / rate, so
    the estimate is not the goodput but rate x payload / (wire - burst), 1.13 x the rate
    here (11.32 Mbit/s measured, 11.34 computed).  Without --link-speed the report prints
    that figure; with it (given to the report, for a run started without) it is above
    the link: no figure, the burst the probes saw (the issue's 32 KB) and a probe size.
    A monitor with that size gets an estimate between the goodput and the rate."""
    server, client = netns_pair
    shape_with_burst(server)
    shape_with_burst(client)
    n = 200_000
    monitor_tcp(client, server, tmp_path / "200k.db", n, 2.0, "120kB/s", 12.0)
    wire = tcp_message_on_the_wire(n)
    model = 2 * 8 * (n - 8) / (2 * 8 * (wire - BURST_B) / RATE_BPS)
    assert 1.1 * RATE_BPS < model < 1.2 * RATE_BPS  # the arithmetic, for the reader
    doc = build_report(tmp_path / "200k.db", baseline_windows=2)
    b = doc["summary"]["bandwidth_bps"]
    assert b["status"] == "figure" and b["count"] >= 4, b
    # slower only: a late ACK, a slow-start round or a drop lengthens the probe, nothing
    # shortens it below the bucket's arithmetic
    assert 0.85 * model <= b["median"] <= 1.03 * model, (b["median"], model)
    shaped = build_report(tmp_path / "200k.db", baseline_windows=2, link_bps=RATE_BPS)
    s = shaped["summary"]["bandwidth_bps"]
    assert (s["status"], s["median"], s["above_link"]) == ("above_link", None, b["cycles"])
    (warning,) = [w for w in shaped["warnings"] if w.startswith("bandwidth:")]
    burst = re.search(r"about ([\d,]+) B of each large probe's payload passed at line rate",
                      warning)
    assert burst, warning
    # the burst in payload bytes: 32 KB of frames carry MSS / (MTU + 14) of payload
    assert float(burst[1].replace(",", "")) == pytest.approx(BURST_B * MSS / 1514, rel=0.2)
    size = re.search(r"--step SIZE:1:SPACING with SIZE of ([\d,]+) B or more gives", warning)
    assert size, warning
    # the report's size: its estimate stays within the link, and near the goodput.  (The
    # budget is loose, as it is not what is tested here: a fresh connection's slow start
    # overflows the shaper's queue, and the first probes' retransmissions, which the
    # monitor counts, triple their bytes or more: at 1MB/s a CI run once stopped on its
    # budget after 6.8 MB in 4 s, two probes of 0.9 MB.)
    n = int(size[1].replace(",", ""))
    monitor_tcp(client, server, tmp_path / "big.db", n, 3.5, "4MB/s", 16.0)
    big = build_report(tmp_path / "big.db", baseline_windows=2, link_bps=RATE_BPS)
    b = big["summary"]["bandwidth_bps"]
    assert b["status"] == "figure" and b["count"] >= 3, (n, b)
    assert 0.85 * RATE_BPS * MSS / 1514 <= b["median"] <= RATE_BPS, (n, b)

"""Latency under load (``beoperf pingpong --under-load``): the same sizes alone and then
beside a bulk TCP load in one session, on loopback (both distributions and their tails
in the document and every view, the load's account, the server's cap, no connection
left behind, bad options) and between namespace hosts through a token bucket (the
load's queue makes the ping-pong slower)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from beoperf import report
from beoperf.engines.protocol import Refusal
from beoperf.engines.tcp_server import ServerConfig, check_params
from beoperf.model import document
from beoperf.model.pingpong import from_json
from beoperf.suites import pingpong
from helpers import checked, child_env, cli, running_server
from test_netns import goodput_limit_mbps, start_server, tbf


def established(port: int) -> int:
    """The server's ends of the TCP connections established on ``port``: sockets of this
    process (the server runs in a thread of the test) in state ESTABLISHED with local port
    ``port`` (/proc/net/tcp*, matched to /proc/self/fd by inode).  Owned sockets only: an
    ephemeral port number is shared, and other tests' sockets may have ``port`` as their
    local port towards somewhere else (a CI run counted 3 before the client had started)."""
    mine = set()
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                mine.add(target[len("socket:["):-1])
    count = 0
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(name).read_text().splitlines()[1:]:
            fields = line.split()
            count += (fields[3] == "01" and fields[9] in mine
                      and int(fields[1].rsplit(":", 1)[1], 16) == port)
    return count


def wait_closed(port: int, timeout: float = 10.0) -> int:
    """Connections still established with ``port`` once they are gone or time is up."""
    until = time.monotonic() + timeout
    while (left := established(port)) and time.monotonic() < until:
        time.sleep(0.1)
    return left


def test_loopback_run_has_both_distributions_and_their_tails():
    """One run: every size measured alone and under load, each with its samples and
    tail; the load's bytes and goodput as the server received them; the text answers
    first, the CSV has a row per size and phase, the HTML has the section."""
    res = cli("pingpong", "--under-load", "--sizes", "16,4K", "--time-budget", "4",
              "--history", "off", "--json")
    assert res.status == 0, res.stderr
    doc = checked(res.json)
    assert doc["schema_version"] == 7
    body = doc["body"]
    under = body["under_load"]
    assert body["parameters"]["load_streams"] == 1
    assert under["status"] == "complete"
    # each phase has half the budget: a busy machine may leave the larger size out of one
    assert {s["size"] for s in under["sizes"]} <= {16, 4096} >= {s["size"] for s in body["sizes"]}
    assert 16 in {s["size"] for s in under["sizes"]} & {s["size"] for s in body["sizes"]}
    for size in (*body["sizes"], *under["sizes"]):
        assert size["samples"] > 0 and size["tail"]["samples"] == size["samples"]
        assert size["tail"]["percentiles_us"]["p50"] > 0
        assert set(size["tail"]["percentiles_us"]) >= {"p99", "p99.9", "p99.99"}
    load = under["load"]
    assert load["started"] is True and load["capped"] is False
    assert load["bytes"] > 0 and load["bytes"] == sum(load["bytes_per_stream"])
    assert load["throughput_bps"] == pytest.approx(load["bytes"] * 8 / load["window_s"],
                                                   rel=1e-3)
    run = from_json(doc)
    text = report.render(run.to_document(), "text")
    assert "under load " in text and "idle" in text and "as the server received it" in text
    assert text.index("under load") < text.index("latency ")  # the answer first
    assert "median under load" in text and "compare's verdict" in text
    rows = report.render(run.to_document(), "csv").splitlines()
    assert rows[0].startswith("phase,size_bytes,samples,median_us,p50_us")
    assert sorted(r.split(",")[0] for r in rows[1:]) == \
        ["idle"] * len(body["sizes"]) + ["load"] * len(under["sizes"])
    html = report.render(run.to_document(), "html", anchor="r")
    assert "Latency under load" in html and "Under load: " in html


def test_a_plain_run_records_no_load_and_its_csv_has_the_tails():
    """Without --under-load nothing of it is recorded (the shape of version 6), and the
    CSV still gives each size's tails."""
    res = cli("pingpong", "--sizes", "16", "--time-budget", "1", "--history", "off", "--json")
    assert res.status == 0, res.stderr
    body = checked(res.json)["body"]
    assert "under_load" not in body and "load_streams" not in body["parameters"]
    rows = report.render(document.from_json(res.json), "csv").splitlines()
    assert len(rows) == 2 and rows[1].startswith("idle,16,")
    assert "under load" not in report.render(document.from_json(res.json), "text")


def test_a_version_6_run_loads_without_a_load():
    """A run written before --under-load (version 6) loads as version 7 without one, and
    its text and CSV say nothing of a load."""
    doc = document.load(Path(__file__).parent / "fixtures" / "documents" /
                        "pingpong-v6-before-under-load.json")
    assert doc.schema_version == 7 and "under_load" not in doc.body
    run = from_json(doc.to_json())
    assert run.under_load is None and run.loaded_sizes() == []
    assert "under load" not in report.render(doc, "text")
    assert [r.split(",")[0] for r in report.render(doc, "csv").splitlines()[1:]] == ["idle"] * 2


def test_the_load_ends_with_the_session_and_leaves_no_connection():
    """Against a server of its own: after the run no connection to the server's port is
    left, the server's log counts the load, and its account matches the document."""
    with running_server() as srv:
        spec = pingpong.Spec(sizes=(64,), host="127.0.0.1", port=srv.port, time_budget=2,
                             under_load=True, load_streams=2, history=None)
        measured = pingpong.run(spec)
        assert measured.error is None and measured.interrupt is None
        load = measured.run.under_load["load"]
        assert len(load["bytes_per_stream"]) == 2 and min(load["bytes_per_stream"]) > 0
        assert wait_closed(srv.port) == 0
        assert any("load_streams=2 loads=1" in line for line in srv.log), srv.log


def test_the_servers_cap_ends_a_load_and_the_document_says_so():
    """A server whose cap on a load is shorter than the loaded sweep: the load ends at
    the cap, the run still completes, and the document and its warnings say why."""
    with running_server(max_load_s=0.3) as srv:
        spec = pingpong.Spec(sizes=(64,), host="127.0.0.1", port=srv.port, time_budget=3,
                             under_load=True, history=None)
        measured = pingpong.run(spec)
        assert measured.error is None
        load = measured.run.under_load["load"]
        assert load["capped"] is True and load["server_cap_s"] == 0.3
        assert load["window_s"] < 1.0
        assert any("cap on a load's duration" in w for w in measured.run.warnings)
        assert wait_closed(srv.port) == 0


def test_an_interrupt_under_load_stops_the_load_and_keeps_the_result(tmp_path):
    """Ctrl-C while the loaded sweep runs: exit 130, the document is written with the
    sizes measured (the loaded phase "interrupted"), and no connection is left."""
    with running_server() as srv:
        out = tmp_path / "run"
        proc = subprocess.Popen(
            [sys.executable, "-m", "beoperf", "pingpong", "127.0.0.1", "--port", str(srv.port),
             "--under-load", "--sizes", "16,1K,64K", "--time-budget", "8", "--history", "off",
             "-o", str(out)], env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        until = time.monotonic() + 120  # a busy machine: imports and the idle sweep
        while established(srv.port) < 3 and proc.poll() is None and time.monotonic() < until:
            time.sleep(0.01)  # three connections: control, data and the load's
        assert time.monotonic() < until, "the loaded sweep never began"
        # the third connection is the load's: the loaded sweep has begun (it may last well
        # under a second on loopback, and its data connection comes and goes between sizes,
        # so the signal goes at once, with no second look at the count)
        assert proc.poll() is None, srv.log
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        body = json.loads(out.with_name("run.json").read_text())["body"]
        assert body["under_load"]["status"] == "interrupted"
        assert body["under_load"]["load"]["started"] is True
        assert len(body["sizes"]) == 3  # the sweep without load completed
        assert wait_closed(srv.port) == 0


@pytest.mark.parametrize(("argv", "words"), [
    (("--under-load", "--mode", "stream"), "--under-load is for --mode pingpong"),
    (("--under-load", "--streams", "2"), "--streams is for"),
    (("--load-streams", "2"), "--load-streams needs --under-load"),
    (("--under-load", "--load-streams", "0"), "--load-streams 0: give 1 to"),
])
def test_bad_under_load_options_are_one_line_and_exit_2(argv, words):
    res = cli("pingpong", "--sizes", "16", "--time-budget", "1", *argv)
    assert res.status == 2 and words in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(("params", "words"), [
    ({"mode": "stream", "load_streams": 1}, "ping-pong mode only"),
    ({"mode": "pingpong", "load_streams": 129}, "above this server's cap"),
    ({"mode": "pingpong", "load_streams": -1}, "bad number of load streams"),
    ({"mode": "pingpong", "load_streams": True}, "bad number of load streams"),
])
def test_the_server_refuses_a_load_it_does_not_serve(params, words):
    with pytest.raises(Refusal, match=words):
        check_params({"max_size": 64, **params}, ServerConfig())


def test_serve_takes_its_cap_on_a_load_and_refuses_a_bad_one():
    """beoperf serve --max-load-time: the server's cap on a load; a value that is no
    duration is one line and exit 2, before anything listens."""
    from beoperf.suites import serve

    server = serve.start(serve.Spec(bind="127.0.0.1", port=0, max_load_s=2.5))
    try:
        assert server.cfg.max_load_s == 2.5
    finally:
        server.listener.close()
        if server.udp is not None:
            server.udp.close()
    res = cli("serve", "--bind", "127.0.0.1", "--port", "0", "--max-load-time", "0")
    assert res.status == 2 and "--max-load-time 0" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_a_client_silent_under_load_loses_its_session_and_its_load():
    """A client that starts a load and then says nothing on its control connection: the
    server ends the session at its idle timeout, and the load with it (its end of every
    connection closed, the client's sends fail), however much the load still sends."""
    from beoperf.engines.base import Peer
    from beoperf.engines.tcp import TcpClient

    with running_server(idle_timeout=1.0) as srv:
        client = TcpClient(Peer("127.0.0.1", srv.port),
                           {"mode": "pingpong", "max_size": 64, "load_streams": 2})
        client.connect()
        try:
            client.start_load()
            assert established(srv.port) == 4  # control, data and the two load connections
            assert wait_closed(srv.port) == 0  # ended by the idle timeout
            load = client.load
            assert load is not None
            until = time.monotonic() + 10
            while load.alive() and time.monotonic() < until:
                time.sleep(0.1)
            assert not load.alive() and load.errors, load.errors
        finally:
            client.close(abort=True)
        assert any("peer went silent" in line and "loads=1" in line for line in srv.log), \
            srv.log


def test_a_load_frame_without_load_streams_is_refused():
    """A session that asked for no load connections cannot start a load: the server
    refuses it as a bad request and ends that session only."""
    from beoperf.engines.base import Peer
    from beoperf.engines.protocol import PeerRefused
    from beoperf.engines.tcp import TcpClient

    with running_server() as srv:
        client = TcpClient(Peer("127.0.0.1", srv.port), {"mode": "pingpong", "max_size": 64})
        client.connect()
        try:
            with pytest.raises(PeerRefused, match="no load connections"):
                client._request({"op": "load"}, "loading")
        finally:
            client.close(abort=True)
        assert wait_closed(srv.port) == 0


# Between namespace hosts through a token bucket

def test_a_load_on_a_shaped_link_makes_the_ping_pong_slower(netns_pair):
    """Both directions through a 50 Mbit/s token bucket: the load fills the client's
    queue (up to the bucket's 100 ms of latency), so a small message's median under load
    is several times its median alone (x3 asked; a queue of milliseconds against a round
    trip of microseconds gave x500), its p90 too, and the load's goodput is the link's
    (at most 5% above what the shaper lets through, at least a third of it).  Compare's
    verdict on it is not asked: a loaded sweep of few trials on a busy machine can have
    a median interval wide enough for "cannot tell"."""
    server, client = netns_pair
    tbf(server, "50mbit")
    tbf(client, "50mbit")
    start_server(server)
    res = client.run([sys.executable, "-m", "beoperf", "pingpong", server.addr4,
                      "--under-load", "--sizes", "64", "--time-budget", "6",
                      "--history", "off", "--json"], check=False, timeout=120)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    body = doc["body"]
    (idle,), (loaded,) = body["sizes"], body["under_load"]["sizes"]
    assert loaded["time_us"]["median"] > 3 * idle["time_us"]["median"], (idle, loaded)
    assert loaded["tail"]["percentiles_us"]["p90"] > 3 * idle["tail"]["percentiles_us"]["p90"]
    load = body["under_load"]["load"]
    mss, mtu = body["local"]["socket"]["mss"], body["local"]["interface"]["mtu"]
    limit = goodput_limit_mbps(50, mss, mtu)
    assert limit / 3 < load["throughput_bps"] / 1e6 <= 1.05 * limit, load

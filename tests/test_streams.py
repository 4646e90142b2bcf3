"""Parallel streams (--streams N) and the reverse direction (--reverse) of stream mode:
on loopback (the document's figures, the server's cap, an older server, bad options) and
between namespace hosts through token buckets of known rates."""

from __future__ import annotations

import json
import socket
import sys
import threading

import pytest

from beoperf import errors
from beoperf.engines import protocol
from beoperf.engines.base import Peer
from beoperf.engines.tcp import TcpClient
from beoperf.engines.tcp_data import MAX_STREAMS
from beoperf.model.pingpong import from_json
from beoperf.report.pingpong import text
from helpers import checked, cli, running_server
from test_netns import goodput_limit_mbps, start_server, tbf


def stream_run(*extra: str) -> dict:
    res = cli("pingpong", "--mode", "stream", "--sizes", "64K", "--time-budget", "2",
              "--history", "off", "--json", *extra)
    assert res.status == 0, res.stderr
    return checked(res.json)


def test_streams_on_loopback_record_each_stream_and_their_sum():
    """--streams 3 with --integrity: every size has three per-stream goodputs (each
    stream's bytes over its own time), which together are at least the sum over the
    common window (each stream ran within it; 5% for taking the median of each over the
    trials) and the summary names the streams."""
    doc = stream_run("--streams", "3", "--integrity")
    body = doc["body"]
    assert (body["parameters"]["streams"], body["parameters"]["reverse"]) == (3, False)
    (size,) = body["sizes"]
    assert len(size["streams_bps"]) == 3 and min(size["streams_bps"]) > 0
    total = size["throughput_bps"]["from_median"]
    assert sum(size["streams_bps"]) >= 0.95 * total  # medians of each, 5% for their noise
    summary = text(from_json(doc))
    assert "3 streams, forward (this end sends)" in summary
    assert "SUM" in summary and "slowest" in summary and "fastest" in summary


def test_reverse_on_loopback_the_client_receives():
    """--reverse with one stream: the client times what it receives (integrity checked
    at this end), the direction is recorded and said."""
    doc = stream_run("--reverse", "--integrity")
    body = doc["body"]
    assert (body["parameters"]["streams"], body["parameters"]["reverse"]) == (1, True)
    assert body["sizes"][0]["throughput_bps"]["from_median"] > 0
    assert "reverse (the server sends, this end receives)" in text(from_json(doc))


def test_one_stream_forward_records_neither():
    """A run without the options records them nowhere, as every run before them."""
    body = stream_run()["body"]
    assert "streams" not in body["parameters"] and "reverse" not in body["parameters"]
    assert "streams_bps" not in body["sizes"][0]


def test_compare_sets_streams_against_one_stream(tmp_path):
    """Three streams against one: compare takes both, says the settings differ (streams
    1 -> 3), and compares their goodputs at the size."""
    for name, extra in (("one", ()), ("three", ("--streams", "3"))):
        res = cli("pingpong", "--mode", "stream", "--sizes", "64K", "--time-budget", "2",
                  "--history", "off", "-o", str(tmp_path / name), *extra)
        assert res.status == 0, res.stderr
    res = cli("compare", str(tmp_path / "one.json"), str(tmp_path / "three.json"),
              "--format", "json")
    assert res.status == 0, res.stderr
    rows = checked(res.json)["body"]["rows"]
    (row,) = [r for r in rows if not r["baseline"]]
    assert "streams 1 -> 3" in row["differs"]
    assert all(r["peak_bps"] > 0 and r["peak_size"] == 65536 for r in rows)
    assert row["peak_change_pct"] is not None


@pytest.mark.parametrize("argv, words", [
    (("--streams", "2"), "--streams is for --mode stream"),
    (("--reverse",), "--reverse is for --mode stream"),
    (("--mode", "stream", "--streams", "0"), "--streams 0: give 1 to"),
    (("--mode", "stream", "--streams", "2", "--nocache"), "--nocache with --streams"),
])
def test_bad_stream_options_are_one_line_and_exit_2(argv, words):
    res = cli("pingpong", "--sizes", "1K", "--history", "off", *argv)
    assert res.status == 2, res.stderr
    assert words in res.stderr and "Traceback" not in res.stderr


def test_the_server_refuses_streams_above_its_cap_in_one_line():
    """The embedded server caps a session at MAX_STREAMS: one more is refused, in one
    line naming the cap, and nothing else is printed."""
    res = cli("pingpong", "--mode", "stream", "--sizes", "1K", "--history", "off",
              "--streams", str(MAX_STREAMS + 1))
    assert res.status != 0
    assert f"cap of {MAX_STREAMS} streams" in res.stderr and "Traceback" not in res.stderr
    assert len([line for line in res.stderr.splitlines() if "cap of" in line]) == 1


def test_the_server_takes_its_cap_of_connections_for_one_session():
    """A session of MAX_STREAMS streams: the server accepts every data connection."""
    with running_server() as srv:
        client = TcpClient(Peer("127.0.0.1", srv.port),
                           {"mode": "stream", "max_size": 4096, "streams": MAX_STREAMS})
        client.connect()
        try:
            assert len(client.more_data) == MAX_STREAMS - 1
        finally:
            client.close()


def old_server(listener: socket.socket) -> None:
    """A server as before --streams: it takes the session, its welcome has no
    max_streams (and it would then run one forward stream)."""
    conn, _ = listener.accept()
    with conn:
        protocol.recv_message(conn)
        protocol.send_message(conn, {"op": "welcome", "token": "t", "server": {},
                                     "limits": {"max_memory": 1 << 26}})
        conn.settimeout(5)
        try:
            protocol.recv_message(conn)
        except (OSError, protocol.ProtocolError, ConnectionError):
            pass


@pytest.mark.parametrize("params", [{"streams": 2, "reverse": False},
                                    {"streams": 1, "reverse": True}])
def test_an_older_server_is_refused_on_the_client_side_in_one_line(params):
    with socket.create_server(("127.0.0.1", 0)) as listener:
        thread = threading.Thread(target=old_server, args=(listener,), daemon=True)
        thread.start()
        client = TcpClient(Peer("127.0.0.1", listener.getsockname()[1]),
                           {"mode": "stream", "max_size": 4096, **params})
        with pytest.raises(errors.PeerError, match="older than --streams and --reverse") as exc:
            client.connect()
        assert "\n" not in str(exc.value)
        thread.join(5)


# Between namespace hosts through token buckets


def body_of(host, *args: str) -> dict:
    res = host.run([sys.executable, "-m", "beoperf", "pingpong", *args, "--history", "off",
                    "--json"], check=False, timeout=120)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["body"]


HARMONIC_4 = 1 + 1 / 2 + 1 / 3 + 1 / 4


def test_four_streams_sum_to_the_link_goodput(netns_pair):
    """--streams 4 through a 100 Mbit/s token bucket: the sum is the link's TCP goodput
    (its rate times the payload's share of a frame), not four times it; the four
    per-stream goodputs are there, each over its own time, so together at least the sum
    over the window and at most H(4) times it (the bound when the streams run one after
    another)."""
    server, client = netns_pair
    tbf(server, "100mbit")
    tbf(client, "100mbit")
    start_server(server)
    body = body_of(client, server.addr4, "--mode", "stream", "--streams", "4", "--sizes",
                   "1M", "--time-budget", "6")
    (size,) = body["sizes"]
    mss, mtu = body["local"]["socket"]["mss"], body["local"]["interface"]["mtu"]
    total = size["throughput_bps"]["from_median"]
    assert total / 1e6 == pytest.approx(goodput_limit_mbps(100, mss, mtu), rel=0.1), size
    rates = size["streams_bps"]
    assert len(rates) == 4 and min(rates) > 0
    assert 0.95 * total <= sum(rates) <= HARMONIC_4 * total, rates  # 5%: medians of each


def test_reverse_measures_the_other_direction_of_an_asymmetric_link(netns_pair):
    """Server to client shaped at 400 Mbit/s, client to server at 100: --reverse reads
    the 400 direction (above 1.5 times the 100 one's goodput, never above the 400's; a
    forward stream reads the 100: the test above and test_netns hold stream mode to a
    shaper's rate), and records its direction.  The faster direction is the measured
    one because a token bucket's burst is outlasted sooner there; the lower bound leaves
    room for a busy machine that cannot fill 400 Mbit/s."""
    server, client = netns_pair
    tbf(server, "400mbit")
    tbf(client, "100mbit")
    start_server(server)
    back = body_of(client, server.addr4, "--mode", "stream", "--sizes", "1M", "--time-budget",
                   "3", "--reverse")
    mss, mtu = back["local"]["socket"]["mss"], back["local"]["interface"]["mtu"]
    reverse_mbps = back["sizes"][0]["throughput_bps"]["from_median"] / 1e6
    assert 1.5 * goodput_limit_mbps(100, mss, mtu) < reverse_mbps
    assert reverse_mbps <= 1.05 * goodput_limit_mbps(400, mss, mtu)
    assert back["parameters"]["reverse"] is True

"""In-process CLI: exit statuses, one-line errors, --json and output files."""

from __future__ import annotations

import contextlib
import json
import socket
import threading

import pytest

from beoperf import __version__
from beoperf.cli import ExitStatus
from beoperf.engines import protocol
from helpers import cli, hello, running_server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def assert_one_line_error(res, status: ExitStatus, *words: str) -> None:
    assert res.status == status, res.stderr
    assert len(res.error_lines) == 1, res.stderr
    line = res.error_lines[0]
    assert line.startswith("beoperf: "), line
    assert "Traceback" not in res.stderr
    for word in words:
        assert word in line, line


def test_version():
    res = cli("--version")
    assert res.status == 0
    assert __version__ in res.stdout


def test_no_command_is_usage_error():
    assert_one_line_error(cli(), ExitStatus.USAGE, "usage error")


@pytest.mark.parametrize("argv,word", [
    (["pingpong", "--precision", "2"], "--precision"),
    (["pingpong", "--sizes", ",,"], "sizes"),
    (["pingpong", "--sizes", "12,abc"], "not a size"),
    (["pingpong", "--start", "2K", "--end", "1K"], "range"),
    (["pingpong", "--mode", "sideways"], "invalid choice"),
    (["pingpong", "--cpu", "x"], "--cpu"),
    (["pingpong", "--sndbuf", "lots"], "--sndbuf"),
    (["pingpong", "--port", "70000"], "port"),
    (["pingpong", "--no-such-option"], "unrecognized"),
    (["serve", "--max-memory", "huge"], "--max-memory"),
    (["pingpong", "--timeout", "inf"], "--timeout"),
    (["pingpong", "--trial-time", "nan"], "--trial-time"),
    (["pingpong", "--max-time", "0"], "--max-time"),
    (["serve", "--handshake-timeout", "nan"], "--handshake-timeout"),
    (["serve", "--idle-timeout", "3e7"], "--idle-timeout"),
])
def test_bad_options(argv, word):
    assert_one_line_error(cli(*argv), ExitStatus.USAGE, "usage error", word)


def test_unknown_host():
    res = cli("pingpong", "no-such-host.invalid", "--sizes", "1")
    assert_one_line_error(res, ExitStatus.CONNECTION, "connection error", "resolve")


def test_refused_connection():
    res = cli("pingpong", "127.0.0.1", "--port", str(free_port()), "--sizes", "1")
    assert_one_line_error(res, ExitStatus.CONNECTION, "connection error", "refused")


def test_silent_listener_is_not_a_beoperf_server():
    """Something that accepts the connection but never answers the hello (nc -l, a
    hung service) is a peer error, not a connection error: the port is reachable."""
    held: list[socket.socket] = []
    with socket.create_server(("127.0.0.1", 0)) as listener:
        def accept_and_sleep():
            with contextlib.suppress(OSError):
                held.append(listener.accept()[0])

        threading.Thread(target=accept_and_sleep, daemon=True).start()
        res = cli("pingpong", "127.0.0.1", "--port", str(listener.getsockname()[1]),
                  "--sizes", "1", "--timeout", "0.5")
    for sock in held:
        sock.close()
    assert held, "the connection was not even accepted"
    assert_one_line_error(res, ExitStatus.PEER, "peer error", "not a beoperf server",
                          "did not answer the handshake")


def fake_peer(reply: bytes) -> tuple[int, threading.Thread]:
    """A one-shot TCP peer that reads a little and answers `reply`."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn, listener:
            conn.recv(65536)
            conn.sendall(reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener.getsockname()[1], thread


def test_peer_of_another_version():
    refusal = {"op": "refuse", "code": "version", "reason": "I speak version 99"}
    port, thread = fake_peer(protocol.encode(refusal, version=99))
    res = cli("pingpong", "127.0.0.1", "--port", str(port), "--sizes", "1")
    thread.join(5)
    assert_one_line_error(res, ExitStatus.PEER, "peer error", "version 99")


def test_not_a_beoperf_server():
    port, thread = fake_peer(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    res = cli("pingpong", "127.0.0.1", "--port", str(port), "--sizes", "1")
    thread.join(5)
    assert_one_line_error(res, ExitStatus.PEER, "not a beoperf server")


def test_server_refuses_old_client_version():
    with running_server() as srv:
        sock = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        with sock:
            sock.sendall(protocol.encode(hello(), version=protocol.PROTOCOL_VERSION + 1))
            reply = protocol.recv_message(sock)
    assert reply["op"] == "refuse" and reply["code"] == "version"
    assert f"protocol version {protocol.PROTOCOL_VERSION}" in reply["reason"]


def test_busy_server_refuses_second_client():
    with running_server(handshake_timeout=10) as srv:
        first = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        with first:
            protocol.send_message(first, hello())
            assert protocol.recv_message(first)["op"] == "welcome"
            res = cli("pingpong", "127.0.0.1", "--port", str(srv.port), "--sizes", "1")
    assert_one_line_error(res, ExitStatus.PEER, "busy")


def test_server_limit_is_a_peer_error():
    with running_server(max_memory=1 << 20) as srv:
        res = cli("pingpong", "127.0.0.1", "--port", str(srv.port), "--sizes", "2M")
    # says how much memory the session needs (two 2 MiB buffers) and how to give it
    assert_one_line_error(res, ExitStatus.PEER, "limit", "needs 4194304 bytes",
                          "--max-memory 4M")


def test_json_to_stdout_summary_to_stderr():
    with running_server() as srv:
        res = cli("pingpong", "127.0.0.1", "--port", str(srv.port), "--sizes", "1,1024", "--json",
                  "--time-budget", "2")  # what is written, not how precise: no 20 s needed
    assert res.status == 0, res.stderr
    doc = res.json
    assert (doc["format"], doc["kind"], doc["schema_version"]) == ("beoperf", "pingpong", 7)
    assert doc["meta"]["command_line"][:2] == ["beoperf", "pingpong"]
    body = doc["body"]
    assert [s["size"] for s in body["sizes"]] == [1, 1024]
    assert body["summary"]["latency_size"] == 1
    assert "latency" in res.stderr


def test_output_prefix_writes_json_and_netpipe(tmp_path):
    prefix = tmp_path / "runs" / "lo"
    with running_server() as srv:
        res = cli("pingpong", "127.0.0.1", "--port", str(srv.port), "--sizes", "1,64,4K",
                  "-o", str(prefix))
    assert res.status == 0, res.stderr
    doc = json.loads((tmp_path / "runs" / "lo.json").read_text())["body"]
    lines = (tmp_path / "runs" / "lo.np").read_text().splitlines()
    assert [int(line.split()[0]) for line in lines] == [s["size"] for s in doc["sizes"]]
    assert "latency" in res.stdout and "peak" in res.stdout
    assert any("session" in line and " ok" in line for line in srv.log)


def test_server_error_mid_run_is_reported_with_its_reason():
    """A server that stops mid-trial says why on the control path; the client raises that."""
    from beoperf import _core, engines

    with running_server() as srv:
        client = engines.get("tcp")(engines.Peer("127.0.0.1", srv.port),
                                    {"mode": "pingpong", "max_size": 1024}, timeout=5)
        client.connect()
        with pytest.raises(protocol.PeerRefused, match="outside the session limits"):
            client.trial(4096, 1, _core.Pool(4096), 0)  # over the agreed max_size
        client.close(abort=True)
    assert any("outside the session limits" in line for line in srv.log)


def test_command_line_is_recorded():
    with running_server() as srv:
        res = cli("pingpong", "127.0.0.1", "--port", str(srv.port), "--sizes", "8", "--json",
                  "--time-budget", "2")
    assert res.json["meta"]["command_line"][:3] == ["beoperf", "pingpong", "127.0.0.1"]


def test_back_to_back_sessions_are_never_told_busy():
    """The server says bye only after its session is over, so the next run may start."""
    with running_server() as srv:
        for _ in range(15):
            res = cli("pingpong", "127.0.0.1", "--port", str(srv.port), "--sizes", "1",
                      "--max-time", "0.05", "--json")
            assert res.status == 0, res.stderr


@pytest.mark.parametrize(("argv", "expected"), [
    ([], 0.002),  # the default sweep
    (["--sizes", "16,4K"], 0.002),  # a sweep of a few sizes
    (["--sizes", "16"], 0.25),  # one size: sustained, NetPIPE-length trials
    (["--sizes", "16", "--time-budget", "1.2"], 0.1),  # what the budget affords twice
    (["--sizes", "16", "--max-time", "0.06"], 0.005),  # ... or the cap
    (["--sizes", "16", "--time-budget", "0.01"], 0.002),  # never below a sweep's
    (["--sizes", "16", "--time-budget", "none"], 0.25),
    (["--sizes", "16", "--trial-time", "0.01"], 0.01),  # asked for
    (["--trial-time", "0.03"], 0.03),
])
def test_trial_time_default(argv, expected):
    from beoperf.cli import build_parser
    from beoperf.cli.pingpong import spec_from

    args = build_parser("pingpong").parse_args(["pingpong", *argv])
    args.argv = ["pingpong", *argv]
    assert spec_from(args).trial_time == pytest.approx(expected)


@pytest.mark.parametrize(("argv", "expected"), [
    ([], "reno"),
    (["--mode", "bidir"], "reno"),
    (["--mode", "stream"], None),
    (["--congestion", "system"], None),
    (["--congestion", "reno", "--mode", "stream"], "reno"),
    (["--transport", "mpi"], None),
])
def test_congestion_control_by_mode(argv, expected):
    from beoperf.cli import build_parser
    from beoperf.cli.pingpong import spec_from
    from beoperf.suites import pingpong

    args = build_parser("pingpong").parse_args(["pingpong", *argv])
    args.argv = ["pingpong", *argv]
    spec = spec_from(args)
    assert pingpong.arranged(spec).congestion == expected
    assert spec.params()["congestion"] == expected, "what a document records (mpi: no arranging)"
    if not argv:  # a sweep over modes: each mode its own
        modes = [pingpong.arranged(pingpong.configure(spec, "mode", m)).congestion
                 for m in ("pingpong", "stream")]
        assert modes == ["reno", None]


def test_congestion_control_bad_input_is_one_line():
    for argv in (["--congestion", "no_such_cc"], ["--congestion", "x;y"],
                 ["--congestion", "reno", "--transport", "mpi"]):
        got = cli("pingpong", "--sizes", "1", *argv)
        assert got.status == 2 and len(got.error_lines) == 1 and "congestion" in got.stderr, \
            (argv, got.stderr)


@pytest.mark.parametrize("argv, allowed, expected", [
    ([], {0, 1, 2, 3}, (3, 2)),  # embedded peer: the last CPU and the one before
    ([], {5}, (None, None)),  # one CPU: nothing to choose
    (["--cpu", "none"], {0, 1}, (None, None)),  # left to the scheduler
    (["--cpu", "NONE"], {0, 1}, (None, None)),
    (["--cpu", "0,1"], {0, 1, 2}, (0, 1)),  # given: kept
    (["--cpu", "1"], {0, 1, 2}, (1, None)),  # the client only: the server left alone
    (["node02"], {0, 1}, (None, None)),  # a remote peer: its placement is its own
    (["--transport", "mpi"], {0, 1}, (None, None)),  # MPI binds its own ranks
])
def test_embedded_placement(argv, allowed, expected, monkeypatch):
    from beoperf.cli import build_parser
    from beoperf.cli.pingpong import spec_from
    from beoperf.suites import pingpong

    monkeypatch.setattr(pingpong.os, "sched_getaffinity", lambda pid: set(allowed))
    args = build_parser("pingpong").parse_args(["pingpong", *argv])
    args.argv = ["pingpong", *argv]
    spec = pingpong.placed(spec_from(args))
    assert (spec.client_cpu, spec.server_cpu) == expected

"""Everything a hostile or broken client can do to `beoperf serve`.

Used in-process on loopback and, as `python server_abuse.py HOST PORT`, from
inside a network-namespace test host. Each abuse is bounded in time.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
from typing import Any

from beoperf.engines import echo, protocol

HELLO = {"op": "hello", "role": "control", "beoperf": "abuse",
         "params": {"mode": "pingpong", "max_size": 1 << 20}}


def _connect(host: str, port: int) -> socket.socket:
    return socket.create_connection((host, port), timeout=5)


def _reply(sock: socket.socket) -> str:
    """The op the server answered with, or 'closed'."""
    try:
        return protocol.recv_message(sock)["op"]
    except (protocol.PeerGone, ConnectionError, protocol.ProtocolError):
        return "closed"


def send_and_read(host: str, port: int, payload: bytes) -> str:
    with _connect(host, port) as sock:
        sock.sendall(payload)
        return _reply(sock)


def _session(host: str, port: int) -> tuple[socket.socket, dict[str, Any]]:
    """A control connection and the server's welcome.  The server may still be ending
    the session abused before (busy for a moment, longer on a loaded machine): retry."""
    deadline = time.monotonic() + 15
    while True:
        ctrl = _connect(host, port)
        protocol.send_message(ctrl, HELLO)
        welcome = protocol.recv_message(ctrl)
        if welcome["op"] == "welcome" or time.monotonic() > deadline:
            return ctrl, welcome
        ctrl.close()
        time.sleep(0.1)


def mid_test_disconnect(host: str, port: int) -> str:
    """Open a real session, start a run, send half a message, vanish."""
    ctrl, welcome = _session(host, port)
    data = _connect(host, port)
    protocol.send_message(data, {"op": "hello", "role": "data", "token": welcome["token"]})
    protocol.recv_message(ctrl)  # "data"
    protocol.send_message(ctrl, {"op": "run", "size": 1 << 20, "reps": 100, "seq0": 0})
    data.sendall(b"x" * (300 * 1024))
    data.close()
    ctrl.close()
    return welcome["op"]


def silent_session(host: str, port: int) -> list[socket.socket]:
    """A session that opens its data connection, then says nothing, never closing
    (as a peer whose host died would): the server must time it out."""
    ctrl, welcome = _session(host, port)
    data = _connect(host, port)
    protocol.send_message(data, {"op": "hello", "role": "data", "token": welcome["token"]})
    protocol.recv_message(ctrl)
    return [ctrl, data]


def session_then_bad_run(host: str, port: int) -> str:
    ctrl, welcome = _session(host, port)
    with ctrl:
        with _connect(host, port) as data:
            protocol.send_message(data, {"op": "hello", "role": "data",
                                         "token": welcome["token"]})
            protocol.recv_message(ctrl)
            protocol.send_message(ctrl, {"op": "run", "size": 1 << 30, "reps": 1, "seq0": 0})
            return _reply(ctrl)


def abuses(host: str, port: int) -> dict[str, str]:
    """Run every abuse once; name -> how the server answered."""
    header = protocol.HEADER
    out = {
        "garbage": send_and_read(host, port, os.urandom(1024)),
        "http": send_and_read(host, port, b"GET / HTTP/1.0\r\n\r\n" + b"\0" * 8),
        "oversize": send_and_read(host, port, header.pack(protocol.MAGIC, 1, 100 << 20)),
        "not-json": send_and_read(host, port,
                                  header.pack(protocol.MAGIC, 1, 4) + b"\xff\xfe{x"),
        "deep-json": send_and_read(host, port,
                                   header.pack(protocol.MAGIC, 1, 60000) + b"[" * 60000),
        "wrong-version": send_and_read(host, port, protocol.encode(HELLO, version=999)),
        "bad-params": send_and_read(host, port, protocol.encode(
            dict(HELLO, params={"mode": "pingpong", "max_size": 1 << 40}))),
        "data-no-session": send_and_read(host, port, protocol.encode(
            {"op": "hello", "role": "data", "token": "nope"})),
        "not-hello": send_and_read(host, port, protocol.encode({"op": "run"})),
        "bad-run": session_then_bad_run(host, port),
        "mid-test-disconnect": mid_test_disconnect(host, port),
    }
    with _connect(host, port) as sock:  # truncated frame, then no more
        sock.sendall(header.pack(protocol.MAGIC, 1, 100) + b"{" * 10)
        sock.shutdown(socket.SHUT_WR)
        out["truncated"] = _reply(sock)
    return out


EXPECTED = {"garbage": "refuse", "http": "refuse", "oversize": "refuse", "not-json": "refuse",
            "deep-json": "refuse", "wrong-version": "refuse", "bad-params": "refuse",
            "data-no-session": "refuse", "not-hello": "refuse", "bad-run": "error",
            "mid-test-disconnect": "welcome", "truncated": "closed"}


def half_open(host: str, port: int, count: int) -> list[socket.socket]:
    """Connections that never finish a handshake (some send half a header)."""
    socks = []
    for i in range(count):
        s = _connect(host, port)
        if i % 2:
            s.sendall(protocol.MAGIC[:2])
        socks.append(s)
    return socks


def hello_then_close(host: str, port: int) -> float:
    """A client that says hello and leaves before opening its data connection; the
    seconds until the next client is welcomed (the server must notice the close at
    once, not after its handshake timeout)."""
    ctrl, welcome = _session(host, port)
    assert welcome["op"] == "welcome", welcome
    ctrl.close()
    started = time.monotonic()
    while True:
        with _connect(host, port) as sock:
            protocol.send_message(sock, HELLO)
            if _reply(sock) == "welcome" or time.monotonic() - started > 30:
                return time.monotonic() - started
        time.sleep(0.02)


def _open_session(host: str, port: int) -> tuple[socket.socket, socket.socket, dict[str, Any]]:
    """A control connection, its data connection, and the data hello used."""
    ctrl, welcome = _session(host, port)
    assert welcome["op"] == "welcome", welcome
    data = _connect(host, port)
    hello = {"op": "hello", "role": "data", "token": welcome["token"]}
    protocol.send_message(data, hello)
    assert protocol.recv_message(ctrl)["op"] == "data"
    return ctrl, data, hello


def data_flood(host: str, port: int, extra: int = 20) -> dict[str, int]:
    """A session whose client opens `extra` more data connections than the one it uses:
    how many the server closed within a second, and how many it left waiting."""
    ctrl, data, hello = _open_session(host, port)
    socks = []
    try:
        for _ in range(extra):
            socks.append(_connect(host, port))
            protocol.send_message(socks[-1], hello)
        deadline, closed = time.monotonic() + 1.0, 0
        for sock in socks:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                closed += _reply(sock) in ("refuse", "closed")
            except TimeoutError:
                pass
    finally:
        for sock in [*socks, data, ctrl]:
            sock.close()
    return {"closed_at_once": closed, "left_waiting": extra - closed}


def _gone(sock: socket.socket) -> bool:
    """Whether the server has spoken or hung up on this connection (nothing else
    would make it readable while a message trickles in)."""
    return bool(select.select([sock], [], [], 0)[0])


def trickle(host: str, port: int, target: str, step: float, limit: float) -> float:
    """Send a message one byte every `step` s to `target` ("control": a run request,
    "echo": an echo message, "data": the data of a run) until the server gives up or
    `limit` s pass; the seconds the server kept the connection."""
    if target == "echo":
        watch = [sock := _connect(host, port)]
        protocol.send_message(sock, {"op": "hello", "role": "echo", "beoperf": "abuse"})
        assert protocol.recv_message(sock)["op"] == "echo"
        payload = echo.tcp_message(b"x" * 200)
    else:
        ctrl, data, _ = _open_session(host, port)
        watch = [ctrl, data]
        sock, payload = ctrl, protocol.encode({"op": "run", "size": 1, "reps": 1, "seq0": 0,
                                               "pad": "x" * 200})
        if target == "data":
            protocol.send_message(ctrl, {"op": "run", "size": 1000, "reps": 1, "seq0": 0})
            sock, payload = data, b"x" * 1000
    started = time.monotonic()
    try:
        for byte in payload:
            if time.monotonic() - started > limit or any(_gone(s) for s in watch):
                break
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                break
            time.sleep(step)
        return time.monotonic() - started
    finally:
        for s in watch:
            s.close()


def hostile_server(host: str, port: int, idle: float) -> dict[str, Any]:
    """The abuses that once held or flooded the server, for one whose idle timeout is
    `idle` s; asserts that each is bounded and returns what was measured."""
    out: dict[str, Any] = {"hello_then_close_s": hello_then_close(host, port),
                           "data_flood": data_flood(host, port)}
    for target in ("control", "echo", "data"):
        out[f"trickle_{target}_s"] = trickle(host, port, target, idle * 0.3, idle * 4 + 2)
    assert out["hello_then_close_s"] < 1.0, out
    assert out["data_flood"]["left_waiting"] <= 2, out
    for target in ("control", "echo", "data"):  # about idle (the C loop: 2 x idle), not all
        assert out[f"trickle_{target}_s"] < idle * 3 + 1, out
    return out


def abuse_server(host: str, port: int) -> dict[str, Any]:
    """All abuses, the last a silent session left open; asserts the answers."""
    got = abuses(host, port)
    assert got == EXPECTED, got
    _SILENT.extend(silent_session(host, port))
    return got


_SILENT: list[socket.socket] = []


def normal_client(host: str, port: int) -> dict[str, Any]:
    """A real client run (as a subprocess, as a user would) while half-open peers linger."""
    lingering = half_open(host, port, 40)
    try:
        time.sleep(0.2)
        proc = subprocess.run(
            [sys.executable, "-m", "beoperf", "pingpong", host, "--port", str(port),
             "--sizes", "1,1024,65536", "--integrity", "--json", "--timeout", "20"],
            capture_output=True, text=True, timeout=120)
    finally:
        for s in lingering:
            s.close()
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["body"]


def assert_served_normally(host: str, port: int) -> dict[str, Any]:
    # the server may still be ending the abused sessions; a busy answer is fine, then retry
    deadline = time.monotonic() + 20
    while True:
        try:
            doc = normal_client(host, port)
            break
        except AssertionError as exc:
            if "busy" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    for s in _SILENT:  # the server timed these out to serve us; now let them go
        s.close()
    _SILENT.clear()
    assert doc["status"] == "complete"
    assert [s["size"] for s in doc["sizes"]] == [1, 1024, 65536]
    assert doc["summary"]["corrupt_messages"] == 0
    return doc


if __name__ == "__main__":  # HOST PORT [IDLE_TIMEOUT of that server, default 2]
    host_arg, port_arg = sys.argv[1], int(sys.argv[2])
    idle_arg = float(sys.argv[3]) if len(sys.argv) > 3 else 2.0
    print(json.dumps({"abuse": abuse_server(host_arg, port_arg),
                      "hostile": hostile_server(host_arg, port_arg, idle_arg),
                      "normal": assert_served_normally(host_arg, port_arg)["summary"]}))

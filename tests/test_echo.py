"""The echo service exists once (engines/echo.py): the server answers and the monitor's
probers build and check their probes with the same functions."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from beoperf.engines import echo, protocol, tcp_server
from beoperf.monitor import probes
from beoperf.monitor.probes import TcpProber, UdpProber, resolve

SRC = Path(__file__).resolve().parent.parent / "src" / "beoperf"


def test_server_and_probes_import_one_echo_module():
    assert probes.echo is echo and tcp_server.echo is echo
    copies = [p.relative_to(SRC) for p in SRC.rglob("*.py")
              if p.name != "echo.py" and (b'b"BEOU"' in p.read_bytes()
                                          or b'b"BEOR"' in p.read_bytes())]
    assert copies == [], "a second copy of the echo format"


@pytest.mark.parametrize("size", [8, 9, 16, 17, 1000])
def test_a_probe_is_answered_by_the_servers_function_and_a_reply_never(size):
    probe = echo.udp_probe(7, size)
    assert len(probe) == size
    answer = echo.udp_answer(probe)
    assert answer is not None and len(answer) == size and answer != probe
    assert echo.udp_answer(answer) is None  # no echo loops between two servers
    assert echo.udp_answer(b"hello, not a probe") is None
    assert echo.udp_probe(7, 64) != echo.udp_probe(7, 64)  # a late reply never matches


class UdpPeer(threading.Thread):
    """One datagram in; answered with `answer(datagram)` (None: not answered)."""

    def __init__(self, answer) -> None:
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(5)
        self.answer, self.got = answer, b""
        self.start()

    def run(self) -> None:
        self.got, addr = self.sock.recvfrom(65535)
        reply = self.answer(self.got)
        if reply is not None:
            self.sock.sendto(reply, addr)


@pytest.mark.parametrize("answer,outcome", [
    (echo.udp_answer, "ok"),
    (lambda d: echo.udp_answer(d)[:-1] + b"?", "timeout"),  # a reply that is not the echo
    (lambda d: d, "timeout"),  # the probe itself sent back: not an answer
])
def test_the_udp_prober_takes_only_the_servers_answer(answer, outcome):
    peer = UdpPeer(answer)
    prober = UdpProber(resolve("127.0.0.1"), peer.sock.getsockname()[1])
    try:
        result = prober.probe(100, 0.5)
    finally:
        prober.close()
        peer.join(5)
        peer.sock.close()
    assert echo.udp_answer(peer.got) is not None  # the server's parser takes the probe
    assert result.outcome == outcome


def test_the_tcp_prober_is_served_by_the_servers_echo_loop():
    served: list[echo.TcpEcho] = []
    with socket.create_server(("127.0.0.1", 0)) as listener:
        def serve() -> None:
            conn, _ = listener.accept()
            with conn:
                assert protocol.recv_message(conn)["role"] == "echo"
                served.append(echo.TcpEcho(conn, idle_timeout=5))
                served[0].serve()

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        prober = TcpProber(resolve("127.0.0.1"), listener.getsockname()[1])
        try:
            outcomes = [prober.probe(size, 2.0).outcome for size in (8, 100, 70_000)]
        finally:
            prober.close()
        thread.join(5)
    assert outcomes == ["ok", "ok", "ok"]
    assert served[0].count == 3


def tcp_pair() -> tuple[socket.socket, socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname(), timeout=5)
        server, _ = listener.accept()
    return client, server


def test_the_echo_loop_refuses_a_message_over_its_limit():
    a, b = tcp_pair()
    with a, b:
        a.sendall(echo.tcp_message(b"hi") + echo.LEN.pack(echo.MAX_MESSAGE + 1))
        served = echo.TcpEcho(b, idle_timeout=5)
        with pytest.raises(protocol.Refusal) as info:
            served.serve()
        assert info.value.code == "limit" and served.count == 1
        assert protocol.recv_message(a)["op"] == "echo"
        assert a.recv(6, socket.MSG_WAITALL) == echo.tcp_message(b"hi")

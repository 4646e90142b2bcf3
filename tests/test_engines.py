"""Transports by name: the registry, a transport defined here and used through it, what a
failure means (the same line and exit status in every command), and measure_size."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading

import numpy as np
import pytest

from beoperf import _core, engines, errors
from beoperf.cli.errors import ExitStatus, describe
from beoperf.engines import Peer, Transport, Trial, protocol
from beoperf.engines.tcp import TcpClient
from beoperf.engines.tcp_data import set_io_timeout
from beoperf.sweep.driver import SweepConfig, open_transport, run_sweep
from beoperf.sweep.probe import measure_size
from helpers import hello, running_server


def test_the_registry_lists_tcp_and_refuses_unknown_names():
    assert "tcp" in engines.names()
    assert engines.get("tcp") is TcpClient and TcpClient.name == "tcp"
    with pytest.raises(errors.BadSpec) as info:
        engines.get("nope")
    assert "'nope'" in str(info.value) and "tcp" in info.value.hint
    status, line = describe(info.value)
    assert status == ExitStatus.USAGE and line.startswith("beoperf: usage error: ")


def test_a_name_is_never_taken_twice():
    class Impostor(SocketPair):
        pass

    with pytest.raises(ValueError, match="already taken"):
        engines.register("tcp")(Impostor)
    assert engines.get("tcp") is TcpClient


def test_the_echo_code_loads_without_numpy_or_the_c_loops():
    """Built-ins register by name and load when first asked for: `beoperf monitor`
    (probes and the echo format) does not carry numpy and the engines' C loops."""
    code = ("import sys; from beoperf import engines; import beoperf.monitor.probes; "
            "print(engines.names(), 'numpy' in sys.modules, 'beoperf._core' in sys.modules); "
            "engines.get('tcp'); print('beoperf.engines.tcp' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == ["['mpi', 'tcp'] False False", "True"]


# --------------------------------------------------------------------------- a transport


class SocketPair(Transport):
    """A whole transport in a few lines: the C ping-pong loops over a socketpair, the
    other end in a thread of this process."""

    def connect(self):
        self.here, self.there = socket.socketpair()
        for sock in (self.here, self.there):
            set_io_timeout(sock, self.timeout)
        self.trials = 0
        return {"peer": "a thread"}

    def trial(self, size, reps, pool, seq0):
        other = threading.Thread(target=_core.run, daemon=True, args=(
            "pingpong-server", self.there.fileno(), _core.Pool(size), reps))
        other.start()
        samples, elapsed, corrupt = _core.run("pingpong-client", self.here.fileno(), pool,
                                              reps, seq0=seq0, size=size)
        other.join()
        self.trials += 1
        return Trial(np.frombuffer(samples, dtype=np.uint64), elapsed, corrupt)

    def reset(self):
        pass

    def facts(self):
        return {"end": "here"}, {"end": "there"}

    def close(self, abort=False):
        self.here.close()
        self.there.close()


@pytest.fixture
def socketpair_transport():
    engines.register("test-socketpair")(SocketPair)
    yield "test-socketpair"
    engines.TRANSPORTS.pop("test-socketpair")


def test_a_transport_registered_here_is_found_by_name_and_swept(socketpair_transport):
    assert socketpair_transport in engines.names()
    params = {"transport": socketpair_transport, "mode": "pingpong", "max_size": 4096}
    transport = open_transport(Peer("localhost", 0), params, timeout=5.0)
    try:
        assert isinstance(transport, SocketPair) and transport.name == socketpair_transport
        out = run_sweep(transport, SweepConfig(sizes=[8, 4096], trial_time=0.002,
                                               max_time=0.3))
    finally:
        transport.close()
    assert out.status == "complete", out.reason
    assert [s.size for s in out.sizes] == [8, 4096]
    assert all(s.time_us["median"] > 0 and s.corrupt == 0 for s in out.sizes)
    assert transport.trials >= sum(s.trials for s in out.sizes)
    assert transport.facts() == ({"end": "here"}, {"end": "there"})


def test_the_sweep_of_an_unknown_transport_is_a_usage_error():
    with pytest.raises(errors.BadSpec, match="unknown transport 'udp-nope'"):
        open_transport(Peer("localhost", 0), {"transport": "udp-nope", "mode": "pingpong"})


# --------------------------------------------------------------------------- failures


H = "node02"


@pytest.mark.parametrize("exc,status,line", [
    (protocol.PeerRefused("server is busy", "busy"), ExitStatus.PEER,
     "beoperf: peer error: node02 refused: server is busy"),
    (protocol.VersionMismatch(9), ExitStatus.PEER,
     "beoperf: peer error: node02: peer speaks protocol version 9, this beoperf speaks "
     f"{protocol.PROTOCOL_VERSION}; use the same beoperf version at both ends"),
    (protocol.ProtocolError("bad magic b'HTTP'"), ExitStatus.PEER,
     "beoperf: peer error: node02 is not a beoperf server: bad magic b'HTTP'; check --port"),
    (protocol.PeerGone("peer closed the control connection"), ExitStatus.CONNECTION,
     "beoperf: connection error: lost node02: peer closed the control connection"),
    (_core.PeerClosedError("peer closed"), ExitStatus.CONNECTION,
     "beoperf: connection error: lost node02: peer closed"),
    (TimeoutError("timed out"), ExitStatus.CONNECTION,
     "beoperf: connection error: lost node02: timed out"),
    (errors.ConnectError("cannot connect to node02 port 5202: Connection refused"),
     ExitStatus.CONNECTION, "beoperf: connection error: lost node02: cannot connect to "
                            "node02 port 5202: Connection refused"),
    (errors.IntegrityError("2 corrupted message(s) at 64 bytes", "check the NICs"),
     ExitStatus.INTEGRITY,
     "beoperf: integrity error: 2 corrupted message(s) at 64 bytes; check the NICs"),
    (RuntimeError("boom"), ExitStatus.ERROR, "beoperf: error: the sweep stopped: "
                                             "RuntimeError: boom; the sizes measured before "
                                             "it were kept"),
])
def test_what_a_failure_mid_sweep_means(exc, status, line):
    """The lines and statuses `beoperf pingpong` has always printed for these."""
    meaning = TcpClient.failure(exc, H)
    assert isinstance(meaning, errors.BeoperfError)
    assert describe(meaning) == (status, line)


def test_the_base_transport_knows_lost_peers_and_the_rest():
    assert isinstance(Transport.failure(ConnectionResetError("reset"), H), errors.ConnectError)
    assert isinstance(Transport.failure(ValueError("odd"), H), errors.Failed)
    peer_error = errors.PeerError("refused")
    assert Transport.failure(peer_error, H) is peer_error


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_connect_says_what_went_wrong_and_leaves_nothing_open():
    client = TcpClient(Peer("127.0.0.1", free_port()), {"mode": "pingpong", "max_size": 8},
                       timeout=2)
    with pytest.raises(errors.ConnectError) as info:
        client.connect()
    assert "Connection refused" in str(info.value) and "beoperf serve" in info.value.hint
    assert client.ctrl is None and client.data is None


# --------------------------------------------------------------------------- measure_size


def test_measure_size_measures_one_size():
    with running_server() as srv:
        result = measure_size("127.0.0.1", srv.port, 64, max_time=0.2, timeout=5)
    assert result.size == 64 and result.samples > 0 and result.time_us["median"] > 0


def test_measure_size_says_whether_the_peer_is_unreachable_or_refused():
    """Unreachable: a ConnectError (still a ConnectionError, as callers expect); busy: a
    PeerError, so that a refusal has one exit status in every command."""
    port = free_port()
    with pytest.raises(errors.ConnectError) as info:
        measure_size("127.0.0.1", port, 16, max_time=0.2, timeout=2)
    assert isinstance(info.value, ConnectionError)
    assert str(info.value).startswith(f"measuring against 127.0.0.1 port {port}: cannot "
                                      f"connect to 127.0.0.1 port {port}")
    with running_server(handshake_timeout=10) as srv:
        first = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        with first:
            protocol.send_message(first, hello())
            assert protocol.recv_message(first)["op"] == "welcome"
            with pytest.raises(errors.PeerError, match="busy") as refused:
                measure_size("127.0.0.1", srv.port, 16, max_time=0.2, timeout=5)
    assert str(refused.value).startswith(f"measuring against 127.0.0.1 port {srv.port}: ")
    assert describe(refused.value)[0] == ExitStatus.PEER

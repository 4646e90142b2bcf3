"""`beoperf serve` shares its sessions between client addresses in turns (issue 28, item
9: one client sending a valid hello every 4.5 s kept a real client to 4 successes in 68
tries).  The rule (beoperf.engines.tcp_server.Turns) by hand, then on loopback with two
source addresses: a hostile client at 127.0.0.2 that takes the server again the moment
its session ends, and a real client at 127.0.0.1."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from beoperf import _core, engines
from beoperf.engines import protocol
from beoperf.engines.tcp_server import Turns, address_of
from helpers import hello, running_server

# --- the rule ---------------------------------------------------------------------------


def test_a_lone_address_is_never_refused():
    turns = Turns(hold=5.0)
    for now in range(100):
        assert turns.holder("10.0.0.1", float(now)) == 0
        turns.started("10.0.0.1")
        turns.ended("10.0.0.1", now + 0.5)


def test_the_next_session_is_kept_for_an_address_that_waited():
    """A waited while B had a session: the next one is A's for ``hold`` seconds (B is
    refused and waits in its turn), whoever of the two asks first."""
    turns = Turns(hold=5.0)
    turns.started("B")
    turns.refused("A", 1.0)
    turns.ended("B", 2.0)
    assert turns.holder("B", 2.1) == 1  # kept for one other address
    turns.refused("B", 2.1)
    assert turns.holder("A", 2.2) == 0
    turns.started("A")
    turns.ended("A", 3.0)
    assert turns.holder("A", 3.1) == 1 and turns.holder("B", 3.1) == 0  # B's turn now


def test_a_turn_that_lapses_costs_one_hold_then_the_address_waits_no_more():
    turns = Turns(hold=5.0)
    turns.started("B")
    turns.refused("A", 1.0)
    turns.ended("B", 2.0)
    assert turns.holder("B", 6.9) == 1
    assert turns.holder("B", 7.0) == 0  # A never came back
    turns.started("B")
    turns.ended("B", 8.0)
    assert turns.holder("B", 8.1) == 0


def test_waiting_is_remembered_for_a_while_and_for_a_bounded_number_of_addresses():
    turns = Turns(hold=5.0, remember=30.0, most=3)
    turns.started("B")
    turns.refused("A", 0.0)
    turns.ended("B", 31.0)  # A was told busy too long ago
    assert turns.holder("B", 31.1) == 0
    for n in range(10):
        turns.refused(f"10.0.0.{n}", 40.0 + n)
    assert list(turns.waiting) == ["10.0.0.7", "10.0.0.8", "10.0.0.9"]


@pytest.mark.parametrize(("peer", "host"), [("10.0.0.1:5202", "10.0.0.1"),
                                            ("[::1]:40000", "::1"),
                                            ("[fe80::1%eth0]:1", "fe80::1%eth0")])
def test_address_of_a_peer(peer, host):
    assert address_of(peer) == host


# --- on loopback ------------------------------------------------------------------------

HOSTILE = "127.0.0.2"


def hostile(port: int, stop: threading.Event, sessions: list[float]) -> None:
    """Take the server whenever it can be taken: a valid hello, then hold the session
    until the server ends it (no data connection: the handshake timeout), then at once
    again; told busy, ask again 20 times a second."""
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5,
                                          source_address=(HOSTILE, 0)) as sock:
                protocol.send_message(sock, hello())
                reply = protocol.recv_message(sock)
                if reply["op"] == "welcome":
                    sessions.append(time.monotonic())
                    sock.settimeout(10)
                    protocol.recv_message(sock)  # the server's error when it gives up
                    continue
        except (OSError, protocol.ProtocolError):
            pass
        stop.wait(0.05)


def real_run(port: int) -> bool:
    """One short session of the real client (from 127.0.0.1): True if it ran, False if
    the server was busy."""
    client = engines.get("tcp")(engines.Peer("127.0.0.1", port),
                                {"mode": "pingpong", "max_size": 1024}, timeout=5)
    try:
        client.connect()
    except Exception as exc:  # noqa: BLE001 - the busy refusal, said as a PeerError
        if "busy" in str(exc):
            return False
        raise
    try:
        client.trial(64, 100, _core.Pool(1024), 0)
    finally:
        client.close()
    return True


def runs_beside(port: int, runs: int, deadline: float) -> tuple[int, list[float]]:
    """The real client's ``runs`` sessions, each tried every 0.2 s until it runs, 0.3 s
    apart (a user's loop): how many tries it took, and when each run started."""
    tries, started = 0, []
    while len(started) < runs and time.monotonic() < deadline:
        tries += 1
        at = time.monotonic()
        if real_run(port):
            started.append(at)
            time.sleep(0.3)
        else:
            time.sleep(0.2)
    return tries, started


@contextlib.contextmanager
def hostile_beside(port: int) -> Iterator[list[float]]:
    """The hostile client running on its thread, once it holds its first session: the
    start times of its sessions; stopped (and joined) when the block ends."""
    stop, sessions = threading.Event(), []
    thread = threading.Thread(target=hostile, args=(port, stop, sessions), daemon=True)
    thread.start()
    try:
        while not sessions:
            time.sleep(0.01)
        yield sessions
    finally:
        stop.set()
        thread.join(15)


def test_a_client_that_retakes_the_server_at_once_does_not_keep_another_out():
    """The hostile client holds the server for a handshake timeout (1 s) at a time and
    asks again at once; the real client's five runs each start within one hostile
    session and one hold of the turn, and take turns with the hostile one's sessions."""
    timeout = 1.0
    with running_server(handshake_timeout=timeout) as srv:
        srv.server.turns = Turns(hold=2.0)
        with hostile_beside(srv.port) as sessions:
            began = time.monotonic()
            tries, started = runs_beside(srv.port, 5, began + 60)
    assert len(started) == 5, (tries, len(sessions))
    gaps = [b - a for a, b in zip([began, *started], started, strict=False)]
    # each run waits for at most the hostile session under way and one of its turns
    assert max(gaps) < 2 * timeout + 2.0 + 1.0, gaps
    # the hostile client got its turns too: the server is shared, not taken from it
    assert sum(began <= t <= started[-1] for t in sessions) >= 3


def test_without_turns_the_same_client_keeps_the_real_one_out():
    """The same abuse with the turns off (a hold of 0): the real client gets in only by
    chance, far less often than in the test above (the defect, measured)."""
    with running_server(handshake_timeout=1.0) as srv:
        srv.server.turns = Turns(hold=0.0)
        with hostile_beside(srv.port):
            tries, started = runs_beside(srv.port, 5, time.monotonic() + 8)
    assert len(started) < 5 and tries > 5 * len(started), (tries, len(started))


def test_a_lone_client_back_to_back_is_never_told_busy_after_another_gave_up():
    """After a hostile client leaves, the real client alone runs session after session:
    at most one held turn (the one the departed client let lapse) refuses it, and then
    none."""
    with running_server(handshake_timeout=1.0) as srv:
        srv.server.turns = Turns(hold=1.0)
        with hostile_beside(srv.port):
            assert runs_beside(srv.port, 1, time.monotonic() + 30)[1]
        time.sleep(1.5)  # the turn kept for the departed client lapses
        assert all(real_run(srv.port) for _ in range(10))

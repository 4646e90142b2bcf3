"""The C core (beoperf._core) over real sockets: pools, patterns and the timed loops."""

from __future__ import annotations

import contextlib
import errno
import gc
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from beoperf import _core
from beoperf.engines.tcp_data import set_io_timeout

IO_TIMEOUT = 5.0  # seconds; only reached if something is broken


class Peer(threading.Thread):
    """Runs one end of a loop in a thread and hands back its result or exception."""

    def __init__(self, fn, *args, **kwargs) -> None:
        super().__init__(daemon=True)
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.result = None
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.result = self.fn(*self.args, **self.kwargs)
        except BaseException as exc:
            self.error = exc

    def value(self, timeout: float = 2 * IO_TIMEOUT):
        self.join(timeout)
        assert not self.is_alive(), "peer thread did not finish"
        if self.error is not None:
            raise self.error
        return self.result


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    set_io_timeout(a, IO_TIMEOUT)
    set_io_timeout(b, IO_TIMEOUT)
    yield a, b
    a.close()
    b.close()


def samples_of(result) -> np.ndarray:
    samples, _, _ = result
    return np.frombuffer(samples, dtype=np.uint64)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


# --- pools ---------------------------------------------------------------------------------

def test_pool_default_is_a_send_and_a_receive_buffer():
    pool = _core.Pool(100)
    assert (pool.size, pool.slots, pool.total) == (100, 2, 128 + 100)
    assert pool.message(0) == bytes(100)  # pre-faulted with zeros
    assert pool.message(12344) == pool.message(0)


def test_pool_span_gives_many_slots():
    pool = _core.Pool(100, 10_000)
    stride = 128  # 100 rounded up to 64 bytes
    assert pool.size == 100
    assert pool.slots == (10_000 - 100) // stride + 1 == 78
    assert pool.total == (pool.slots - 1) * stride + 100
    assert pool.slots > 1
    assert len(pool.message(77)) == 100


@pytest.mark.parametrize("size, span, slots", [(1, 640, 10), (64, 64, 2), (64, 128, 2),
                                               (100, 50, 2), (4096, 3 * 4096, 3)])
def test_pool_slot_counts(size, span, slots):
    pool = _core.Pool(size, span=span)
    assert pool.slots == slots  # never fewer than two
    assert pool.total <= max(span, size + (size + 63) // 64 * 64)


@pytest.mark.parametrize("args", [(0,), (-1,), (1, -1)])
def test_pool_rejects_bad_sizes(args):
    with pytest.raises(ValueError):
        _core.Pool(*args)


def test_pool_message_index_must_be_unsigned():
    with pytest.raises(OverflowError):
        _core.Pool(8).message(-1)


def test_pool_message_offsets_are_distinct(pair):
    """Stream `slots` patterned messages into a spanning pool: each lands in its own slot."""
    a, b = pair
    size, seq0 = 100, 1000
    send_pool, recv_pool = _core.Pool(size, 1000), _core.Pool(size, 1000)
    slots = recv_pool.slots
    assert slots == 8
    receiver = Peer(_core.run, "stream-recv", b.fileno(), recv_pool, slots, integrity=True,
                    seq0=seq0, timed=False)
    _, _, corrupt_sent = _core.run("stream-send", a.fileno(), send_pool, slots, integrity=True,
                                   seq0=seq0, timed=False)
    _, _, corrupt = receiver.value()
    assert corrupt == corrupt_sent == 0
    messages = [recv_pool.message(i) for i in range(slots)]
    for i, msg in enumerate(messages):
        assert msg == _core.pattern(size, seq0 + i), f"slot {i} was overwritten"
    assert len(set(messages)) == slots
    assert recv_pool.message(slots) == messages[0]  # indices wrap around the span
    assert [send_pool.message(i) for i in range(slots)] == messages


def test_uninitialised_pool_does_not_crash_the_interpreter():
    """Pool.__new__ without __init__ must not divide by zero slots in C (SIGFPE)."""
    code = ("from beoperf import _core\n"
            "p = _core.Pool.__new__(_core.Pool)\n"
            "try:\n"
            "    p.message(0)\n"
            "except Exception:\n"
            "    pass\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert proc.returncode == 0, f"interpreter died with {proc.returncode}: {proc.stderr!r}"


# --- integrity pattern ---------------------------------------------------------------------

@pytest.mark.parametrize("n", range(18))
def test_pattern_verifies_and_tail(n):
    data = _core.pattern(n, 7)
    assert isinstance(data, bytes) and len(data) == n
    assert _core.verify(data, 7) is True
    assert _core.verify(bytearray(data), 7) is True
    for i in range(n):  # every byte counts, including the tail after the last full word
        flipped = bytearray(data)
        flipped[i] ^= 0x01
        assert _core.verify(bytes(flipped), 7) is False, (n, i)


@pytest.mark.parametrize("n", range(1, 18))
def test_pattern_depends_on_seq(n):
    assert _core.verify(_core.pattern(n, 7), 8) is False
    assert _core.pattern(n, 7) != _core.pattern(n, 8)


def test_pattern_is_deterministic_and_prefix_consistent():
    assert _core.pattern(1000, 42) == _core.pattern(1000, 42)
    long = _core.pattern(1000, 42)
    for n in (0, 1, 7, 8, 9, 999):
        assert _core.pattern(n, 42) == long[:n]
    assert _core.verify(b"", 12345) is True
    assert len(set(long[i:i + 8] for i in range(0, 1000, 8))) > 100  # not a constant fill
    assert _core.pattern(16, 2**64 - 1) != _core.pattern(16, 0)


def test_pattern_rejects_negative_length():
    with pytest.raises(ValueError):
        _core.pattern(-1, 0)


def test_clock():
    t0 = _core.now_ns()
    t1 = _core.now_ns()
    assert isinstance(t0, int) and t1 >= t0
    assert abs(_core.now_ns() - time.monotonic_ns()) < 10**9  # both CLOCK_MONOTONIC
    for rounds in (100, 1, 0, -5):
        overhead = _core.clock_overhead_ns(rounds)
        assert isinstance(overhead, int) and overhead >= 0


# --- ping-pong -----------------------------------------------------------------------------

def test_pingpong(pair):
    a, b = pair
    reps, size = 50, 1024
    server = Peer(_core.run, "pingpong-server", b.fileno(), _core.Pool(size), reps, timed=False)
    result = _core.run("pingpong-client", a.fileno(), _core.Pool(size), reps)
    samples, elapsed, corrupt = result
    assert isinstance(samples, bytes) and len(samples) == reps * 8
    values = samples_of(result)
    assert values.shape == (reps,)
    assert (values > 0).all()
    assert elapsed > 0 and corrupt == 0
    srv_samples, srv_elapsed, srv_corrupt = server.value()
    assert srv_samples is None and srv_elapsed > 0 and srv_corrupt == 0


@pytest.mark.parametrize("size", [1, 7, 8, 9, 4096, 300_000])
def test_pingpong_integrity_clean(pair, size):
    a, b = pair
    reps = 5
    server = Peer(_core.run, "pingpong-server", b.fileno(), _core.Pool(size), reps,
                  integrity=True, seq0=77, timed=False)
    result = _core.run("pingpong-client", a.fileno(), _core.Pool(size), reps, integrity=True,
                       seq0=77)
    assert result[2] == 0
    assert (samples_of(result) > 0).all()
    assert server.value()[2] == 0


def test_pingpong_injected_corruption_counted_once_per_trial(pair):
    a, b = pair
    reps, size, trials = 5, 1000, 3
    client_pool, server_pool = _core.Pool(size), _core.Pool(size)
    for trial in range(trials):
        seq0 = trial * reps
        server = Peer(_core.run, "pingpong-server", b.fileno(), server_pool, reps,
                      integrity=True, seq0=seq0, inject_corrupt=2, timed=False)
        result = _core.run("pingpong-client", a.fileno(), client_pool, reps, integrity=True,
                           seq0=seq0)
        assert result[2] == 1, f"trial {trial}"
        assert server.value()[2] == 0  # what the server received was intact
        assert len(samples_of(result)) == reps


def test_pingpong_inject_beyond_reps_is_harmless(pair):
    a, b = pair
    server = Peer(_core.run, "pingpong-server", b.fileno(), _core.Pool(64), 3, integrity=True,
                  inject_corrupt=3, timed=False)
    assert _core.run("pingpong-client", a.fileno(), _core.Pool(64), 3, integrity=True)[2] == 0
    assert server.value()[2] == 0


def test_pingpong_sequence_mismatch_detected_by_server(pair):
    a, b = pair
    reps = 4
    server = Peer(_core.run, "pingpong-server", b.fileno(), _core.Pool(256), reps,
                  integrity=True, seq0=100, timed=False)
    client = _core.run("pingpong-client", a.fileno(), _core.Pool(256), reps, integrity=True,
                       seq0=0)
    assert server.value()[2] == reps
    assert client[2] == 0  # the echo is what the client sent


def test_pingpong_untimed_client_returns_no_samples(pair):
    a, b = pair
    server = Peer(_core.run, "pingpong-server", b.fileno(), _core.Pool(16), 3, timed=False)
    samples, elapsed, corrupt = _core.run("pingpong-client", a.fileno(), _core.Pool(16), 3,
                                          timed=False)
    assert samples is None and elapsed > 0 and corrupt == 0
    server.value()


def test_pingpong_with_spanning_pool(pair):
    a, b = pair
    reps, size = 20, 512
    server = Peer(_core.run, "pingpong-server", b.fileno(), _core.Pool(size, 64 * 1024), reps,
                  integrity=True, timed=False)
    result = _core.run("pingpong-client", a.fileno(), _core.Pool(size, 64 * 1024), reps,
                       integrity=True)
    assert result[2] == 0 and server.value()[2] == 0


# --- streaming -----------------------------------------------------------------------------

def test_stream_pair(pair):
    a, b = pair
    reps, size = 20, 65536
    receiver = Peer(_core.run, "stream-recv", b.fileno(), _core.Pool(size), reps,
                    integrity=True, seq0=5, timed=False)
    sent = _core.run("stream-send", a.fileno(), _core.Pool(size), reps, integrity=True, seq0=5,
                     timed=False)
    samples, elapsed, corrupt = receiver.value()
    assert samples is None and elapsed > 0 and corrupt == 0
    assert sent[0] is None and sent[1] > 0 and sent[2] == 0


def test_stream_injected_corruption(pair):
    a, b = pair
    reps, size = 10, 4096
    receiver = Peer(_core.run, "stream-recv", b.fileno(), _core.Pool(size), reps,
                    integrity=True, timed=False)
    _core.run("stream-send", a.fileno(), _core.Pool(size), reps, integrity=True,
              inject_corrupt=3, timed=False)
    assert receiver.value()[2] == 1


def test_stream_recv_sends_go_byte_first(pair):
    a, b = pair
    size, reps = 32, 2
    receiver = Peer(_core.run, "stream-recv", b.fileno(), _core.Pool(size), reps,
                    integrity=True, timed=False)
    assert recv_exact(a, 1) == b"G"
    a.sendall(_core.pattern(size, 0) + _core.pattern(size, 1))
    assert receiver.value()[2] == 0


# --- bidirectional -------------------------------------------------------------------------

def test_bidir_larger_than_socket_buffers(pair):
    a, b = pair
    size, reps = 4 * 1024 * 1024, 2
    buffers = sum(s.getsockopt(socket.SOL_SOCKET, opt) for s in (a, b)
                  for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF))
    assert size > buffers, "the message must not fit in the socket buffers"
    other = Peer(_core.run, "bidir", b.fileno(), _core.Pool(size), reps, integrity=True,
                 timeout_ms=int(IO_TIMEOUT * 1000))
    mine = _core.run("bidir", a.fileno(), _core.Pool(size), reps, integrity=True,
                     timeout_ms=int(IO_TIMEOUT * 1000))
    theirs = other.value()
    for result in (mine, theirs):
        assert result[2] == 0
        assert (samples_of(result) > 0).all() and len(samples_of(result)) == reps
        assert result[1] > 0


def test_bidir_small_messages(pair):
    a, b = pair
    other = Peer(_core.run, "bidir", b.fileno(), _core.Pool(8), 100, integrity=True,
                 timed=False)
    mine = _core.run("bidir", a.fileno(), _core.Pool(8), 100, integrity=True)
    assert mine[2] == 0 and other.value() == (None, other.result[1], 0)


def test_bidir_sends_its_own_message_with_the_default_pool(pair):
    """The default pool (as make_pool builds without nocache) keeps `out` and `in` apart:
    the incoming message must not overwrite the outgoing one before it is sent."""
    a, b = pair
    size = 4 * 1024 * 1024
    pool = _core.Pool(size)
    assert pool.slots == 2
    other = Peer(_core.run, "bidir", b.fileno(), pool, 1, integrity=True, seq0=0,
                 timeout_ms=int(IO_TIMEOUT * 1000))
    a.sendall(_core.pattern(size, 99))  # all of ours first, reading nothing until sent
    echoed = recv_exact(a, size)
    assert other.value()[2] == 1  # we sent another sequence number: counted as corrupt
    assert len(echoed) == size
    own_pattern = _core.verify(echoed, 0)
    assert own_pattern, "bidir sent bytes it had received instead of its pattern"


# --- each sample is one message's own time ------------------------------------------------
#
# A timed loop reads the clock before and after each message: its samples are disjoint
# pieces of the trial, so they add up to at most the trial's elapsed time, and to at least
# that less what the loop does between two messages (a clock read and some bookkeeping,
# per message).  A loop that reported each sample as the time since the trial started
# would sum to about reps/2 times the trial; one that timed only the send, far less.

GAP_SLACK_NS = 500  # per message beyond two clock reads (bookkeeping: about 30 ns here)


def sum_bounds(reps: int) -> tuple[int, int]:
    """(lowest, highest) sum of the samples of a trial, less its elapsed time."""
    overhead = _core.clock_overhead_ns(1000)
    return -(reps + 1) * (2 * overhead + GAP_SLACK_NS), reps  # interval() rounds 0 up to 1


def delayed_echo(sock: socket.socket, size: int, delays: list[float]) -> None:
    """Echo each of len(delays) messages after sleeping its delay."""
    for delay in delays:
        message = recv_exact(sock, size)
        time.sleep(delay)
        sock.sendall(message)


def timed_trial(pair, role: str, reps: int, size: int, delays: list[float] | None):
    a, b = pair
    if role == "bidir":
        peer = Peer(_core.run, "bidir", b.fileno(), _core.Pool(size), reps, timed=False)
    elif delays is not None:
        peer = Peer(delayed_echo, b, size, delays)
    else:
        peer = Peer(_core.run, "pingpong-server", b.fileno(), _core.Pool(size), reps,
                    timed=False)
    result = _core.run(role, a.fileno(), _core.Pool(size), reps)
    peer.value()
    return samples_of(result).astype(np.int64), result[1]


def test_samples_are_each_messages_own_time_and_follow_the_peer(pair):
    """A peer that holds some messages back: each sample covers its own message's wait
    (and not an earlier one's), and the samples add up to the trial."""
    delays = [0.0, 0.004, 0.0, 0.002, 0.006, 0.0, 0.003, 0.0]
    low, high = sum_bounds(len(delays))
    for _attempt in range(3):  # a preemption between two messages may widen one gap
        samples, elapsed = timed_trial(pair, "pingpong-client", len(delays), 64, delays)
        assert samples.sum() - elapsed <= high, (samples, elapsed)
        assert all(s >= d * 1e9 for s, d in zip(samples, delays, strict=True)), samples
        assert samples.max() <= elapsed
        if samples.sum() - elapsed >= low:
            return
    pytest.fail(f"samples sum to {samples.sum()} ns of a trial of {elapsed} ns "
                f"(at least {elapsed + low} expected)")


@pytest.mark.parametrize("role, reps, size", [("pingpong-client", 2000, 64),
                                              ("pingpong-client", 20, 1 << 20),
                                              ("bidir", 1000, 64), ("bidir", 10, 1 << 20)])
def test_samples_add_up_to_the_elapsed_time(pair, role, reps, size):
    low, high = sum_bounds(reps)
    for _attempt in range(3):
        samples, elapsed = timed_trial(pair, role, reps, size, None)
        gap = int(samples.sum()) - elapsed
        assert gap <= high and (samples > 0).all(), (gap, elapsed)
        if gap >= low:
            return
    pytest.fail(f"{role}: samples sum to {elapsed + gap} ns of a trial of {elapsed} ns "
                f"(at least {elapsed + low} expected)")


# --- failures ------------------------------------------------------------------------------

def test_peer_closed_error_is_a_connection_error():
    assert issubclass(_core.PeerClosedError, ConnectionError)


def test_client_peer_closes_mid_reply(pair):
    a, b = pair
    size = 1000

    def half_echo_then_close():
        data = recv_exact(b, size)
        b.sendall(data[: size // 2])
        b.shutdown(socket.SHUT_RDWR)

    peer = Peer(half_echo_then_close)
    with pytest.raises(_core.PeerClosedError):
        _core.run("pingpong-client", a.fileno(), _core.Pool(size), 3)
    peer.value()


def test_server_peer_closes_mid_message(pair):
    a, b = pair
    b.sendall(b"x" * 500)
    b.close()
    with pytest.raises(_core.PeerClosedError) as info:
        _core.run("pingpong-server", a.fileno(), _core.Pool(1000), 1)
    assert isinstance(info.value, ConnectionError)


def test_stream_recv_peer_closes(pair):
    a, b = pair
    b.sendall(b"y" * 100)
    b.shutdown(socket.SHUT_WR)
    with pytest.raises(_core.PeerClosedError):
        _core.run("stream-recv", a.fileno(), _core.Pool(64), 3, timed=False)


def test_bidir_peer_closes_mid_message(pair):
    a, b = pair
    b.sendall(b"z" * 500)
    b.close()
    with pytest.raises(ConnectionError):
        _core.run("bidir", a.fileno(), _core.Pool(1000), 1, timeout_ms=2000)


def test_silent_peer_times_out_on_recv(pair):
    a, b = pair
    set_io_timeout(a, 0.2)
    with pytest.raises(TimeoutError):
        _core.run("pingpong-client", a.fileno(), _core.Pool(64), 1)


def test_silent_peer_times_out_on_send(pair):
    a, b = pair
    set_io_timeout(a, 0.2)
    with pytest.raises(TimeoutError):  # 4 MiB cannot fit in the buffers of a reader-less peer
        _core.run("pingpong-client", a.fileno(), _core.Pool(4 * 1024 * 1024), 1)


def test_silent_peer_times_out_stream_send(pair):
    a, b = pair
    set_io_timeout(a, 0.2)
    with pytest.raises(TimeoutError):  # the go byte never comes
        _core.run("stream-send", a.fileno(), _core.Pool(64), 1, timed=False)


def test_silent_peer_times_out_bidir(pair):
    a, b = pair
    with pytest.raises(TimeoutError):
        _core.run("bidir", a.fileno(), _core.Pool(64), 1, timeout_ms=200)


def trickler(sock: socket.socket, step: float, chunk: int = 1) -> tuple[Peer, threading.Event]:
    """A peer that sends `chunk` bytes every `step` s until told to stop (or 10 s)."""
    stop = threading.Event()

    def trickle():
        end = time.monotonic() + 10
        with contextlib.suppress(OSError):
            while not stop.wait(step) and time.monotonic() < end:
                sock.sendall(b"t" * chunk)

    return Peer(trickle), stop


@pytest.mark.parametrize("role", ["pingpong-server", "bidir"])
def test_trickling_peer_times_out(pair, role):
    """A byte every third of the timeout used to keep a loop waiting for ever (each wait
    saw progress); the timeout now bounds the progress, so the loop gives up after about
    two timeouts, long before the trickle ends (the old loop saw the peer close)."""
    a, b = pair
    set_io_timeout(a, 0.3)
    peer, stop = trickler(b, 0.1)
    started = time.monotonic()
    try:
        with pytest.raises(TimeoutError):
            _core.run(role, a.fileno(), _core.Pool(1000), 1, timeout_ms=300, timed=False)
        assert time.monotonic() - started < 2.0  # the trickle would take 100 s
    finally:
        stop.set()
        peer.value()


def test_slow_but_steady_transfer_is_not_cut(pair):
    """64 KiB per timeout is enough: a 1 MiB message trickling in 32 KiB every tenth
    of the 0.3 s timeout arrives whole, though no single wait sees all of it."""
    a, b = pair
    set_io_timeout(a, 0.3)
    size = 1 << 20
    peer, stop = trickler(b, 0.1, chunk=32 * 1024)
    started = time.monotonic()
    try:
        _core.run("stream-recv", a.fileno(), _core.Pool(size), 1, timeout_ms=300, timed=False)
        assert time.monotonic() - started > 3 * 0.3  # it did take many timeouts
    finally:
        stop.set()
        peer.value()


@pytest.mark.parametrize("reps", [0, 2**27 + 1])
def test_reps_out_of_range(pair, reps):
    a, _ = pair
    with pytest.raises(ValueError, match="reps"):
        _core.run("pingpong-client", a.fileno(), _core.Pool(8), reps)


def test_negative_reps_rejected(pair):
    a, _ = pair
    with pytest.raises((ValueError, OverflowError)):
        _core.run("pingpong-client", a.fileno(), _core.Pool(8), -1)


@pytest.mark.parametrize("role", ["", "pingpong", "PINGPONG-CLIENT", "stream", "bidir "])
def test_unknown_role(pair, role):
    a, _ = pair
    with pytest.raises(ValueError, match="unknown loop role"):
        _core.run(role, a.fileno(), _core.Pool(8), 1)


def test_pool_argument_must_be_a_pool(pair):
    a, _ = pair
    with pytest.raises(TypeError):
        _core.run("pingpong-client", a.fileno(), b"not a pool", 1)


def test_not_a_socket(tmp_path):
    with open(tmp_path / "file", "wb") as f:
        with pytest.raises(OSError) as info:
            _core.run("pingpong-client", f.fileno(), _core.Pool(8), 1)
    assert info.value.errno == errno.ENOTSOCK
    assert not isinstance(info.value, (TimeoutError, ConnectionError))


def test_a_pool_cannot_be_initialised_twice():
    """Re-initialising would free memory a loop may be using (GIL released)."""
    pool = _core.Pool(4096)
    with pytest.raises(RuntimeError, match="twice"):
        pool.__init__(16)
    assert pool.size == 4096


# --- the buffer protocol: other code reads and writes the memory the loops use -----------

def test_pool_is_a_read_write_buffer_of_its_whole_allocation():
    pool = _core.Pool(100, 1000)
    view = memoryview(pool)
    assert (view.format, view.itemsize, view.ndim, view.readonly) == ("B", 1, 1, False)
    assert len(view) == view.nbytes == len(pool) == pool.total
    assert view.obj is pool
    for i in range(pool.slots + 2):
        assert pool.offset(i) == (i % pool.slots) * pool.stride
        start = pool.offset(i)
        view[start:start + pool.size] = _core.pattern(pool.size, i % pool.slots)
        assert pool.message(i) == bytes(view[start:start + pool.size])


def test_what_is_written_through_a_view_is_what_the_loop_sends(pair):
    a, b = pair
    pool = _core.Pool(100, 1000)
    view = memoryview(pool)
    sent = [_core.pattern(pool.size, 500 + i) for i in range(pool.slots)]
    for i, message in enumerate(sent):
        view[pool.offset(i):pool.offset(i) + pool.size] = message
    sender = Peer(_core.run, "stream-send", a.fileno(), pool, pool.slots, timed=False)
    b.sendall(b"G")  # the receiver's go
    got = recv_exact(b, pool.slots * pool.size)
    sender.value()
    assert [got[i * pool.size:(i + 1) * pool.size] for i in range(pool.slots)] == sent


def test_what_the_loop_receives_is_read_through_a_view_and_numpy(pair):
    """Ping-pong client: it sends message 0 and receives into message 1 of its pool."""
    a, b = pair
    pool = _core.Pool(64)
    view, array = memoryview(pool), np.frombuffer(pool, dtype=np.uint8)
    assert array.shape == (pool.total,) and array.flags.writeable
    array[pool.offset(0):pool.offset(0) + 64] = np.frombuffer(_core.pattern(64, 1), np.uint8)

    def answer():
        request = recv_exact(b, 64)
        b.sendall(_core.pattern(64, 99))
        return request

    server = Peer(answer)
    _core.run("pingpong-client", a.fileno(), pool, 1)
    assert server.value() == _core.pattern(64, 1)  # numpy's write is what went out
    received = slice(pool.offset(1), pool.offset(1) + 64)
    assert bytes(view[received]) == array[received].tobytes() == _core.pattern(64, 99)


def test_a_pool_with_live_views_cannot_be_reinitialised():
    pool = _core.Pool(4096)
    view = memoryview(pool)
    array = np.frombuffer(pool, dtype=np.uint8)
    assert pool.exports == 2
    with pytest.raises(BufferError, match="live buffer views"):
        pool.__init__(16)
    assert pool.size == 4096 and len(view) == len(array) == pool.total
    view.release()
    del array
    assert pool.exports == 0
    with pytest.raises(RuntimeError, match="twice"):  # and still never twice
        pool.__init__(16)


def test_a_view_keeps_its_pool_and_memory_alive():
    view = memoryview(_core.Pool(4096))
    gc.collect()
    view[-1] = 5
    assert view.obj.total == len(view) and view.obj.message(1)[-1] == 5
    assert view.obj.exports == 1


def test_an_uninitialised_pool_exports_nothing():
    pool = _core.Pool.__new__(_core.Pool)
    with pytest.raises(BufferError, match="not initialised"):
        memoryview(pool)
    assert len(pool) == 0 and pool.exports == 0

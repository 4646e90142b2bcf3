"""The control protocol: frames, their validation, and reading them off a socket."""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beoperf.engines import protocol
from beoperf.engines.protocol import (
    HEADER,
    MAGIC,
    MAX_PAYLOAD,
    PROTOCOL_VERSION,
    PeerGone,
    PeerRefused,
    ProtocolError,
    VersionMismatch,
    decode,
    decode_header,
    decode_payload,
    encode,
    expect,
    recv_message,
    send_message,
)


def frame(payload: bytes, *, magic: bytes = MAGIC, version: int = PROTOCOL_VERSION,
          length: int | None = None) -> bytes:
    return HEADER.pack(magic, version, len(payload) if length is None else length) + payload


# --- encode / decode ---------------------------------------------------------------------

def test_header_layout_is_frozen():
    assert HEADER.size == 10
    assert MAGIC == b"BEOP"
    data = encode({"op": "hello"})
    assert data[:4] == b"BEOP"
    assert struct.unpack(">H", data[4:6])[0] == PROTOCOL_VERSION
    assert struct.unpack(">I", data[6:10])[0] == len(data) - 10
    assert json.loads(data[10:]) == {"op": "hello"}


@pytest.mark.parametrize("message", [
    {"op": "hello"},
    {"op": "run", "size": 8388611, "reps": 1 << 24, "seq0": 2**63},
    {"op": "welcome", "server": {"host": "beta", "cpus": [0, 1], "x": None, "f": 1.5},
     "token": "abc"},
    {"op": "error", "reason": "caf\u00e9 \u2603 \U0001f600", "code": "busy"},
    {"op": ""},
])
def test_round_trip(message):
    data = encode(message)
    assert decode(data) == message
    assert decode_header(data[:HEADER.size]) == (PROTOCOL_VERSION, len(data) - HEADER.size)
    assert decode_payload(data[HEADER.size:]) == message


def test_encode_rejects_oversize():
    with pytest.raises(ValueError, match="exceeds"):
        encode({"op": "x", "pad": "a" * MAX_PAYLOAD})


def test_encode_at_the_limit():
    base = len(json.dumps({"op": "x", "pad": ""}, separators=(",", ":")))
    message = {"op": "x", "pad": "a" * (MAX_PAYLOAD - base)}
    data = encode(message)
    assert len(data) == HEADER.size + MAX_PAYLOAD
    assert decode(data) == message


def test_decode_header_rejects_bad_magic():
    with pytest.raises(ProtocolError, match="bad magic"):
        decode_header(HEADER.pack(b"HTTP", 1, 2))
    with pytest.raises(ProtocolError, match="bad magic"):
        decode(b"GET / HTTP/1.1\r\n\r\n")


@pytest.mark.parametrize("n", [0, 1, 4, 9])
def test_decode_header_rejects_truncated(n):
    with pytest.raises(ProtocolError, match="truncated"):
        decode_header(encode({"op": "x"})[:n])
    with pytest.raises(ProtocolError, match="truncated"):
        decode(encode({"op": "x"})[:n])


def test_decode_header_rejects_too_long_input():
    with pytest.raises(ProtocolError):
        decode_header(encode({"op": "x"})[:11])


@pytest.mark.parametrize("length", [MAX_PAYLOAD + 1, 2**32 - 1])
def test_decode_header_rejects_oversize(length):
    with pytest.raises(ProtocolError, match="exceeds"):
        decode_header(HEADER.pack(MAGIC, PROTOCOL_VERSION, length))


def test_decode_header_accepts_other_versions():
    # the header is frozen: any version is readable so that a mismatch can be reported
    assert decode_header(HEADER.pack(MAGIC, 7, 5)) == (7, 5)
    assert decode_header(HEADER.pack(MAGIC, 0, MAX_PAYLOAD)) == (0, MAX_PAYLOAD)


@pytest.mark.parametrize("payload", [b"not json", b"{", b"\xff\xfe", b"", b"{'op': 'x'}",
                                     b"[" * 30_000 + b"]" * 30_000])
def test_decode_rejects_non_json(payload):
    with pytest.raises(ProtocolError, match="not JSON"):
        decode(frame(payload))


@pytest.mark.parametrize("payload", [b"[]", b'["op"]', b'"op"', b"1", b"null", b"true"])
def test_decode_rejects_json_non_object(payload):
    with pytest.raises(ProtocolError, match="'op' string"):
        decode(frame(payload))


@pytest.mark.parametrize("payload", [b"{}", b'{"opp": "x"}', b'{"op": 1}', b'{"op": null}',
                                     b'{"op": ["x"]}', b'{"OP": "x"}'])
def test_decode_rejects_object_without_op(payload):
    with pytest.raises(ProtocolError, match="'op' string"):
        decode(frame(payload))


@pytest.mark.parametrize("delta", [-1, 1, 100])
def test_decode_rejects_length_mismatch(delta):
    payload = b'{"op":"x"}'
    with pytest.raises(ProtocolError, match="header says"):
        decode(frame(payload, length=len(payload) + delta))
    with pytest.raises(ProtocolError, match="header says"):
        decode(encode({"op": "x"}) + b" ")


def test_version_mismatch():
    message = {"op": "hello", "beoperf": "9.0"}
    data = encode(message, version=PROTOCOL_VERSION + 1)
    with pytest.raises(VersionMismatch) as info:
        decode(data)
    err = info.value
    assert isinstance(err, ProtocolError)
    assert err.version == PROTOCOL_VERSION + 1
    assert err.message == message
    assert f"version {PROTOCOL_VERSION + 1}" in str(err)
    assert str(PROTOCOL_VERSION) in str(err)


def test_version_mismatch_defaults():
    err = VersionMismatch(0)
    assert err.version == 0 and err.message == {}


def test_version_mismatch_with_invalid_payload_is_a_plain_protocol_error():
    with pytest.raises(ProtocolError) as info:
        decode(frame(b"junk", version=PROTOCOL_VERSION + 1))
    assert not isinstance(info.value, VersionMismatch)


def test_expect():
    assert expect({"op": "done", "x": 1}, "done") == {"op": "done", "x": 1}
    with pytest.raises(PeerRefused) as info:
        expect({"op": "refuse", "reason": "busy", "code": "busy"}, "welcome")
    assert info.value.reason == "busy" and info.value.code == "busy"
    with pytest.raises(PeerRefused) as info:
        expect({"op": "error"}, "welcome")
    assert info.value.code == "error" and info.value.reason == "no reason given"
    with pytest.raises(ProtocolError, match="expected 'done'"):
        expect({"op": "welcome"}, "done")


# --- robustness: decode never raises anything but ProtocolError --------------------------

def _decode_outcome(data: bytes) -> None:
    try:
        message = decode(data)
    except ProtocolError:
        return
    assert isinstance(message, dict)
    assert isinstance(message["op"], str)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200))
def test_decode_arbitrary_bytes(data):
    _decode_outcome(data)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 3))
def test_decode_valid_header_random_payload(payload, version):
    _decode_outcome(frame(payload, version=version))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(json_values, st.integers(0, 3))
def test_decode_valid_header_random_json(value, version):
    payload = json.dumps(value).encode()
    _decode_outcome(frame(payload, version=version))


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(max_size=8), json_values, max_size=5), st.text(max_size=10))
def test_decode_objects_with_op_round_trip(extra, op):
    message = dict(extra, op=op)
    # compare as JSON text: NaN != NaN as a float, but not as text
    assert json.dumps(decode(encode(message))) == json.dumps(message)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(min_size=4, max_size=4) | st.just(MAGIC), st.integers(0, 2**16 - 1),
       st.integers(0, 2**32 - 1), st.binary(max_size=64))
def test_decode_random_header_fields(magic, version, length, payload):
    _decode_outcome(HEADER.pack(magic, version, length) + payload)


# --- over a socket -------------------------------------------------------------------------

@pytest.fixture
def pair():
    a, b = socket.socketpair()
    a.settimeout(5.0)
    b.settimeout(5.0)
    yield a, b
    a.close()
    b.close()


def test_send_and_recv_message(pair):
    a, b = pair
    send_message(a, {"op": "hello", "n": 1})
    send_message(a, {"op": "bye"})
    assert recv_message(b) == {"op": "hello", "n": 1}
    assert recv_message(b) == {"op": "bye"}


def test_recv_message_one_byte_at_a_time(pair):
    a, b = pair
    message = {"op": "welcome", "token": "t" * 300, "server": {"host": "beta"}}
    data = encode(message)

    def trickle():
        for i in range(len(data)):
            a.sendall(data[i:i + 1])
            if i % 50 == 0:
                time.sleep(0.001)

    sender = threading.Thread(target=trickle)
    sender.start()
    try:
        assert recv_message(b) == message
    finally:
        sender.join(5)


@pytest.mark.parametrize("cut", [0, 3, HEADER.size, HEADER.size + 5])
def test_recv_message_peer_gone_mid_frame(pair, cut):
    a, b = pair
    a.sendall(encode({"op": "hello", "pad": "x" * 20})[:cut])
    a.shutdown(socket.SHUT_WR)
    with pytest.raises(PeerGone):
        recv_message(b)


def test_peer_gone_is_a_connection_error():
    assert issubclass(PeerGone, ConnectionError)
    assert not issubclass(PeerGone, ProtocolError)


def test_recv_message_rejects_oversize_before_reading_payload(pair):
    a, b = pair
    a.sendall(HEADER.pack(MAGIC, PROTOCOL_VERSION, MAX_PAYLOAD + 1))  # and nothing more
    with pytest.raises(ProtocolError, match="exceeds"):
        recv_message(b)


def test_recv_message_rejects_bad_magic(pair):
    a, b = pair
    a.sendall(b"SSH-2.0-OpenSSH\r\n")
    with pytest.raises(ProtocolError, match="bad magic"):
        recv_message(b)


def test_recv_message_version_mismatch(pair):
    a, b = pair
    a.sendall(encode({"op": "hello"}, version=PROTOCOL_VERSION + 1))
    with pytest.raises(VersionMismatch) as info:
        recv_message(b)
    assert info.value.version == PROTOCOL_VERSION + 1
    # the whole frame was consumed: the stream stays in sync
    send_message(a, {"op": "next"})
    assert recv_message(b) == {"op": "next"}


def test_recv_message_timeout(pair):
    a, b = pair
    b.settimeout(0.05)
    a.sendall(encode({"op": "hello"})[:5])
    with pytest.raises(TimeoutError):
        recv_message(b)


def test_module_constants():
    assert protocol.DEFAULT_PORT == 5202
    assert MAX_PAYLOAD == 64 * 1024


def _trickle(sock: socket.socket, data: bytes, step: float) -> threading.Thread:
    def send():
        with contextlib.suppress(OSError):
            for i in range(len(data)):
                sock.sendall(data[i:i + 1])
                time.sleep(step)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


def test_recv_message_deadline_bounds_the_whole_message(pair):
    """A byte every 50 ms never trips a 0.2 s per-read timeout; a deadline trips anyway."""
    a, b = pair
    b.settimeout(0.2)
    _trickle(a, encode({"op": "hello", "pad": "x" * 100}), 0.05)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        recv_message(b, deadline=started + 0.3)
    assert time.monotonic() - started < 0.6  # the whole frame would take 6 s


def test_recv_message_in_pieces_within_the_deadline(pair):
    a, b = pair
    message = {"op": "run", "size": 8}
    _trickle(a, encode(message), 0.005).join(5)
    assert recv_message(b, deadline=time.monotonic() + 5) == message


def test_recv_message_deadline_already_past(pair):
    a, b = pair
    send_message(a, {"op": "x"})
    with pytest.raises(TimeoutError):
        recv_message(b, deadline=time.monotonic() - 1)

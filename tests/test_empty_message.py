"""Empty messages (size 0, the first row of NetPIPE's, IMB's and OSU's tables): measured
on TCP (one byte each way on the wire, engines.tcp_data.wire_size) and over MPI (a count
of 0), and read by every reader of a curve without a division by zero or a point on a
log axis."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from beoperf import model
from beoperf.analysis.curve import analyze
from beoperf.engines.tcp_data import EMPTY_MESSAGE_WIRE_BYTES, wire_size
from beoperf.sweep.schedule import explicit_schedule, netpipe_schedule
from helpers import cli
from mpi_helpers import beoperf, require_mpi, run_bounded
from test_documents import FIXTURES


def test_zero_is_a_size_in_lists_and_schedules():
    assert explicit_schedule("1K,0,1") == [0, 1, 1024]
    assert netpipe_schedule(0, 8, 0) == [0, 1, 2, 3, 4, 6, 8]
    assert netpipe_schedule(1, 8, 0)[0] == 1  # the default sweep is unchanged
    assert wire_size(0) == EMPTY_MESSAGE_WIRE_BYTES == 1 and wire_size(7) == 7


def test_the_analysis_keeps_an_empty_message_for_the_latency_only():
    """A rate of 0 at size 0 is no collapse, no dip, no point of a fit: the peak, the
    slopes and n1/2 are those of the other sizes; the latency may be the empty one's."""
    sizes = [0, 1, 2, 4, 8, 1024, 65536]
    times = [10.0, 10.2, 10.1, 10.3, 10.4, 18.0, 600.0]
    bps = [n * 8 / (t * 1e-6) for n, t in zip(sizes, times, strict=True)]
    a = analyze(sizes, times, [None] * len(sizes), bps)
    without = analyze(sizes[1:], times[1:], [None] * 6, bps[1:])
    assert a.collapses == [] and a.dips == []
    assert (a.peak_bps, a.peak_size, a.n_half) == (without.peak_bps, without.peak_size,
                                                   without.n_half)
    assert a.hockney is not None and a.hockney.first_size == 1
    assert a.slopes[0] is None and a.slopes[1:] == without.slopes
    assert a.latency_size in (0, 1, 2, 4, 8) and a.latency_us <= 10.4
    only = analyze([0], [10.0], [None], [0.0])
    assert (only.latency_size, only.latency_us, only.peak_bps, only.peak_size) == \
        (0, 10.0, 0.0, 0)
    assert only.hockney is None and only.n_half is None


def test_tcp_loopback_measures_an_empty_message_as_a_round_trip():
    """--sizes 0,1,1024 on loopback: the empty message's time is a real round trip (one
    byte each way), its fastest no slower than the 1-byte one's (1.5x for a busy machine)."""
    res = cli("pingpong", "--sizes", "0,1,1024", "--time-budget", "6", "--history", "off",
              "--json")
    assert res.status == 0, res.stderr
    doc = res.json
    assert doc["schema_version"] == model.KINDS["pingpong"].version
    rows = {s["size"]: s for s in doc["body"]["sizes"]}
    assert sorted(rows) == [0, 1, 1024]
    assert rows[0]["time_us"]["median"] > 0
    # the fastest round trips: a median moves with the neighbours of the moment each size
    # ran in (a CI run's busy phase read an MPI empty message's median 3x the 1-byte one's)
    empty, one = rows[0]["time_us"]["min"], rows[1]["time_us"]["min"]
    assert 0 < empty <= 1.5 * one, (empty, one)
    assert rows[0]["throughput_bps"]["from_median"] == 0
    assert rows[0]["samples"] > 0 and rows[0]["corrupt"] == 0
    summary = doc["body"]["summary"]
    assert summary["peak_size"] == 1024 and summary["latency_size"] in (0, 1)


@pytest.mark.parametrize("impl", ["openmpi", "mpich"])
def test_mpi_measures_an_empty_message(impl):
    require_mpi(impl)
    got = run_bounded(beoperf("pingpong", "--transport", "mpi", "--mpi", impl, "--sizes",
                              "0,1", "--time-budget", "2", "--history", "off", "--json"), 90)
    rows = {s["size"]: s for s in got.document()["body"]["sizes"]}
    assert sorted(rows) == [0, 1]
    assert rows[0]["time_us"]["median"] > 0
    empty, one = rows[0]["time_us"]["min"], rows[1]["time_us"]["min"]  # as on TCP above
    assert 0 < empty <= 1.5 * one, (empty, one)
    assert rows[0]["throughput_bps"]["from_median"] == 0


def crafted_with_an_empty_row(tmp_path, name: str = "empty.json"):
    """The version 4 fixture (a loopback run of 1, 64 and 1024 B) with a crafted size-0
    row in front: the 1-byte row's times, no throughput."""
    doc = model.load(FIXTURES / "pingpong-v4-before-issue28.json").to_json()
    row = json.loads(json.dumps(doc["body"]["sizes"][0]))
    row["size"] = 0
    row["throughput_bps"] = {k: 0.0 for k in row["throughput_bps"]}
    doc["body"]["sizes"].insert(0, row)
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_plot_compare_netpipe_text_and_report_read_an_empty_row(tmp_path):
    path = crafted_with_an_empty_row(tmp_path)
    other = crafted_with_an_empty_row(tmp_path, "again.json")
    res = cli("plot", str(path), "-o", str(tmp_path / "plots"))
    assert res.status == 0, res.stderr
    assert len(list((tmp_path / "plots").glob("*.png"))) == 3
    res = cli("compare", str(path), str(other), "--format", "csv")
    assert res.status == 0 and not re.search(r"\b(nan|inf)\b", res.stdout.lower())
    res = cli("compare", str(path), str(other))
    assert res.status == 0, res.stderr
    assert "of 4 sizes" in res.stdout  # the empty message is compared as a time
    from beoperf.model.pingpong import load_json
    from beoperf.report.pingpong import netpipe, text
    run = load_json(path)
    rows = [line.split() for line in netpipe(run).splitlines()]
    assert [int(r[0]) for r in rows] == [0, 1, 64, 1024]
    assert float(rows[0][1]) == 0 and float(rows[0][2]) > 0
    assert all(math.isfinite(float(v)) for r in rows for v in r)
    assert "latency" in text(run) and "peak at 1024 B" in text(run)
    (tmp_path / "dir").mkdir()
    path.rename(tmp_path / "dir" / "empty.json")
    res = cli("report", str(tmp_path / "dir"), "-o", str(tmp_path / "r.html"))
    assert res.status == 0, res.stderr
    html = (tmp_path / "r.html").read_text()
    assert "NaN" not in html and "Infinity" not in html


def test_a_run_of_empty_messages_only_says_it_has_no_throughput(tmp_path):
    path = crafted_with_an_empty_row(tmp_path)
    doc = json.loads(path.read_text())
    doc["body"]["sizes"] = doc["body"]["sizes"][:1]
    path.write_text(json.dumps(doc))
    from beoperf.model.pingpong import load_json
    from beoperf.report.pingpong import text
    out = text(load_json(path))
    assert "one-way at 0 B" in out and "throughput none: empty messages" in out
    assert cli("plot", str(path), "-o", str(tmp_path / "p")).status == 0
    assert not np.isnan(load_json(path).sizes[0].central_time_us())
    res = cli("compare", str(path), str(crafted_with_an_empty_row(tmp_path, "b.json")))
    assert res.status == 1 and res.error_lines == [
        f"beoperf: input error: {path}: empty messages (0 B) only: no throughput to compare; "
        "a run with a size above 0 has a peak"]


def test_a_server_older_than_empty_messages_is_named_in_the_refusal(monkeypatch):
    """A 'beoperf serve' before this change refuses size 0 as outside its limits; the
    client says why and what to do (the server's check is put back as it was)."""
    from beoperf import _core, engines
    from beoperf.engines import protocol, tcp_server
    from helpers import running_server

    current = tcp_server.Session._trial

    def older(self, message):
        if message.get("size") == 0:
            raise protocol.Refusal("limit", f"run of {message.get('reps')} x 0 bytes is "
                                            "outside the session limits")
        return current(self, message)

    monkeypatch.setattr(tcp_server.Session, "_trial", older)
    with running_server() as srv:
        client = engines.get("tcp")(engines.Peer("127.0.0.1", srv.port),
                                    {"mode": "pingpong", "max_size": 1024}, timeout=5)
        client.connect()
        assert client.trial(1, 3, _core.Pool(1024), 0).elapsed_ns > 0
        with pytest.raises(protocol.PeerRefused, match=r"outside the session limits: a "
                           r"'beoperf serve' older than empty messages \(size 0\) refuses "
                           r"them; upgrade it, or leave 0 out of --sizes"):
            client.trial(0, 3, _core.Pool(1024), 0)
        client.close(abort=True)

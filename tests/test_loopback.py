"""Loopback functional tests: every mode, integrity, options, Ctrl-C, server safety."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from beoperf import sysinfo
from beoperf.cli import ExitStatus
from helpers import cli, running_server
from server_abuse import abuse_server, assert_served_normally

SIZES = "1,1024,65536,1M"
RECORDING = ("--time-budget", "2")  # a test of what is recorded, not of how precise
MiB = 1024 * 1024


def run_mode(port: int, mode: str, *extra: str) -> dict:
    res = cli("pingpong", "127.0.0.1", "--port", str(port), "--mode", mode, "--sizes", SIZES,
              "--json", *extra)
    assert res.status == 0, res.stderr
    return {**res.json["body"], "meta": res.json["meta"]}


@pytest.mark.parametrize("mode", ["pingpong", "stream", "bidir"])
def test_every_mode_measures_every_size(mode):
    with running_server() as srv:
        doc = run_mode(srv.port, mode)
    assert doc["status"] == "complete" and doc["parameters"]["mode"] == mode
    assert [s["size"] for s in doc["sizes"]] == [1, 1024, 65536, 1 << 20]
    for s in doc["sizes"]:
        t = s["time_us"]
        assert 0 < t["min"] <= t["median"] <= t["p90"] <= t["p99"] <= t["max"]
        assert s["samples"] >= 6 and s["trials"] >= 3
        assert s["throughput_bps"]["from_min"] >= s["throughput_bps"]["from_median"] > 0
        assert s["corrupt"] == 0
    if mode == "stream":  # one sample per trial, each on a fresh connection
        assert all(s["samples"] == s["trials"] for s in doc["sizes"])
    big = doc["sizes"][-1]
    factor = 2 if mode == "bidir" else 1
    expected = factor * big["size"] * 8 / (big["time_us"]["median"] * 1e-6)
    assert big["throughput_bps"]["from_median"] == pytest.approx(expected)


def test_metadata_of_both_ends():
    with running_server() as srv:
        doc = run_mode(srv.port, "pingpong", "--sndbuf", "64K", "--rcvbuf", "128K", *RECORDING)
    for end in ("local", "remote"):
        facts = doc[end]
        assert facts["interface"]["name"] == "lo"
        assert facts["interface"]["mtu"] == int(open("/sys/class/net/lo/mtu").read())
        sock = facts["socket"]
        assert sock["sndbuf"] >= 65536 and sock["rcvbuf"] >= 131072  # Linux doubles them
        assert sock["mss"] > 0 and sock["nodelay"] is True
        assert facts["host"]["kernel"] == os.uname().release
    assert doc["meta"]["clock"]["resolution_ns"] >= 1
    assert doc["parameters"]["sndbuf"] == 65536 and doc["parameters"]["rcvbuf"] == 131072


def test_nagle_option_reaches_both_ends():
    with running_server() as srv:
        doc = run_mode(srv.port, "pingpong", "--nagle", *RECORDING)
    assert doc["local"]["socket"]["nodelay"] is False
    assert doc["remote"]["socket"]["nodelay"] is False


def test_integrity_and_nocache_clean_run():
    with running_server() as srv:
        doc = run_mode(srv.port, "pingpong", "--integrity", "--nocache", *RECORDING)
    assert doc["summary"]["corrupt_messages"] == 0
    assert doc["parameters"]["integrity"] and doc["parameters"]["nocache"]
    for end in ("local", "remote"):  # each end says what its pool spans
        pool = doc[end]["pool"]
        assert pool["nocache"] and pool["span_bytes"] >= 2 * (1 << 20)


def test_nocache_with_a_huge_cache_and_a_default_server(monkeypatch):
    """A 260 MiB last-level cache (as on some servers) once made a default `serve`
    (64M) refuse every --nocache run.  Now the server spans what its limit allows, says
    so in the result and warns that the cache was not defeated; the client, which has
    no limit, spans 1.5 x its LLC."""
    llc = 260 * MiB
    monkeypatch.setattr(sysinfo, "llc_bytes", lambda *a, **k: llc)  # both ends: one process
    with running_server() as srv:
        res = cli("pingpong", "127.0.0.1", "--port", str(srv.port), "--sizes", "8,4096",
                  "--nocache", "--integrity", "--json")
    assert res.status == 0, res.stderr
    doc = res.json["body"]
    remote, local = doc["remote"]["pool"], doc["local"]["pool"]
    assert remote == {"nocache": True, "span_bytes": 64 * MiB, "llc_bytes": llc,
                      "llc_assumed": False, "exceeds_llc": False}
    assert local["span_bytes"] == 3 * llc // 2 + 4096 and local["exceeds_llc"]
    warning = [w for w in doc["warnings"] if "no-cache" in w]
    assert len(warning) == 1 and warning[0].startswith("server: ")
    assert "260 MiB last-level cache" in warning[0] and "--max-memory 391M" in warning[0]
    assert doc["summary"]["corrupt_messages"] == 0 and doc["status"] == "complete"


@pytest.mark.parametrize("mode", ["pingpong", "stream", "bidir"])
def test_integrity_catches_a_corrupted_message(tmp_path, mode):
    with running_server(inject_corrupt=3) as srv:
        res = cli("pingpong", "127.0.0.1", "--port", str(srv.port), "--mode", mode,
                  "--sizes", "64,4096", "--integrity", "-o", str(tmp_path / "run"))
    assert res.status == ExitStatus.INTEGRITY, res.stderr
    assert "beoperf: integrity error:" in res.stderr and "corrupted" in res.stderr
    doc = json.loads((tmp_path / "run.json").read_text())["body"]
    assert doc["status"] == "failed" and doc["sizes"][0]["corrupt"] >= 1


def test_embedded_default_and_ipv6():
    res = cli("pingpong", "--sizes", "16,4K", "--json", *RECORDING)
    assert res.status == 0, res.stderr
    assert res.json["body"]["remote"]["socket"]["family"] == "ipv4"
    if not socket.has_ipv6 or not os.path.exists("/proc/net/if_inet6"):
        pytest.skip("no IPv6 on this machine")
    res6 = cli("pingpong", "-6", "--sizes", "16", "--json", *RECORDING)
    assert res6.status == 0, res6.stderr
    assert res6.json["body"]["local"]["socket"]["family"] == "ipv6"


def test_one_size_is_measured_in_sustained_trials():
    """One size (a latency) is measured in trials as long as NetPIPE's, without the
    client's pause every 2 ms, which on a VM's two CPUs read 0.7x of a sustained
    ping-pong (bench/RESULTS.md, L1); the trials' round trips add up to their length."""
    from beoperf.suites.pingpong import SUSTAINED_TRIAL_S

    res = cli("pingpong", "--sizes", "16", "--time-budget", "4", "--json")
    assert res.status == 0, res.stderr
    body = res.json["body"]
    assert body["parameters"]["trial_time"] == SUSTAINED_TRIAL_S
    size = body["sizes"][0]
    measured_s = size["samples"] * 2 * size["time_us"]["median"] * 1e-6
    assert measured_s >= 0.5 * size["trials"] * SUSTAINED_TRIAL_S, size


def test_ctrl_c_keeps_completed_sizes(tmp_path):
    prefix = tmp_path / "partial"
    proc = subprocess.Popen([sys.executable, "-m", "beoperf", "pingpong", "-o", str(prefix),
                             "--precision", "0.0001", "--time-budget", "60"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == ExitStatus.INTERRUPTED, err
    assert "Traceback" not in err
    doc = json.loads(prefix.with_suffix(".json").read_text())["body"]
    assert doc["status"] == "interrupted" and doc["sizes"]
    assert all(s["trials"] >= 1 for s in doc["sizes"])  # every size with a trial is kept
    assert not all(s["converged"] for s in doc["sizes"])
    assert len(prefix.with_suffix(".np").read_text().splitlines()) == len(doc["sizes"])


def test_server_survives_abuse_on_loopback():
    with running_server(handshake_timeout=0.5, idle_timeout=1.0) as srv:
        abuse_server("127.0.0.1", srv.port)
        assert_served_normally("127.0.0.1", srv.port)
        assert srv.thread.is_alive()
    assert any("rejected" in line for line in srv.log)
    assert any("went silent" in line for line in srv.log)


def test_cpu_pinning_of_each_end():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs")
    first, second = sorted(os.sched_getaffinity(0))[:2]
    with running_server() as srv:
        res = cli("pingpong", "127.0.0.1", "--port", str(srv.port), "--sizes", "64",
                  "--cpu", f"{first},{second}", "--json", *RECORDING)
    assert res.status == 0, res.stderr
    assert os.sched_getaffinity(0) >= {first, second}  # given back after the run
    assert res.json["body"]["local"]["cpus"] == [first]
    assert res.json["body"]["remote"]["cpus"] == [second]


def test_embedded_peer_puts_the_ends_on_two_cpus():
    """Without a host and without --cpu, the client goes on the last CPU it may use and
    the embedded server on the one before; --cpu none leaves both to the scheduler."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    quick = ["--sizes", "64", "--trial-time", "0.002", "--json"]
    placed = cli("pingpong", *quick)
    assert placed.status == 0, placed.stderr
    body = placed.json["body"]
    assert body["local"]["cpus"] == [cpus[-1]]
    assert body["remote"]["cpus"] == [cpus[-2]]
    assert (body["parameters"]["client_cpu"], body["parameters"]["server_cpu"]) == \
        (cpus[-1], cpus[-2])
    free = cli("pingpong", *quick, "--cpu", "none")
    assert free.status == 0, free.stderr
    body = free.json["body"]
    assert body["local"]["cpus"] == cpus and body["remote"]["cpus"] == cpus
    assert body["parameters"]["client_cpu"] is None and body["parameters"]["server_cpu"] is None


def test_busy_poll_is_requested_and_recorded():
    with running_server() as srv:
        doc = run_mode(srv.port, "pingpong", "--busy-poll", "50", *RECORDING)
    assert doc["parameters"]["busy_poll"] == 50
    granted = doc["local"]["socket"]["busy_poll_us"]
    if os.geteuid() == 0:  # raising SO_BUSY_POLL needs CAP_NET_ADMIN
        assert granted == 50 and doc["remote"]["socket"]["busy_poll_us"] == 50
    else:
        assert granted == 50 or any("SO_BUSY_POLL" in w for w in doc["warnings"])


def test_the_data_connections_congestion_control_is_set_at_both_ends_and_recorded():
    """Reno by default in ping-pong (a fresh connection per pass must not start from a
    pacing estimate), the system's in stream mode and with 'system'; both ends record
    what their socket used."""
    system = sysinfo._read_text("/proc/sys/net/ipv4/tcp_congestion_control")
    with running_server() as srv:
        ping = run_mode(srv.port, "pingpong", *RECORDING)
        stream = run_mode(srv.port, "stream", *RECORDING)
        kept = run_mode(srv.port, "pingpong", "--congestion", "system", *RECORDING)
    assert ping["parameters"]["congestion"] == "reno"
    assert ping["local"]["socket"]["congestion"] == "reno" == \
        ping["remote"]["socket"]["congestion"]
    for doc in (stream, kept):
        assert doc["parameters"]["congestion"] is None
        assert doc["local"]["socket"]["congestion"] == system == \
            doc["remote"]["socket"]["congestion"]


def test_configuration_sweep_writes_each_run_a_table_and_graphs(tmp_path):
    prefix = tmp_path / "bufs"
    with running_server() as srv:
        res = cli("pingpong", "127.0.0.1", "--port", str(srv.port), "--sizes", "1,1K,64K",
                  "--sweep", "sndbuf=16K,256K", "--time-budget", "3", "-o", str(prefix))
    assert res.status == 0, res.stderr
    for value, granted in (("16K", 2 * 16384), ("256K", 2 * 262144)):
        doc = json.loads((tmp_path / f"bufs-sndbuf-{value}.json").read_text())["body"]
        assert doc["parameters"]["sndbuf"] == granted // 2
        assert doc["local"]["socket"]["sndbuf"] == granted  # what the kernel granted
        assert (tmp_path / f"bufs-sndbuf-{value}.np").exists()
    table = (tmp_path / "bufs-compare.md").read_text()
    assert "sndbuf=16K" in table and "sndbuf=256K" in table and "one replicate" in table
    for name in ("throughput", "signature", "saturation"):
        assert (tmp_path / "bufs-plots" / f"{name}.png").stat().st_size > 0


def test_configuration_sweep_errors():
    res = cli("pingpong", "--sweep", "colour=red", "-o", "x")
    assert res.status == ExitStatus.USAGE and "KEY=V1,V2" in res.stderr
    res = cli("pingpong", "--sweep", "sndbuf=16K,64K")
    assert res.status == ExitStatus.USAGE and "-o PREFIX" in res.stderr
    res = cli("pingpong", "--sweep", "sndbuf=16K,lots", "-o", "x")
    assert res.status == ExitStatus.USAGE and "--sndbuf" in res.stderr

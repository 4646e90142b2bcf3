"""`beoperf monitor`: schedule and budget arithmetic, the store, the loop with fake probers,
and real probes between namespace hosts (refused, kill -9, bytes the peer received,
metrics)."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from tests.helpers import cli, running_server

from beoperf.monitor import schedule as sched
from beoperf.monitor import store
from beoperf.monitor.metrics import Metrics
from beoperf.monitor.probes import Result
from beoperf.monitor.runner import Monitor

FAST = ["--step", "8:3:0.05", "--step", "1000:1:0.05", "--start-offset", "0"]  # 0.2 s cycle


def monitor_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "beoperf", "monitor", *args]


# --------------------------------------------------------------------------- schedule


def test_default_schedule_is_the_published_loop():
    s = sched.Schedule.build([sched.parse_step(t) for t in sched.DEFAULT_STEPS], None, "icmp")
    assert s.period_s == 9
    assert [(x.offset_s, x.size, x.window_s) for x in s.slots()] == [
        (0, 8, 1), (1, 8, 1), (2, 8, 1), (3, 20000, 6)]
    # 3 x (20 IP + 8 ICMP + 8) + 20,008 bytes of ICMP in 14 fragments of <= 1480
    assert sched.cycle_bytes(s, "icmp") == 3 * 36 + 20008 + 14 * 20
    share = sched.cycle_bytes(s, "icmp") / 9 * 8 / 10e6
    assert 0.0017 < share < 0.0019  # the study's 0.17% of 10 Mbit/s, with headers


@pytest.mark.parametrize("text, message", [
    ("8:3", "SIZE:COUNT:SPACING"), ("a:3:1", "integers"), ("8:0:1", "COUNT >= 1"),
    ("8:1:-1", "SPACING > 0"), ("8:1:nan", "SPACING > 0")])
def test_bad_steps(text, message):
    with pytest.raises(ValueError, match=message):
        sched.parse_step(text)


def test_schedule_limits():
    with pytest.raises(ValueError, match="longer than the --period"):
        sched.Schedule.build([sched.Step(8, 3, 1)], 2, "icmp")
    with pytest.raises(ValueError, match="icmp probes carry 8..65507"):
        sched.Schedule.build([sched.Step(4, 1, 1)], None, "icmp")
    assert sched.Schedule.build([sched.Step(8, 1, 1)], 5, "udp").slots()[-1].window_s == 5


def test_wire_bytes():
    assert sched.wire_bytes("icmp", 8) == 36
    assert sched.wire_bytes("udp", 1472) == 1500  # exactly one MTU
    assert sched.wire_bytes("udp", 1473) == 1481 + 2 * 20  # two fragments
    assert sched.wire_bytes("icmp", 8, ipv6=True) == 56
    assert sched.wire_bytes("tcp", 100) == 104 + 2 * 52  # a segment and an ACK
    assert sched.wire_bytes("tcp", 3000) == 3004 + (3 + 2) * 52


@pytest.mark.parametrize("budget, link, per_s", [
    ("0.2%", "10M", 2500.0), ("2kB/s", None, 2000.0), ("16kbit/s", None, 2000.0),
    ("500B/s", "1G", 500.0)])
def test_budgets(budget, link, per_s):
    assert sched.parse_budget(budget, link).bytes_per_s == pytest.approx(per_s)


@pytest.mark.parametrize("budget, link, message", [
    ("0.2%", None, "needs --link-speed"), ("0%", "10M", "more than 0%"),
    ("lots", None, "give a share"), ("1%", "fast", "bits per second")])
def test_bad_budgets(budget, link, message):
    with pytest.raises(ValueError, match=message):
        sched.parse_budget(budget, link)


def test_cli_refuses_a_schedule_over_budget():
    # the route to 127.0.0.1 has MTU 65,535: the 20,000-byte probe is one packet (20 + 8 + 20,000)
    res = cli("monitor", "127.0.0.1", "--db", "x.db", "--budget", "0.1%", "--link-speed", "10M")
    assert res.status == 2
    assert res.stderr.count("\n") == 1
    assert "20,136 bytes per 9 s cycle = 2,237.3 B/s > 0.1% of 10 Mbit/s = 1,250.0 B/s" \
        in res.stderr
    assert not Path("x.db").exists()


@pytest.mark.parametrize("mtu, per_cycle, share", [(1500, "20,396", "0.181%"),
                                                   (9000, "20,176", "0.179%")])
def test_netns_dry_run_prints_the_cost_at_the_path_mtu(netns_pair, mtu, per_cycle, share):
    server, client = netns_pair
    for host in (server, client):
        host.set_mtu(mtu)
    res = client.run(monitor_argv(server.addr4, "--dry-run", "--budget", "0.2%",
                                  "--link-speed", "10M"), check=False)
    assert res.returncode == 0, res.stderr
    assert f"{per_cycle} bytes per cycle of 9 s with icmp and IP headers (path MTU {mtu})" \
        in res.stdout
    assert f"share of the 10 Mbit/s link: {share}" in res.stdout


@pytest.mark.parametrize("argv, message", [
    (["127.0.0.1"], "--db FILE is required"),
    (["127.0.0.1", "--db", "x", "--step", "8:3:1", "--period", "1"], "longer than"),
    (["127.0.0.1", "--db", "x", "--timeout", "0"], "--timeout"),
    (["report"], "give the database"),
    (["report", "x.db", "--from", "yesterday"], "--from 'yesterday'"),
    (["report", "x.db", "--noise-floor=-1"], "--noise-floor -1.0"),
    (["report", "x.db", "--noise-floor", "nan"], "--noise-floor nan"),
    (["report", "x.db", "--noise-floor", "inf"], "give 0 to 1000000 microseconds"),
])
def test_cli_usage_errors(argv, message):
    res = cli("monitor", *argv)
    assert res.status == 2 and message in res.stderr and res.stderr.count("\n") == 1


def test_link_local_target_without_interface_is_refused():
    res = cli("monitor", "fe80::1", "--dry-run")
    assert res.status == 1 and res.stderr.count("\n") == 1
    assert "a link-local address needs its interface, as in fe80::1%eth0" in res.stderr


def test_cli_noise_floor_default_is_the_reports():
    from beoperf.cli import build_parser
    from beoperf.monitor import events

    args = build_parser("monitor").parse_args(["monitor", "report", "x.db"])
    assert args.noise_floor == events.NOISE_FLOOR_US


def test_dry_run_on_loopback_prints_the_cost():
    res = cli("monitor", "127.0.0.1", "--dry-run", "--budget", "0.2%", "--link-speed", "10M")
    assert res.status == 0, res.stderr
    assert "20,136 bytes per cycle of 9 s with icmp and IP headers (path MTU 65535)" \
        in res.stdout
    assert "share of the 10 Mbit/s link: 0.179%" in res.stdout


# --------------------------------------------------------------------------- store


def test_store_schema_wal_and_continuation(tmp_path):
    path = str(tmp_path / "m.db")
    db = store.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    run1 = store.start_run(db, host="h", address="a", transport="icmp", period_s=1, config={})
    store.write_cycle(db, run1, 0, [store.Probe(0, 1.0, 8, 36, "icmp", "ok", 10.0)])
    db.close()
    db = store.connect(path)  # continues
    run2 = store.start_run(db, host="h", address="a", transport="icmp", period_s=1, config={})
    assert run2 == run1 + 1 and len(list(store.probes_between(db))) == 1
    with pytest.raises(ValueError, match="unknown outcome"):
        store.write_cycle(db, run2, 0, [store.Probe(0, 2.0, 8, 36, "icmp", "ok", 1.0),
                                        store.Probe(1, 3.0, 8, 36, "icmp", "lost")])
    assert len(list(store.probes_between(db))) == 1  # all of a cycle or nothing
    with pytest.raises(sqlite3.IntegrityError):  # a cycle is never written twice
        store.write_cycle(db, run1, 0, [store.Probe(0, 1.0, 8, 36, "icmp", "ok", 10.0)])
    db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    db.close()
    with pytest.raises(store.StoreError, match="schema version 99"):
        store.connect(path)


def test_store_refuses_a_file_that_is_not_sqlite(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_text("not a database at all, just text\n" * 100)
    with pytest.raises(store.StoreError, match="bad.db"):
        store.connect(str(bad))
    res = cli("monitor", "report", str(bad))
    assert res.status == 1 and res.stderr.count("\n") == 1


# --------------------------------------------------------------------------- the loop


class FakeProber:
    """Answers, or times out by sleeping its whole timeout; counts bytes as told."""

    transport = "udp"
    address = "198.18.0.1"

    def __init__(self, fail: set[int] | None = None, wire_factor: int = 1) -> None:
        self.fail, self.wire_factor = fail or set(), wire_factor
        self.sent: list[tuple[float, int, float]] = []  # (monotonic, size, timeout)

    def estimate(self, size: int) -> int:
        return sched.wire_bytes("udp", size)

    def probe(self, size: int, timeout: float) -> Result:
        n = len(self.sent)
        self.sent.append((time.monotonic(), size, timeout))
        wire = self.estimate(size) * self.wire_factor
        if n in self.fail:
            time.sleep(timeout)
            return Result(time.time(), "timeout", None, None, wire)
        return Result(time.time(), "ok", 100.0, None, wire)

    def close(self) -> None:
        return None


def fast_schedule() -> sched.Schedule:
    return sched.Schedule.build([sched.Step(8, 3, 0.05), sched.Step(1000, 1, 0.05)], None,
                                "udp")


def run_monitor(tmp_path, prober, **kw) -> tuple[Monitor, str, sqlite3.Connection]:
    db = store.connect(str(tmp_path / "m.db"))
    run_id = store.start_run(db, host="h", address="a", transport="udp", period_s=0.2,
                             config={})
    mon = Monitor(prober, fast_schedule(), db, run_id, timeout=2.0, start_offset=0, **kw)
    reason = mon.run()
    return mon, reason, db


def test_timeouts_never_shift_the_schedule(tmp_path):
    prober = FakeProber(fail={1, 2, 5, 9, 10, 11})  # whole-timeout sleeps
    mon, reason, db = run_monitor(tmp_path, prober, max_cycles=5)
    assert reason == "completed 5 cycle(s)"
    sends = [t for t, _size, _timeout in prober.sent]
    assert len(sends) == 20
    due = [sends[0] + 0.2 * (i // 4) + 0.05 * (i % 4) for i in range(20)]
    lateness = [s - d for s, d in zip(sends, due, strict=True)]
    assert max(lateness) < 0.04, lateness  # each probe on its slot, no drift
    # a timeout lasts at most until the next probe is due
    assert all(t <= 0.05 + 1e-6 for _s, _size, t in prober.sent[:3])
    assert prober.sent[3][2] <= 0.05 + 1e-6  # the last one: until the next cycle
    rows = db.execute("SELECT cycle, slot, outcome FROM probes ORDER BY id").fetchall()
    assert [r[2] for r in rows].count("timeout") == 6 and len(rows) == 20


def test_budget_stops_probing_and_the_run_says_why(tmp_path):
    budget = sched.Budget(sched.cycle_bytes(fast_schedule(), "udp") / 0.2 * 1.5, "test")
    prober = FakeProber(wire_factor=3)  # the real bytes turn out 3x the estimate
    mon, reason, db = run_monitor(tmp_path, prober, budget=budget, max_cycles=50)
    assert reason.startswith("budget: ") and "would exceed test" in reason
    assert mon.totals.cycles < 50
    elapsed = time.monotonic() - mon.started
    assert mon.totals.bytes <= budget.bytes_per_s * (elapsed + 0.2)


def test_stop_event_ends_the_loop_between_probes(tmp_path):
    prober = FakeProber()
    db = store.connect(str(tmp_path / "m.db"))
    run_id = store.start_run(db, host="h", address="a", transport="udp", period_s=0.2,
                             config={})
    mon = Monitor(prober, fast_schedule(), db, run_id, timeout=2.0, start_offset=0,
                  max_cycles=50)
    threading.Timer(0.5, mon.stop.set).start()
    assert mon.run() == "stopped by signal"  # not "completed 50 cycle(s)" 10 s later
    cycles = db.execute("SELECT cycle, count(*) FROM probes GROUP BY cycle").fetchall()
    assert len(cycles) >= 2 and all(n <= 4 for _c, n in cycles)


def test_metrics_never_export_a_failed_latency():
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    m = Metrics(2500.0)
    m.observe("icmp", 8, "ok", 250.0, 36, 1e9)
    m.observe("icmp", 8, "timeout", None, 36, 1e9 + 1)
    m.observe("icmp", 8, "refused", 99.0, 36, 1e9 + 2)
    families = {f.name: f for f in text_string_to_metric_families(generate_latest(
        m.registry).decode())}
    counts = {s.labels["outcome"]: s.value for s in families["beoperf_probes"].samples
              if s.name == "beoperf_probes_total"}
    assert counts == {"ok": 1, "timeout": 1, "refused": 1}
    rtt = {s.name: s.value for s in families["beoperf_probe_rtt_seconds"].samples
           if "le" not in s.labels}
    assert rtt["beoperf_probe_rtt_seconds_count"] == 1
    assert rtt["beoperf_probe_rtt_seconds_sum"] == pytest.approx(250e-6)
    assert families["beoperf_probe_bytes"].samples[0].value == 108
    assert families["beoperf_monitor_budget_bytes_per_second"].samples[0].value == 2500


# --------------------------------------------------------------------------- loopback


@pytest.mark.parametrize("transport", ["udp", "tcp"])
def test_loopback_probes_answered_then_refused(tmp_path, transport):
    db = str(tmp_path / "m.db")
    with running_server() as srv:
        res = cli("monitor", "127.0.0.1", "--db", db, "--transport", transport, "--port",
                  str(srv.port), "--cycles", "3", *FAST)
        assert res.status == 0, res.stderr
        port = srv.port
    res = cli("monitor", "127.0.0.1", "--db", db, "--transport", transport, "--port",
              str(port), "--cycles", "2", *FAST)
    assert res.status == 0, res.stderr
    con = sqlite3.connect(db)
    got = con.execute("SELECT run_id, outcome, count(*), count(rtt_us) FROM probes "
                      "GROUP BY 1, 2 ORDER BY 1").fetchall()
    assert got == [(1, "ok", 12, 12), (2, "refused", 8, 0)]
    runs = con.execute("SELECT stop_reason FROM runs ORDER BY id").fetchall()
    assert runs == [("completed 3 cycle(s)",), ("completed 2 cycle(s)",)]


# --------------------------------------------------------------------------- namespaces


def start_serve(host, port: int) -> subprocess.Popen:
    """`beoperf serve` in a namespace host, returned once it listens (TCP and UDP)."""
    proc = host.popen([sys.executable, "-m", "beoperf", "serve", "--bind", host.addr4,
                       "--port", str(port)], stdout=subprocess.PIPE,
                      stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    assert f"port {port}" in line, line
    return proc


def nft_counter(host, proto: str) -> None:
    rules = (f"table netdev beoperf_test {{\n chain ingress {{\n type filter hook ingress "
             f"device {host.ifname} priority 0;\n ip protocol {proto} counter\n }}\n}}\n")
    host.run(["nft", "-f", "-"], input=rules, text=True)


def nft_bytes(host) -> int:
    out = host.run(["nft", "list", "table", "netdev", "beoperf_test"]).stdout
    return int(out.split("bytes")[1].split()[0])


@pytest.mark.parametrize("transport, mtu", [("icmp", 1500), ("udp", 1500), ("tcp", 1500),
                                            ("icmp", 1000), ("udp", 1280)])
def test_netns_bytes_counted_match_what_the_peer_received(netns_pair, tmp_path, transport,
                                                          mtu):
    server, client = netns_pair
    db = tmp_path / "m.db"
    for host in (server, client):
        host.set_mtu(mtu)
    nft_counter(server, transport)
    if transport == "tcp":  # veth passes TSO/GSO super-packets whole; a wire would not
        client.run(["ethtool", "-K", client.ifname, "tso", "off", "gso", "off"])
    with start_serve(server, 5300) as srv:
        try:
            res = client.run(monitor_argv(server.addr4, "--db", db, "--transport", transport,
                                          "--port", "5300", "--cycles", "5",
                                          "--step", "8:3:0.05", "--step", "3000:1:0.05",
                                          "--start-offset", "0"), check=False)
            assert res.returncode == 0, res.stderr
        finally:
            srv.terminate()
    con = sqlite3.connect(db)
    sent, ok = con.execute("SELECT sum(wire_bytes), sum(outcome = 'ok') FROM probes").fetchone()
    assert ok == 20
    if transport == "tcp":  # counted from TCP_INFO: handshake, hello and ACKs included;
        # the peer also got the closing FIN/ACK, and the SYN's longer options
        assert 0 <= nft_bytes(server) - sent <= 3 * 60, (nft_bytes(server), sent)
        return
    assert sent == 5 * (3 * 36 + sched.wire_bytes(transport, 3000, mtu=mtu))
    assert nft_bytes(server) == sent
    config = json.loads(con.execute("SELECT config FROM runs").fetchone()[0])
    assert config["path_mtu"] == mtu


def link_local(host) -> str:
    """The host's IPv6 link-local address once it is usable (not tentative)."""
    deadline = time.monotonic() + 10
    while True:
        out = host.run(["ip", "-j", "-6", "addr", "show", "dev", host.ifname, "scope",
                        "link"]).stdout
        infos = [a for i in json.loads(out or "[]") for a in i.get("addr_info", [])]
        ready = [a["local"] for a in infos
                 if a.get("scope") == "link" and "local" in a and not a.get("tentative")]
        if ready or time.monotonic() > deadline:
            assert ready, infos
            return ready[0]
        time.sleep(0.1)


def test_netns_link_local_target_keeps_its_scope(netns_pair, tmp_path):
    server, client = netns_pair
    for host in (server, client):
        host.set_mtu(1400)
    target = f"{link_local(server)}%{client.ifname}"
    db = tmp_path / "m.db"
    res = client.run(monitor_argv(target, "--db", db, "--cycles", "2", "--step", "8:2:0.05",
                                  "--step", "3000:1:0.05", "--start-offset", "0"), check=False)
    assert res.returncode == 0, res.stderr
    assert "(path MTU 1400)" in res.stdout
    con = sqlite3.connect(db)
    assert con.execute("SELECT count(*), sum(outcome = 'ok') FROM probes").fetchone() == (6, 6)
    assert con.execute("SELECT address FROM runs").fetchone()[0] == target


def test_netns_mtu_assumed_without_a_route(netns_pair):
    _server, client = netns_pair
    # in the benchmarking range, but not on the link: the namespace has no route to it
    res = client.run(monitor_argv("198.18.1.1", "--dry-run"), check=False)
    assert res.returncode == 0, res.stderr
    assert "(path MTU 1500 assumed: Network is unreachable)" in res.stdout


def test_netns_refused_when_the_server_stops(netns_pair, tmp_path):
    server, client = netns_pair
    db = tmp_path / "m.db"
    srv = start_serve(server, 5301)
    mon = client.popen(monitor_argv(server.addr4, "--db", db, "--transport", "tcp",
                                    "--port", "5301", *FAST), stdout=subprocess.PIPE,
                       text=True)
    try:
        time.sleep(2.0)
        srv.terminate()
        srv.wait(timeout=10)
        time.sleep(2.0)
    finally:
        mon.send_signal(signal.SIGTERM)
        out, _ = mon.communicate(timeout=20)
        if srv.poll() is None:
            srv.kill()
    assert mon.returncode == 0
    outcomes = [r[0] for r in sqlite3.connect(db).execute(
        "SELECT outcome FROM probes ORDER BY t_utc")]
    assert outcomes[0] == "ok" and outcomes[-1] == "refused"
    last_ok = max(i for i, o in enumerate(outcomes) if o == "ok")
    assert set(outcomes[last_ok + 2:]) == {"refused"}  # one in-flight probe may fail otherwise
    reason = sqlite3.connect(db).execute("SELECT stop_reason FROM runs").fetchone()[0]
    assert reason == "stopped by signal"


def test_netns_kill_9_never_corrupts_or_loses_committed_cycles(netns_pair, tmp_path):
    server, client = netns_pair
    db = tmp_path / "m.db"
    rng = random.Random(5)
    committed: set[tuple[int, int]] = set()
    for run in range(1, 13):
        mon = client.popen(monitor_argv(server.addr4, "--db", db, "-v",
                                        "--step", "8:3:0.02", "--step", "2000:1:0.02",
                                        "--start-offset", "0"), stdout=subprocess.PIPE,
                           text=True)
        time.sleep(rng.uniform(0.3, 1.2))
        os.kill(mon.pid, signal.SIGKILL)
        out, _ = mon.communicate(timeout=10)
        committed |= {(run, int(line.split()[1])) for line in out.splitlines()
                      if line.startswith("cycle ") and "committed" in line}
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    rows = con.execute("SELECT run_id, cycle, count(*), count(DISTINCT slot) FROM probes "
                       "GROUP BY 1, 2").fetchall()
    assert all(n == 4 and distinct == 4 for _r, _c, n, distinct in rows)  # whole cycles
    stored = {(r, c) for r, c, _n, _d in rows}
    assert committed <= stored  # nothing reported committed is lost
    assert len(stored - committed) <= 12  # at most the one in flight per kill
    assert len(committed) > 12
    assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 12


def test_netns_metrics_endpoint_parses(netns_pair, tmp_path):
    from prometheus_client.parser import text_string_to_metric_families

    server, client = netns_pair
    mon = client.popen(monitor_argv(server.addr4, "--db", tmp_path / "m.db",
                                    "--metrics-port", "9465", *FAST),
                       stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)
        res = client.run([sys.executable, "-c", "import urllib.request, sys; sys.stdout.write("
                          "urllib.request.urlopen('http://127.0.0.1:9465/metrics', timeout=5)"
                          ".read().decode())"])
    finally:
        mon.send_signal(signal.SIGTERM)
        mon.communicate(timeout=20)
    names = {f.name for f in text_string_to_metric_families(res.stdout)}
    assert {"beoperf_probe_rtt_seconds", "beoperf_probes", "beoperf_probe_bytes"} <= names
    assert 'beoperf_probes_total{outcome="ok",size="8",transport="icmp"}' in res.stdout


def test_icmp_without_permission_is_a_clear_error(monkeypatch):
    from beoperf.monitor import probes

    def refuse(*_a, **_k):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(probes.socket, "socket", refuse)
    res = cli("monitor", "127.0.0.1", "--db", "never.db")
    assert res.status == 1 and res.stderr.count("\n") == 1
    assert "ping_group_range" in res.stderr and "--transport udp" in res.stderr
    assert not Path("never.db").exists()


def test_netns_icmp_uses_the_datagram_socket_where_allowed(netns_pair, tmp_path):
    server, client = netns_pair
    client.run(["sysctl", "-w", "net.ipv4.ping_group_range=0 2147483647"])  # this netns only
    host_range = Path("/proc/sys/net/ipv4/ping_group_range").read_text()
    db = tmp_path / "m.db"
    res = client.run(monitor_argv(server.addr4, "--db", db, "--cycles", "2", *FAST),
                     check=False)
    assert res.returncode == 0, res.stderr
    con = sqlite3.connect(db)
    assert '"icmp_socket": "datagram socket"' in con.execute("SELECT config FROM runs") \
        .fetchone()[0]
    assert con.execute("SELECT count(*) FROM probes WHERE outcome='ok'").fetchone()[0] == 8
    client.run(["sysctl", "-w", "net.ipv4.ping_group_range=1 0"])
    res = client.run(monitor_argv(server.addr4, "--db", db, "--cycles", "1", *FAST),
                     check=False)
    assert res.returncode == 0, res.stderr  # root falls back to the raw socket
    assert '"icmp_socket": "raw socket"' in con.execute(
        "SELECT config FROM runs ORDER BY id DESC").fetchone()[0]
    assert Path("/proc/sys/net/ipv4/ping_group_range").read_text() == host_range


# --------------------------------------------------------------------------- reports


def test_netns_link_down_is_one_outage_and_availability_adds_up(netns_pair, tmp_path):
    from beoperf.monitor import report

    server, client = netns_pair
    db = tmp_path / "m.db"
    period = 0.25
    mon = client.popen(monitor_argv(server.addr4, "--db", db, "--step", "8:3:0.05",
                                    "--step", "1000:1:0.1", "--start-offset", "0"),
                       stdout=subprocess.DEVNULL)
    try:
        time.sleep(3.0)
        t_down = time.time()
        server.link_down()
        time.sleep(3.0)
        t_up0 = time.time()
        server.link_up()
        t_up1 = time.time()
        time.sleep(3.0)
    finally:
        mon.send_signal(signal.SIGTERM)
        mon.wait(timeout=20)
    doc = report.build_report(str(db))
    assert len(doc["outages"]) == 1, doc["outages"]
    out = doc["outages"][0]
    assert t_down <= out["start_utc"] <= t_down + period + 0.05
    assert t_up0 - period <= out["end_utc"] <= t_up1 + period + 0.1
    assert out["kind"] in ("timeout", "unreachable") and not out["open"]
    con = sqlite3.connect(db)
    rows, ok = con.execute("SELECT count(*), sum(outcome = 'ok') FROM probes").fetchone()
    s = doc["summary"]
    assert (s["probes"], s["answered"]) == (rows, ok)
    assert s["answered_pct"] == pytest.approx(100 * ok / rows, abs=0.001)
    assert s["uptime_pct"] == pytest.approx(100 * (1 - s["outage_s"] / s["monitored_s"]),
                                            abs=0.01)
    assert out["duration_s"] == pytest.approx(3.0, abs=2 * period + (t_up1 - t_up0))
    md = report.render_markdown(doc)
    assert "Outages" in md and f"{s['answered_pct']:.3f}"[:5] in md


def shape(host, rate: str = "10mbit") -> None:
    # a bucket of about one frame, so that a 20,000-byte probe crosses at the rate
    host.run(["tc", "qdisc", "replace", "dev", host.ifname, "root", "tbf", "rate", rate,
              "burst", "1600", "latency", "20ms"])


@pytest.mark.skipif(not Path("/usr/bin/iperf3").exists(), reason="iperf3 not installed")
def test_netns_congestion_is_found_and_bandwidth_measured(netns_pair, tmp_path):
    from beoperf.monitor import report

    server, client = netns_pair
    shape(server)
    shape(client)
    db = tmp_path / "m.db"
    iperf = server.popen(["iperf3", "-s", "-1", "-B", server.addr4],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    mon = client.popen(monitor_argv(server.addr4, "--db", db, "--step", "8:6:0.05",
                                    "--step", "20000:1:0.2", "--start-offset", "0"),
                       stdout=subprocess.DEVNULL)
    try:
        time.sleep(20.0)
        bulk = (time.time(), 0.0)
        client.run(["iperf3", "-c", server.addr4, "-t", "12"], stdout=subprocess.DEVNULL)
        bulk = (bulk[0], time.time())
        time.sleep(14.0)
    finally:
        mon.send_signal(signal.SIGTERM)
        mon.wait(timeout=20)
        if iperf.poll() is None:
            iperf.kill()
        iperf.wait()
    doc = report.build_report(str(db), baseline_windows=8)
    hits = [e for e in doc["congestion"]
            if e["start_utc"] < bulk[1] and e["end_utc"] > bulk[0]]
    assert hits, (bulk, doc["congestion"])
    # one event, its edges within 2 windows of the flow's, nothing in the quiet parts
    assert len(doc["congestion"]) == 1, (bulk, doc["congestion"])
    assert abs(hits[0]["start_utc"] - bulk[0]) < 4, (bulk, hits)
    assert abs(hits[0]["end_utc"] - bulk[1]) < 4, (bulk, hits)
    assert hits[0]["ratio"] > 10 and hits[0]["dispersion_ratio"] > 10
    quiet = report.build_report(str(db), None, bulk[0] - 1, baseline_windows=8)
    bps = quiet["summary"]["bandwidth_bps"]["median"]
    assert 8e6 <= bps <= 12e6, bps


# --------------------------------------------------------------------------- the echo service


def test_server_udp_echo_answers_only_probes_within_its_rate():
    import socket

    with running_server(udp_echo_rate=24000.0) as srv:  # 3000 B/s per source
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.settimeout(0.5)
        sock.connect(("127.0.0.1", srv.port))
        sock.send(b"hello, not a probe")
        with pytest.raises(TimeoutError):
            sock.recv(100)
        probe = b"BEOU" + bytes(996)
        sock.send(probe)
        assert sock.recv(2000) == b"BEOR" + bytes(996)  # a reply is never echoed again
        sock.send(b"BEOR" + bytes(996))
        with pytest.raises(TimeoutError):
            sock.recv(2000)
        answered = 0
        for _ in range(10):  # 10 kB at once against a 3 kB/s bucket
            sock.send(probe)
        try:
            while sock.recv(2000):
                answered += 1
        except TimeoutError:
            pass
        assert 1 <= answered <= 3
        sock.close()


def test_server_tcp_echo_limits():
    import socket
    import struct

    from beoperf import protocol

    with running_server(max_echo=1) as srv:
        first = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        protocol.send_message(first, {"op": "hello", "role": "echo"})
        assert protocol.recv_message(first)["op"] == "echo"
        second = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        protocol.send_message(second, {"op": "hello", "role": "echo"})
        reply = protocol.recv_message(second)
        assert reply["op"] == "refuse" and reply["code"] == "busy"
        first.sendall(struct.pack(">I", 5) + b"hello")
        assert first.recv(9, socket.MSG_WAITALL) == struct.pack(">I", 5) + b"hello"
        first.sendall(struct.pack(">I", 1 << 30))  # over the 1 MiB limit
        refused = protocol.recv_message(first)
        assert refused["op"] == "refuse" and refused["code"] == "limit"
        assert first.recv(100) == b""  # and closed
        first.close()
        second.close()


def test_a_stall_skips_late_probes_instead_of_bunching_them(tmp_path):
    class Stalling(FakeProber):
        def probe(self, size, timeout):
            result = super().probe(size, timeout)
            if len(self.sent) == 2:
                time.sleep(0.33)  # e.g. the process was stopped for a moment
            return result

    prober = Stalling()
    mon, reason, _db = run_monitor(tmp_path, prober, max_cycles=4)
    sends = sorted(t for t, _s, _t in prober.sent)
    assert min(b - a for a, b in zip(sends, sends[1:], strict=False)) > 0.03  # no burst
    assert mon.totals.skipped_probes + 4 * mon.totals.skipped_cycles >= 2


def test_an_exception_in_a_prober_is_an_error_row(tmp_path):
    class Broken(FakeProber):
        def probe(self, size, timeout):
            super().probe(size, timeout)
            if len(self.sent) == 3:
                raise RuntimeError("boom")
            return Result(time.time(), "ok", 50.0, None, 36)

    _mon, reason, db = run_monitor(tmp_path, Broken(), max_cycles=2)
    assert reason == "completed 2 cycle(s)"
    rows = db.execute("SELECT outcome, error FROM probes WHERE outcome != 'ok'").fetchall()
    assert rows == [("error", "internal: RuntimeError('boom')")]


def test_tcp_probes_survive_large_messages_and_a_server_closing_idle_connections():
    from beoperf.monitor.probes import TcpProber, resolve

    with running_server(idle_timeout=0.3) as srv:
        prober = TcpProber(resolve("127.0.0.1"), srv.port)
        try:
            got = [prober.probe(500_000, 2.0).outcome]
            time.sleep(0.8)  # the server drops the idle echo connection meanwhile
            got += [prober.probe(8, 2.0).outcome, prober.probe(500_000, 2.0).outcome]
        finally:
            prober.close()
    assert got == ["ok", "ok", "ok"]


def test_db_paths_are_paths_not_uris(tmp_path):
    path = tmp_path / "odd?name%41#x.db"
    db = store.connect(str(path))
    db.close()
    assert path.exists() and sorted(p.name for p in tmp_path.iterdir())[0] == path.name
    store.connect(str(path), create=False).close()


def test_earlier_runs_count_against_the_budget(tmp_path):
    db = store.connect(str(tmp_path / "m.db"))
    run = store.start_run(db, host="h", address="a", transport="udp", period_s=1, config={})
    now = time.time()
    store.write_cycle(db, run, 0, [store.Probe(0, now - 7200, 8, 1000, "udp", "ok", 1.0),
                                   store.Probe(1, now - 100, 8, 500, "udp", "ok", 1.0),
                                   store.Probe(2, now - 50, 8, 700, "udp", "ok", 1.0)])
    sent, seconds = store.recent_traffic(db, 3600, now)
    assert sent == 1200 and seconds == pytest.approx(100)
    assert store.recent_traffic(db, 10, now) == (0, 0.0)
    db.close()
    rate = sched.cycle_bytes(fast_schedule(), "udp") / 0.2 * 1.5
    budget = sched.Budget(rate, "test")
    # what an earlier run sent just now uses up the allowance: the new run stops at once
    mon, reason, _db = run_monitor(tmp_path, FakeProber(), budget=budget, max_cycles=5,
                                   prior=(int(rate * 10), 1.0))
    assert reason.startswith("budget: ") and mon.totals.probes == 0
    _mon, reason, _db = run_monitor(tmp_path, FakeProber(), budget=budget, max_cycles=5,
                                    prior=(int(rate * 0.5), 1.0))
    assert reason == "completed 5 cycle(s)"

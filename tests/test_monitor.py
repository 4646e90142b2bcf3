"""`beoperf monitor`: schedule and budget arithmetic, the store, the loop with fake probers,
and real probes between namespace hosts (refused, kill -9, bytes the peer received,
metrics).  What its report finds on namespace links (an outage, congestion, a shaper's
burst) is in test_monitor_links.py."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from tests.helpers import cli, running_server
from tests.test_monitor_report import build_report

from beoperf import errors
from beoperf import report as renderers
from beoperf.model import document
from beoperf.monitor import schedule as sched
from beoperf.monitor import store
from beoperf.monitor.metrics import Metrics
from beoperf.monitor.probes import Result, resolve
from beoperf.monitor.runner import MARGIN, Monitor
from beoperf.suites import monitor as suite

FAST = ["--step", "8:3:0.05", "--step", "1000:1:0.05", "--start-offset", "0"]  # 0.2 s cycle


def monitor_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "beoperf", "monitor", *args]


def wait_until_monitoring(proc: subprocess.Popen) -> str:
    """Read a monitor's stdout until its "monitoring ..." line (printed as its loop
    starts): a test times what follows from there, not from a process start that a
    loaded machine makes slow.  The line."""
    for line in proc.stdout:
        if line.startswith("monitoring "):
            return line
    raise AssertionError(f"the monitor ended (status {proc.wait()}) before monitoring")


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
    ("8:3", "SIZE:COUNT:SPACING"), ("a:3:1", "integers"), ("8:0:1", "COUNT from 1 to"),
    ("8:99999999:1", "COUNT from 1 to 10,000"), ("8:1:-1", "SPACING from 0.001"),
    ("8:1:nan", "SPACING from"), ("8:1:inf", "SPACING from"), ("8:1:1e308", "SPACING from"),
    ("8:1:0.0001", "SPACING from 0.001")])
def test_bad_steps(text, message):
    with pytest.raises(ValueError, match=message):
        sched.parse_step(text)


def test_schedule_limits():
    with pytest.raises(ValueError, match="longer than the --period"):
        sched.Schedule.build([sched.Step(8, 3, 1)], 2, "icmp")
    with pytest.raises(ValueError, match="a cycle lasts at most"):
        sched.Schedule.build([sched.Step(8, 9000, 1e6)], None, "icmp")
    with pytest.raises(ValueError, match="probes per cycle: at most"):
        sched.Schedule.build([sched.Step(8, 6000, 1), sched.Step(8, 6000, 1)], None, "icmp")
    for period in (float("nan"), float("inf"), 1e308, 0.0, -1.0):
        with pytest.raises(ValueError, match="--period"):
            sched.Schedule.build([sched.Step(8, 1, 1)], period, "icmp")
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


@pytest.mark.parametrize("budget, link, line", [
    ("0.2%", "10M", "budget: 0.2% of 10 Mbit/s = 2,500.0 B/s (2,500 bytes per cycle)"),
    ("2kB/s", None, "budget: 2kB/s = 2,000.0 B/s (2,000 bytes per cycle)"),
    ("16kbit/s", None, "budget: 16kbit/s = 2,000.0 B/s"),
    ("16k", None, "budget: 16k = 2,000.0 B/s"),  # a plain rate is bit/s, as everywhere
    ("500B/s", "1G", "budget: 500B/s = 500.0 B/s"),
    # a capital B is bytes in a link speed too: 10GB/s is 80 Gbit/s (refused before)
    ("0.2%", "10GB/s", "budget: 0.2% of 80 Gbit/s = 20,000,000.0 B/s"),
    ("1%", "1.25GB/s", "budget: 1% of 10 Gbit/s = 12,500,000.0 B/s"),
    ("100%", "100Mbit/s", "budget: 100% of 100 Mbit/s = 12,500,000.0 B/s")])
def test_budgets(budget, link, line):
    """--budget and --link-speed are read by beoperf.units' grammar, as every option."""
    argv = ["monitor", "127.0.0.1", "--dry-run", "--step", "8:1:1", "--budget", budget]
    res = cli(*argv, *(["--link-speed", link] if link else []))
    assert res.status == 0, res.stderr
    assert line in res.stdout, res.stdout


def test_link_speed_in_bytes_is_eight_times_the_bits():
    res = cli("monitor", "127.0.0.1", "--dry-run", "--link-speed", "10GB/s")
    assert res.status == 0, res.stderr
    assert "share of the 80 Gbit/s link: " in res.stdout
    share = float(res.stdout.split("share of the 80 Gbit/s link: ")[1].split("%")[0])
    bits = cli("monitor", "127.0.0.1", "--dry-run", "--link-speed", "80G").stdout
    assert f"share of the 80 Gbit/s link: {share:.3f}%" in bits


@pytest.mark.parametrize("budget, link, message", [
    ("0.2%", None, "--budget 0.2%: a share of the link needs --link-speed"),
    ("0%", "10M", "--budget 0%: give more than 0% and at most 100%"),
    ("101%", "10M", "--budget 101%: fraction '101%' must be between 0 and 1"),
    ("lots", None, "--budget 'lots': give a share (0.2%, with --link-speed) or a rate"),
    ("2kB", None, "--budget '2kB': give a share"),
    ("1%", "fast", "--link-speed 'fast': not a rate")])
def test_bad_budgets(budget, link, message, tmp_path):
    argv = ["monitor", "127.0.0.1", "--db", str(tmp_path / "m.db"), "--budget", budget]
    res = cli(*argv, *(["--link-speed", link] if link else []))
    assert res.status == 2 and res.stderr.count("\n") == 1, res.stderr
    assert message in res.stderr, res.stderr
    assert list(tmp_path.iterdir()) == []


def default_cycle_bytes(host: str) -> tuple[int, int]:
    """(path MTU, bytes of the default cycle over ICMP) to `host`, the MTU read the way
    the product reads it (the kernel's route: 65,535 on most loopbacks, not all)."""
    target = resolve(host)
    schedule = sched.Schedule.build([sched.parse_step(t) for t in sched.DEFAULT_STEPS],
                                    None, "icmp")
    return target.mtu, sched.cycle_bytes(schedule, "icmp", target.ipv6, target.mtu)


def test_cli_refuses_a_schedule_over_budget(tmp_path):
    _mtu, per_cycle = default_cycle_bytes("127.0.0.1")
    assert per_cycle / 9 > 1250.0  # over 0.1% of 10 Mbit/s at any MTU
    db = tmp_path / "x.db"
    res = cli("monitor", "127.0.0.1", "--db", str(db), "--budget", "0.1%", "--link-speed", "10M")
    assert res.status == 2
    assert res.stderr.count("\n") == 1
    assert (f"{per_cycle:,} bytes per 9 s cycle = {per_cycle / 9:,.1f} B/s > 0.1% of "
            "10 Mbit/s = 1,250.0 B/s") in res.stderr
    assert list(tmp_path.iterdir()) == []


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


HUGE = "1e308"


@pytest.mark.parametrize("argv, message", [
    (["127.0.0.1"], "--db FILE is required"),
    (["127.0.0.1", "--db", "x", "--step", "8:3:1", "--period", "1"], "longer than"),
    (["127.0.0.1", "--db", "x", "--timeout", "0"], "--timeout"),
    (["report"], "give the database"),
    (["report", "x.db", "--from", "yesterday"], "--from 'yesterday'"),
    (["report", "x.db", "--noise-floor=-1"], "--noise-floor -1.0"),
    (["report", "x.db", "--noise-floor", "nan"], "--noise-floor nan"),
    (["report", "x.db", "--noise-floor", "inf"], "give 0 to 1000000 microseconds"),
    # huge, NaN and infinite numbers: one line each, never a traceback or a hang
    (["report", "x.db", "--from", HUGE], "--from '1e308': give a time from 1970-01-01"),
    (["report", "x.db", "--to", HUGE], "--to '1e308': give a time from 1970-01-01"),
    (["report", "x.db", "--from", "nan"], "--from 'nan': give a time"),
    (["report", "x.db", "--to=-inf"], "--to '-inf': give a time"),
    (["report", "x.db", "--to", "inf"], "--to 'inf': give a time"),
    (["127.0.0.1", "--db", "x", "--start-offset", HUGE], "--start-offset 1e+308: give"),
    (["127.0.0.1", "--db", "x", "--start-offset", "nan"], "--start-offset nan: give"),
    (["127.0.0.1", "--db", "x", "--start-offset", "inf"], "--start-offset inf: give"),
    (["127.0.0.1", "--db", "x", "--period", HUGE], "--period 1e+308: give seconds"),
    (["127.0.0.1", "--db", "x", "--period", "nan"], "--period nan: give seconds"),
    (["127.0.0.1", "--db", "x", "--period", "inf"], "--period inf: give seconds"),
    (["127.0.0.1", "--db", "x", "--timeout", HUGE], "--timeout 1e+308: give seconds"),
    (["127.0.0.1", "--db", "x", "--timeout", "nan"], "--timeout nan: give seconds"),
    (["127.0.0.1", "--db", "x", "--timeout", "inf"], "--timeout inf: give seconds"),
    (["127.0.0.1", "--db", "x", "--step", "8:99999999:1"], "COUNT from 1 to 10,000"),
    (["127.0.0.1", "--db", "x", "--step", "8:1:nan"], "SPACING from"),
    (["127.0.0.1", "--db", "x", "--step", f"8:1:{HUGE}"], "SPACING from"),
    (["127.0.0.1", "--db", "x", "--step", "8:2000:2000000"], "a cycle lasts at most"),
    (["127.0.0.1", "--db", "x", "--budget", "1e999B/s"], "must be finite and greater than 0"),
    (["127.0.0.1", "--db", "x", "--budget", "nan%", "--link-speed", "10M"], "--budget nan%"),
    (["127.0.0.1", "--db", "x", "--budget", "1%", "--link-speed", "1e999"],
     "--link-speed '1e999': rate '1e999' must be finite"),
    (["127.0.0.1", "--db", "x", "--budget", "..B/s"], "--budget '..B/s': give a share"),
    # each command refuses the other's options, by name
    (["report", "x.db", "--budget", "1%"],
     "--budget is an option of 'beoperf monitor HOST', not of this command"),
    (["report", "x.db", "--bud", "1%"], "--budget is an option of 'beoperf monitor HOST'"),
    (["report", "x.db", "--step", "8:1:1"], "--step is an option of 'beoperf monitor HOST'"),
    (["report", "x.db", "--db", "y.db"], "--db is an option of 'beoperf monitor HOST'"),
    (["report", "x.db", "-v"], "-v is an option of 'beoperf monitor HOST'"),
    (["127.0.0.1", "--db", "x", "--from", "2026-01-01"],
     "--from is an option of 'beoperf monitor report', not of this command"),
    (["127.0.0.1", "--db", "x", "-o", "out"], "-o is an option of 'beoperf monitor report'"),
    (["127.0.0.1", "--db", "x", "--json"], "--json is an option of 'beoperf monitor report'"),
    (["127.0.0.1", "--db", "x", "--noise-floor=5"], "--noise-floor is an option of 'beoperf "
                                                     "monitor report'"),
    (["127.0.0.1", "--db", "x", "extra"], "unrecognized arguments: extra"),
])
def test_cli_usage_errors(argv, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # "x", "x.db": never created, whatever happens
    if "--db" in argv and argv[0] != "report":
        argv = [*argv, "--dry-run"]  # were it accepted, it would not start probing
    res = cli("monitor", *argv)
    assert res.status == 2 and message in res.stderr and res.stderr.count("\n") == 1, \
        res.stderr
    assert list(tmp_path.iterdir()) == []


def test_options_may_come_before_the_host_or_the_file(tmp_path):
    res = cli("monitor", "--dry-run", "--step", "8:1:1", "127.0.0.1")
    assert res.status == 0, res.stderr
    assert "bytes per cycle of 1 s" in res.stdout
    db = tmp_path / "m.db"
    store.connect(str(db)).close()
    res = cli("monitor", "report", "--from", "2026-11-01", str(db))
    assert res.status == 1 and "no probes from 2026-11-01" in res.stderr, res.stderr


def test_link_local_target_without_interface_is_refused():
    res = cli("monitor", "fe80::1", "--dry-run")
    assert res.status == 1 and res.stderr.count("\n") == 1
    assert "a link-local address needs its interface, as in fe80::1%eth0" in res.stderr


def test_cli_noise_floor_default_is_the_reports():
    from beoperf.analysis import monitor_events as events
    from beoperf.cli import build_parser

    args = build_parser("monitor").parse_args(["monitor", "report", "x.db"])
    assert args.noise_floor == events.NOISE_FLOOR_US


def test_dry_run_on_loopback_prints_the_cost():
    mtu, per_cycle = default_cycle_bytes("127.0.0.1")
    res = cli("monitor", "127.0.0.1", "--dry-run", "--budget", "0.2%", "--link-speed", "10M")
    assert res.status == 0, res.stderr
    assert f"{per_cycle:,} bytes per cycle of 9 s with icmp and IP headers (path MTU {mtu})" \
        in res.stdout
    assert f"share of the 10 Mbit/s link: {100 * per_cycle / 9 * 8 / 10e6:.3f}%" in res.stdout


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


# --------------------------------------------------------------------------- one writer


def udp_monitor_argv(db: Path, port: int, *args: str) -> list[str]:
    return monitor_argv("127.0.0.1", "--db", str(db), "--transport", "udp", "--port",
                        str(port), *FAST, *args)


def test_a_second_monitor_on_one_db_is_refused_with_the_first_ones_pid(tmp_path):
    db = tmp_path / "m.db"
    alias = tmp_path / "alias.db"  # another name for the same database
    alias.symlink_to(db)
    with running_server() as srv:
        first = subprocess.Popen(udp_monitor_argv(db, srv.port), stdout=subprocess.PIPE,
                                 text=True)
        try:
            assert f"pid {first.pid}" in wait_until_monitoring(first)
            for name in (db, alias):
                second = subprocess.run(udp_monitor_argv(name, srv.port, "--cycles", "1"),
                                        capture_output=True, text=True, timeout=60)
                assert second.returncode == 1, second.stderr
                assert second.stderr.count("\n") == 1 and second.stdout == ""
                assert f"is in use by another beoperf monitor (pid {first.pid}" \
                    in second.stderr
            first.kill()  # SIGKILL: no clean-up code runs, the kernel drops the lock
            first.communicate(timeout=10)
            third = subprocess.run(udp_monitor_argv(db, srv.port, "--cycles", "1"),
                                   capture_output=True, text=True, timeout=60)
            assert third.returncode == 0, third.stderr
        finally:
            if first.poll() is None:
                first.kill()
                first.communicate(timeout=10)
    con = sqlite3.connect(db)
    assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 2  # first and third


def test_a_report_reads_what_a_running_monitor_committed(tmp_path):
    db = tmp_path / "m.db"
    with running_server() as srv:
        mon = subprocess.Popen(udp_monitor_argv(db, srv.port, "-v"), stdout=subprocess.PIPE,
                               text=True)
        try:
            wait_until_monitoring(mon)
            committed = [mon.stdout.readline() for _ in range(5)]  # 5 cycles, then report
            assert all(" committed: " in line for line in committed), committed
            res = cli("monitor", "report", str(db), "--json", "--baseline-windows", "2")
            assert res.status == 0, res.stderr
            assert res.json["body"]["summary"]["probes"] >= 5 * 4
            assert " committed: " in mon.stdout.readline()  # and the monitor goes on
        finally:
            mon.send_signal(signal.SIGTERM)
            mon.communicate(timeout=20)
    assert mon.returncode == 0
    probes = sqlite3.connect(db).execute("SELECT count(*) FROM probes").fetchone()[0]
    assert probes > res.json["body"]["summary"]["probes"]


def test_the_lock_is_per_database_and_per_process(tmp_path):
    fd = store.lock(str(tmp_path / "a.db"))
    try:
        with pytest.raises(store.StoreError, match=f"pid {os.getpid()}"):
            store.lock(str(tmp_path / "a.db"))  # flock: another open file, refused too
        other = store.lock(str(tmp_path / "b.db"))
        os.close(other)
    finally:
        os.close(fd)
    os.close(store.lock(str(tmp_path / "a.db")))  # free once closed
    assert (tmp_path / "a.db.lock").read_text() == f"{os.getpid()}\n"


@pytest.mark.parametrize("plant", ["symlink", "dangling symlink", "hard link", "other owner",
                                   "fifo", "big file"])
def test_a_planted_lock_file_is_refused_and_nothing_written(tmp_path, plant):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    os.chmod(victim, 0o600)
    lock = tmp_path / "m.db.lock"
    if plant == "symlink":
        lock.symlink_to(victim)
    elif plant == "dangling symlink":
        lock.symlink_to(tmp_path / "created-by-root")
    elif plant == "hard link":
        os.link(victim, lock)
    elif plant == "other owner":
        lock.write_text("")
        os.chown(lock, 65534, 65534)
    elif plant == "big file":  # someone's file that happens to have the name
        lock.write_text("not a pid\n" * 100)
        victim = lock
    else:
        os.mkfifo(lock)
    res = cli("monitor", "127.0.0.1", "--db", str(tmp_path / "m.db"), "--transport", "udp",
              "--port", "9", "--cycles", "1", *FAST)
    assert res.status == 1 and res.stderr.count("\n") == 1, res.stderr
    assert "the lock file is" in res.stderr or "not a beoperf lock file" in res.stderr
    assert victim.read_text() == ("not a pid\n" * 100 if plant == "big file" else "precious\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.db.lock", "victim"]


@pytest.mark.parametrize("kind", ["a FIFO", "a directory", "a device"])
def test_a_db_that_is_not_a_file_is_refused_before_sqlite_opens_it(tmp_path, kind):
    path = {"a device": Path("/dev/null")}.get(kind, tmp_path / "m.db")
    if kind == "a FIFO":
        os.mkfifo(path)
    elif kind == "a directory":
        path.mkdir()
    for argv in (udp_monitor_argv(path, 9, "--cycles", "1"),
                 monitor_argv("report", str(path))):
        res = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert res.returncode == 1 and res.stderr.count("\n") == 1, res.stderr
        assert f"{path}: is {kind}, not a database file" in res.stderr
    assert not Path("/dev/null.lock").exists()
    assert [p.name for p in tmp_path.iterdir()] == ([] if kind == "a device" else ["m.db"])


def read_only_mount(directory: Path, argv: list[str]) -> subprocess.CompletedProcess:
    """`argv` run in a private mount namespace where `directory` is mounted read-only."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a read-only bind mount")
    script = 'mount --bind -o ro "$1" "$1" && shift && exec "$@"'
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                           script, "sh", str(directory), *argv],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("state", ["with -wal and -shm", "closed cleanly", "new"])
def test_a_database_that_cannot_be_written_is_one_line(tmp_path, state):
    ro = tmp_path / "ro"
    ro.mkdir()
    db = ro / "m.db"
    if state != "new":
        with running_server() as srv:
            argv = udp_monitor_argv(db, srv.port, "--cycles", "1")
            if state == "with -wal and -shm":  # as a kill -9 leaves it
                argv = [sys.executable, "-c", "import os, sys; from beoperf.monitor import "
                        "store; store.connect(sys.argv[1]); os._exit(0)", str(db)]
            subprocess.run(argv, check=True, capture_output=True, timeout=60)
    before = sorted(p.name for p in ro.iterdir())
    res = read_only_mount(ro, udp_monitor_argv(db, 9, "--cycles", "1"))
    assert res.returncode == 1, res.stderr
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr
    assert f"{db}: cannot be written (" in res.stderr
    assert sorted(p.name for p in ro.iterdir()) == before


def test_a_read_only_database_file_is_one_line(tmp_path, monkeypatch):
    """A database SQLite opens read-only without a word (a file this user may not
    write): refused at start, not by a traceback at the first write."""
    db = tmp_path / "m.db"
    store.connect(str(db)).close()
    real = store.sqlite3.connect
    monkeypatch.setattr(store.sqlite3, "connect",
                        lambda database, **kw: real(database + "?mode=ro", **kw))
    res = cli("monitor", "127.0.0.1", "--db", str(db), "--transport", "udp", "--port", "9",
              "--cycles", "1", *FAST)
    assert res.status == 1 and res.stderr.count("\n") == 1, res.stderr
    assert f"{db}: cannot be written (attempt to write a readonly database)" in res.stderr


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


def lateness(mon: Monitor, prober: FakeProber, db: sqlite3.Connection) -> list[float]:
    """How late each probe was sent after its slot's due time, the slot being the one the
    monitor stored it under (so a drift or a shifted schedule shows as growing lateness).

    Checks on the way that every probe sent has its row, in sending order, each slot once."""
    rows = db.execute("SELECT cycle, slot, size FROM probes ORDER BY id").fetchall()
    assert [size for *_k, size in rows] == [size for _t, size, _timeout in prober.sent]
    assert len(set((c, s) for c, s, _size in rows)) == len(rows)  # no slot twice
    assert [(c, s) for c, s, _ in rows] == sorted((c, s) for c, s, _ in rows)
    slots, period = mon.slots, mon.schedule.period_s
    t0 = mon.started + mon.start_offset
    return [t - (t0 + cycle * period + slots[slot].offset_s)
            for (t, _size, _timeout), (cycle, slot, _size) in zip(prober.sent, rows, strict=True)]


def test_timeouts_never_shift_the_schedule(tmp_path):
    fail = {1, 2, 5, 9, 10, 11}  # whole-timeout sleeps
    prober = FakeProber(fail=fail)
    mon, reason, db = run_monitor(tmp_path, prober, max_cycles=5)
    assert reason == "completed 5 cycle(s)"
    late = lateness(mon, prober, db)
    # each probe sent within its own slot, never early: nothing drifts, however many time
    # out (a loaded machine may make the monitor skip a late probe: then it is not sent)
    windows = [mon.slots[s].window_s for (s,) in db.execute("SELECT slot FROM probes "
                                                            "ORDER BY id")]
    assert all(0 <= x < w for x, w in zip(late, windows, strict=True)), (late, windows)
    assert len(prober.sent) + mon.totals.skipped_probes + 4 * mon.totals.skipped_cycles \
        == 4 * (1 + db.execute("SELECT max(cycle) FROM probes").fetchone()[0])
    # a timeout lasts at most until the next probe is due, less the margin kept to commit
    for (_t, _size, timeout), w in zip(prober.sent, windows, strict=True):
        assert timeout <= w - min(MARGIN, w / 10) + 1e-9
    outcomes = [r[0] for r in db.execute("SELECT outcome FROM probes ORDER BY id")]
    assert [i for i, o in enumerate(outcomes) if o == "timeout"] == \
        sorted(i for i in fail if i < len(prober.sent))


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


def late_probes(res) -> int:
    """The probes a monitor run skipped as late, from its closing line (a cycle skipped
    whole is not one of the --cycles it runs: its probes are not among those counted)."""
    found = re.search(r"skipped \(late\) \d+ cycle\(s\) and (\d+) probe\(s\)",
                      res.stdout + res.stderr)
    return int(found.group(1)) if found else 0


@pytest.mark.parametrize("transport", ["udp", "tcp"])
def test_loopback_probes_answered_then_refused(tmp_path, transport):
    db = str(tmp_path / "m.db")
    with running_server() as srv:
        first = cli("monitor", "127.0.0.1", "--db", db, "--transport", transport, "--port",
                    str(srv.port), "--cycles", "3", *FAST)
        assert first.status == 0, first.stderr
        port = srv.port
    second = cli("monitor", "127.0.0.1", "--db", db, "--transport", transport, "--port",
                 str(port), "--cycles", "2", *FAST)
    assert second.status == 0, second.stderr
    con = sqlite3.connect(db)
    got = con.execute("SELECT run_id, outcome, count(*), count(rtt_us) FROM probes "
                      "GROUP BY 1, 2 ORDER BY 1").fetchall()
    # every probe of the cycles is stored, but for one found too late to mean anything
    # (more than half its 50 ms window: a busy machine), which is counted, not stored
    ok, refused = 12 - late_probes(first), 8 - late_probes(second)
    assert got == [(1, "ok", ok, ok), (2, "refused", refused, 0)]
    assert ok >= 9 and refused >= 6
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


@pytest.mark.skipif(shutil.which("nft") is None or shutil.which("ethtool") is None,
                    reason="nft and ethtool not installed (apt-get install nftables ethtool): "
                           "they count what the peer receives")
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
    sent, ok, failed = con.execute("SELECT sum(wire_bytes), sum(outcome = 'ok'), "
                                   "sum(outcome != 'ok') FROM probes").fetchone()
    # a probe that a loaded peer answers too late, or that the monitor skips when it is
    # itself late, still has its bytes right: no count of answers is assumed here
    assert ok > 0
    if transport == "tcp":  # counted from TCP_INFO: handshake, hello and ACKs included;
        # the peer also got what each connection sent after its last count: the SYN's
        # longer options, a last delayed ACK, FIN and ACK (or RST); a failed probe closes
        # its connection (a late echo would be read as the next probe's)
        connections = 1 + failed
        assert 0 <= nft_bytes(server) - sent <= 3 * 60 * connections, \
            (nft_bytes(server), sent, failed)
        return
    rows = con.execute("SELECT size, wire_bytes FROM probes").fetchall()
    assert all(wire == sched.wire_bytes(transport, size, mtu=mtu) for size, wire in rows)
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
        wait_until_monitoring(mon)
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
    assert reason == "stopped by SIGTERM"


def test_netns_kill_9_never_corrupts_or_loses_committed_cycles(netns_pair, tmp_path):
    server, client = netns_pair
    db = tmp_path / "m.db"
    rng = random.Random(5)
    committed: dict[tuple[int, int], int] = {}  # (run, cycle) -> rows, as the monitor said
    for _ in range(12):
        mon = client.popen(monitor_argv(server.addr4, "--db", db, "-v",
                                        "--step", "8:3:0.02", "--step", "2000:1:0.02",
                                        "--start-offset", "0"), stdout=subprocess.PIPE,
                           text=True)
        # "monitoring 198.18.0.1 (198.18.0.1) over icmp, run 3 in ...": its run id, then a
        # few 80 ms cycles, and a kill at any moment
        run = int(wait_until_monitoring(mon).split(", run ")[1].split()[0])
        time.sleep(rng.uniform(0.2, 0.9))
        os.kill(mon.pid, signal.SIGKILL)  # also frees the lock: the next run may start
        out, _ = mon.communicate(timeout=10)
        for line in out.splitlines():  # "cycle 3 committed: 4/4 answered ..."
            if line.startswith("cycle ") and " committed: " in line:
                words = line.split()
                committed[(run, int(words[1]))] = int(words[3].split("/")[1])
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    rows = {(r, c): (n, distinct) for r, c, n, distinct in con.execute(
        "SELECT run_id, cycle, count(*), count(DISTINCT slot) FROM probes GROUP BY 1, 2")}
    assert all(n == distinct <= 4 for n, distinct in rows.values())  # each slot at most once
    # nothing reported committed is lost, and every committed cycle is whole: as many
    # rows as the monitor wrote (fewer than 4 only if it skipped a late probe)
    assert {k: rows.get(k, (0, 0))[0] for k in committed} == committed
    in_flight = set(rows) - set(committed)  # committed, killed before saying so
    assert len({r for r, _c in in_flight}) == len(in_flight)  # at most one per kill
    assert len(committed) >= 12  # the test saw cycles committed (2 to 11 per run)
    assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 12


def test_netns_metrics_endpoint_parses(netns_pair, tmp_path):
    from prometheus_client.parser import text_string_to_metric_families

    server, client = netns_pair
    mon = client.popen(monitor_argv(server.addr4, "--db", tmp_path / "m.db",
                                    "--metrics-port", "9465", *FAST),
                       stdout=subprocess.PIPE, text=True)
    try:
        wait_until_monitoring(mon)  # the endpoint listens before the loop starts
        time.sleep(1.0)  # 5 cycles
        res = client.run([sys.executable, "-c", "import urllib.request, sys; sys.stdout.write("
                          "urllib.request.urlopen('http://127.0.0.1:9465/metrics', timeout=5)"
                          ".read().decode())"])
    finally:
        mon.send_signal(signal.SIGTERM)
        mon.communicate(timeout=20)
    names = {f.name for f in text_string_to_metric_families(res.stdout)}
    assert {"beoperf_probe_rtt_seconds", "beoperf_probes", "beoperf_probe_bytes"} <= names
    assert 'beoperf_probes_total{outcome="ok",size="8",transport="icmp"}' in res.stdout


def test_icmp_without_permission_is_a_clear_error(monkeypatch, tmp_path):
    from beoperf.monitor import probes

    def refuse(*_a, **_k):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(probes.socket, "socket", refuse)
    res = cli("monitor", "127.0.0.1", "--db", str(tmp_path / "never.db"))
    assert res.status == 1 and res.stderr.count("\n") == 1
    assert "ping_group_range" in res.stderr and "--transport udp" in res.stderr
    assert not (tmp_path / "never.db").exists()


@pytest.mark.tools("sysctl")
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

    from beoperf.engines import protocol

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
        stall = (0.0, 0.0)  # monotonic start and end

        def probe(self, size, timeout):
            result = super().probe(size, timeout)
            if len(self.sent) == 2:
                start = time.monotonic()
                time.sleep(0.33)  # e.g. the process was stopped for a moment
                self.stall = (start, time.monotonic())
            return result

    prober = Stalling()
    mon, reason, db = run_monitor(tmp_path, prober, max_cycles=4)
    assert reason == "completed 4 cycle(s)"
    late = lateness(mon, prober, db)
    slots = db.execute("SELECT cycle, slot FROM probes ORDER BY id").fetchall()
    window = {s.index: s.window_s for s in mon.slots}
    assert all(0 <= x < window[s] for x, (_c, s) in zip(late, slots, strict=True))  # no burst
    # every probe that fell due during the stall, found more than half its window late
    # when the monitor woke, was skipped (not sent late, and not stored)
    t0, period = mon.started + mon.start_offset, mon.schedule.period_s
    due = {(c, s.index): t0 + c * period + s.offset_s for c in range(8) for s in mon.slots}
    start, end = prober.stall
    missed = {k for k, d in due.items() if start < d < end - window[k[1]] / 2}
    assert len(missed) >= 5 and not missed & set(slots), (missed, slots)
    assert mon.totals.skipped_probes + 4 * mon.totals.skipped_cycles >= len(missed)


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
    assert store.read(str(path), lambda con: len(store.runs(con))) == 0
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


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


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGINT])
def test_sighup_and_ctrl_c_stop_a_monitor_cleanly(tmp_path, sig):
    """A closed terminal (SIGHUP) ends a monitor as SIGTERM does: exit 0, the run's end
    recorded with the signal, committed cycles kept."""
    db = tmp_path / "m.db"
    with running_server() as srv:
        mon = subprocess.Popen(udp_monitor_argv(db, srv.port, "-v"), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        try:
            wait_until_monitoring(mon)
            assert " committed: " in mon.stdout.readline()
            mon.send_signal(sig)
            _out, err = mon.communicate(timeout=20)
        finally:
            if mon.poll() is None:
                mon.kill()
                mon.communicate()
    assert mon.returncode == 0, err
    reason = sqlite3.connect(db).execute("SELECT stop_reason FROM runs").fetchone()[0]
    assert reason == f"stopped by {sig.name}"
    assert sqlite3.connect(db).execute("SELECT count(*) FROM probes").fetchone()[0] >= 4


# --------------------------------------------------------------------------- the session suite


def fast_spec(db: Path, port: int, **kw) -> suite.SessionSpec:
    return suite.SessionSpec(host="127.0.0.1", db=str(db), transport="udp", port=port,
                             steps=(sched.Step(8, 3, 0.05), sched.Step(1000, 1, 0.05)),
                             start_offset_s=0.0, **kw)


def test_a_session_is_a_schema_valid_document_of_what_it_did(tmp_path):
    lines: list[str] = []
    with running_server() as srv:
        doc = suite.session(fast_spec(tmp_path / "m.db", srv.port, cycles=3,
                                      command_line=("beoperf", "monitor", "x")),
                            progress=lines.append)
    document.validate(doc.kind, doc.to_json())
    b = doc.body
    assert (b["status"], b["stop_reason"], b["run_id"]) == ("stopped", "completed 3 cycle(s)", 1)
    assert b["totals"]["probes"] == 12 and b["totals"]["cycles"] == 3
    rows, sent = sqlite3.connect(tmp_path / "m.db").execute(
        "SELECT count(*), sum(wire_bytes) FROM probes").fetchone()
    assert (rows, sent) == (12, b["totals"]["bytes"])
    assert lines[0].startswith("probes: ") and lines[-1].startswith("monitoring 127.0.0.1 ")
    assert doc.meta["command_line"] == ["beoperf", "monitor", "x"]
    assert renderers.render(doc, "text").startswith("stopped (completed 3 cycle(s)): 3 cycle(s)")
    suite.check(doc)  # not a failure


def test_a_session_records_the_link_speed_and_its_report_judges_by_it(tmp_path):
    """--link-speed is in the run's config; over loopback the 1,000-byte probes come back
    far faster than a 10 Mbit/s link could carry them: no figure, and the reason."""
    with running_server() as srv:
        suite.session(fast_spec(tmp_path / "m.db", srv.port, cycles=30, link_bps=10e6))
    config = json.loads(sqlite3.connect(tmp_path / "m.db").execute(
        "SELECT config FROM runs").fetchone()[0])
    assert config["link_bps"] == 10e6
    doc = build_report(tmp_path / "m.db", baseline_windows=2)
    b = doc["summary"]["bandwidth_bps"]
    assert (b["status"], b["median"], b["link_bps"]) == ("above_link", None, 10e6), b
    assert any("above the 10 Mbit/s link (--link-speed)" in w for w in doc["warnings"])


def test_a_dry_run_is_a_planned_session_and_touches_nothing(tmp_path):
    doc = suite.plan(suite.SessionSpec(host="127.0.0.1", link_bps=10e6, budget_bps=20e3,
                                       budget_text="0.2% of 10 Mbit/s"))
    document.validate(doc.kind, doc.to_json())
    assert doc.body["status"] == "planned" and doc.body["budget"]["bytes_per_s"] == 2500.0
    text = renderers.render(doc, "text").splitlines()
    assert text[0].startswith("probes: ") and text[1].startswith("share of the 10 Mbit/s")
    assert text[2] == "budget: 0.2% of 10 Mbit/s = 2,500.0 B/s (22,500 bytes per cycle)"
    with pytest.raises(errors.BadSpec, match="schedule over budget"):
        suite.plan(suite.SessionSpec(host="127.0.0.1", budget_bps=8.0, budget_text="1 B/s"))
    for bad in (0.0, -8.0, float("nan")):  # the spec is checked, not only the options
        with pytest.raises(errors.BadSpec, match="give a finite rate > 0"):
            suite.plan(suite.SessionSpec(host="127.0.0.1", budget_bps=bad))


def test_a_session_that_spends_its_budget_is_exit_status_1(tmp_path):
    db = tmp_path / "m.db"
    with running_server() as srv:
        big = [*FAST[:2], "--step", "20000:1:0.05", *FAST[4:]]  # 20 times the bytes
        first = cli("monitor", "127.0.0.1", "--db", str(db), "--transport", "udp", "--port",
                    str(srv.port), "--cycles", "5", *big)
        assert first.status == 0, first.stderr
        # a budget the schedule fits, which the first run's traffic has spent already
        target = resolve("127.0.0.1")
        per_s = sched.cycle_bytes(fast_schedule(), "udp", target.ipv6, target.mtu) / 0.2
        res = cli("monitor", "127.0.0.1", "--db", str(db), "--transport", "udp", "--port",
                  str(srv.port), "--cycles", "5", "--budget", f"{per_s * 1.5:.1f}B/s", *FAST)
    assert res.status == 1, res.stderr
    first_line, last_line = res.stderr.splitlines()
    assert first_line.startswith("stopped (budget: ") and " 0 probe(s)" in first_line
    assert last_line.startswith("beoperf: monitor stopped: budget: ")
    reason = sqlite3.connect(db).execute("SELECT stop_reason FROM runs WHERE id = 2").fetchone()
    assert reason[0].startswith("budget: ")


def test_a_host_that_does_not_resolve_is_a_connection_error(tmp_path):
    """Exit status 3, as in every command that reaches a peer (it was 1 before)."""
    res = cli("monitor", "no-such-host.invalid", "--db", str(tmp_path / "m.db"))
    assert res.status == 3 and res.stderr.count("\n") == 1, res.stderr
    assert "beoperf: connection error: cannot resolve host 'no-such-host.invalid'" in res.stderr
    assert list(tmp_path.iterdir()) == []


def test_stop_signals_stop_the_command_until_the_loop_watches_them():
    """Before the loop runs (resolving, locking) a signal stops the command as it stops
    every command (exit 128 + signal); once it runs, it sets the flag with its name."""
    from beoperf.cli.monitor import stopping_on_signals

    with suite.StopFlag() as stop, stopping_on_signals(stop):
        with pytest.raises(KeyboardInterrupt) as caught:
            signal.raise_signal(signal.SIGTERM)
        assert str(caught.value) == "terminated by SIGTERM" and not stop.is_set()
        stop.armed = True
        signal.raise_signal(signal.SIGHUP)
        signal.raise_signal(signal.SIGINT)
        assert stop.is_set() and stop.reason == "stopped by SIGHUP"


def test_a_running_monitor_imports_no_numpy_nor_matplotlib(tmp_path):
    """A monitor runs for weeks: it carries only what monitoring needs (the report's
    numpy and matplotlib, the schema validator, the engines' C core stay out)."""
    code = ("import json, sys; from beoperf.cli import main; rc = main(sys.argv[1:]); "
            "print(json.dumps([rc, sorted(m for m in ('numpy', 'matplotlib', 'jsonschema', "
            "'beoperf._core', 'beoperf.analysis.monitor') if m in sys.modules)]))")
    with running_server() as srv:
        done = subprocess.run([sys.executable, "-c", code, "monitor", "127.0.0.1", "--db",
                               str(tmp_path / "m.db"), "--transport", "udp", "--port",
                               str(srv.port), "--cycles", "2", *FAST],
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == [0, []]


def test_a_session_interrupted_without_a_stop_flag_records_why(tmp_path):
    """Used as a library (no stop flag, no handlers), Ctrl-C still leaves the run's end
    in the database before it propagates."""
    db = tmp_path / "m.db"
    with running_server() as srv:
        timer = threading.Timer(0.5, signal.raise_signal, (signal.SIGINT,))
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                suite.session(fast_spec(db, srv.port))
        finally:
            timer.cancel()
    reason, ended = sqlite3.connect(db).execute(
        "SELECT stop_reason, ended_utc FROM runs").fetchone()
    assert reason == "interrupted by the user" and ended is not None
    assert sqlite3.connect(db).execute("SELECT count(*) FROM probes").fetchone()[0] >= 4

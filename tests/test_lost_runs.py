"""Nothing collected is lost, nothing runs unbounded (issue 25, item 5), with real
processes: a sweep piped through tee and stopped by Ctrl-C to its process group, a sweep
read by `head -1`, a sweep whose sizes stall, and runs kept without -o."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from beoperf import model
from beoperf.cli import runs, streams
from helpers import child_env, cli

BEOPERF = [sys.executable, "-m", "beoperf"]
SWEEP = ["pingpong", "--sizes", "1,1K,64K", "--time-budget", "1", "--history", "off"]


def _wait_for(path: Path, proc: subprocess.Popen, limit: float) -> None:
    """Until ``path`` exists (the process still running), at most ``limit`` seconds."""
    end = time.monotonic() + limit
    while not path.exists():
        assert proc.poll() is None, "the sweep ended before its first value was written"
        assert time.monotonic() < end, f"{path} not written within {limit} s"
        time.sleep(0.05)


def _valid(prefix: Path) -> None:
    doc = model.load(prefix.with_name(prefix.name + ".json"))
    assert doc.kind == "pingpong" and doc.body["sizes"]
    np_text = prefix.with_name(prefix.name + ".np").read_text()
    assert len(np_text.splitlines()) == len(doc.body["sizes"])


def test_ctrl_c_to_a_sweep_piped_through_tee_keeps_the_values_completed(tmp_path):
    """`beoperf pingpong --sweep ... -o P 2>&1 | tee log`, both in one process group, and
    SIGINT to the group once the first value is on disk: tee ends at once, so every line
    beoperf prints after meets a closed pipe.  The first value's .json and .np are whole,
    the comparison of the values completed is written, and beoperf ends with 130."""
    prefix = tmp_path / "P"
    log = (tmp_path / "log").open("wb")
    sweep = subprocess.Popen([*BEOPERF, *SWEEP, "--sweep", "sndbuf=64K,128K,256K",
                              "-o", str(prefix)], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, env=child_env(), process_group=0)
    tee = subprocess.Popen(["tee", str(tmp_path / "tee.log")], stdin=sweep.stdout, stdout=log,
                           process_group=sweep.pid)
    assert sweep.stdout is not None
    sweep.stdout.close()  # tee holds the only reading end: when it ends, the pipe is broken
    first = tmp_path / "P-sndbuf-64K.json"
    try:
        _wait_for(first, sweep, 60)
        os.killpg(sweep.pid, signal.SIGINT)
        status = sweep.wait(timeout=60)
        tee.wait(timeout=10)
    finally:
        for proc in (sweep, tee):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        log.close()
    assert tee.returncode == -signal.SIGINT  # the pipe's reader is gone
    assert status == 130
    _valid(tmp_path / "P-sndbuf-64K")
    assert (tmp_path / "P-compare.md").exists()
    for later in ("128K", "256K"):  # written whole, or not at all
        if (tmp_path / f"P-sndbuf-{later}.json").exists():
            _valid(tmp_path / f"P-sndbuf-{later}")
    assert "Traceback" not in (tmp_path / "tee.log").read_text()


def test_a_sweep_read_by_head_goes_on_and_writes_every_value(tmp_path):
    """`... | head -1`: head ends after the first line; the sweep still measures and writes
    every value and its comparison, prints no traceback, and exits 141 (its output was
    not all delivered: beoperf.cli.streams)."""
    prefix = tmp_path / "H"
    sweep = subprocess.Popen([*BEOPERF, *SWEEP, "--sweep", "sndbuf=64K,128K", "-o",
                              str(prefix)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=child_env())
    head = subprocess.run(["head", "-1"], stdin=sweep.stdout, capture_output=True, timeout=60)
    assert sweep.stdout is not None and sweep.stderr is not None
    sweep.stdout.close()
    err = sweep.stderr.read().decode()
    status = sweep.wait(timeout=60)
    assert len(head.stdout.decode().splitlines()) == 1
    assert status == streams.LOST_OUTPUT, err
    assert "Traceback" not in err
    for value in ("64K", "128K"):
        _valid(tmp_path / f"H-sndbuf-{value}")
    assert (tmp_path / "H-compare.md").exists()


def test_a_sweep_with_16k_buffers_ends_within_its_budget(tmp_path):
    """16 KiB socket buffers on loopback: each round trip of a large message took about
    10 s here, and the README's sweep ran 29.5 min for its first value.  Now each value
    ends within its budget (plus at most a trial longer than predicted), the whole sweep
    within the values' budgets and the start-up and graphs; sizes cut say so, and the
    total is said before the start."""
    budget = 3.0
    prefix = tmp_path / "B"
    started = time.monotonic()
    res = subprocess.run([*BEOPERF, "pingpong", "--sweep", "sndbuf=16K,64K", "--time-budget",
                          str(budget), "--history", "off", "-o", str(prefix)],
                         capture_output=True, text=True, env=child_env(), timeout=600)
    wall = time.monotonic() - started
    assert res.returncode == 0, res.stderr
    assert f"2 values x {budget:g} s (--time-budget, per value)" in res.stderr
    for value in ("16K", "64K"):
        body = model.load(tmp_path / f"B-sndbuf-{value}.json").body
        sweep = body["sweep"]
        assert sweep["elapsed_s"] <= 2 * budget, (value, sweep["elapsed_s"])
        short = sweep["short_of_minimum"]
        assert all(0 < trials < sweep["min_trials"] for _size, trials in short)
        for size, trials in short[:6]:  # the summary lists the first six
            assert f"{size} B ({trials})" in res.stdout
        if sweep["not_measured"]:
            n = len(sweep["not_measured"])
            assert f"{n} size{'s' if n != 1 else ''} not measured" in res.stdout
            assert not {s["size"] for s in body["sizes"]} & set(sweep["not_measured"])
    assert wall <= 2 * 2 * budget + 60  # start-up, two values' connections, the graphs


def test_a_run_without_o_is_kept_in_the_runs_directory(tmp_path, monkeypatch):
    """No -o: the run is written to $BEOPERF_RUNS (a private directory, made), its path
    printed; the newest KEEP runs stay."""
    where = tmp_path / "state" / "runs"
    monkeypatch.setenv(runs.ENV, str(where))
    res = cli("pingpong", "--sizes", "1,64", "--time-budget", "0.3", "--history", "off")
    assert res.status == 0, res.stderr
    kept = sorted(where.glob("*-pingpong-*.json"))
    assert len(kept) == 1 and f"kept in {kept[0]}" in res.stderr
    assert stat.S_IMODE(where.stat().st_mode) == 0o700
    assert model.load(kept[0]).kind == "pingpong"
    assert kept[0].with_suffix(".np").exists()


def test_the_runs_directory_keeps_the_newest_and_refuses_a_link(tmp_path, monkeypatch):
    where = tmp_path / "runs"
    where.mkdir(mode=0o700)
    for i in range(runs.KEEP + 3):
        for suffix in (".json", ".np"):
            (where / f"2026010{i // 10}T0000{i % 10:02d}Z-pingpong-00000{i % 10}"
                     f"{suffix}").write_text("x")
    (where / "notes.txt").write_text("mine")
    fd = os.open(where, os.O_RDONLY | os.O_DIRECTORY)
    try:
        removed = runs.prune(fd, runs.KEEP)
    finally:
        os.close(fd)
    assert len(removed) == 2 * 3 and all(n.startswith("2026010") for n in removed)
    assert sorted(removed)[0].startswith("20260100T000000Z")  # the oldest went
    assert (where / "notes.txt").exists() and len(list(where.iterdir())) == 2 * runs.KEEP + 1
    link = tmp_path / "linked"
    link.symlink_to(where)
    monkeypatch.setenv(runs.ENV, str(link))
    with pytest.raises(Exception, match="symbolic link"):
        runs.keep("pingpong", {".json": "{}"})
    monkeypatch.setenv(runs.ENV, "off")
    assert runs.keep("pingpong", {".json": "{}"}) is None


def test_a_sweep_value_stopped_before_its_first_size_leaves_no_file(tmp_path, monkeypatch):
    """The race the piped Ctrl-C test can lose: the stop lands after a value has started
    but before its first size completed.  That value's document would hold no size; it is
    not written (a file with nothing measured is not a result), the values before it are,
    with their comparison, and the exit status is the stop's."""
    from beoperf.suites import pingpong

    real = pingpong.run_configs

    def stopped_on_the_second(spec, key, values, progress=None, hold=None):
        configs = real(spec, key, values[:1], progress)
        for value, measured, stack in configs:
            yield value, measured, stack
        body = {**measured.document.body, "sizes": []}
        empty = model.Document(kind=measured.document.kind, body=body,
                               meta=measured.document.meta)
        yield values[1], pingpong.Measured(empty, measured.run, None, KeyboardInterrupt()), \
            contextlib.ExitStack()

    monkeypatch.setattr(pingpong, "run_configs", stopped_on_the_second)
    prefix = tmp_path / "P"
    result = cli("pingpong", "--sizes", "1,1K", "--time-budget", "0.5", "--history", "off",
                 "--sweep", "sndbuf=64K,128K", "-o", str(prefix))
    assert result.status == 130, result.stderr
    _valid(tmp_path / "P-sndbuf-64K")
    assert not (tmp_path / "P-sndbuf-128K.json").exists()
    assert not (tmp_path / "P-sndbuf-128K.np").exists()
    assert "sndbuf=128K: stopped before any size was measured" in result.stderr

"""SIGTERM, SIGHUP and SIGKILL: completed sizes are written, no process is left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from beoperf import interrupts
from helpers import cli, wait_for

SLOW_SWEEP = ["--precision", "0.0001", "--time-budget", "60"]  # never precise: 60 s


def children(pid: int) -> list[int]:
    """PIDs whose parent is ``pid`` (from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(entry.name))
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def start_sweep(prefix: Path) -> tuple[subprocess.Popen, int]:
    """A slow default sweep with its embedded server; (process, the server's PID)."""
    proc = subprocess.Popen([sys.executable, "-m", "beoperf", "pingpong", "-o", str(prefix),
                             *SLOW_SWEEP], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert wait_for(lambda: children(proc.pid), timeout=20), "the embedded server started"
    return proc, children(proc.pid)[0]


@pytest.mark.parametrize("sig, status", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_stop_signal_mid_sweep_writes_a_partial_result(tmp_path, sig, status):
    prefix = tmp_path / "partial"
    proc, server = start_sweep(prefix)
    try:
        time.sleep(2.5)  # a few sizes of 0.3 s each
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == status, err
    assert "Traceback" not in err
    assert f"terminated by {sig.name}" in err
    doc = json.loads(prefix.with_suffix(".json").read_text())["body"]
    assert doc["status"] == "interrupted"
    assert doc["status_reason"] == f"terminated by {sig.name}"
    assert doc["sizes"] and all(s["trials"] >= 1 for s in doc["sizes"])
    assert not all(s["converged"] for s in doc["sizes"])
    assert len(prefix.with_suffix(".np").read_text().splitlines()) == len(doc["sizes"])
    assert wait_for(lambda: not alive(server), timeout=5), "the embedded server is gone"


def test_sigkill_leaves_no_embedded_server(tmp_path):
    proc, server = start_sweep(tmp_path / "killed")
    try:
        time.sleep(0.5)
        proc.kill()
        proc.wait()
        gone = wait_for(lambda: not alive(server), timeout=2)
    finally:
        if alive(server):
            os.kill(server, signal.SIGKILL)
    assert gone, "the embedded server outlived its parent by more than 2 s"


def test_stop_signal_is_held_while_writing():
    """A SIGTERM during interrupts.deferred() is raised when the block ends, once."""
    with interrupts.handling():
        written = []
        with pytest.raises(interrupts.Terminated) as info:
            with interrupts.deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)  # the handler has run by now
                written.append("result")
        assert written == ["result"] and info.value.signum == signal.SIGTERM
        os.kill(os.getpid(), signal.SIGTERM)  # a second one is ignored: cleanup goes on
        time.sleep(0.05)
    assert interrupts.exit_status(info.value) == 143


def test_handlers_are_given_back():
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    res = cli("pingpong", "--sizes", "")
    assert res.status == 2
    assert {s: signal.getsignal(s) for s in before} == before


def test_cpu_pinning_with_the_embedded_server():
    """--cpu N,M without a host: the embedded server must not inherit the client's CPU."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs")
    first, second = sorted(os.sched_getaffinity(0))[:2]
    res = cli("pingpong", "--sizes", "64", "--cpu", f"{first},{second}", "--time-budget", "2",
              "--json")  # where each end ran, not how long
    assert res.status == 0, res.stderr
    assert res.json["body"]["local"]["cpus"] == [first]
    assert res.json["body"]["remote"]["cpus"] == [second]


def test_a_launched_rank_s_reason_is_told_with_the_signal_that_stopped_this_process():
    """An MPI rank is stopped by SIGUSR1 whatever stopped beoperf, so it says "interrupted
    by the user"; beoperf tells the signal it got (SIGTERM: a scheduler's limit, kill),
    and leaves every other reason, and a Ctrl-C's, as the rank gave it."""
    from beoperf import interrupts

    user = interrupts.BY_THE_USER
    term = interrupts.Terminated(signal.SIGTERM)
    assert interrupts.relayed(user, term) == "terminated by SIGTERM"
    assert interrupts.relayed(user, interrupts.Terminated(signal.SIGHUP)) == \
        "terminated by SIGHUP"
    assert interrupts.relayed(user, KeyboardInterrupt()) == user
    assert interrupts.relayed(user, None) == user
    assert interrupts.relayed("rank 1 failed", term) == "rank 1 failed"
    assert interrupts.relayed(None, term) is None

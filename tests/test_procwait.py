"""beoperf.procwait: a child's end is seen when it happens (a pidfd), not at the next
tick of a sleeping poll as with Popen.wait(timeout); timeouts and the fallback."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from beoperf import procwait


def child(seconds: float, status: int = 0) -> subprocess.Popen:
    code = f"import time, sys; time.sleep({seconds}); sys.exit({status})"
    return subprocess.Popen([sys.executable, "-c", code])


def no_sleeping(monkeypatch):
    def refuse(_s):
        raise AssertionError("procwait slept: it polls instead of waking on the exit")
    monkeypatch.setattr(procwait.time, "sleep", refuse)
    monkeypatch.setattr(subprocess.time, "sleep", refuse)  # Popen.wait(timeout)'s poll


def test_the_exit_status_without_a_polling_sleep(monkeypatch):
    proc = child(0.2, 3)
    no_sleeping(monkeypatch)
    assert procwait.wait(proc, 30) == 3
    assert proc.returncode == 3


def test_still_running_after_the_timeout(monkeypatch):
    proc = child(30)
    try:
        no_sleeping(monkeypatch)
        began = time.monotonic()
        assert procwait.wait(proc, 0.2) is None
        assert time.monotonic() - began >= 0.2
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_already_ended_and_no_timeout():
    proc = child(0, 0)
    proc.wait()
    assert procwait.wait(proc, 1) == 0
    assert procwait.wait(child(0.05, 2), None) == 2


def test_without_pidfd_the_poll_is_left(monkeypatch):
    def missing(_pid, _flags=0):
        raise OSError(38, "Function not implemented")
    monkeypatch.setattr(os, "pidfd_open", missing)
    proc = child(30)
    try:
        assert procwait.wait(proc, 0.1) is None
    finally:
        proc.kill()
        proc.wait()
    assert procwait.wait(child(0.05, 4), 30) == 4


@pytest.mark.parametrize("timeout", [0, 0.0001])
def test_a_zero_timeout_returns_at_once(timeout):
    proc = child(30)
    try:
        assert procwait.wait(proc, timeout) is None
    finally:
        proc.kill()
        proc.wait()

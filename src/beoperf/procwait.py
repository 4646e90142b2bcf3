"""Waiting for a child process to end, woken the moment it does.

``subprocess.Popen.wait(timeout)`` polls: it sleeps between checks, the sleep doubling
up to 50 ms, so a process is seen to end up to 50 ms after it did.  `beoperf cluster
hpcc` lost about that much on every HPCC run it launched (bench/RESULTS.md, C4), 2-7%
of a short run.  A pidfd (Linux 5.3) becomes readable when the process ends, and
waiting on it wakes at once; where there is none (an older kernel, a seccomp filter),
the poll is what is left.
"""

from __future__ import annotations

import math
import os
import select
import subprocess
import time


def wait(proc: subprocess.Popen, timeout: float | None) -> int | None:
    """``proc``'s exit status, or None while it still runs after ``timeout`` seconds
    (``timeout`` None: as long as it takes).  Signals interrupt it as they interrupt
    ``Popen.wait`` (Ctrl-C raises KeyboardInterrupt)."""
    if timeout is None:
        return proc.wait()
    if proc.poll() is not None:
        return proc.returncode
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        deadline = time.monotonic() + timeout
        while not poller.poll(max(0, math.ceil((deadline - time.monotonic()) * 1000))):
            if time.monotonic() >= deadline:
                break
    finally:
        os.close(fd)
    return proc.poll()

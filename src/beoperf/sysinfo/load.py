"""Was the machine dedicated to the run?  The load average and the busiest other processes.

Published cluster evaluations insist on a dedicated machine: another process on a CPU
shows in every figure.  A run records, at its start and end, the load average and the
busiest processes other than beoperf's own tree (by CPU over a short window, from the
utime and stime of ``/proc/PID/stat``; by name from ``/proc/PID/comm`` only, never the
command line, which may hold secrets), and warns when the machine was not dedicated: the
load beyond beoperf's own above 0.5 per CPU, or another process above 10% of a CPU.

Reads are bounded, a process that ends while it is read is left out, and a text that
does not parse is ignored: this must never cost the measurement.
"""

from __future__ import annotations

import math
import os
import resource
import time
from dataclasses import dataclass, field
from typing import Any

from beoperf import safeio

WINDOW_S = 0.2  # the window over which each process's CPU is counted
LOAD_PER_CPU = 0.5  # more load than this per CPU, beyond beoperf's own: not dedicated
BUSY_SHARE = 0.10  # another process above this share of one CPU: not dedicated
TOP = 8  # the busiest other processes recorded
MAX_PIDS = 8192  # ~18 us a read: at most ~0.15 s a look at every process
MAX_STAT = 4096  # /proc/PID/stat is one line of a few hundred bytes
MAX_COMM = 64  # TASK_COMM_LEN is 16
LOADAVG_TAU_S = 60.0  # the 1-minute load average's time constant
try:
    CLK_TCK = float(os.sysconf("SC_CLK_TCK"))
except (ValueError, OSError):  # pragma: no cover - Linux has it
    CLK_TCK = 100.0


@dataclass(frozen=True)
class Proc:
    """What /proc/PID/stat says of one process: its state, parent and CPU ticks."""

    state: str
    ppid: int
    ticks: int


def _read(path: str, limit: int) -> str | None:
    try:
        return safeio.read_text(path, limit, "a /proc file")
    except (safeio.FileInputError, OSError):
        return None


def parse_loadavg(text: str) -> tuple[float, float, float] | None:
    """The 1, 5 and 15 minute load averages of a /proc/loadavg text, or None."""
    fields = text.split()[:3]
    try:
        values = tuple(float(f) for f in fields)
    except ValueError:
        return None
    if len(values) != 3 or not all(math.isfinite(v) and 0 <= v < 1e6 for v in values):
        return None
    return values[0], values[1], values[2]


def parse_stat(text: str) -> Proc | None:
    """State, parent and utime + stime of a /proc/PID/stat text, or None.  The name is
    between the first "(" and the last ")" and may hold spaces and parentheses, so the
    fields are counted from the last ")"."""
    close = text.rfind(")")
    rest = text[close + 1:].split()[:16] if close >= 0 else []
    if len(rest) < 13 or len(rest[0]) != 1:
        return None
    try:
        ppid, utime, stime = int(rest[1]), int(rest[11]), int(rest[12])
    except ValueError:
        return None
    if min(ppid, utime, stime) < 0:
        return None
    return Proc(rest[0], ppid, utime + stime)


def parse_comm(text: str) -> str | None:
    """A process's name from /proc/PID/comm, made printable (any user may name a process:
    a terminal escape sequence is shown as "?"), or None when empty."""
    name = "".join(c if c.isprintable() else "?" for c in text.rstrip("\n"))[:MAX_COMM]
    return name or None


def processes(proc: str = "/proc") -> dict[int, Proc]:
    """Every process readable now, by PID (at most MAX_PIDS)."""
    try:
        pids = [int(e) for e in os.listdir(proc) if e.isdigit()][:MAX_PIDS]
    except OSError:
        return {}
    out = {}
    for pid in pids:
        text = _read(os.path.join(proc, str(pid), "stat"), MAX_STAT)
        found = parse_stat(text) if text is not None else None
        if found is not None:
            out[pid] = found
    return out


def own_tree(procs: dict[int, Proc], root: int) -> set[int]:
    """``root`` and every process descended from it."""
    children: dict[int, list[int]] = {}
    for pid, p in procs.items():
        children.setdefault(p.ppid, []).append(pid)
    tree, todo = {root}, [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in tree:
                tree.add(child)
                todo.append(child)
    return tree


def _children_cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


@dataclass
class Moment:
    """The machine at one moment: what a document records (``record``), and beoperf's
    own CPU so far, to tell its load from the others' at the end."""

    record: dict[str, Any]
    own_cpu_s: float
    at: float = field(default_factory=time.monotonic)


def _busiest(before: dict[int, Proc], after: dict[int, Proc], own: set[int],
             seconds: float, proc: str) -> list[dict[str, Any]]:
    """The TOP busiest processes not in ``own``, by share of one CPU over the window."""
    shares = [((after[pid].ticks - p.ticks) / CLK_TCK / seconds, pid)
              for pid, p in before.items() if pid in after and pid not in own
              and after[pid].ticks >= p.ticks]
    out = []
    for share, pid in sorted(shares, reverse=True)[:TOP]:
        text = _read(os.path.join(proc, str(pid), "comm"), MAX_COMM + 1)
        name = parse_comm(text) if text is not None else None
        if name is not None and share > 0:
            out.append({"name": name, "cpu_percent": round(100 * share, 1)})
    return out


def moment(window: float = WINDOW_S, proc: str = "/proc", me: int | None = None) -> Moment:
    """The load average, the number of CPUs, beoperf's own running processes and the
    busiest others over ``window`` seconds (beoperf's tree: ``me``, this process, and its
    descendants)."""
    me = os.getpid() if me is None else me
    before, t0 = processes(proc), time.monotonic()
    time.sleep(window)
    after, t1 = processes(proc), time.monotonic()
    own = own_tree(before, me) | own_tree(after, me)
    text = _read(os.path.join(proc, "loadavg"), 4096)
    loads = parse_loadavg(text) if text is not None else None
    record = {"utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "load": list(loads) if loads else None,
              "cpus": os.cpu_count() or 1,
              "own_running": sum(1 for pid in own if pid in after and after[pid].state == "R"),
              "busiest": _busiest(before, after, own, max(t1 - t0, 1e-3), proc)}
    own_s = sum(after[pid].ticks for pid in own if pid in after) / CLK_TCK
    return Moment(record, own_s + _children_cpu_s())


def own_load_at_end(start: Moment, end: Moment) -> float:
    """beoperf's own share of the 1-minute load average at the end: its CPU over the run
    as a number of busy CPUs, weighted as the load average weighs the run's length, and
    never less than its processes running at that moment."""
    seconds = max(end.at - start.at, 1e-3)
    rate = max(end.own_cpu_s - start.own_cpu_s, 0.0) / seconds
    return max(float(end.record["own_running"]),
               rate * (1 - math.exp(-seconds / LOADAVG_TAU_S)))


def _others_load(record: dict[str, Any], own: float) -> float | None:
    """The load average beyond beoperf's own, when it is above LOAD_PER_CPU per CPU."""
    loads, cpus = record.get("load"), record.get("cpus") or 1
    if not loads or loads[0] - own <= LOAD_PER_CPU * cpus:
        return None
    return float(loads[0] - own)


def _busy(record: dict[str, Any]) -> str | None:
    busy = [p for p in record.get("busiest") or [] if p["cpu_percent"] > 100 * BUSY_SHARE]
    return ", ".join(f"{p['name']} ({p['cpu_percent']:.0f}%)" for p in busy) or None


def judge(moments: list[tuple[str, dict[str, Any], float]]) -> list[str]:
    """One warning when the machine was not dedicated at any of ``moments`` (when, the
    record, beoperf's own load then): the load beyond beoperf's own above LOAD_PER_CPU
    per CPU, or another process above BUSY_SHARE of a CPU; nothing otherwise."""
    loads, busy = [], []
    for when, record, own in moments:
        others = _others_load(record, own)
        if others is not None:
            loads.append(f"{others:.2f} at {when}")
        names = _busy(record)
        if names:
            busy.append(f"{names} at {when}")
    parts = []
    if loads:
        cpus = moments[-1][1].get("cpus") or 1
        parts.append(f"load average beyond beoperf's own {' and '.join(loads)} on {cpus} "
                     f"CPU(s), above {LOAD_PER_CPU} per CPU")
    if busy:
        parts.append(f"other processes above {100 * BUSY_SHARE:.0f}% of a CPU: "
                     + "; ".join(busy))
    return ["the machine was not dedicated to the run: " + "; ".join(parts)] if parts else []


__all__ = ["Moment", "judge", "moment", "own_load_at_end", "own_tree", "parse_comm",
           "parse_loadavg", "parse_stat", "processes"]

"""The monitor loop: fixed cadence on the monotonic clock, one transaction per cycle.

Cycle ``k`` of a run starts at ``t0 + k * period`` (``t0`` = now + a random offset within
one period, so that monitors started together do not probe together); probe ``i`` of a
cycle is due at its slot's offset.  A probe's timeout ends at the latest when the next
probe is due, so timeouts never shift the schedule.  When the process falls more than a
cycle behind (suspended, or a slow disk), the missed cycles are skipped, not bunched;
so is any probe found more than half its window late (counted in
``Totals.skipped_probes``, not stored: a probe sent late with a cut-short timeout would
record loss that did not happen).  Each probe's timeout ends a
little before the next probe is due (``MARGIN``), leaving time to commit the cycle.

Before each probe the bytes sent so far plus the probe's estimate are checked against
the budget's allowance (rate x (elapsed + one period)); over it, probing stops and the
run records why.  What earlier runs in the same database sent within the last
``BUDGET_MEMORY`` seconds counts too (``prior``), so restarting the monitor, by hand or
by a service manager, does not reset the budget.
"""

from __future__ import annotations

import os
import random
import select
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from beoperf.monitor import store
from beoperf.monitor.probes import Prober, Result
from beoperf.monitor.schedule import Budget, Schedule, Slot

if TYPE_CHECKING:
    from beoperf.monitor.metrics import Metrics

Log = Callable[[str], None]
MIN_TIMEOUT = 0.001
BUDGET_MEMORY = 3600.0  # seconds of earlier runs' traffic that count against the budget
MARGIN = 0.02  # seconds (at most a tenth of the window) kept free before the next probe


class StopFlag:
    """Like threading.Event for one thread and its signal handlers: ``set`` only sets a
    flag (and the first reason given) and writes to a pipe, so it is safe in a handler;
    ``wait`` selects on the pipe.  ``armed`` is True once a monitor loop watches it: a
    signal handler sets the flag from then on (before, the loop would never see it)."""

    def __init__(self) -> None:
        self.flag = False
        self.armed = False
        self.reason: str | None = None
        self.r, self.w = os.pipe()
        os.set_blocking(self.w, False)

    def set(self, reason: str | None = None) -> None:
        self.reason = self.reason or reason
        self.flag = True
        try:
            os.write(self.w, b"x")
        except OSError:  # full or closed: the flag is what counts
            pass

    def is_set(self) -> bool:
        return self.flag

    def wait(self, timeout: float) -> bool:
        if not self.flag and timeout > 0:
            select.select([self.r], [], [], timeout)
        return self.flag

    def close(self) -> None:
        os.close(self.r)
        os.close(self.w)

    def __enter__(self) -> StopFlag:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


@dataclass
class Totals:
    cycles: int = 0
    probes: int = 0
    answered: int = 0
    bytes: int = 0
    skipped_cycles: int = 0
    skipped_probes: int = 0


class Monitor:
    def __init__(self, prober: Prober, schedule: Schedule, db: sqlite3.Connection,
                 run_id: int, *, timeout: float, budget: Budget | None = None,
                 metrics: Metrics | None = None, log: Log | None = None,
                 start_offset: float | None = None, max_cycles: int | None = None,
                 prior: tuple[int, float] = (0, 0.0), stop: StopFlag | None = None) -> None:
        self.prober, self.schedule, self.db, self.run_id = prober, schedule, db, run_id
        self.timeout, self.budget, self.metrics, self.log = timeout, budget, metrics, log
        self.slots = schedule.slots()
        self.start_offset = (random.uniform(0, schedule.period_s) if start_offset is None
                             else start_offset)
        self.max_cycles = max_cycles
        self.stop = StopFlag() if stop is None else stop
        self.totals = Totals()
        self.started = 0.0
        self.prior_bytes, self.prior_s = prior  # earlier runs: bytes sent, over seconds

    # ------------------------------------------------------------------ the loop

    def run(self) -> str:
        """Probe until stopped; the reason it stopped ("stopped by signal": the stop
        flag was set, whose own reason, if it was given one, says more)."""
        self.stop.armed = True
        self.started = time.monotonic()
        t0 = self.started + self.start_offset
        period = self.schedule.period_s
        cycle = 0
        while not self.stop.is_set():
            if self.max_cycles is not None and self.totals.cycles >= self.max_cycles:
                return f"completed {self.max_cycles} cycle(s)"
            start = t0 + cycle * period
            behind = time.monotonic() - start
            if behind > period:  # fell behind: skip, do not bunch
                missed = int(behind // period)
                self.totals.skipped_cycles += missed
                cycle += missed
                continue
            results, stopped = self._cycle(start)
            if results:
                store.write_cycle(self.db, self.run_id, cycle, results)
                self._committed(cycle, results)
            if stopped:
                return stopped
            cycle += 1
        return "stopped by signal"

    def _cycle(self, start: float) -> tuple[list[store.Probe], str | None]:
        results: list[store.Probe] = []
        for slot in self.slots:
            due = start + slot.offset_s
            if self.stop.wait(max(0.0, due - time.monotonic())):
                return results, "stopped by signal"
            if time.monotonic() - due > slot.window_s / 2:  # too late to mean anything
                self.totals.skipped_probes += 1
                continue
            reason = self._over_budget(slot)
            if reason:
                return results, reason
            end = due + slot.window_s - min(MARGIN, slot.window_s / 10)
            timeout = max(MIN_TIMEOUT, min(self.timeout, end - time.monotonic()))
            results.append(self._row(slot, self._probe(slot, timeout)))
        return results, None

    def _probe(self, slot: Slot, timeout: float) -> Result:
        """The prober's result; an unexpected exception becomes an "error" row."""
        t_utc = time.time()
        try:
            return self.prober.probe(slot.size, timeout)
        except Exception as exc:  # noqa: BLE001 - one odd probe must not end weeks of data
            return Result(t_utc, "error", None, f"internal: {exc!r}"[:500], 0)

    def _over_budget(self, slot: Slot) -> str | None:
        if self.budget is None:
            return None
        elapsed = time.monotonic() - self.started + self.prior_s
        allowance = self.budget.bytes_per_s * (elapsed + self.schedule.period_s)
        sent = self.prior_bytes + self.totals.bytes
        if sent + self.prober.estimate(slot.size) <= allowance:
            return None
        return (f"budget: {sent:,} bytes sent in {elapsed:,.0f} s; the next "
                f"probe ({slot.size} B) would exceed {self.budget.text} = "
                f"{self.budget.bytes_per_s:,.1f} B/s")

    def _row(self, slot: Slot, r: Result) -> store.Probe:
        self.totals.probes += 1
        self.totals.bytes += r.wire_bytes
        self.totals.answered += r.outcome == "ok"
        if self.metrics:
            self.metrics.observe(self.prober.transport, slot.size, r.outcome, r.rtt_us,
                                 r.wire_bytes, r.t_utc)
        return store.Probe(slot.index, r.t_utc, slot.size, r.wire_bytes,
                           self.prober.transport, r.outcome, r.rtt_us, r.error)

    def _committed(self, cycle: int, rows: list[store.Probe]) -> None:
        self.totals.cycles += 1
        if self.metrics:
            self.metrics.cycles.inc()
        if self.log:
            ok = [p for p in rows if p.outcome == "ok"]
            rtts = " ".join(f"{p.size}B:{p.rtt_us / 1000:.3f}ms" for p in ok if p.rtt_us)
            failed = " ".join(f"{p.size}B:{p.outcome}" for p in rows if p.outcome != "ok")
            self.log(f"cycle {cycle} committed: {len(ok)}/{len(rows)} answered "
                     f"{rtts} {failed}".rstrip())

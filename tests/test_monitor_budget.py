"""The monitor's budget, on a virtual clock: what a budget lets through, probe by probe.

The loop (``beoperf.monitor.runner``) checks before each probe that the bytes sent so far
plus the probe's estimate stay within rate x (elapsed + one period): the headroom of one
period is what lets a cycle start at all (at elapsed 0 the allowance would be 0).  Here
the loop runs on a clock that moves only when it waits for the next probe, so every
probe is sent exactly when due and the arithmetic is exact: a schedule at exactly the
budget's rate probes every slot of every cycle, and one just over it is stopped at the
one probe where its deficit first exceeds the headroom.
"""

from __future__ import annotations

import pytest

from beoperf.monitor import runner, store
from beoperf.monitor import schedule as sched
from beoperf.monitor.probes import Result

PUBLISHED = sched.Schedule.build([sched.parse_step(s) for s in sched.DEFAULT_STEPS], None,
                                 "udp")  # 3 pings of 8 B 1 s apart, one of 20,000 B; 9 s
CYCLE = sched.cycle_bytes(PUBLISHED, "udp")


class Clock:
    """monotonic() and time() for the runner; only ``Stop.wait`` moves it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return 1.7e9 + self.now


class Stop(runner.StopFlag):
    """The runner's stop flag, whose waits pass on the virtual clock instead of sleeping."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock

    def wait(self, timeout: float) -> bool:
        if not self.flag and timeout > 0:
            self.clock.now += timeout
        return self.flag


class Prober:
    """Answers at once; each probe costs its estimate on the wire (UDP over IPv4)."""

    transport = "udp"
    address = "198.18.0.1"

    def __init__(self) -> None:
        self.sent: list[tuple[float, int]] = []

    def estimate(self, size: int) -> int:
        return sched.wire_bytes("udp", size)

    def probe(self, size: int, timeout: float) -> Result:
        self.sent.append((runner.time.monotonic(), size))
        return Result(runner.time.time(), "ok", 100.0, None, self.estimate(size))

    def close(self) -> None:
        return None


@pytest.fixture
def monitor(tmp_path, monkeypatch):
    """monitor(schedule, rate, cycles, prior) -> (Monitor, reason, Prober), run to its end
    on a virtual clock."""
    clock = Clock()
    monkeypatch.setattr(runner, "time", clock)
    db = store.connect(str(tmp_path / "m.db"))
    stops: list[Stop] = []

    def run(schedule: sched.Schedule, rate: float, cycles: int,
            prior: tuple[int, float] = (0, 0.0)):
        run_id = store.start_run(db, host="h", address="a", transport="udp",
                                 period_s=schedule.period_s, config={})
        prober, stop = Prober(), Stop(clock)
        stops.append(stop)
        mon = runner.Monitor(prober, schedule, db, run_id, timeout=1.0,
                             budget=sched.Budget(rate, "the test's budget"), start_offset=0,
                             max_cycles=cycles, prior=prior, stop=stop)
        return mon, mon.run(), prober

    yield run
    for stop in stops:
        stop.close()
    db.close()


def test_the_published_schedule_fits_its_own_rate():
    assert CYCLE == 3 * 36 + 20_288  # 20,008 B of UDP in 14 fragments, each with its header
    assert not sched.over_budget(PUBLISHED, CYCLE, sched.Budget(CYCLE / 9.0, "exact"))
    assert sched.over_budget(PUBLISHED, CYCLE, sched.Budget(CYCLE / 9.0 * (1 - 1e-9), "less"))
    assert not sched.over_budget(PUBLISHED, CYCLE, None)


@pytest.mark.parametrize("steps, cycles", [(sched.DEFAULT_STEPS, 50), (("1000:1:0.25",), 200)])
def test_a_schedule_at_exactly_the_budget_probes_every_slot(monitor, steps, cycles):
    """At a rate of exactly one cycle's bytes per period, every probe of every cycle is
    sent, on time.  The one-probe schedule is tight: each probe brings the bytes sent to
    exactly the allowance (1,028 B per 0.25 s), so it needs "at most", not "below"."""
    schedule = sched.Schedule.build([sched.parse_step(s) for s in steps], None, "udp")
    per_cycle = sched.cycle_bytes(schedule, "udp")
    mon, reason, prober = monitor(schedule, per_cycle / schedule.period_s, cycles)
    assert reason == f"completed {cycles} cycle(s)"
    slots = schedule.slots()
    assert len(prober.sent) == mon.totals.probes == cycles * len(slots)
    assert mon.totals.bytes == cycles * per_cycle
    assert [t for t, _size in prober.sent] == [
        1000.0 + c * schedule.period_s + s.offset_s for c in range(cycles) for s in slots]


def test_a_schedule_just_over_the_budget_stops_at_the_right_probe(monitor):
    """0.8% over: the headroom of one period (20,396 B) is used up by cycle 41's big
    probe.  At slot k of cycle c the allowance is rate x (9c + offset_k + 9) and the bytes
    would be 20,396c + the cycle's bytes up to and with slot k; with rate = 0.992 x
    20,396 / 9 the 20,000-byte probe (offset 3 s) fits while (c + 1) <= 0.992 (c + 4/3),
    that is up to cycle 40; the 8-byte ones fit until cycle 123."""
    rate = CYCLE / 9.0 * 0.992
    mon, reason, prober = monitor(PUBLISHED, rate, 200)
    assert len(prober.sent) == mon.totals.probes == 41 * 4 + 3
    assert mon.totals.cycles == 42  # the last one partly: what it sent is stored
    assert prober.sent[-1] == (1000.0 + 41 * 9 + 2, 8)
    sent = 41 * CYCLE + 3 * 36
    assert mon.totals.bytes == sent
    assert reason == (f"budget: {sent:,} bytes sent in {41 * 9 + 3:,} s; the next probe "
                      f"(20000 B) would exceed the test's budget = {rate:,.1f} B/s")
    assert reason == ("budget: 836,344 bytes sent in 372 s; the next probe (20000 B) would "
                      "exceed the test's budget = 2,248.1 B/s")


@pytest.mark.parametrize("prior_s, probes", [(0.0, 3), (4.5, 4 * 20)])
def test_what_an_earlier_run_sent_counts(monitor, prior_s, probes):
    """Half a cycle's bytes sent by an earlier run: sent just now, they leave room for the
    three small probes only; sent over the last half period (at the rate), for all."""
    prior = (CYCLE // 2, prior_s)
    mon, reason, prober = monitor(PUBLISHED, CYCLE / 9.0, 20, prior)
    assert len(prober.sent) == mon.totals.probes == probes
    if probes == 3:
        assert reason == (f"budget: {CYCLE // 2 + 108:,} bytes sent in 3 s; the next probe "
                          f"(20000 B) would exceed the test's budget = {CYCLE / 9:,.1f} B/s")
    else:
        assert reason == "completed 20 cycle(s)"


# --------------------------------------------------------------------------- bytes on the wire


@pytest.mark.parametrize("transport, size, ipv6, mtu, wire", [
    ("icmp", 8, False, 1500, 20 + 8 + 8),
    ("udp", 8, False, 1500, 20 + 8 + 8),
    ("icmp", 8, True, 1500, 40 + 8 + 8),
    ("udp", 1472, False, 1500, 1500),  # exactly one MTU: one packet
    ("udp", 1473, False, 1500, 1481 + 2 * 20),  # 1,481 B of UDP: 1,480 + 1 in two fragments
    ("udp", 2942, False, 1500, 2950 + 2 * 20),  # 2,950 B: 1,480 + 1,470
    ("udp", 1500, True, 1500, 1508 + 2 * (40 + 8)),  # IPv6: 1,448 B a fragment, + 8 B header
    ("udp", 1452, True, 1500, 1500),  # IPv6, exactly one MTU
    ("udp", 2892, True, 1500, 2900 + 3 * (40 + 8)),  # 2,900 B: 1,448 + 1,448 + 4
    ("udp", 17948, False, 9000, 17956 + 3 * 20),  # jumbo: 8,976 B a fragment (8 B multiples)
    ("tcp", 100, False, 1500, 104 + 2 * 52),  # one segment and one ACK (52 B headers)
    ("tcp", 1450, False, 1500, 1454 + 3 * 52),  # 1,454 B: two segments of 1,448, one ACK
    ("tcp", 3000, False, 1500, 3004 + 5 * 52),  # three segments, two (delayed) ACKs
    ("tcp", 1430, True, 1500, 1434 + 3 * 72),  # IPv6: 1,428 B a segment
])
def test_wire_bytes_count_every_header(transport, size, ipv6, mtu, wire):
    """The bytes a probe puts on the link, counted by hand from the header sizes: IPv4 20,
    IPv6 40 (+ 8 per fragment), ICMP and UDP 8, TCP 32 (with timestamps) plus the echo's
    4-byte length prefix; fragments carry multiples of 8 bytes."""
    assert sched.wire_bytes(transport, size, ipv6, mtu) == wire
    if mtu == 1500:
        assert sched.wire_bytes(transport, size, ipv6) == wire


def test_cycle_bytes_pass_the_path_on():
    schedule = sched.Schedule.build([sched.Step(1430, 2, 1.0), sched.Step(17948, 1, 1.0)],
                                    None, "tcp")
    assert sched.cycle_bytes(schedule, "tcp", ipv6=True, mtu=9000) == (
        2 * sched.wire_bytes("tcp", 1430, True, 9000)
        + sched.wire_bytes("tcp", 17948, True, 9000))
    assert sched.wire_bytes("tcp", 17948, True, 9000) == 17952 + (3 + 2) * 72
    udp = sched.Schedule.build([sched.Step(1473, 2, 1.0)], None, "udp")
    assert sched.cycle_bytes(udp, "udp") == 2 * (1481 + 2 * 20)

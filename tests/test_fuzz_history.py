"""Fuzz of what issue 28 (item 9) changed: a history file of arbitrary bytes or of
arbitrary medians (this setup's and other setups' of this host) never raises, and the
interval it widens stays positive, finite and within the cap (beoperf.sweep.history);
the server's turns (beoperf.engines.tcp_server.Turns) keep their bounds under any
sequence of events."""

from __future__ import annotations

import json
import math
import os
import random
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beoperf.analysis import intervals
from beoperf.engines.tcp_server import Turns
from beoperf.suites.pingpong import across_runs
from beoperf.sweep import history as h
from test_history import HOST, NOW, sweep, utc

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SETUP = {"peer": "127.0.0.1", **HOST}
# the widest a history may make an interval, on the log scale, over the within-run part
CAP = intervals.between_runs_halfwidth(h.MAX_RELATIVE_SD)

medians = (st.floats(min_value=h.MIN_MEDIAN, max_value=h.MAX_MEDIAN)
           | st.sampled_from([h.MIN_MEDIAN, h.MAX_MEDIAN, 5e-324, 1e308, 0.0, -1.0])
           | st.integers(min_value=-(2**70), max_value=2**70))
points = st.sampled_from([1, 16, 256, 4096, 65536, 1048576]) | st.integers(-3, 2**40)
runs = st.lists(st.lists(st.tuples(points, medians), max_size=8), max_size=6)


def checked_widening(directory: Path) -> list[str]:
    """A run widened by the history in ``directory``: its notes; every interval is
    positive, finite and at most CAP (on the log scale) beyond its within-run part."""
    run = sweep(1.0, rng=random.Random(1))
    notes = across_runs(run, h.History.load(directory, "pingpong", SETUP, NOW), utc())
    for s in run.sizes:
        low, high = s.ci95_us
        m = s.time_us["median"]
        within = s.ci95_within_run_us or s.ci95_us
        assert 0 < low <= m <= high < math.inf
        wide = max(math.log(m / low), math.log(high / m))
        base = max(math.log(m / within[0]), math.log(within[1] / m))
        assert wide <= math.hypot(base, CAP) * (1 + 1e-9)
    return notes


def write(directory: Path, setup: dict, data: bytes) -> None:
    (directory / f"{h.setup_key('pingpong', setup)}.json").write_bytes(data)


def history_bytes(drawn: list, setup: dict) -> bytes:
    return json.dumps({"format": h.FORMAT, "setup": setup, "runs": [
        {"utc": utc(0.1 + i * 0.01), "medians": [[p, v] for p, v in run]}
        for i, run in enumerate(drawn)]}).encode()


@SETTINGS
@given(st.binary(max_size=2048))
def test_a_history_of_arbitrary_bytes(data):
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o700)
        write(Path(tmp), SETUP, data)
        checked_widening(Path(tmp))


@SETTINGS
@given(runs, runs)
def test_histories_of_arbitrary_medians_mine_and_another_setup_s(mine, other):
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o700)
        write(Path(tmp), SETUP, history_bytes(mine, SETUP))
        another = {**SETUP, "peer": "198.18.0.9"}
        write(Path(tmp), another, history_bytes(other, another))
        notes = checked_widening(Path(tmp))
        assert all(isinstance(n, str) and "\n" not in n for n in notes)


events = st.lists(st.tuples(st.sampled_from(["refused", "holder", "started", "ended"]),
                            st.sampled_from(["a", "b", "c", "d"]),
                            st.floats(min_value=0, max_value=5)), max_size=60)


@SETTINGS
@given(events)
def test_turns_under_any_sequence_of_events(seq):
    """The waiting list stays within its bound; a refusal always names at least one
    other address; an address alone (never another's event) is never refused."""
    turns, alone, now = Turns(hold=2.0, remember=10.0, most=3), Turns(hold=2.0), 0.0
    for what, host, step in seq:
        now += step
        if what == "refused":
            turns.refused(host, now)
        elif what == "holder":
            got = turns.holder(host, now)
            assert got >= 0 and (got == 0 or host not in turns.kept_for)
        elif what == "started":
            turns.started(host)
        else:
            turns.ended(host, now)
        assert len(turns.waiting) <= 3
        assert alone.holder("a", now) == 0
        alone.started("a")
        alone.ended("a", now)

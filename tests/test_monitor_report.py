"""The monitor report on synthetic stores whose truth is known (accelerated schedule).

Each database is written through store.py (start_run, write_cycle) at the accelerated
test schedule: one cycle per 0.2 s, three 8-byte probes then one of 20,000 bytes, a
few thousand cycles (10-20 minutes of data).  Reports are made by the suite
(suites/monitor.py), every one validated against the monitor-report schema.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from tests.helpers import cli

from beoperf import errors, model
from beoperf import report as renderers
from beoperf.analysis import monitor as analysis
from beoperf.analysis import monitor_cycles as cycles
from beoperf.analysis import monitor_events as events
from beoperf.analysis import monitor_series as series
from beoperf.cli.monitor import write_report
from beoperf.model import document
from beoperf.model.document import Document
from beoperf.model.monitor import PLOTS
from beoperf.monitor import store
from beoperf.report import monitor_plots as plots
from beoperf.suites import monitor as suite

T0 = 1793577600.0  # 2026-11-02 00:00:00 UTC, a Monday
PERIOD = 0.2  # s per cycle
SMALL, LARGE = 8, 20000
SCHEDULE = [{"size": SMALL, "count": 3, "spacing_s": 0.02},
            {"size": LARGE, "count": 1, "spacing_s": 0.1}]
OFFSETS = (0.0, 0.02, 0.04, 0.06)  # send time of each slot in its cycle, s
BASE_US = 20_000.0  # RTT of the small probes, µs
BPS = 50e6  # bandwidth of the synthetic path, bit/s

# A cycle's truth: (rtt of the small probes µs, noise scale µs, loss fraction, outcome
# of all its probes or None for "by the loss").
Truth = Callable[[int], tuple[float, float, float, str | None]]


def steady(k: int) -> tuple[float, float, float, str | None]:
    return BASE_US, 100.0, 0.0, None


def write_db(path: Path, truth: Truth, n_cycles: int, *, t0: float = T0, host: str = "peer",
             seed: int = 1, runs: list[tuple[int, int]] | None = None,
             transport: str = "icmp", bps: Callable[[int], float] = lambda k: BPS,
             config: dict | None = None) -> Path:
    """A store with `n_cycles` cycles; `runs` lists (first cycle, time offset s) of each run
    (default one run); a run's cycles go on until the next run's first cycle.  The large
    probe of cycle k crosses at bps(k); `config` is added to every run's config."""
    rng = np.random.default_rng(seed)
    db = store.connect(str(path))
    db.execute("PRAGMA synchronous=OFF")  # a test database need not survive a power loss
    runs = runs or [(0, 0.0)]
    bounds = [first for first, _ in runs[1:]] + [n_cycles]
    for (first, offset), stop in zip(runs, bounds, strict=True):
        run_id = store.start_run(db, host=host, address="192.0.2.1", transport=transport,
                                 period_s=PERIOD, started_utc=t0 + offset,
                                 config={"period_s": PERIOD, "schedule": SCHEDULE,
                                         "timeout_s": 0.1} | (config or {}))
        for k in range(first, stop):
            store.write_cycle(db, run_id, k - first,
                              cycle_probes(truth, k, t0 + offset + k * PERIOD, rng,
                                           transport, bps(k)))
    db.close()
    return path


def cycle_probes(truth: Truth, k: int, t: float, rng: np.random.Generator,
                 transport: str = "icmp", bps: float = BPS) -> list[store.Probe]:
    rtt, noise, loss, outcome = truth(k)
    out = []
    for slot, offset in enumerate(OFFSETS):
        size = SMALL if slot < 3 else LARGE
        kind = outcome or ("timeout" if rng.random() < loss else "ok")
        value = rtt + rng.gamma(2.0, noise / 2.0)
        if size == LARGE:
            value += 2 * 8 * (LARGE - SMALL) / bps * 1e6
        out.append(store.Probe(slot, t + offset, size, size + 28, transport, kind,
                               value if kind == "ok" else None))
    return out


def t_cycle(k: int, t0: float = T0) -> float:
    return t0 + k * PERIOD


def report_document(db: str | Path, **options) -> Document:
    """The suite's report on a database, checked against its schema."""
    doc = suite.report(suite.ReportSpec(db=str(db), **options))
    document.validate(doc.kind, doc.to_json())
    return doc


def build_report(db: str | Path, **options) -> dict:
    """The body of the suite's report on a database."""
    return report_document(db, **options).body


# --- databases --------------------------------------------------------------------------

OUTAGE = (1000, 1150)  # cycles with no answer at all


def outage_truth(k: int) -> tuple[float, float, float, str | None]:
    if OUTAGE[0] <= k < OUTAGE[1]:
        return BASE_US, 100.0, 0.0, "unreachable" if k % 3 == 0 else "timeout"
    if k == 2000:  # one lone unanswered cycle: not an outage at outage_cycles=2
        return BASE_US, 100.0, 0.0, "timeout"
    return steady(k)


CONGESTED = (2500, 3000)


def congestion_truth(k: int) -> tuple[float, float, float, str | None]:
    if CONGESTED[0] <= k < CONGESTED[1]:
        return BASE_US + 6000.0, 600.0, 0.05, None
    return BASE_US, 100.0, 0.002, None


SHIFT_AT = 3003  # not on a window boundary: one window holds both levels


def shift_truth(k: int) -> tuple[float, float, float, str | None]:
    return (BASE_US if k < SHIFT_AT else BASE_US + 5000.0), 100.0, 0.002, None


DIP = (1500, 1700)  # a stable dip shorter than a baseline: neither congestion nor shift


def dip_then_down_truth(k: int) -> tuple[float, float, float, str | None]:
    low = DIP[0] <= k < DIP[1] or k >= 4003
    return (BASE_US - 5000.0 if low else BASE_US), 100.0, 0.002, None


@pytest.fixture(scope="module")
def dbs(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("monitor")
    return {
        "outage": str(write_db(d / "outage.sqlite", outage_truth, 3000)),
        "congestion": str(write_db(d / "congestion.sqlite", congestion_truth, 6000)),
        "shift": str(write_db(d / "shift.sqlite", shift_truth, 6000)),
        "down": str(write_db(d / "down.sqlite", dip_then_down_truth, 6000)),
        # run 2 starts 100 s after run 1's last cycle was due
        "gap": str(write_db(d / "gap.sqlite", steady, 3000, runs=[(0, 0.0), (1500, 100.0)])),
        "dead": str(write_db(d / "dead.sqlite", lambda k: (BASE_US, 0.0, 0.0, "timeout"), 50)),
    }


@pytest.fixture(scope="module")
def documents(dbs) -> dict[str, Document]:
    return {name: report_document(path) for name, path in dbs.items()}


@pytest.fixture(scope="module")
def docs(documents) -> dict[str, dict]:
    return {name: doc.body for name, doc in documents.items()}


# --- outages and availability ---------------------------------------------------------


def test_outage_reported_within_one_cycle(docs):
    (out,) = docs["outage"]["outages"]
    assert abs(out["start_utc"] - t_cycle(OUTAGE[0])) <= PERIOD
    assert abs(out["end_utc"] - t_cycle(OUTAGE[1])) <= PERIOD
    assert out["cycles"] == OUTAGE[1] - OUTAGE[0]
    assert out["kind"] == "timeout"  # 100 of 150 cycles time out, 50 are unreachable
    assert out["outcomes"]["unreachable"] == 4 * 50
    assert not out["open"]


def test_availability_matches_the_arithmetic(docs):
    s = docs["outage"]["summary"]
    failed_cycles = OUTAGE[1] - OUTAGE[0] + 1  # the outage and the lone cycle 2000
    assert s["probes"] == 4 * 3000
    assert s["answered_pct"] == pytest.approx(100.0 * (3000 - failed_cycles) / 3000, abs=1e-3)
    monitored = 3000 * PERIOD
    assert s["monitored_s"] == pytest.approx(monitored)
    down = (OUTAGE[1] - OUTAGE[0]) * PERIOD
    assert s["uptime_pct"] == pytest.approx(100.0 * (1 - down / monitored), abs=1e-3)


def test_outage_cycles_is_the_threshold(dbs):
    doc = build_report(dbs["outage"], outage_cycles=1)
    assert [o["cycles"] for o in doc["outages"]] == [150, 1]
    assert build_report(dbs["outage"], outage_cycles=151)["outages"] == []


def test_outage_open_when_the_data_end_inside_it(dbs):
    doc = build_report(dbs["outage"], t_to=t_cycle(1100))
    (out,) = doc["outages"]
    assert out["open"] and out["ended_by"] == "end of data"
    assert out["end_utc"] == pytest.approx(t_cycle(1099) + OFFSETS[-1])


def test_gaps_are_not_monitored_and_not_outages(docs):
    doc = docs["gap"]
    (gap,) = doc["not_monitored"]
    assert gap["start_utc"] == pytest.approx(t_cycle(1500))
    assert gap["end_utc"] == pytest.approx(t_cycle(1500) + 100.0)
    assert doc["outages"] == []
    s = doc["summary"]
    assert s["monitored_s"] == pytest.approx(3000 * PERIOD)
    assert s["answered_pct"] == 100.0 and s["uptime_pct"] == 100.0
    assert doc["range"]["not_monitored_s"] == pytest.approx(100.0)


def test_outage_is_cut_at_a_gap(tmp_path):
    def truth(k: int) -> tuple[float, float, float, str | None]:
        return BASE_US, 100.0, 0.0, "timeout" if 1400 <= k < 1600 else None

    path = write_db(tmp_path / "cut.sqlite", truth, 2000, runs=[(0, 0.0), (1500, 100.0)])
    first, second = build_report(str(path))["outages"]
    assert first["open"] and first["ended_by"] == "gap" and first["cycles"] == 100
    assert second["open_start"] and not second["open"] and second["cycles"] == 100


# --- congestion and level shifts ----------------------------------------------------


def _overlaps(item: dict, lo: float, hi: float) -> bool:
    return item["start_utc"] < hi and item["end_utc"] > lo


def test_congestion_found_where_it_was_and_nowhere_else(docs):
    doc = docs["congestion"]
    lo, hi = t_cycle(CONGESTED[0]), t_cycle(CONGESTED[1])
    (event,) = doc["congestion"]
    assert _overlaps(event, lo, hi)
    assert abs(event["start_utc"] - lo) < 10.0 and abs(event["end_utc"] - hi) < 10.0
    assert event["added_ms"] == pytest.approx(3.0, abs=0.5)  # +6 ms RTT = +3 ms one way
    assert event["ratio"] > 1.2 and event["dispersion_ratio"] > 2.0
    assert event["loss_pct"] > event["baseline"]["loss_pct"]
    assert doc["level_shifts"] == []


@pytest.mark.parametrize("name, at, change_ms", [("shift", SHIFT_AT, 2.5),
                                                  ("down", 4003, -2.5)])
def test_level_shift_is_not_congestion(docs, name, at, change_ms):
    doc = docs[name]
    assert doc["congestion"] == []  # the dip of "down" is no congestion either
    (shift,) = doc["level_shifts"]
    assert abs(shift["at_utc"] - t_cycle(at)) < 5 * PERIOD
    assert shift["change_ms"] == pytest.approx(change_ms, abs=0.1)


@pytest.mark.parametrize("kind", ["dispersion", "loss"])
def test_dispersion_or_loss_alone_is_congestion(tmp_path, kind):
    def truth(k: int) -> tuple[float, float, float, str | None]:
        busy = CONGESTED[0] <= k < CONGESTED[1]
        noise = 1500.0 if busy and kind == "dispersion" else 150.0
        return BASE_US, noise, 0.15 if busy and kind == "loss" else 0.002, None

    doc = build_report(str(write_db(tmp_path / "alone.sqlite", truth, 6000)))
    (event,) = doc["congestion"]
    assert _overlaps(event, t_cycle(CONGESTED[0]), t_cycle(CONGESTED[1]))
    assert event["duration_s"] == pytest.approx((CONGESTED[1] - CONGESTED[0]) * PERIOD,
                                                rel=0.15)
    assert doc["level_shifts"] == []
    if kind == "loss":
        assert event["loss_pct"] > 10.0 and event["ratio"] == pytest.approx(1.0, abs=0.01)
    else:
        assert event["dispersion_ratio"] > 5.0


def test_steady_link_has_no_events(docs):
    for name in ("gap", "outage"):
        assert docs[name]["congestion"] == [] and docs[name]["level_shifts"] == []


# --- latency and bandwidth ------------------------------------------------------------


def test_bandwidth_recovers_the_synthetic_path(docs):
    for name in ("outage", "shift", "gap"):
        b = docs[name]["summary"]["bandwidth_bps"]
        assert b["median"] == pytest.approx(BPS, rel=0.03)
        assert (b["status"], b["above_link"]) == ("figure", 0)
        # only the window (8 cycles) holding the level shift has an IQR of 5 ms
        assert b["unresolved"] == (8 if name == "shift" else 0)
        # 2 x 8 x 19,992 bits in 2 x the 100 µs noise floor (the IQR is below it)
        assert b["resolvable_bps"] == pytest.approx(16 * (LARGE - SMALL) / 200e-6, rel=1e-6)


def bandwidth_cells(md: str) -> list[str]:
    """The bandwidth column of every table row of a Markdown report."""
    return [row.split(" | ")[7] for row in md.splitlines()
            if row.startswith("| ") and "bandwidth" not in row and row.count(" | ") >= 8]


def test_a_large_probe_within_the_noise_gives_a_lower_bound_not_a_figure(tmp_path):
    """A 20 Gbit/s path adds 16 µs to a 20,000-byte probe, within 2 x the 100 µs noise
    floor: before issue 11 the report printed a median of whatever the noise gave (a few
    Gbit/s); now every period shows '> 1599.36', the rate 2 x 8 x 19,992 bits in 200 µs."""
    db = write_db(tmp_path / "fast.sqlite", steady, 2000, bps=lambda k: 20e9)
    document = report_document(db)
    doc = document.body
    bound = 16 * (LARGE - SMALL) / 200e-6
    for period in [doc["summary"], *doc["days"], *doc["weeks"]]:
        b = period["bandwidth_bps"]
        assert (b["status"], b["median"]) == ("lower_bound", None), b
        assert b["resolvable_bps"] == pytest.approx(bound, rel=1e-6)
        assert b["unresolved"] > b["cycles"] / 2
    assert all(v is None for v in doc["series"]["timeline"]["bandwidth_bps"]["median"])
    texts = [t.get_text() for ax in plots.bandwidth_figure(doc).axes for t in ax.texts]
    assert "no bandwidth figure: the probes cannot resolve it (see the warnings)" in texts
    md = renderers.render(document, "markdown")
    assert set(bandwidth_cells(md)) == {f"> {bound / 1e6:.2f}"}
    (warning,) = [w for w in doc["warnings"] if w.startswith("bandwidth:")]
    assert f"> {bound / 1e6:,.2f} Mbit/s is a lower bound, not a figure" in warning
    assert "within the small probes' noise" in warning and "--step SIZE:1:SPACING" in warning
    # a 500 Mbit/s path (+640 µs) stands clear of the floor: a figure again
    clear = build_report(write_db(tmp_path / "clear.sqlite", steady, 2000,
                                  bps=lambda k: 500e6))
    assert clear["summary"]["bandwidth_bps"]["median"] == pytest.approx(500e6, rel=0.05)


def test_the_small_probes_iqr_sets_the_resolution_when_above_the_floor(tmp_path):
    """With 2 ms of noise (IQR about 1.4 ms), a 1.6 ms extra time is within the noise
    although far above the floor; 6.4 ms (50 Mbit/s) stands clear of it."""
    def noisy(k: int) -> tuple[float, float, float, str | None]:
        return BASE_US, 2000.0, 0.0, None

    slow = build_report(write_db(tmp_path / "slow.sqlite", noisy, 2000, bps=lambda k: 50e6))
    assert slow["summary"]["bandwidth_bps"]["status"] == "figure"
    fast = build_report(write_db(tmp_path / "fast.sqlite", noisy, 2000, bps=lambda k: 200e6))
    b = fast["summary"]["bandwidth_bps"]
    assert (b["status"], b["median"]) == ("lower_bound", None)
    # gamma(2, 1000 µs): IQR 1,422 µs; the windows' IQRs scatter around it
    assert 16 * (LARGE - SMALL) / (2 * 1.8e-3) < b["resolvable_bps"] \
        < 16 * (LARGE - SMALL) / (2 * 1.1e-3)


def test_estimates_above_the_link_speed_are_flagged_and_never_a_figure(tmp_path):
    """A run started with --link-speed 10M whose 20,000-byte probes cross at 100 Mbit/s
    (within a shaper's burst): no period shows a figure, the warning says why and which
    probe size would measure the shaped rate."""
    db = write_db(tmp_path / "shaped.sqlite", steady, 2000, bps=lambda k: 100e6,
                  config={"link_bps": 10e6})
    document = report_document(db)
    doc = document.body
    for period in [doc["summary"], *doc["days"], *doc["weeks"]]:
        b = period["bandwidth_bps"]
        assert (b["status"], b["median"], b["link_bps"]) == ("above_link", None, 10e6), b
        assert b["above_link"] == b["cycles"] == 2000
    assert all(v is None for v in doc["series"]["timeline"]["bandwidth_bps"]["max"])
    texts = [t.get_text() for ax in plots.bandwidth_figure(doc).axes for t in ax.texts]
    assert "no bandwidth figure: the estimates are above the link speed (see the " \
           "warnings)" in texts
    assert doc["source"]["runs"][0]["link_bps"] == 10e6
    md = renderers.render(document, "markdown")
    assert set(bandwidth_cells(md)) == {"above link (2000 of 2000)"}
    (warning,) = [w for w in doc["warnings"] if w.startswith("bandwidth:")]
    assert "above the 10 Mbit/s link (--link-speed): probes pass within a shaper's burst" \
        in warning and "not a bandwidth (no figure is shown)" in warning
    # 3.2 ms at 10 Mbit/s is 2,000 bytes of the 19,992: the probe passed within the burst
    assert "passed within the burst, so the burst is at least that" in warning
    # at least the 19,992 B burst: an estimate within the link needs n / (n - burst) under
    # the wire's share of the payload (frames of MTU + 14 bytes): 1448 of 1514 for TCP,
    # the only transport whose probes can be that large; the report adds 25 %
    size = re.search(r"--step SIZE:1:SPACING with SIZE of ([\d,]+) B or more with "
                     r"--transport tcp \(ICMP and UDP probes carry at most 65,507 B\)",
                     warning)
    assert size, warning
    least = (LARGE - SMALL) / (1 - 1448 / 1514)
    assert float(size[1].replace(",", "")) == pytest.approx(1.25 * least, rel=0.01)


def test_estimates_above_the_link_are_left_out_of_the_median(tmp_path):
    """Two cycles in five cross at 1 Gbit/s on a 100 Mbit/s link, the others at 40, 50
    and 60 Mbit/s: the median is that of those three (50), not of all five (60)."""
    rates = (1e9, 1e9, 40e6, 50e6, 60e6)
    db = write_db(tmp_path / "mixed.sqlite", steady, 2000, bps=lambda k: rates[k % 5],
                  config={"link_bps": 100e6})
    document = report_document(db)
    b = document.body["summary"]["bandwidth_bps"]
    assert (b["status"], b["above_link"], b["count"]) == ("figure", 800, 1200)
    assert b["median"] == pytest.approx(50e6, rel=0.01)
    assert max(v for v in document.body["series"]["timeline"]["bandwidth_bps"]["max"]
               if v is not None) < 100e6
    md = renderers.render(document, "markdown")
    assert f"{b['median'] / 1e6:.2f} (800 above link left out)" in bandwidth_cells(md)
    (warning,) = [w for w in document.body["warnings"] if w.startswith("bandwidth:")]
    seen = re.match(r"bandwidth: 800 of 2000 cycles' large probes came back as if at "
                    r"([\d,.]+) Mbit/s, above the 100 Mbit/s link", warning)
    assert seen and float(seen[1].replace(",", "")) == pytest.approx(1000, rel=0.05), warning
    assert "(left out of the median)" in warning


def test_runs_with_different_link_speeds_are_judged_each_by_its_own(tmp_path):
    """A run told 10M and one told 1G, both crossing at 100 Mbit/s: the first run's
    estimates are above its link and left out, the second's are the figure."""
    db = write_db(tmp_path / "two.sqlite", steady, 2000, bps=lambda k: 100e6,
                  runs=[(0, 0.0), (1000, 0.0)], config={"link_bps": 10e6})
    con = sqlite3.connect(db)
    with con:
        con.execute("UPDATE runs SET config = json_set(config, '$.link_bps', 1e9) WHERE id = 2")
    con.close()
    doc = build_report(db)
    b = doc["summary"]["bandwidth_bps"]
    assert (b["status"], b["above_link"], b["count"], b["link_bps"]) == \
        ("figure", 1000, 1000, 1e9)
    assert b["median"] == pytest.approx(100e6, rel=0.03)
    assert [r["link_bps"] for r in doc["source"]["runs"]] == [10e6, 1e9]
    (warning,) = [w for w in doc["warnings"] if w.startswith("bandwidth:")]
    seen = re.match(r"bandwidth: 1000 of 2000 cycles' large probes came back as if at "
                    r"([\d,.]+) Mbit/s, above the 10 Mbit/s link", warning)
    assert seen and float(seen[1]) == pytest.approx(100, rel=0.03), warning


@pytest.mark.parametrize("config, options", [
    ({"argv": ["beoperf", "monitor", "peer", "--link-speed", "10M"]}, ()),
    ({"argv": ["beoperf", "monitor", "peer", "--link-speed=10M"]}, ()),
    ({"link_bps": None}, ("--link-speed", "10M")),
    ({"link_bps": 1e9}, ("--link-speed", "10Mbit/s")),
])
def test_the_link_speed_of_older_runs_and_of_the_report(tmp_path, config, options):
    """Runs recorded before the config kept link_bps still have their command line; a
    report's --link-speed stands for every run's."""
    db = write_db(tmp_path / "old.sqlite", steady, 500, bps=lambda k: 100e6, config=config)
    res = cli("monitor", "report", str(db), "--json", *options)
    assert res.status == 0, res.stderr
    doc = json.loads(res.stdout)["body"]
    assert doc["summary"]["bandwidth_bps"]["status"] == "above_link"
    assert doc["summary"]["bandwidth_bps"]["link_bps"] == 10e6
    assert ("link_bps" in doc["method"]["parameters"]) == bool(options)


def test_one_way_latency_is_half_the_rtt(docs):
    lat = docs["gap"]["summary"]["one_way_ms"]
    noise_median_us = 50.0 * 1.678  # median of gamma(shape 2, scale 50 µs)
    assert lat["median"] == pytest.approx((BASE_US + noise_median_us) / 2000, abs=0.005)
    assert lat["count"] == 3 * 3000


def test_days_and_weeks_split_at_utc_midnight_and_monday(tmp_path):
    t0 = T0 - 300.0  # Sunday 23:55 UTC: 5 minutes in ISO week 44, 5 in week 45
    doc = build_report(str(write_db(tmp_path / "midnight.sqlite", steady, 3000,
                                           t0=t0)))
    assert [d["period"] for d in doc["days"]] == ["2026-11-01", "2026-11-02"]
    assert [w["period"] for w in doc["weeks"]] == ["2026-W44", "2026-W45"]
    assert [d["probes"] for d in doc["days"]] == [4 * 1500, 4 * 1500]
    assert sum(w["monitored_s"] for w in doc["weeks"]) == pytest.approx(600.0)


# --- errors ---------------------------------------------------------------------------


def test_empty_range_is_an_input_error(dbs, tmp_path):
    with pytest.raises(errors.InputError, match="no probes from"):
        build_report(dbs["gap"], t_from=T0 + 86400)
    with pytest.raises(errors.BadSpec, match="empty range"):
        build_report(dbs["gap"], t_from=T0 + 10, t_to=T0 + 10)
    empty = tmp_path / "empty.sqlite"
    store.connect(str(empty)).close()
    with pytest.raises(errors.InputError, match="no probes at all"):
        build_report(str(empty))


def _state(directory: Path) -> dict[str, tuple]:
    """Every file in a directory: content, mode, modification time (and the change time
    of the database itself).  A -shm file is SQLite's shared-memory index, where readers
    too take their locks: only its existence counts.  (SQLite running as root also
    fchowns a -wal file it opens to the database's owner, which touches its ctime.)"""
    out = {}
    for p in sorted(directory.iterdir()):
        st = p.stat()
        out[p.name] = () if p.name.endswith("-shm") else (
            p.read_bytes(), st.st_mode, st.st_mtime_ns,
            st.st_ctime_ns if p.suffix == ".db" else None)
    return out


@pytest.mark.parametrize("kind", ["empty file", "foreign SQLite", "foreign SQLite in WAL mode",
                                  "monitor database", "monitor database after a kill -9"])
def test_a_report_never_changes_its_input(tmp_path, kind):
    path = tmp_path / "in.db"
    if kind == "empty file":
        path.touch()
    elif kind.startswith("foreign"):
        con = sqlite3.connect(path, isolation_level=None)
        con.execute(f"PRAGMA journal_mode={'WAL' if 'WAL' in kind else 'DELETE'}")
        con.execute("CREATE TABLE t (x)")
        con.close()
    else:
        write_db(path, steady, 300)
        if "kill" in kind:  # a writer that never closed: -wal and -shm stay, cycles in -wal
            code = ("import os, sys; sys.path[:0] = sys.argv[2:]\n"
                    "from tests.test_monitor_report import *\n"
                    "db = store.connect(sys.argv[1])\n"
                    "run = store.start_run(db, host='peer', address='192.0.2.1', "
                    "transport='icmp', period_s=PERIOD, config={'schedule': SCHEDULE})\n"
                    "rng = np.random.default_rng(2)\n"
                    "for k in range(300, 400):\n"
                    "    store.write_cycle(db, run, k, cycle_probes(steady, k, t_cycle(k), rng))\n"
                    "os._exit(0)\n")
            root = str(Path(__file__).resolve().parent.parent)
            subprocess.run([sys.executable, "-c", code, str(path), root, *sys.path],
                           check=True, timeout=60)
            assert (tmp_path / "in.db-wal").stat().st_size > 0
    before = _state(tmp_path)
    res = cli("monitor", "report", str(path), "--json")
    if kind.startswith("monitor"):
        assert res.status == 0, res.stderr
        assert res.json["body"]["summary"]["probes"] == 4 * (400 if "kill" in kind else 300)
    else:
        assert res.status == 1 and res.stderr.count("\n") == 1, res.stderr
        assert "is not a beoperf monitor database" in res.stderr
    # not a byte, mode or time changed; no -wal or -shm file appeared
    assert _state(tmp_path) == before


def test_a_read_retried_when_the_file_changed_meanwhile(tmp_path):
    """A database without a -wal file is read as immutable; if a writer checkpoints
    into it during the read, the read is done again the ordinary way."""
    path = write_db(tmp_path / "m.db", steady, 50)
    calls = []

    def query(db):
        calls.append(db.execute("SELECT count(*) FROM probes").fetchone()[0])
        if len(calls) == 1:  # a monitor writes 10 cycles and stops: a checkpoint
            w = store.connect(str(path))
            run = store.start_run(w, host="peer", address=None, transport="icmp",
                                  period_s=PERIOD, config={})
            rng = np.random.default_rng(3)
            for k in range(10):
                store.write_cycle(w, run, k, cycle_probes(steady, k, t_cycle(50 + k), rng))
            w.close()
        return calls[-1]

    assert store.read(str(path), query) == 4 * 60
    assert calls == [4 * 50, 4 * 60]
    assert [p.name for p in tmp_path.iterdir()] == ["m.db"]


def test_not_a_store(tmp_path):
    bad = tmp_path / "bad.sqlite"
    bad.write_text("not sqlite")
    with pytest.raises(store.StoreError):
        build_report(str(bad))


def test_unknown_host(dbs):
    with pytest.raises(errors.InputError, match="no probes at all to nowhere"):
        build_report(dbs["gap"], host="nowhere")


def test_interleaved_cycles_are_regrouped():
    key = np.array([1 << 32, 2 << 32, 1 << 32, 2 << 32, (1 << 32) + 1])
    p = cycles.Probes(t=np.arange(5.0), rtt=np.full(5, 1.0), outcome=np.zeros(5, int),
                      size=np.full(5, 8), key=key)
    grouped, cyc = cycles.cycle_index(p)
    assert grouped.t.tolist() == [0.0, 2.0, 1.0, 3.0, 4.0]
    assert cyc.tolist() == [0, 0, 1, 1, 2]


def test_several_hosts_need_a_choice(tmp_path):
    path = tmp_path / "two.sqlite"
    write_db(path, steady, 200, host="a")
    write_db(path, steady, 200, host="b", t0=T0 + 1000)
    with pytest.raises(errors.InputError, match="2 hosts"):
        build_report(str(path))
    doc = build_report(str(path), host="b")
    assert doc["source"]["host"] == "b" and doc["summary"]["probes"] == 800


def test_transports_are_never_pooled(tmp_path):
    path = tmp_path / "two.sqlite"
    write_db(path, steady, 200, transport="icmp")
    slower = lambda k: (BASE_US + 3000.0, 100.0, 0.0, None)  # noqa: E731 - the echo service
    write_db(path, slower, 100, t0=T0 + 1000, transport="udp")
    with pytest.raises(errors.InputError,
                       match=r"probes over 2 transports \(icmp: 800 probes, udp: 400 probes\) at "
                             r"all; a report is about one host over one transport: choose one "
                             r"\(--transport"):
        build_report(str(path))
    res = cli("monitor", "report", str(path))
    assert res.status == 1 and res.stderr.count("\n") == 1 and "--transport" in res.stderr
    for transport, probes, rtt_us in (("icmp", 800, BASE_US), ("udp", 400, BASE_US + 3000.0)):
        doc = build_report(str(path), transport=transport)
        assert doc["source"]["transport"] == transport
        assert doc["summary"]["probes"] == probes
        assert {r["transport"] for r in doc["source"]["runs"]} == {transport}
        assert doc["summary"]["one_way_ms"]["median"] == pytest.approx(rtt_us / 2000, abs=0.2)
        res = cli("monitor", "report", str(path), "--transport", transport)
        assert res.status == 0, res.stderr
        assert res.stdout.startswith(f"# Link report: peer over {transport}\n")
        assert f"{probes} {transport} probes in 1 run(s)" in res.stdout
    # a time range holding one transport needs no choice
    doc = build_report(str(path), t_from=T0 + 900)
    assert doc["source"]["transport"] == "udp"


# --- the documents and the plots --------------------------------------------------------


def _table_rows(md: str, heading: str) -> list[list[str]]:
    section = md.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("| ")][1:]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]


def _text(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def test_markdown_and_json_agree(dbs, tmp_path):
    document = report_document(dbs["congestion"], plots=True)
    doc = document.body
    paths = write_report(document, tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text()
    assert json.loads((tmp_path / "out" / "report.json").read_text()) == json.loads(
        json.dumps(document.to_json()))
    assert model.load(tmp_path / "out" / "report.json").body == json.loads(json.dumps(doc))
    assert md == renderers.render(document, "markdown") == renderers.render(document, "text")
    days = _table_rows(md, "Per day (UTC)")
    assert len(days) == len(doc["days"])
    for row, d in zip(days, doc["days"], strict=True):
        assert row[0] == d["period"]
        assert row[2:7] == [_text(d["answered_pct"]), _text(d["uptime_pct"]),
                            _text(d["one_way_ms"]["median"]), _text(d["one_way_ms"]["mean"]),
                            _text(d["one_way_ms"]["p95"])]
        assert float(row[7]) == pytest.approx(d["bandwidth_bps"]["median"] / 1e6, abs=0.005)
    (row,) = _table_rows(md, "Congestion")
    event = doc["congestion"][0]
    assert row[0] == analysis.iso(event["start_utc"])
    assert row[3:7] == [_text(event["one_way_ms"]["median"]),
                        _text(event["baseline"]["one_way_ms"]), _text(event["ratio"]),
                        _text(event["added_ms"])]
    assert f"{doc['method']['parameters']['outage_cycles']} consecutive cycles" in md
    assert {Path(p).name for p in paths} == {"report.md", "report.json", *PLOTS}
    assert doc["plots"] == list(PLOTS) and "![latency.png](latency.png)" in md


def test_markdown_on_stdout_links_no_plot(dbs, tmp_path):
    res = cli("monitor", "report", dbs["outage"])
    assert res.status == 0, res.stderr
    assert "![" not in res.stdout and ".png" not in res.stdout
    assert "Not drawn: `beoperf monitor report FILE -o DIR` writes them" in res.stdout
    res = cli("monitor", "report", dbs["outage"], "--json")
    assert res.status == 0 and res.json["body"]["plots"] == []
    out = tmp_path / "out"
    res = cli("monitor", "report", dbs["outage"], "-o", str(out), "--json")
    assert res.status == 0 and res.json["body"]["plots"] == list(PLOTS)
    document.validate("monitor-report", res.json)
    md = (out / "report.md").read_text()
    for name in PLOTS:  # what -o writes links what it wrote
        assert f"![{name}]({name})" in md and (out / name).stat().st_size > 0


def test_report_files_never_follow_a_planted_symlink(dbs, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    victims = {}
    for name in ("report.md", "report.json", "latency.png"):
        victim = tmp_path / f"victim-{name}"
        victim.write_text("precious\n")
        (out / name).symlink_to(victim)
        victims[name] = victim
    write_report(report_document(dbs["outage"], plots=True), out)
    for name, victim in victims.items():
        assert victim.read_text() == "precious\n"
        assert not (out / name).is_symlink() and (out / name).stat().st_size > 100
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["report.md", "report.json", *PLOTS])  # no temporary file left


def test_no_negative_zero(tmp_path):
    assert analysis.words_s(-0.0) == "0 s" and analysis.words_s(0.0) == "0 s"
    for x in (-0.0, -1e-9, -0.0004):
        value = cycles.num(x, 3)
        assert value == 0 and str(value) == "0.0" and json.dumps(value) == "0.0"
    assert cycles.nums(np.array([-1e-9, np.nan, 1.23456]), 3) == [0.0, None, 1.235]
    assert str(cycles.nums(np.array([-1e-9]), 3)[0]) == "0.0"


def test_doc_is_versioned_and_strict_json(documents):
    doc = documents["dead"].to_json()
    assert (doc["format"], doc["kind"], doc["schema_version"]) == ("beoperf", "monitor-report", 4)
    assert doc["meta"]["beoperf"] and doc["meta"]["utc_start"] <= doc["meta"]["utc_end"]
    json.dumps(doc, allow_nan=False)  # no NaN or inf anywhere
    assert {"days", "weeks", "summary", "outages", "congestion", "level_shifts",
            "not_monitored", "method", "series"} <= set(doc["body"])
    assert model.from_json(json.loads(documents["dead"].dumps())).body == doc["body"]


def test_plots_never_blank_without_answers(docs, dbs, tmp_path):
    doc = docs["dead"]
    assert doc["summary"]["answered"] == 0 and doc["summary"]["one_way_ms"]["median"] is None
    assert any("no latency" in w for w in doc["warnings"])
    paths = write_report(report_document(dbs["dead"], plots=True), tmp_path)
    assert len(paths) == 2 + len(PLOTS)
    for path in paths[2:]:
        data = Path(path).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 10_000
    texts = [t.get_text() for ax in plots.latency_figure(doc).axes for t in ax.texts]
    assert plots.NO_DATA in texts
    texts = [t.get_text() for ax in plots.cdf_figure(doc).axes for t in ax.texts]
    assert plots.NO_DATA in texts


def test_binned_series_keep_maxima_and_loss(docs):
    doc = docs["congestion"]
    tl = doc["series"]["timeline"]
    worst = max(v for v in tl["one_way_ms"]["max"] if v is not None)
    assert worst == pytest.approx(max(e["one_way_ms"]["p95"] for e in doc["congestion"]),
                                  rel=0.5)
    assert worst >= doc["summary"]["one_way_ms"]["p95"]
    lossy = [x for x in tl["loss_pct"] if x]
    assert lossy and max(lossy) > 1.0


# --- events.py on arrays ----------------------------------------------------------------


def test_grouped_quantiles_match_numpy():
    rng = np.random.default_rng(3)
    groups = rng.integers(0, 7, 500)
    values = rng.normal(size=500)
    values[::17] = np.nan
    q, n = events.grouped_quantiles(groups, values, (0.0, 0.5, 0.95, 1.0), 8)
    for g in range(7):
        mine = values[(groups == g) & ~np.isnan(values)]
        assert n[g] == mine.size
        assert q[g] == pytest.approx(np.quantile(mine, (0.0, 0.5, 0.95, 1.0)))
    assert n[7] == 0 and np.isnan(q[7]).all()


def test_find_outages_respects_length_and_breaks():
    failed = np.array([0, 1, 1, 0, 1, 0, 1, 1, 1, 1], dtype=bool)
    breaks = np.zeros(10, dtype=bool)
    assert events.find_outages(failed, breaks, 2) == [(1, 3), (6, 10)]
    breaks[8] = True
    assert events.find_outages(failed, breaks, 2) == [(1, 3), (6, 8), (8, 10)]
    assert events.find_outages(failed, breaks, 1) == [(1, 3), (4, 5), (6, 8), (8, 10)]


def test_pelt_finds_steps_and_nothing_in_noise():
    rng = np.random.default_rng(4)
    x = np.concatenate([np.zeros(100), np.full(50, 5.0), np.zeros(100)])
    signal = (x + rng.normal(size=x.size))[:, None]
    assert events.pelt(signal, events.default_penalty(x.size, 1)) == [100, 150, 250]
    noise = rng.normal(size=(300, 3))
    assert events.pelt(noise, events.default_penalty(300)) == [300]


def test_refine_edge_moves_to_the_true_change():
    stat = np.concatenate([np.full(60, 100.0), np.full(60, 130.0)])
    stat += np.random.default_rng(5).normal(0, 2, stat.size)
    assert events.refine_edge(stat, 100.0, 48, 20, rising=True) == 60
    assert events.refine_edge(stat[::-1], 100.0, 70, 20, rising=False) == 60
    flat = np.full(120, 100.0)
    assert events.refine_edge(flat, 100.0, 48, 20, rising=True) == 48


def test_window_width_is_relative_to_the_cycle_count():
    assert events.window_width(6000, 3) == 8  # at least 24 small probes a window
    assert events.window_width(268_800, 3) == 67
    assert events.window_width(100, 1) == 24


@pytest.mark.parametrize("span_s, want", [(600, 1.0), (4 * 7 * 86400, 7200.0),
                                          (3600, 10.0)])
def test_bins_are_round_and_few(span_s, want):
    assert series.bin_width(span_s, PERIOD) == want
    assert span_s / series.bin_width(span_s, PERIOD) <= series.MAX_BINS


def test_iso_weeks_start_on_monday():
    edges, names = analysis.week_edges(T0 + 3600, T0 + 8 * 86400)
    assert edges[0] == T0 and names == ["2026-W45", "2026-W46"]
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", analysis.day_edges(T0, T0 + 1)[1][0])


def _segments(spec: list[tuple[int, float, float]]) -> list[events.Segment]:
    """Segments from (windows, RTT level µs, IQR µs), 100 probes a window, 0.1 % lost."""
    out, first = [], 0
    for length, level, iqr in spec:
        out.append(events.Segment(first, first + length, level, iqr, 100.0 * length,
                                  0.1 * length))
        first += length
    return out


def test_classify_steps_dips_and_congestion():
    base, dip, step = (100, 20000.0, 200.0), (20, 15000.0, 200.0), (2, 17500.0, 2600.0)
    assert events.classify(_segments([base, step, dip, step, base]), 36) == ([], [])
    wide = (2, 17500.0, 9000.0)  # wider than a step between the two levels explains
    episodes, _ = events.classify(_segments([base, wide, dip, wide, base]), 36)
    assert [(e.first, e.stop) for e in episodes] == [(100, 102), (122, 124)]
    busy = (10, 24000.0, 1000.0)
    (episode,), shifts = events.classify(_segments([base, busy, base]), 36)
    assert (episode.first, episode.stop, shifts) == (100, 110, [])
    assert episode.base.level == 20000.0


def test_range_ends_where_asked(dbs):
    to = t_cycle(1000) + 0.1  # inside cycle 1000, before its period is over
    doc = build_report(dbs["gap"], t_from=t_cycle(10), t_to=to)
    assert doc["range"]["from_utc"] == t_cycle(10) and doc["range"]["to_utc"] == to
    assert doc["summary"]["monitored_s"] == pytest.approx(to - t_cycle(10))
    assert doc["summary"]["probes"] == 4 * 991


def test_wander_within_the_baselines_spread_is_not_congestion():
    # a 20 ms baseline of two segments whose windows wander: medians by a robust SD of
    # 500 µs (within and between the segments), IQRs of 400 µs by 100 µs
    rng = np.random.default_rng(3)

    def stable(first: int, stop: int, shift: float) -> events.Segment:
        n = stop - first
        medians = 20000.0 + shift + 500.0 * rng.standard_normal(n)
        iqrs = 400.0 + 100.0 * rng.standard_normal(n)
        return events.Segment(first, stop, float(np.median(medians)), float(np.median(iqrs)),
                              100.0 * n, 0.1 * n, tuple(medians), tuple(iqrs))

    before, after = stable(0, 100, -300.0), stable(102, 200, 300.0)
    (base,) = events.baselines(events.plateaus([before, after], [True, True]), 36)
    level_sd, iqr_sd = base.level_spread, base.iqr_spread
    assert 500.0 < level_sd < 700.0 and 80.0 < iqr_sd < 125.0  # the two levels' gap counts

    def classify(level: float, iqr: float) -> list[tuple[int, int]]:
        busy = events.Segment(100, 102, level, iqr, 200.0, 0.2)
        episodes, shifts = events.classify([before, busy, after], 36)
        assert shifts == []
        return [(e.first, e.stop) for e in episodes]

    # above 5 % and one IQR, or 1.5 x the IQR, but within 3 spreads: its own wander
    assert classify(base.level + 2.5 * level_sd, base.iqr) == []
    assert classify(base.level, max(1.6 * base.iqr, base.iqr + 2.5 * iqr_sd)) == []
    # beyond 3 spreads too: congestion
    assert classify(base.level + 3.5 * level_sd, base.iqr) == [(100, 102)]
    assert classify(base.level, base.iqr + 3.5 * iqr_sd) == [(100, 102)]


def test_host_noise_on_a_fast_path_is_not_congestion(tmp_path):
    # a 60 µs path whose RTT rises to 130 µs for a minute (the prober's CPUs going idle),
    # later +2 ms for a minute (a queue)
    def truth(k: int) -> tuple[float, float, float, str | None]:
        if 1000 <= k < 1300:
            return 130.0, 20.0, 0.0, None
        if 3000 <= k < 3300:
            return 2060.0, 400.0, 0.0, None
        return 60.0, 5.0, 0.0, None

    db = str(write_db(tmp_path / "fast.sqlite", truth, 5000))
    doc = build_report(db)
    (event,) = doc["congestion"]
    assert _overlaps(event, t_cycle(3000), t_cycle(3300))
    assert doc["level_shifts"] == []
    assert "100 µs of RTT" in doc["method"]["events"]
    assert doc["method"]["parameters"]["noise_floor_us"] == 100.0
    # the baseline's IQR is shown as measured (gamma noise of scale 2.5 µs), not the floor
    assert event["baseline"]["iqr_ms"] < 0.005
    # without the floor the 130 µs minute is an event too
    bare = build_report(db, noise_floor_us=0.0)
    assert any(_overlaps(e, t_cycle(1000), t_cycle(1300)) for e in bare["congestion"])
    assert "0 µs of RTT" in bare["method"]["events"]


# --- the document kind, its old files, and the text of today's reports ------------------

FIXTURES = Path(__file__).resolve().parent / "fixtures"
FOOTER = re.compile(r"Generated \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC by beoperf \S+ "
                    r"\(beoperf monitor-report v4\)\.")


EMPTY = re.compile(r"None: .*\.|Not looked for: .*\.")


def as_before_issue25(lines: list[str]) -> list[str]:
    """The Markdown as it was before issue 25: without the answer at the top (its list
    after the first paragraph), and an empty table as "(none)", not what was looked for."""
    start = 4 if len(lines) > 4 and lines[4].startswith("- **") else None
    if start is not None:
        end = lines.index("", start)
        lines = lines[:start] + lines[end + 1:]
    return ["(none)" if EMPTY.fullmatch(line) else line for line in lines]


def test_markdown_says_what_needs_attention_first_and_what_was_looked_for(dbs):
    res = cli("monitor", "report", dbs["outage"])
    lines = res.stdout.splitlines()
    assert lines[4].startswith("- **FAIL** 1 outage(s)") and "*To do:*" in lines[4]
    assert "None: no 2 or more cycles in a row without an answered probe." not in lines
    assert "(none)" not in lines
    assert "None: no change from one stable baseline level to another." in lines


NEW_IN_ISSUE28 = ("- **local time**: ", "- **spikes**: ")
NEW_SECTIONS_ISSUE28 = ("## By weekday and hour (", "## Spikes (")


def as_before_issue28(lines: list[str]) -> list[str]:
    """The Markdown of a UTC report as it was before issue 28: without what that issue
    added (the method's time zone rule, the time zone among the parameters, the weekday
    x hour and spike sections, the spike rule and thresholds)."""
    out: list[str] = []
    skipping = False
    for line in lines:
        if line.startswith("## "):
            skipping = line.startswith(NEW_SECTIONS_ISSUE28)
        if not skipping and not line.startswith(NEW_IN_ISSUE28):
            out.append(line.replace(", timezone = UTC, spike_rtt_ms = [10.0, 50.0]", ""))
    return out


@pytest.mark.parametrize("name", ["outage", "congestion", "shift", "gap"])
def test_markdown_is_the_text_reports_had_before_the_restructure(dbs, name):
    """The Markdown of a report is, byte for byte, what beoperf printed before issue 10
    (fixtures written by that code for these same seeded databases), but for the last
    line, which names the document's format and version, the bandwidth method line,
    which issue 11 changed alone (it states when a bandwidth is a figure), and what
    issue 28 added (as_before_issue28)."""
    res = cli("monitor", "report", dbs[name])
    assert res.status == 0, res.stderr
    lines = as_before_issue25(as_before_issue28(
        res.stdout.replace(f"`{dbs[name]}`", "`DB`").splitlines()))
    before = (FIXTURES / "monitor-report" / f"{name}.md").read_text().splitlines()
    assert lines[:-1] == before[:-1]
    assert before[-1].endswith("(beoperf.monitor-report v1).") and FOOTER.fullmatch(lines[-1])


def test_a_report_written_before_the_envelope_loads_and_renders_as_it_did():
    doc = model.load(FIXTURES / "documents" / "monitor-report-v1-after-issue9.json")
    assert (doc.kind, doc.schema_version) == ("monitor-report", 4)
    assert doc.meta["beoperf"] == "0.1.0" and doc.meta["utc_end"] == "2026-11-23T11:06:43Z"
    document.validate(doc.kind, doc.to_json())
    before = (FIXTURES / "monitor-report" / "monitor-report-v1-after-issue9.md").read_text()
    now = renderers.render(doc, "markdown")
    assert as_before_issue25(now.splitlines())[:-1] == before.splitlines()[:-1]
    assert now.splitlines()[-1] == "Generated 2026-11-23 11:06:43 UTC by beoperf 0.1.0 " \
                                   "(beoperf monitor-report v4)."
    assert renderers.formats("monitor-report") == ["json", "markdown", "text"]


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(schema_version=3), "schema version 3"),
    (lambda d: d.update(generated_utc=1e300), "generated_utc"),
    (lambda d: d.pop("summary"), "summary"),
    (lambda d: d["summary"].update(probes=-1), "not a valid monitor-report document"),
])
def test_a_broken_old_report_is_one_document_error(tmp_path, change, message):
    doc = json.loads((FIXTURES / "documents" / "monitor-report-v1-after-issue9.json").read_text())
    change(doc)
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(model.DocumentError, match=message):
        model.load(path)


def test_report_spec_is_checked_before_the_database_is_read(tmp_path):
    missing = str(tmp_path / "absent.db")
    for spec, message in ((dict(outage_cycles=0), "--outage-cycles 0"),
                          (dict(baseline_windows=1), "--baseline-windows 1"),
                          (dict(noise_floor_us=float("nan")), "--noise-floor nan"),
                          (dict(link_bps=float("nan")), "--link-speed nan"),
                          (dict(link_bps=0.0), "--link-speed 0.0"),
                          (dict(t_from=T0, t_to=T0), "empty range")):
        with pytest.raises(errors.BadSpec, match=message):
            suite.report(suite.ReportSpec(db=missing, **spec))
    with pytest.raises(store.StoreError, match="does not exist"):
        suite.report(suite.ReportSpec(db=missing))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("path, value", [
    (("range", "monitored_s"), None), (("range", "not_monitored_s"), None),
    (("range", "from_utc"), 1e300), (("days", 0, "monitored_s"), None),
    (("days", 0, "start_utc"), -1.0), (("summary", "monitored_s"), None),
    (("source", "runs", 0, "started_utc"), 1e300)])
def test_a_document_the_renderer_could_not_show_is_refused(path, value):
    """What the schema accepts, the Markdown renderer shows: times it cannot print (out
    of 1970..9999) and missing durations are refused when the document is read."""
    doc = json.loads((FIXTURES / "documents" / "monitor-report-v1-after-issue9.json")
                     .read_text())
    assert renderers.render(model.from_json(doc), "markdown")
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    with pytest.raises(model.DocumentError, match="not a valid monitor-report document at"):
        model.from_json(doc)


@pytest.mark.parametrize("damage, message", [
    ("UPDATE runs SET config = 'not json'", "run 1 has a bad config"),
    ("UPDATE runs SET config = '[1]'", "run 1 has a bad config"),
    ("""UPDATE runs SET config = '{"schedule": [{"size": "8"}]}'""", "run 1 has a bad config"),
    ("UPDATE runs SET period_s = 'slow', transport = 'carrier pigeon'",
     "run 1 has a bad transport, period_s"),
    ("UPDATE probes SET rtt_us = 'fast' WHERE id = 7", "a probe row beoperf never writes"),
    ("UPDATE probes SET run_id = 9 WHERE id = 7", "probes of run 9, which it does not list"),
    ("UPDATE probes SET t_utc = -1e999 WHERE id = 7", "a probe row beoperf never writes"),
    ("UPDATE probes SET t_utc = 1e300 WHERE id = 7", "a probe row beoperf never writes"),
    ("UPDATE runs SET period_s = 1e300", "run 1 has a bad period_s"),
])
def test_a_damaged_database_is_one_line(tmp_path, damage, message):
    """Rows beoperf never writes (a database edited by hand, or damaged): one line and
    exit status 1, never a traceback."""
    path = write_db(tmp_path / "m.db", steady, 20)
    con = sqlite3.connect(path)
    con.execute("PRAGMA foreign_keys=OFF")
    con.execute(damage)
    con.commit()
    con.close()
    res = cli("monitor", "report", str(path))
    assert res.status == 1 and len(res.error_lines) == 1, res.stderr
    assert res.stderr.startswith(f"beoperf: monitor database: {path}: {message}"), res.stderr


def test_large_probes_lost_on_the_path_are_a_warning(tmp_path):
    """Every large probe timed out, every small one answered (the lab's case: one end's
    MTU at 9000 against 1500 beyond it): the report says large packets are lost, at the
    top, where it used to show an empty bandwidth column only."""
    db = write_db(tmp_path / "lost.db", steady, 40)
    con = sqlite3.connect(db)
    con.execute("UPDATE probes SET outcome = 'timeout', rtt_us = NULL WHERE size = ?", (LARGE,))
    con.commit()
    con.close()
    doc = report_document(db)
    lost = [w for w in doc.body["warnings"] if "large probes" in w]
    assert lost == [f"the large probes ({LARGE:,} bytes) were answered 0 of 40 times, the "
                    "small ones 120 of 120: large packets or their fragments are lost on the "
                    "path (a path MTU, a firewall dropping fragments, a shaper's burst); "
                    "without them the link's rate cannot be estimated"]
    text = renderers.render(doc, "markdown")
    assert text.index("large probes") < text.index("## Summary")
    healthy = build_report(write_db(tmp_path / "ok.db", steady, 40))
    assert not any("large probes" in w for w in healthy["warnings"])

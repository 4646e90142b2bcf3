"""The monitor report in local time (--timezone), its weekday x hour profile and its spike
counts, on crafted stores: short bursts of cycles placed at chosen instants (around a
local midnight, across a daylight-saving change, on chosen weekdays and hours), each
burst with a known RTT and loss, so that every figure of the report is known in advance.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from tests.helpers import cli

from beoperf import errors
from beoperf.analysis import monitor_local as local
from beoperf.model import document
from beoperf.monitor import store
from beoperf.suites import monitor as suite

PERIOD = 0.2  # s per cycle, as tests/test_monitor_report.py
SCHEDULE = [{"size": 8, "count": 3, "spacing_s": 0.02},
            {"size": 20000, "count": 1, "spacing_s": 0.1}]
OFFSETS = (0.0, 0.02, 0.04, 0.06)


@dataclass(frozen=True)
class Burst:
    """``cycles`` cycles from ``start`` (an aware datetime, or UTC seconds) whose small
    probes all have RTT ``rtt_us``, the first ``lost`` cycles unanswered."""

    start: dt.datetime | float
    cycles: int = 20
    rtt_us: float = 1000.0
    lost: int = 0

    @property
    def t0(self) -> float:
        return self.start if isinstance(self.start, float) else self.start.timestamp()


def burst_db(path: Path, bursts: list[Burst], period: float = PERIOD) -> str:
    """One run holding the bursts, in time order (the gaps between are not monitored),
    one cycle every ``period`` seconds."""
    db = store.connect(str(path))
    run = store.start_run(db, host="peer", address="192.0.2.1", transport="icmp",
                          period_s=period, started_utc=min(b.t0 for b in bursts),
                          config={"period_s": period, "schedule": SCHEDULE, "timeout_s": 0.1})
    k = 0
    for b in sorted(bursts, key=lambda b: b.t0):
        for i in range(b.cycles):
            t = b.t0 + i * period
            ok = i >= b.lost
            store.write_cycle(db, run, k, [
                store.Probe(slot, t + off, 8 if slot < 3 else 20000, 36 if slot < 3 else 20028,
                            "icmp", "ok" if ok else "timeout",
                            (b.rtt_us if slot < 3 else b.rtt_us + 4000.0) if ok else None)
                for slot, off in enumerate(OFFSETS)])
            k += 1
    db.close()
    return str(path)


def report(db: str, **options) -> dict:
    """The report's body, the document checked against its schema."""
    doc = suite.report(suite.ReportSpec(db=db, baseline_windows=2, **options))
    document.validate(doc.kind, doc.to_json())
    return doc.body


BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")


def utc(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=dt.UTC)


# --- --timezone ------------------------------------------------------------------------


def test_days_and_weeks_split_at_local_midnight(tmp_path):
    """Sunday 2026-11-01 22:30 and 23:30 UTC are one UTC day and ISO week; in Berlin
    (UTC+1 in November) the second is Monday 00:30: another day and another week."""
    db = burst_db(tmp_path / "m.sqlite", [Burst(utc(2026, 11, 1, 22, 30)),
                                          Burst(utc(2026, 11, 1, 23, 30))])
    in_utc, in_berlin = report(db), report(db, timezone="Europe/Berlin")
    assert [d["period"] for d in in_utc["days"]] == ["2026-11-01"]
    assert [w["period"] for w in in_utc["weeks"]] == ["2026-W44"]
    assert [d["period"] for d in in_berlin["days"]] == ["2026-11-01", "2026-11-02"]
    assert [w["period"] for w in in_berlin["weeks"]] == ["2026-W44", "2026-W45"]
    assert [d["probes"] for d in in_berlin["days"]] == [80, 80]
    assert in_berlin["days"][1]["start_utc"] == utc(2026, 11, 1, 23).timestamp()
    assert in_berlin["method"]["parameters"]["timezone"] == "Europe/Berlin"
    assert in_utc["method"]["parameters"]["timezone"] == "UTC"
    hours = in_berlin["series"]["hour_of_day"]["count"]
    assert (hours[23], hours[0]) == (60, 60) and sum(hours) == 120
    assert in_utc["series"]["hour_of_day"]["count"][22:] == [60, 60]


def test_a_daylight_saving_day_lasts_25_hours_and_keeps_its_local_hours(tmp_path):
    """Berlin left summer time on 2026-10-25 at 03:00 CEST (01:00 UTC): that day runs from
    2026-10-24 22:00 to 2026-10-25 23:00 UTC, and 00:30 and 01:30 UTC are both 02:30 on
    the wall clock (hour 2), one in CEST and one in CET."""
    db = burst_db(tmp_path / "dst.sqlite", [Burst(utc(2026, 10, 24, 21, 30)),
                                            Burst(utc(2026, 10, 25, 0, 30)),
                                            Burst(utc(2026, 10, 25, 1, 30)),
                                            Burst(utc(2026, 10, 25, 23, 30))])
    body = report(db, timezone="Europe/Berlin")
    days = {d["period"]: d for d in body["days"]}
    assert list(days) == ["2026-10-24", "2026-10-25", "2026-10-26"]
    day = days["2026-10-25"]
    assert day["end_utc"] - day["start_utc"] == 25 * 3600
    assert day["start_utc"] == utc(2026, 10, 24, 22).timestamp()
    assert [d["probes"] for d in days.values()] == [80, 160, 80]
    count = body["series"]["hour_of_day"]["count"]
    assert (count[23], count[2], count[0]) == (60, 120, 60) and sum(count) == 240


def test_local_seconds_follow_the_zone_to_the_second():
    """The offset in force is found exactly at a transition, not on an hourly grid."""
    change = utc(2026, 3, 29, 1).timestamp()  # Berlin: 02:00 CET -> 03:00 CEST
    t = np.array([change - 1.0, change, change + 1.0])
    wall = local.local_seconds(t, change - 7200, change + 7200, BERLIN)
    assert (wall - t).tolist() == [3600.0, 7200.0, 7200.0]
    kolkata = zoneinfo.ZoneInfo("Asia/Kolkata")  # +05:30, no daylight saving
    assert local.hour_of_day(np.array([utc(2026, 1, 1, 18, 29).timestamp()]),
                             0.0, 2e9, kolkata).tolist() == [23]


def test_an_unknown_zone_is_one_line_and_exit_2(tmp_path):
    db = burst_db(tmp_path / "z.sqlite", [Burst(utc(2026, 11, 2, 10))])
    for name in ("Mars/Olympus_Mons", "../../etc/passwd", "", "Europe/Berlin\x00"):
        res = cli("monitor", "report", db, "--timezone", name)
        assert res.status == 2 and res.stdout == ""
        assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
        assert "--timezone" in res.stderr and "IANA" in res.stderr
    with pytest.raises(errors.BadSpec, match="unknown time zone"):
        suite.report(suite.ReportSpec(db=str(tmp_path / "absent.db"), timezone="Nowhere/X"))


def test_the_markdown_names_the_zone_of_its_days(tmp_path):
    db = burst_db(tmp_path / "md.sqlite", [Burst(utc(2026, 11, 1, 23, 30))])
    res = cli("monitor", "report", db, "--timezone", "America/New_York")
    assert res.status == 0, res.stderr
    assert "## Per day (America/New_York)" in res.stdout
    assert "| 2026-11-01 |" in res.stdout  # 18:30 in New York
    assert "time zone America/New_York" in res.stdout
    assert "## Per day (UTC)" in cli("monitor", "report", db).stdout


FIXTURES = Path(__file__).parent / "fixtures" / "documents"


def test_a_version_3_report_loads_as_utc_and_renders():
    from beoperf import model
    from beoperf import report as renderers

    doc = model.load(FIXTURES / "monitor-report-v3-before-issue28.json")
    assert doc.schema_version == 4
    assert "timezone" not in doc.body["method"]["parameters"]
    document.validate(doc.kind, doc.to_json())
    md = renderers.render(doc, "markdown")
    assert "## Per day (UTC)" in md and "| 2026-11-02 |" in md
    assert "By weekday and hour" not in md  # a version 3 report has no profile


# --- the weekday x hour profile ----------------------------------------------------------


def local_time(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=BERLIN)


PROFILE = [Burst(local_time(2026, 11, 2, 9, 10), rtt_us=1320.0, lost=2),  # Mon 09h
           Burst(local_time(2026, 11, 2, 23, 30), rtt_us=560.0),  # Mon 23h
           Burst(local_time(2026, 11, 7, 9, 10), rtt_us=560.0)]  # Sat 09h


def test_the_weekday_hour_profile_puts_each_probe_in_its_local_cell(tmp_path):
    """Three bursts of 20 cycles (80 probes) at known local weekdays and hours: each
    cell holds exactly its burst's probes, share answered and median (half the RTT);
    in UTC the same probes are an hour earlier."""
    db = burst_db(tmp_path / "p.sqlite", PROFILE)
    body = report(db, timezone="Europe/Berlin")
    rows = {w["weekday"]: w for w in body["week_profile"]}
    assert list(rows) == ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    cells = {(d, h): (w["probes"][h], w["answered_pct"][h], w["one_way_median_ms"][h])
             for d, w in rows.items() for h in range(24) if w["probes"][h]}
    assert cells == {("Mon", 9): (80, 90.0, 0.66), ("Mon", 23): (80, 100.0, 0.28),
                     ("Sat", 9): (80, 100.0, 0.28)}
    assert rows["Mon"]["count"][9] == 3 * 18  # the small probes of the answered cycles
    assert all(v is None for w in rows.values() for h, v in
               enumerate(w["one_way_median_ms"]) if not w["probes"][h])
    in_utc = {w["weekday"]: w for w in report(db)["week_profile"]}
    assert in_utc["Mon"]["probes"][8] == in_utc["Mon"]["probes"][22] == 80
    assert in_utc["Sat"]["probes"][8] == 80 and in_utc["Mon"]["probes"][9] == 0


def test_the_profile_in_markdown_and_html_is_the_documents(tmp_path):
    from beoperf import report as renderers

    db = burst_db(tmp_path / "p.sqlite", PROFILE)
    doc = suite.report(suite.ReportSpec(db=db, baseline_windows=2, timezone="Europe/Berlin"))
    md = renderers.render(doc, "markdown")
    assert "## By weekday and hour (Europe/Berlin)" in md
    assert "| weekday | 09h | 23h |" in md  # only the hours with probes
    assert "| Mon | 90.0 | 100.0 |" in md and "| Sat | 100.0 | – |" in md
    assert "| Mon | 0.660 | 0.280 |" in md and "| Sat | 0.280 | – |" in md
    assert "| Tue |" not in md
    html = renderers.render(doc, "html")
    assert "Answered % by weekday and hour (Europe/Berlin)" in html
    assert "One-way median ms by weekday and hour (Europe/Berlin)" in html
    assert ">0.660<" in html


# --- spikes ----------------------------------------------------------------------------


SPIKY = [Burst(utc(2026, 11, 2, 10), cycles=40, rtt_us=1000.0),
         Burst(utc(2026, 11, 2, 11), cycles=10, rtt_us=20_000.0),  # 30 small > 10 ms
         Burst(utc(2026, 11, 2, 12), cycles=8, rtt_us=80_000.0, lost=3),  # 15 > 50 ms
         Burst(utc(2026, 11, 3, 10), cycles=40, rtt_us=1000.0)]


def test_spikes_are_counted_per_day_above_each_threshold(tmp_path):
    """Per day and over all: the answered small probes above 10 ms and 50 ms (the
    defaults); the unanswered cycles of a slow burst are no spikes."""
    body = report(burst_db(tmp_path / "s.sqlite", SPIKY))
    assert body["method"]["parameters"]["spike_rtt_ms"] == [10.0, 50.0]
    day1, day2 = body["days"]
    answered_small = 3 * (40 + 10 + 5)
    assert day1["one_way_ms"]["count"] == answered_small
    assert day1["spikes"] == [
        {"above_ms": 10.0, "count": 45, "pct": round(100 * 45 / answered_small, 3)},
        {"above_ms": 50.0, "count": 15, "pct": round(100 * 15 / answered_small, 3)}]
    assert [x["count"] for x in day2["spikes"]] == [0, 0]
    assert [x["count"] for x in body["summary"]["spikes"]] == [45, 15]
    assert [x["count"] for x in body["weeks"][0]["spikes"]] == [45, 15]
    assert "RTT (the round trip, as ping shows it" in body["method"]["spikes"]


def test_spike_thresholds_are_given_on_the_command_line(tmp_path):
    db = burst_db(tmp_path / "s.sqlite", SPIKY)
    res = cli("monitor", "report", db, "--baseline-windows", "2", "--spike", "70ms",
              "--spike", "0.015", "--spike", "15ms")
    assert res.status == 0, res.stderr
    assert "| period | RTT > 15 ms | RTT > 70 ms | answered small probes |" in res.stdout
    assert f"| 2026-11-02 | 45 ({100 * 45 / 165:.3f} %) | 15 ({100 * 15 / 165:.3f} %) | 165 |" \
        in res.stdout
    assert "| 2026-11-03 | 0 (0.000 %) | 0 (0.000 %) | 120 |" in res.stdout
    assert "most probes count as spikes" not in res.stdout


@pytest.mark.parametrize("given, message", [
    (["0"], "greater than 0"), (["abc"], "not a time"), (["2min"], "at most 60 s"),
    (["nan"], "not a time"), ([f"{k + 1}ms" for k in range(9)], "at most 8 thresholds")])
def test_a_bad_spike_threshold_is_one_line_and_exit_2(tmp_path, given, message):
    db = burst_db(tmp_path / "s.sqlite", [Burst(utc(2026, 11, 2, 10))])
    res = cli("monitor", "report", db, *[a for g in given for a in ("--spike", g)])
    assert res.status == 2 and res.stdout == "" and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and message in res.stderr


def test_thresholds_below_the_paths_own_rtt_are_said(tmp_path):
    """A 20 ms path under the LAN defaults: every probe is a 'spike', and the report says
    so and what to give instead."""
    slow = burst_db(tmp_path / "wan.sqlite", [Burst(utc(2026, 11, 2, 10), 40, 20_000.0)])
    md = cli("monitor", "report", slow, "--baseline-windows", "2").stdout
    assert "The path's median RTT (20 ms) is at or above the lowest threshold (10 ms)" in md
    assert "| all | 120 (100.000 %) | 0 (0.000 %) | 120 |" in md
    fine = cli("monitor", "report", slow, "--baseline-windows", "2", "--spike", "40ms").stdout
    assert "most probes count as spikes" not in fine


def test_the_html_report_shows_the_spikes(tmp_path):
    from beoperf import report as renderers

    db = burst_db(tmp_path / "s.sqlite", SPIKY)
    doc = suite.report(suite.ReportSpec(db=db, baseline_windows=2))
    html = renderers.render(doc, "html")
    assert "Spikes per day (UTC)" in html and "RTT &gt; 50 ms" in html
    assert f">15 ({100 * 15 / 165:.3f} %)<" in html

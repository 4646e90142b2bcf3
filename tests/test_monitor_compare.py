"""`beoperf compare` of two monitor reports, days as replicates, on crafted reports: the
version 3 fixture with its days replaced by days of chosen medians and coverage."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
from tests.helpers import cli

from beoperf import model
from beoperf.analysis import effect
from beoperf.analysis import monitor_compare as mc
from beoperf.model.monitor import MonitorReport

FIXTURE = Path(__file__).parent / "fixtures" / "documents" / \
    "monitor-report-v3-before-issue28.json"
PINGPONG = Path(__file__).parent / "fixtures" / "documents" / \
    "pingpong-v1-after-issue9.json"


def crafted(path: Path, medians: list[float], coverage: float = 100.0,
            first_day: int = 2) -> str:
    """The fixture with one day per median (p95 = 1.5 x the median), each monitored
    ``coverage`` % of its 24 hours."""
    doc = json.loads(FIXTURE.read_text())
    template = doc["body"]["days"][0]
    days = []
    for i, m in enumerate(medians):
        day = copy.deepcopy(template)
        day["period"] = f"2026-11-{first_day + i:02d}"
        day["start_utc"] = 1793577600.0 + 86400.0 * (first_day - 2 + i)
        day["end_utc"] = day["start_utc"] + 86400.0
        day["coverage_pct"] = coverage
        day["monitored_s"] = 864.0 * coverage
        day["one_way_ms"].update(median=m, p95=round(1.5 * m, 3))
        days.append(day)
    doc["body"]["days"] = days
    path.write_text(json.dumps(doc))
    return str(path)


CLASS_WEEK = [0.64, 0.66, 0.68, 0.65, 0.67]
VACATION = [0.27, 0.28, 0.29, 0.28, 0.28]


def typed(path: str) -> MonitorReport:
    return MonitorReport.from_document(model.load(path))


def test_a_week_of_classes_against_a_vacation_week(tmp_path):
    base = crafted(tmp_path / "class.json", CLASS_WEEK)
    cand = crafted(tmp_path / "vacation.json", VACATION, first_day=16)
    rows = mc.compare(typed(base), typed(cand))
    median = rows[0]
    geo = [math.exp(sum(map(math.log, v)) / len(v)) for v in (CLASS_WEEK, VACATION)]
    assert (median.base_days, median.cand_days) == (5, 5)
    assert median.base_ms == pytest.approx(geo[0]) and median.cand_ms == pytest.approx(geo[1])
    assert median.effect.ratio == pytest.approx(geo[1] / geo[0])
    assert median.effect.verdict == effect.BETTER and median.effect.high < 1.0
    assert median.effect.family == 2 and median.effect.df == 8
    res = cli("compare", base, cand, "--label", "class week", "--label", "vacation week")
    assert res.status == 0, res.stderr
    assert "- median one-way latency: class week 0.660 ms (5 days) vs vacation week " \
           "0.280 ms (5 days), -57.6% (" in res.stdout
    assert "**better**" in res.stdout and "corrected for 2 figures at once" in res.stdout


def test_two_weeks_at_one_level_are_no_difference(tmp_path):
    base = crafted(tmp_path / "a.json", VACATION)
    cand = crafted(tmp_path / "b.json", [0.28, 0.27, 0.28, 0.29, 0.28], first_day=9)
    assert {r.effect.verdict for r in mc.compare(typed(base), typed(cand))} == \
        {effect.NO_DIFFERENCE}


def test_days_that_scatter_more_than_the_change_cannot_tell(tmp_path):
    base = crafted(tmp_path / "a.json", [0.2, 0.6, 0.3])
    cand = crafted(tmp_path / "b.json", [0.5, 0.25, 0.7], first_day=9)
    assert mc.compare(typed(base), typed(cand))[0].effect.verdict == effect.CANNOT_TELL


def test_days_monitored_less_than_half_their_time_are_left_out(tmp_path):
    """Also an hour at either end of a period: monitored throughout, but not a day."""
    base = crafted(tmp_path / "a.json", CLASS_WEEK, coverage=49.0)
    cand = crafted(tmp_path / "b.json", VACATION, first_day=16)
    row = mc.compare(typed(base), typed(cand))[0]
    assert row.base_days == 0 and row.effect.verdict == effect.CANNOT_TELL
    assert "no day monitored at least 50% of its time" in (row.effect.reason or "")
    doc = json.loads(Path(crafted(tmp_path / "c.json", CLASS_WEEK)).read_text())
    doc["body"]["days"][0].update(monitored_s=3600.0, coverage_pct=100.0)
    (tmp_path / "c.json").write_text(json.dumps(doc))
    assert mc.compare(typed(str(tmp_path / "c.json")), typed(cand))[0].base_days == 4


@pytest.mark.parametrize("extra, message", [
    (["--format", "json"], "monitor reports compare as table or markdown"),
    (["--baseline", "x"], "the first FILE is the baseline"),
    (["--label", "one"], "give two"),
    (["THIRD"], "two at a time"),
    (["PINGPONG"], "two at a time")])
def test_a_monitor_compare_it_cannot_do_is_one_line_and_exit_2(tmp_path, extra, message):
    base = crafted(tmp_path / "a.json", CLASS_WEEK)
    cand = crafted(tmp_path / "b.json", VACATION)
    extra = [base if e == "THIRD" else str(PINGPONG) if e == "PINGPONG" else e for e in extra]
    res = cli("compare", base, cand, *extra)
    assert res.status == 2 and res.stdout == "" and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and message in res.stderr


# --- two periods of one database --------------------------------------------------------

DAY_CYCLES = 144  # a cycle every 10 minutes


def two_weeks_db(path: Path) -> str:
    """Monitored throughout from Monday 2026-11-02 to Sunday 2026-11-15, one cycle every
    10 minutes: the first week's small probes at the class week's daily RTTs, the second
    week's at the vacation's (one-way: half of them)."""
    from tests.test_monitor_report_local import Burst, burst_db, utc

    rtts = [2000.0 * m for m in CLASS_WEEK + [0.62, 0.63]] + \
        [2000.0 * m for m in VACATION + [0.27, 0.27]]
    return burst_db(path, [Burst(utc(2026, 11, 2 + i), DAY_CYCLES, rtt)
                           for i, rtt in enumerate(rtts)], period=600.0)


def test_two_periods_of_one_database(tmp_path):
    db = two_weeks_db(tmp_path / "two.sqlite")
    res = cli("monitor", "report", db, "--period", "2026-11-02..2026-11-09",
              "--period", "2026-11-09..2026-11-16")
    assert res.status == 0, res.stderr
    first = "- median one-way latency: 2026-11-02..2026-11-09 "
    line = next(x for x in res.stdout.splitlines() if x.startswith(first))
    geo = [math.exp(sum(map(math.log, v)) / 7) for v in (CLASS_WEEK + [0.62, 0.63],
                                                         VACATION + [0.27, 0.27])]
    assert f"{geo[0]:.3f} ms (7 days) vs 2026-11-09..2026-11-16 {geo[1]:.3f} ms (7 days), " \
           f"{100 * (geo[1] / geo[0] - 1):+.1f}%" in line
    assert line.endswith("**better**")
    berlin = cli("monitor", "report", db, "--timezone", "Europe/Berlin", "--period",
                 "2026-11-02..2026-11-09", "--period", "2026-11-09..2026-11-16").stdout
    line = next(x for x in berlin.splitlines() if x.startswith(first))
    assert line.count("(7 days)") == 2  # the hour of a Berlin day at each end is no day


@pytest.mark.parametrize("periods, message", [
    (["2026-11-02..2026-11-09"], "give two"),
    (["2026-11-02", "2026-11-09..2026-11-16"], "give FROM..TO"),
    (["2026-11-09..2026-11-02", "2026-11-09..2026-11-16"], "TO must be after FROM"),
    (["2026-11-02..soon", "2026-11-09..2026-11-16"], "give a time like")])
def test_a_bad_period_is_one_line_and_exit_2(tmp_path, periods, message):
    from tests.test_monitor_report_local import Burst, burst_db, utc

    db = burst_db(tmp_path / "p.sqlite", [Burst(utc(2026, 11, 2, 10))])
    res = cli("monitor", "report", db, *[a for p in periods for a in ("--period", p)])
    assert res.status == 2 and res.stdout == "" and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and message in res.stderr
    res = cli("monitor", "report", db, "--json", "--period", "2026-11-02..2026-11-09",
              "--period", "2026-11-09..2026-11-16")
    assert res.status == 2 and "not with --from, --to, -o or --json" in res.stderr

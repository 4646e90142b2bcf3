"""The monitor report on synthetic stores whose truth is known (accelerated schedule).

Each database is written through store.py (start_run, write_cycle) at the accelerated
test schedule: one cycle per 0.2 s, three 8-byte probes then one of 20,000 bytes, a
few thousand cycles (10-20 minutes of data).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from beoperf.monitor import events, plots, report, store

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
             seed: int = 1, runs: list[tuple[int, int]] | None = None) -> Path:
    """A store with `n_cycles` cycles; `runs` lists (first cycle, time offset s) of each run
    (default one run); a run's cycles go on until the next run's first cycle."""
    rng = np.random.default_rng(seed)
    db = store.connect(str(path))
    db.execute("PRAGMA synchronous=OFF")  # a test database need not survive a power loss
    runs = runs or [(0, 0.0)]
    bounds = [first for first, _ in runs[1:]] + [n_cycles]
    for (first, offset), stop in zip(runs, bounds, strict=True):
        run_id = store.start_run(db, host=host, address="192.0.2.1", transport="icmp",
                                 period_s=PERIOD, started_utc=t0 + offset,
                                 config={"period_s": PERIOD, "schedule": SCHEDULE,
                                         "timeout_s": 0.1})
        for k in range(first, stop):
            store.write_cycle(db, run_id, k - first,
                              cycle_probes(truth, k, t0 + offset + k * PERIOD, rng))
    db.close()
    return path


def cycle_probes(truth: Truth, k: int, t: float, rng: np.random.Generator) -> list[store.Probe]:
    rtt, noise, loss, outcome = truth(k)
    out = []
    for slot, offset in enumerate(OFFSETS):
        size = SMALL if slot < 3 else LARGE
        kind = outcome or ("timeout" if rng.random() < loss else "ok")
        value = rtt + rng.gamma(2.0, noise / 2.0)
        if size == LARGE:
            value += 2 * 8 * (LARGE - SMALL) / BPS * 1e6
        out.append(store.Probe(slot, t + offset, size, size + 28, "icmp", kind,
                               value if kind == "ok" else None))
    return out


def t_cycle(k: int, t0: float = T0) -> float:
    return t0 + k * PERIOD


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
def docs(dbs) -> dict[str, dict]:
    return {name: report.build_report(path) for name, path in dbs.items()}


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
    doc = report.build_report(dbs["outage"], outage_cycles=1)
    assert [o["cycles"] for o in doc["outages"]] == [150, 1]
    assert report.build_report(dbs["outage"], outage_cycles=151)["outages"] == []


def test_outage_open_when_the_data_end_inside_it(dbs):
    doc = report.build_report(dbs["outage"], t_to=t_cycle(1100))
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
    first, second = report.build_report(str(path))["outages"]
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

    doc = report.build_report(str(write_db(tmp_path / "alone.sqlite", truth, 6000)))
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
        assert docs[name]["summary"]["bandwidth_bps"]["median"] == pytest.approx(BPS, rel=0.03)


def test_one_way_latency_is_half_the_rtt(docs):
    lat = docs["gap"]["summary"]["one_way_ms"]
    noise_median_us = 50.0 * 1.678  # median of gamma(shape 2, scale 50 µs)
    assert lat["median"] == pytest.approx((BASE_US + noise_median_us) / 2000, abs=0.005)
    assert lat["count"] == 3 * 3000


def test_days_and_weeks_split_at_utc_midnight_and_monday(tmp_path):
    t0 = T0 - 300.0  # Sunday 23:55 UTC: 5 minutes in ISO week 44, 5 in week 45
    doc = report.build_report(str(write_db(tmp_path / "midnight.sqlite", steady, 3000,
                                           t0=t0)))
    assert [d["period"] for d in doc["days"]] == ["2026-11-01", "2026-11-02"]
    assert [w["period"] for w in doc["weeks"]] == ["2026-W44", "2026-W45"]
    assert [d["probes"] for d in doc["days"]] == [4 * 1500, 4 * 1500]
    assert sum(w["monitored_s"] for w in doc["weeks"]) == pytest.approx(600.0)


# --- errors ---------------------------------------------------------------------------


def test_empty_range_is_a_value_error(dbs, tmp_path):
    with pytest.raises(ValueError, match="no probes from"):
        report.build_report(dbs["gap"], t_from=T0 + 86400)
    with pytest.raises(ValueError, match="empty range"):
        report.build_report(dbs["gap"], t_from=T0 + 10, t_to=T0 + 10)
    empty = tmp_path / "empty.sqlite"
    store.connect(str(empty)).close()
    with pytest.raises(ValueError, match="no probes at all"):
        report.build_report(str(empty))


def test_not_a_store(tmp_path):
    bad = tmp_path / "bad.sqlite"
    bad.write_text("not sqlite")
    with pytest.raises(store.StoreError):
        report.build_report(str(bad))


def test_unknown_host(dbs):
    with pytest.raises(ValueError, match="no probes at all to nowhere"):
        report.build_report(dbs["gap"], host="nowhere")


def test_interleaved_cycles_are_regrouped():
    key = np.array([1 << 32, 2 << 32, 1 << 32, 2 << 32, (1 << 32) + 1])
    p = report.Probes(t=np.arange(5.0), rtt=np.full(5, 1.0), outcome=np.zeros(5, int),
                      size=np.full(5, 8), key=key)
    grouped, cyc = report._cycle_index(p)
    assert grouped.t.tolist() == [0.0, 2.0, 1.0, 3.0, 4.0]
    assert cyc.tolist() == [0, 0, 1, 1, 2]


def test_several_hosts_need_a_choice(tmp_path):
    path = tmp_path / "two.sqlite"
    write_db(path, steady, 200, host="a")
    write_db(path, steady, 200, host="b", t0=T0 + 1000)
    with pytest.raises(ValueError, match="2 hosts"):
        report.build_report(str(path))
    doc = report.build_report(str(path), host="b")
    assert doc["source"]["host"] == "b" and doc["summary"]["probes"] == 800


# --- the documents and the plots --------------------------------------------------------


def _table_rows(md: str, heading: str) -> list[list[str]]:
    section = md.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("| ")][1:]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]


def _text(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def test_markdown_and_json_agree(docs, dbs, tmp_path):
    doc = docs["congestion"]
    paths = report.write_report(doc, dbs["congestion"], tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text()
    assert json.loads((tmp_path / "out" / "report.json").read_text()) == json.loads(
        json.dumps(doc))
    assert md == report.render_markdown(doc)
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
    assert row[0] == report.iso(event["start_utc"])
    assert row[3:7] == [_text(event["one_way_ms"]["median"]),
                        _text(event["baseline"]["one_way_ms"]), _text(event["ratio"]),
                        _text(event["added_ms"])]
    assert f"{doc['method']['parameters']['outage_cycles']} consecutive cycles" in md
    assert {Path(p).name for p in paths} == {"report.md", "report.json", *doc["plots"]}


def test_doc_is_versioned_and_strict_json(docs):
    doc = docs["dead"]
    assert doc["format"] == "beoperf.monitor-report" and doc["schema_version"] == 1
    json.dumps(doc, allow_nan=False)  # no NaN or inf anywhere
    assert {"days", "weeks", "summary", "outages", "congestion", "level_shifts",
            "not_monitored", "method", "series"} <= set(doc)


def test_plots_never_blank_without_answers(docs, dbs, tmp_path):
    doc = docs["dead"]
    assert doc["summary"]["answered"] == 0 and doc["summary"]["one_way_ms"]["median"] is None
    assert any("no latency" in w for w in doc["warnings"])
    paths = report.write_report(doc, dbs["dead"], tmp_path)
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
    assert report.bin_width(span_s, PERIOD) == want
    assert span_s / report.bin_width(span_s, PERIOD) <= report.MAX_BINS


def test_iso_weeks_start_on_monday():
    edges, names = report.week_edges(T0 + 3600, T0 + 8 * 86400)
    assert edges[0] == T0 and names == ["2026-W45", "2026-W46"]
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", report.day_edges(T0, T0 + 1)[1][0])


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
    doc = report.build_report(dbs["gap"], t_from=t_cycle(10), t_to=to)
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
    doc = report.build_report(db)
    (event,) = doc["congestion"]
    assert _overlaps(event, t_cycle(3000), t_cycle(3300))
    assert doc["level_shifts"] == []
    assert "100 µs of RTT" in doc["method"]["events"]
    assert doc["method"]["parameters"]["noise_floor_us"] == 100.0
    # the baseline's IQR is shown as measured (gamma noise of scale 2.5 µs), not the floor
    assert event["baseline"]["iqr_ms"] < 0.005
    # without the floor the 130 µs minute is an event too
    bare = report.build_report(db, noise_floor_us=0.0)
    assert any(_overlaps(e, t_cycle(1000), t_cycle(1300)) for e in bare["congestion"])
    assert "0 µs of RTT" in bare["method"]["events"]

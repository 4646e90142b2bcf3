"""`beoperf compare`: the Mann-Whitney U test, the rows, the formats and the CLI."""

from __future__ import annotations

import csv
import io
import json
import math
import re
import statistics
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from beoperf.analysis import compare
from beoperf.analysis.compare import (
    NO_TRIAL_DATA,
    NOT_SIGNIFICANT,
    SIGNIFICANT,
    TOO_FEW,
    mann_whitney_u,
    rows,
)
from beoperf.analysis.curve import analyze_run
from beoperf.cli import ExitStatus
from beoperf.model.document import validate
from beoperf.model.pingpong import RunResult, SizeResult
from beoperf.report.compare import render_csv, render_impact, render_markdown, render_table
from helpers import cli, save_run


def render_json(table, min_change: float = 0.02) -> str:
    """The comparison document's body as JSON (what `compare --format json` prints), after
    checking the whole document against its schema."""
    doc = compare.document(table, min_change).to_json()
    validate("comparison", doc)
    return json.dumps(doc["body"])

# --- Mann-Whitney U ----------------------------------------------------------------------------


def reference_mwu(a: list[float], b: list[float]) -> tuple[float, float]:
    """Textbook form, independent of the implementation: U by counting pairs, tie-corrected
    variance from the tie groups, continuity correction, two-sided normal tail."""
    u = sum(1.0 if x > y else 0.5 if x == y else 0.0 for x in a for y in b)
    n1, n2 = len(a), len(b)
    n = n1 + n2
    ties = sum(t**3 - t for t in Counter([*a, *b]).values())
    sigma = math.sqrt(n1 * n2 / 12.0 * (n + 1 - ties / (n * (n - 1))))
    if sigma == 0:
        return u, 1.0
    z = max(0.0, abs(u - n1 * n2 / 2.0) - 0.5) / sigma
    return u, min(1.0, 2.0 * (1.0 - statistics.NormalDist().cdf(z)))


# scipy.stats.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic") (scipy 1.17.1)
SCIPY_CASES = [
    ([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], 0.0, 0.012185780355344813),
    ([1, 2, 3, 4, 5, 6], [6, 7, 8, 9, 10, 11], 0.5, 0.006392268870767702),
    ([3, 1, 4, 1, 5, 9, 2, 6], [5, 3, 5, 8, 9, 7, 9, 3, 2], 22.5, 0.20702196820234253),
    ([10.1, 10.3, 10.2, 10.2, 10.5, 10.4, 10.0], [10.6, 10.2, 10.8, 10.9, 10.7, 10.5],
     4.5, 0.02135906798031608),
    ([1, 1, 1, 1], [1, 1, 1], 6.0, 1.0),
]


@pytest.mark.parametrize("a, b, u, p", SCIPY_CASES)
def test_mann_whitney_matches_scipy(a, b, u, p):
    got_u, got_p = mann_whitney_u(a, b)
    assert got_u == u
    assert got_p == pytest.approx(p, rel=1e-9)


@pytest.mark.parametrize("seed", range(20))
def test_mann_whitney_matches_reference_formula_with_ties(seed):
    rng = np.random.default_rng(seed)
    n1, n2 = rng.integers(1, 15, size=2)
    a = [float(x) for x in np.round(rng.normal(10, 1, n1), 0)]  # rounded: many ties
    b = [float(x) for x in np.round(rng.normal(10.5, 1, n2), 0)]
    u, p = mann_whitney_u(a, b)
    ref_u, ref_p = reference_mwu(a, b)
    assert u == ref_u
    assert p == pytest.approx(ref_p, rel=1e-9, abs=1e-12)


def test_mann_whitney_symmetric():
    rng = np.random.default_rng(7)
    a, b = list(rng.normal(0, 1, 9)), list(rng.normal(0.7, 1, 13))
    u_ab, p_ab = mann_whitney_u(a, b)
    u_ba, p_ba = mann_whitney_u(b, a)
    assert p_ab == pytest.approx(p_ba)
    assert u_ab + u_ba == len(a) * len(b)


def test_mann_whitney_identical_samples_p_is_one():
    a = [9.1, 9.3, 9.2, 9.5, 9.0, 9.4]
    assert mann_whitney_u(a, list(a))[1] == pytest.approx(1.0)
    assert mann_whitney_u([5.0] * 8, [5.0] * 8) == (32.0, 1.0)


def test_mann_whitney_well_separated_tiny_p():
    a = [float(x) for x in range(30)]
    u, p = mann_whitney_u(a, [x + 100 for x in a])
    assert u == 0
    assert p < 1e-9


def test_mann_whitney_needs_observations():
    with pytest.raises(ValueError):
        mann_whitney_u([], [1.0])


# --- synthetic runs ----------------------------------------------------------------------------

SIZES = [1, 2, 4, 8, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576]


def size_result(size: int, trials: list[float] | None, median: float | None = None) -> SizeResult:
    median = float(np.median(trials)) if trials else median
    assert median is not None
    return SizeResult(
        size=size, samples=100 * len(trials or [1]), trials=len(trials or [1]), reps=100,
        time_us={"min": median * 0.95, "median": median, "mean": median * 1.01,
                 "p90": median * 1.05, "p99": median * 1.2, "max": median * 1.5,
                 "stddev": median * 0.02, "mad": median * 0.01},
        ci95_halfwidth_us=median * 0.01, ci95_relative=0.01, converged=True,
        throughput_bps={"from_median": size * 8.0 / (median * 1e-6),
                        "from_min": size * 8.0 / (median * 0.95e-6)},
        trial_medians_us=trials)


def synthetic_run(seed: int, latency_us: float = 10.0, bytes_per_us: float = 1250.0,
                  trials: int = 12, noise: float = 0.005, sizes: list[int] = SIZES,
                  peer: str = "10.0.0.2") -> RunResult:
    """Hockney t = latency + n / bandwidth, trial medians with lognormal noise (fixed seed)."""
    rng = np.random.default_rng(seed)
    results = []
    for n in sizes:
        t = latency_us + n / bytes_per_us
        results.append(size_result(n, [float(x) for x in t * rng.lognormal(0, noise, trials)]))
    return RunResult(parameters={"mode": "pingpong", "sizes": len(sizes)},
                     local={}, remote={}, meta={"peer": f"{peer} port 5202"}, sizes=results)


def test_runs_differing_only_by_noise_are_not_significant():
    runs_ = [synthetic_run(1), synthetic_run(2)]
    table = rows(runs_)
    base, other = table
    assert base.baseline and base.latency_test is None and base.latency_change_pct is None
    assert other.latency_test.verdict == NOT_SIGNIFICANT
    assert other.peak_test.verdict == NOT_SIGNIFICANT
    assert abs(other.latency_change_pct) < 2 and abs(other.peak_change_pct) < 2
    assert other.latency_test.size == other.latency_size == analyze_run(runs_[1]).latency_size
    assert other.latency_test.baseline_size == base.latency_size
    assert other.peak_test.size == other.peak_size == 1048576
    assert other.latency_test.n == other.latency_test.baseline_n == 12


def test_many_noise_only_pairs_rarely_significant():
    verdicts = [rows([synthetic_run(s), synthetic_run(s + 1000, noise=0.02)])[1]
                .latency_test.verdict for s in range(40)]
    assert verdicts.count(SIGNIFICANT) <= 2


def test_latency_30_percent_higher_is_significant():
    table = rows([synthetic_run(1), synthetic_run(2, latency_us=13.0)])
    other = table[1]
    assert other.latency_test.verdict == SIGNIFICANT
    assert other.latency_test.p < 0.001
    assert other.latency_change_pct == pytest.approx(30, abs=2)
    assert other.latency_test.change_pct == pytest.approx(30, abs=2)
    assert other.impact_pct == pytest.approx(-30, abs=2)
    assert other.peak_test.verdict == NOT_SIGNIFICANT  # 3 us more on 850 us: well below 2%
    assert other.latency_test.text().startswith("significant (+")


def test_higher_bandwidth_is_a_significant_peak_change():
    other = rows([synthetic_run(1), synthetic_run(2, bytes_per_us=1500.0)])[1]
    assert other.peak_test.verdict == SIGNIFICANT
    assert other.peak_test.change_pct == pytest.approx(19.8, abs=1.5)
    assert other.peak_change_pct > 15
    assert other.latency_test.verdict == NOT_SIGNIFICANT


def test_p_below_alpha_but_change_below_threshold_is_not_significant():
    runs = [synthetic_run(1, noise=0.001), synthetic_run(2, latency_us=10.1, noise=0.001)]
    test = rows(runs)[1].latency_test
    assert test.p < 0.05 and 0 < test.change_pct < 2
    assert test.verdict == NOT_SIGNIFICANT
    assert "but <= 2%" in test.text()
    assert rows(runs, min_change=0.005)[1].latency_test.verdict == SIGNIFICANT


def test_too_few_trials():
    runs = [synthetic_run(1, trials=5), synthetic_run(2, latency_us=20.0)]
    test = rows(runs)[1].latency_test
    assert test.verdict == TOO_FEW and test.p is None
    assert test.text() == "too few trials (12 vs 5)"


def test_imported_run_lacks_trial_data():
    imported = synthetic_run(2)
    imported.source = {"format": "netpipe", "path": "/data/np.out"}
    table = rows([synthetic_run(1), imported])
    assert table[1].latency_test.verdict == NO_TRIAL_DATA == "n/a (source lacks trial data)"
    assert table[1].peak_test.verdict == NO_TRIAL_DATA
    assert table[1].label == "np"
    assert table[1].latency_variance is None  # impact still from the source's own time
    latency_size = next(s for s in imported.sizes if s.size == table[1].latency_size)
    assert table[1].latency_mean_us == latency_size.central_time_us() == table[1].latency_us


def test_missing_trial_medians_lack_trial_data():
    old = synthetic_run(2)
    for s in old.sizes:
        s.trial_medians_us = None
    assert rows([synthetic_run(1), old])[1].latency_test.verdict == NO_TRIAL_DATA
    assert rows([old, synthetic_run(1)])[1].peak_test.verdict == NO_TRIAL_DATA


def test_baseline_index_and_figures():
    runs = [synthetic_run(1, latency_us=13.0), synthetic_run(2)]
    table = rows(runs, baseline_index=1, labels=["slow", "fast"])
    assert [r.baseline for r in table] == [False, True]
    assert table[0].latency_test.verdict == SIGNIFICANT
    slow = table[0]
    assert slow.label == "slow"
    assert slow.latency_us == pytest.approx(13.0, rel=0.02)
    assert slow.peak_size == 1048576
    assert slow.alpha_us == pytest.approx(13.0, rel=0.05)
    assert slow.bandwidth_bps == pytest.approx(1250e6 * 8, rel=0.02)
    assert slow.n_half is not None and slow.latency_p99_us is not None
    with pytest.raises(ValueError):
        rows(runs, baseline_index=2)


def test_peak_tested_at_each_runs_own_peak_size():
    short = synthetic_run(2, sizes=SIZES[:-1])
    row = rows([synthetic_run(1), short])[1]
    test = row.peak_test
    assert (test.size, test.baseline_size) == (row.peak_size, 1048576) == (262144, 1048576)
    assert "262144 vs 1048576 B" in test.text()
    assert test.change_pct == row.peak_change_pct


def test_runs_without_a_common_size_compare_their_latency_sizes():
    """Latency needs no size in common: each run's figure is its own latency size's median,
    and the test compares the trials behind those two figures."""
    a = synthetic_run(1, sizes=[1, 3, 5, 7])
    b = synthetic_run(2, sizes=[2, 4, 6, 8], latency_us=13.0)
    other = rows([a, b])[1]
    test = other.latency_test
    assert test.verdict == SIGNIFICANT
    assert test.size == other.latency_size == analyze_run(b).latency_size
    assert test.baseline_size == analyze_run(a).latency_size
    assert test.size != test.baseline_size and " vs " in test.text()
    assert other.impact_pct == pytest.approx(-30, abs=3)
    assert "n/a" not in render_impact(rows([a, b])).splitlines()[2]


def test_run_without_sizes_is_rejected():
    empty = synthetic_run(1)
    empty.sizes = []
    with pytest.raises(ValueError, match="no message sizes"):
        rows([synthetic_run(1), empty])


# --- the change and the verdict speak about one quantity (issue 9, 6.9) -----------------------

def with_size(run: RunResult, size: int, time_us: float, seed: int = 99) -> RunResult:
    """The run with one size's trials moved to about time_us."""
    rng = np.random.default_rng(seed)
    trials = [float(x) for x in time_us * rng.lognormal(0, 0.005, 12)]
    run.sizes = [size_result(size, trials) if s.size == size else s for s in run.sizes]
    return run


def disagreeing_runs() -> list[RunResult]:
    """The latency figures fall by 7% while the first size (1 B) rises by 50%; the peak
    figure falls by about 3% while the baseline's peak size (1 MiB) is 30% slower."""
    base = with_size(synthetic_run(1), 1, 8.0)
    other = with_size(synthetic_run(2, latency_us=9.3), 1, 12.0)
    slow_end = (9.3 + 1048576 / 1250.0) * 1.3
    other = with_size(other, 1048576, slow_end)
    return [base, other]


def test_verdicts_test_the_figures_whose_change_is_shown():
    base, other = disagreeing_runs()
    row = rows([base, other])[1]
    assert row.latency_change_pct == pytest.approx(-7, abs=1)
    assert row.latency_test.change_pct == row.latency_change_pct  # not the +50% at 1 B
    assert row.latency_test.size == row.latency_size != 1
    assert row.latency_test.verdict == SIGNIFICANT
    assert row.latency_test.median < row.latency_test.baseline_median  # the same direction
    assert row.peak_size == 262144 and row.peak_change_pct == pytest.approx(-3, abs=2)
    assert row.peak_test.change_pct == row.peak_change_pct  # not the -30% at 1 MiB
    assert (row.peak_test.size, row.peak_test.baseline_size) == (262144, 1048576)
    assert row.peak_test.median < row.peak_test.baseline_median


def test_every_format_shows_the_tested_change():
    table = rows(disagreeing_runs(), labels=["base", "other"])
    row = table[1]
    latency, peak = f"{row.latency_change_pct:+.1f}%", f"{row.peak_change_pct:+.1f}%"
    for render in (render_table, render_markdown):
        line = next(x for x in render(table).splitlines() if "other" in x)
        assert line.count(latency) == 2 and line.count(peak) == 2  # the column and the verdict
    record = list(csv.DictReader(io.StringIO(render_csv(table))))[1]
    assert record["latency_test_change_pct"] == record["latency_change_pct"]
    assert record["peak_test_change_pct"] == record["peak_change_pct"]
    assert record["latency_test_size_B"] == str(row.latency_size)
    doc = json.loads(render_json(table))["rows"][1]
    assert doc["latency_test"]["change_pct"] == doc["latency_change_pct"]
    assert doc["peak_test"]["change_pct"] == doc["peak_change_pct"]
    impact = render_impact(table)
    assert f"other: significant ({latency} at {row.latency_size} vs" in impact
    obs = next(s for s in disagreeing_runs()[1].sizes if s.size == row.latency_size)
    assert row.latency_mean_us == pytest.approx(statistics.fmean(obs.trial_medians_us))


# --- throughput collapses in every format (issue 9, 6.3) -------------------------------------

def collapsed_run(seed: int) -> RunResult:
    """synthetic_run with 256 KiB and 1 MiB stalled at 100 ms (a 100x and more drop)."""
    run = synthetic_run(seed)
    for size in (262144, 1048576):
        run = with_size(run, size, 100e3, seed)
    return run


def test_collapses_are_listed_per_run_in_every_format():
    table = rows([synthetic_run(1), collapsed_run(2)], labels=["base", "stalled"])
    assert table[0].collapses == []
    (c,) = table[1].collapses
    assert (c.first_size, c.last_size, c.points) == (262144, 1048576, 2)
    assert table[1].peak_size == 65536  # the figures leave the collapse out
    assert table[1].peak_test.size == 65536
    note = f"Warning: stalled: {c.text()}; its figures leave those sizes out"
    for render in (render_table, render_markdown, render_impact):
        text = render(table)
        assert note in text and "base: throughput collapse" not in text
    line = next(x for x in render_table(table).splitlines() if x.startswith("stalled"))
    assert line.endswith(f"262144..1048576 B (1/{c.factor:.0f})")
    records = list(csv.DictReader(io.StringIO(render_csv(table))))
    assert records[0]["throughput_collapses"] == ""
    first_last, factor = records[1]["throughput_collapses"].split(":")
    assert first_last == "262144-1048576" and float(factor) == pytest.approx(c.factor)
    doc = json.loads(render_json(table))
    assert doc["rows"][1]["collapses"][0]["first_size"] == 262144


# --- the seeds' impact table -------------------------------------------------------------------

SEED_TABLE = """\
Configuration      Latency mean (variance)   Impact
Default            50.03 (4.31)              -
Interrupt coal.    32.10 (1.20)              35.84%
Combined           21.31 (2.09)              57.40%
"""


def two_point_run(mean: float, variance: float, trials: int = 6) -> RunResult:
    """Trial medians mean +- d (half each): mean exactly, variance (ddof=1) = d^2 n / (n-1)."""
    d = math.sqrt(variance * (trials - 1) / trials)
    small = [mean - d] * (trials // 2) + [mean + d] * (trials // 2)
    big = [10.0 + 100.0 + x / 1000 for x in range(trials)]
    return RunResult(parameters={"mode": "pingpong"}, local={}, remote={}, meta={},
                     sizes=[size_result(1, small), size_result(65536, big)])


def seed_runs() -> list[RunResult]:
    # The study's 57.40% comes from unrounded means: 50.034 and 21.314 give it (and still
    # print as 50.03 and 21.31); 50.03 and 21.31 would give 57.41%.
    return [two_point_run(50.034, 4.31), two_point_run(32.10, 1.20), two_point_run(21.314, 2.09)]


def cells(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def test_seed_samples_have_the_studys_mean_and_variance():
    for run, (mean, var) in zip(seed_runs(), [(50.034, 4.31), (32.10, 1.20), (21.314, 2.09)],
                                strict=True):
        obs = run.sizes[0].trial_medians_us
        assert statistics.fmean(obs) == pytest.approx(mean, rel=1e-12)
        assert statistics.variance(obs) == pytest.approx(var, rel=1e-12)


def test_impact_format_reproduces_the_seed_table():
    table = rows(seed_runs(), labels=["Default", "Interrupt coal.", "Combined"])
    assert table[1].latency_mean_us == pytest.approx(32.10)
    assert table[1].latency_variance == pytest.approx(1.20)
    assert table[1].impact_pct == pytest.approx((50.034 - 32.10) / 50.034 * 100)
    text = render_impact(table)
    lines = text.splitlines()
    assert [cells(line) for line in lines[:4]] == [cells(line) for line in SEED_TABLE.splitlines()]
    assert lines[4] == ""
    assert any("Mann-Whitney U" in line for line in lines[5:])
    assert "Interrupt coal.: significant" in text  # 6 vs 6 trials, well separated


# --- formats -----------------------------------------------------------------------------------

def three_rows() -> list[compare.Row]:
    runs = [synthetic_run(1), synthetic_run(2), synthetic_run(3, latency_us=13.0)]
    return rows(runs, labels=["base", "noise", "slow | worse"])


def test_table_format():
    text = render_table(three_rows())
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["run", "latency", "us"]
    assert lines[1].startswith("base ") and "baseline" in lines[1]
    assert "not significant" in lines[2]
    assert re.search(r"\+\d+\.\d% +significant \(\+", lines[3])
    footer = lines[lines.index("") + 1:]
    assert footer[0].startswith("Baseline: base.")
    assert footer[1].startswith("Test: two-sided Mann-Whitney U")
    assert "p < 0.05" in footer[1] and "more than 2%" in footer[1]


def test_markdown_format():
    text = render_markdown(three_rows())
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert len(table) == 5
    widths = {len(re.split(r"(?<!\\)\|", line)) for line in table}
    assert len(widths) == 1  # the escaped pipe in a label does not add a column
    assert "slow \\| worse" in table[4]
    assert "Mann-Whitney U" in text


def test_csv_format_parses():
    records = list(csv.DictReader(io.StringIO(render_csv(three_rows()))))
    assert [r["label"] for r in records] == ["base", "noise", "slow | worse"]
    assert [r["baseline"] for r in records] == ["1", "0", "0"]
    assert records[2]["latency_verdict"] == SIGNIFICANT
    assert records[1]["latency_verdict"] == NOT_SIGNIFICANT
    assert float(records[2]["latency_us"]) == pytest.approx(13.0, rel=0.02)
    assert float(records[2]["peak_Mbit_s"]) == pytest.approx(rows_peak_mbit(), rel=0.05)
    assert float(records[2]["latency_p"]) < 0.001
    for name in ("latency_us", "peak_Mbit_s", "peak_size_B", "n_half_B", "inv_beta_Mbit_s"):
        assert name in records[0]
    for record in records:
        for key, value in record.items():
            if key not in ("label", "latency_verdict", "peak_verdict") and value:
                float(value)  # bare numbers, no units in cells


def rows_peak_mbit() -> float:
    return 1048576 * 8 / (13.0 + 1048576 / 1250.0)


def test_json_format_parses():
    doc = json.loads(render_json(three_rows(), min_change=0.03))
    assert doc["baseline"] == "base"
    assert doc["test"]["name"].startswith("Mann-Whitney U")
    assert doc["test"]["alpha"] == 0.05 and doc["test"]["min_change_pct"] == 3.0
    assert doc["test"]["min_trials"] == 6
    assert [r["label"] for r in doc["rows"]] == ["base", "noise", "slow | worse"]
    assert doc["rows"][0]["latency_test"] is None
    assert doc["rows"][2]["latency_test"]["verdict"] == SIGNIFICANT


# --- CLI ---------------------------------------------------------------------------------------

@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name, run in {"base": synthetic_run(1), "noise": synthetic_run(2),
                      "slow": synthetic_run(3, latency_us=13.0)}.items():
        out[name] = tmp_path / f"{name}.json"
        save_run(run, out[name])
    return out


def assert_one_line_error(res, status: ExitStatus, *words: str) -> str:
    assert res.status == status, res.stderr
    assert len(res.error_lines) == 1, res.stderr
    assert "Traceback" not in res.stderr
    line = res.error_lines[0]
    for word in words:
        assert word in line, line
    return line


def test_cli_table(files):
    res = cli("compare", str(files["base"]), str(files["noise"]), str(files["slow"]))
    assert res.status == 0, res.stderr
    lines = res.stdout.splitlines()
    # all three runs have the same metadata label: the file names tell them apart
    for line, name in zip(lines[1:4], ("base", "noise", "slow"), strict=True):
        assert f"({name}.json)" in line
    assert "not significant" in lines[2] and "significant (+" in lines[3]
    assert "Test: two-sided Mann-Whitney U" in res.stdout


def test_cli_baseline_and_labels(files):
    res = cli("compare", str(files["base"]), str(files["slow"]), "--baseline", str(files["slow"]),
              "--label", "A", "--label", "B", "--format", "json")
    assert res.status == 0, res.stderr
    assert res.json["body"]["baseline"] == "B"
    assert [r["baseline"] for r in res.json["body"]["rows"]] == [False, True]
    assert res.json["body"]["rows"][0]["latency_change_pct"] < -20
    by_label = cli("compare", str(files["base"]), str(files["slow"]), "--baseline", "B",
                   "--label", "A", "--label", "B", "--format", "json")
    assert by_label.json["body"]["baseline"] == "B"


def test_cli_impact_and_markdown(files):
    res = cli("compare", str(files["base"]), str(files["slow"]), "--format", "impact",
              "--label", "Default", "--label", "Slower")
    assert res.status == 0, res.stderr
    lines = res.stdout.splitlines()
    assert cells(lines[0]) == ["Configuration", "Latency mean (variance)", "Impact"]
    assert cells(lines[1])[0] == "Default" and cells(lines[1])[2] == "-"
    assert re.fullmatch(r"-\d+\.\d\d%", cells(lines[2])[2])
    md = cli("compare", str(files["base"]), str(files["slow"]), "--format", "markdown")
    assert md.status == 0 and md.stdout.startswith("| run |")


def test_cli_csv_stdout_is_pure_csv(files):
    res = cli("compare", str(files["base"]), str(files["noise"]), "--format", "csv",
              "--min-change", "5%")
    assert res.status == 0, res.stderr
    records = list(csv.DictReader(io.StringIO(res.stdout)))
    assert len(records) == 2
    assert "Mann-Whitney U" in res.stderr and "more than 5%" in res.stderr


def test_cli_single_file(files):
    res = cli("compare", str(files["base"]))
    assert res.status == 0 and "baseline" in res.stdout


def test_cli_no_files_is_usage_error():
    assert_one_line_error(cli("compare"), ExitStatus.USAGE, "usage error")


def test_cli_baseline_not_among_inputs(files, tmp_path):
    line = assert_one_line_error(
        cli("compare", str(files["base"]), str(files["noise"]), "--baseline",
            str(files["slow"])), ExitStatus.USAGE, "usage error", "--baseline")
    assert "not among the files" in line


def test_cli_label_count_must_match(files):
    assert_one_line_error(cli("compare", str(files["base"]), str(files["noise"]), "--label", "x"),
                          ExitStatus.USAGE, "--label")


@pytest.mark.parametrize("value", ["5", "-0.1", "abc", "150%"])
def test_cli_bad_min_change(files, value):
    assert_one_line_error(cli("compare", str(files["base"]), "--min-change", value),
                          ExitStatus.USAGE, "--min-change")


def test_cli_bad_file_is_one_line_input_error(files, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    line = assert_one_line_error(cli("compare", str(files["base"]), str(bad)), ExitStatus.ERROR)
    assert line.startswith(f"beoperf: input error: {bad}: ")


def test_cli_missing_file_is_input_error(files, tmp_path):
    missing = tmp_path / "missing.json"
    line = assert_one_line_error(cli("compare", str(missing), str(files["base"])),
                                 ExitStatus.ERROR)
    assert line.startswith(f"beoperf: input error: {missing}: ")


def test_cli_result_without_sizes_is_input_error(tmp_path):
    empty = synthetic_run(1)
    empty.sizes = []
    path = tmp_path / "empty.json"
    save_run(empty, path)
    line = assert_one_line_error(cli("compare", str(path)), ExitStatus.ERROR)
    assert line == f"beoperf: input error: {path}: no measured sizes in this result"

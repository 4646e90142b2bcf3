"""beoperf.analysis.effect: the one comparison every verdict comes from."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from beoperf.analysis import effect
from beoperf.analysis.effect import (
    BETTER,
    CANNOT_TELL,
    DEFAULT_SPREAD,
    NO_DIFFERENCE,
    WORSE,
    Replicate,
    Spread,
    blocks,
    compare,
    verdict_of,
)

# --- the verdict of an interval ------------------------------------------------------------


@pytest.mark.parametrize("low, high, higher, expected", [
    (1.05, 1.30, True, BETTER),     # a rate up: better
    (1.05, 1.30, False, WORSE),     # a time up: worse
    (0.70, 0.95, False, BETTER),
    (0.70, 0.95, True, WORSE),
    (0.95, 1.06, False, NO_DIFFERENCE),  # within +-10%
    (1 / 1.1, 1.1, True, NO_DIFFERENCE),  # the margin's own edges count as within
    (0.80, 1.06, False, CANNOT_TELL),
    (0.95, 1.25, True, CANNOT_TELL),
])
def test_verdict_of_an_interval(low, high, higher, expected):
    assert verdict_of(low, high, 0.10, higher) == expected


def test_an_interval_touching_one_is_not_a_change():
    assert verdict_of(1.0, 1.4, 0.1, True) == CANNOT_TELL
    assert verdict_of(0.6, 1.0, 0.1, False) == CANNOT_TELL


# --- one run a side ------------------------------------------------------------------------


def test_one_run_a_side_uses_both_runs_own_uncertainty_and_twice_the_prior():
    prior = Spread(0.05, None, "a test")
    e = compare([Replicate(10.0, 0.01)], [Replicate(12.0, 0.02)], higher_is_better=False,
                prior=prior)
    se = math.sqrt(0.01 ** 2 + 0.02 ** 2 + 2 * 0.05 ** 2)
    z = stats.norm.ppf(0.975)
    assert e.ratio == pytest.approx(1.2)
    assert e.low == pytest.approx(1.2 * math.exp(-z * se))
    assert e.high == pytest.approx(1.2 * math.exp(z * se))
    assert e.p == pytest.approx(2 * stats.norm.sf(math.log(1.2) / se))
    assert e.verdict == WORSE and e.spread_source == "a test" and e.df is None
    assert e.between_pct == pytest.approx(100 * z * 0.05, rel=1e-6)


def test_without_a_prior_the_default_spread_is_used_and_said():
    e = compare([Replicate(10.0, 0.001)], [Replicate(12.0, 0.001)], higher_is_better=False)
    assert e.spread_source == DEFAULT_SPREAD.source
    assert "10%" in e.spread_text() and "no repeated runs" in e.spread_text()
    assert e.verdict == CANNOT_TELL  # +20% is inside what two runs of a 10% machine allow
    assert e.low < 1 < e.high


def test_a_prior_with_degrees_of_freedom_takes_students_t():
    prior = Spread(0.03, 4.0, "4 earlier runs")
    e = compare([Replicate(10.0, 0.0)], [Replicate(11.0, 0.0)], higher_is_better=False,
                prior=prior)
    half = stats.t.ppf(0.975, 4) * math.sqrt(2) * 0.03
    assert math.log(e.high / e.ratio) == pytest.approx(half)


def test_family_widens_to_the_bonferroni_level():
    one = compare([Replicate(10.0, 0.02)], [Replicate(10.5, 0.02)], higher_is_better=False)
    many = compare([Replicate(10.0, 0.02)], [Replicate(10.5, 0.02)], higher_is_better=False,
                   family=124)
    assert many.confidence == pytest.approx(1 - 0.05 / 124)
    ratio = math.log(many.high / many.ratio) / math.log(one.high / one.ratio)
    assert ratio == pytest.approx(stats.norm.ppf(1 - 0.025 / 124) / stats.norm.ppf(0.975))
    assert many.p == pytest.approx(min(1.0, one.p * 124))


def test_a_run_without_an_interval_counts_the_spread_between_runs_only():
    e = compare([Replicate(10.0, None)], [Replicate(30.0, 0.01)], higher_is_better=False)
    assert e.verdict == WORSE and e.reason and "without its own interval" in e.reason


@pytest.mark.parametrize("value", [0.0, -1.0, math.inf, math.nan])
def test_a_figure_that_is_not_positive_cannot_be_told(value):
    e = compare([Replicate(10.0, 0.01)], [Replicate(value, 0.01)], higher_is_better=True)
    assert e.verdict == CANNOT_TELL and e.low is None and "positive" in e.reason


# --- repeated runs -------------------------------------------------------------------------


def test_repeated_runs_give_welchs_pooled_t_on_the_logs():
    base = [10.0, 10.4, 9.8]
    cand = [11.0, 11.5, 10.9]
    e = compare([Replicate(v) for v in base], [Replicate(v) for v in cand],
                higher_is_better=False)
    ref = stats.ttest_ind(np.log(cand), np.log(base), equal_var=True)
    ci = ref.confidence_interval(0.95)
    assert math.log(e.low) == pytest.approx(ci.low)
    assert math.log(e.high) == pytest.approx(ci.high)
    assert e.p == pytest.approx(ref.pvalue)
    assert e.df == 4 and "repeated runs" in e.spread_source


def test_repeated_runs_pool_with_a_history_but_not_with_the_default():
    reps = [Replicate(v, 0.0) for v in (10.0, 10.2)], [Replicate(v, 0.0) for v in (10.1, 10.3)]
    alone = compare(*reps, higher_is_better=False)
    pooled = compare(*reps, higher_is_better=False, prior=Spread(0.08, 6.0, "6 earlier runs"))
    assert alone.df == 2 and pooled.df == 8
    assert "6 earlier runs" in pooled.spread_source
    logs_b, logs_c = np.log([10.0, 10.2]), np.log([10.1, 10.3])
    var_r = (logs_b.var(ddof=1) + logs_c.var(ddof=1)) / 2  # 2 df
    var = (2 * var_r + 6 * 0.08 ** 2) / 8
    half = stats.t.ppf(0.975, 8) * math.sqrt(var * (1 / 2 + 1 / 2))
    assert math.log(pooled.high / pooled.ratio) == pytest.approx(half)
    assert alone.spread_source.startswith("the repeated runs")


# --- coverage: the rates the method promises -------------------------------------------------


def aa_rate(between: float, trials: int, family: int = 1, seed: int = 3) -> float:
    """The share of A/A pairs (one run a side, level moving by ``between`` between runs)
    that get 'better' or 'worse' with the default spread."""
    rng = np.random.default_rng(seed)
    wrong = 0
    for _ in range(trials):
        a, b = 10.0 * rng.lognormal(0, between, 2)
        e = compare([Replicate(a, 0.01)], [Replicate(b, 0.01)], higher_is_better=False,
                    family=family)
        wrong += e.verdict in (BETTER, WORSE)
    return wrong / trials


def test_aa_pairs_on_a_machine_as_noisy_as_the_default_are_wrong_about_5_percent():
    assert aa_rate(0.10, 4000) == pytest.approx(0.05, abs=0.015)


def test_aa_pairs_in_a_family_are_wrong_alpha_over_family():
    assert aa_rate(0.10, 4000, family=10) <= 0.012


def test_a_doubling_is_found_with_one_run_a_side():
    e = compare([Replicate(100e6, 0.01)], [Replicate(200e6, 0.01)], higher_is_better=True,
                family=30)
    assert e.verdict == BETTER and e.low > 1.2


@settings(max_examples=200, deadline=None)
@given(st.floats(1e-6, 1e12), st.floats(1e-6, 1e12), st.floats(0, 20), st.floats(0, 20),
       st.floats(0, 5), st.integers(1, 500))
def test_intervals_of_a_ratio_are_positive_and_hold_the_ratio(a, b, wa, wb, sd, family):
    e = compare([Replicate(a, wa)], [Replicate(b, wb)], higher_is_better=True,
                prior=Spread(sd, None, "x"), family=family)
    assert 0 <= e.low <= e.ratio <= e.high  # exp() of a huge width underflows to 0
    assert e.verdict in effect.VERDICTS


# --- blocks ----------------------------------------------------------------------------------


def test_blocks_against_their_neighbours_are_ttest_1samp_on_the_log_ratios():
    around = [50.0, 51.0, 50.5, 52.0, 51.5]
    cand = [40.0, 41.0, 40.2, 41.5]
    e = blocks(cand, around, higher_is_better=False)
    diffs = np.log(cand) - (np.log(around[:-1]) + np.log(around[1:])) / 2
    ref = stats.ttest_1samp(diffs, 0.0)
    ci = ref.confidence_interval(0.95)
    assert math.log(e.low) == pytest.approx(ci.low)
    assert math.log(e.high) == pytest.approx(ci.high)
    assert e.p == pytest.approx(ref.pvalue) and e.df == 3
    assert e.verdict == BETTER


def test_blocks_cancel_a_linear_drift_and_a_cold_start():
    """The baseline's first block is cold (+50%) and the machine drifts 3% a block: a change
    with no effect must not look like a gain."""
    t = np.arange(9)
    level = 50.0 * (1 + 0.03 * t)
    level[0] *= 1.5
    around, cand = list(level[0::2]), list(level[1::2])
    e = blocks(cand, around, higher_is_better=False)
    assert e.verdict != BETTER


def test_blocks_need_a_neighbour_on_each_side():
    assert "at least 2 blocks" in blocks([1.0, 1.0], [1.0, 1.0], higher_is_better=False).reason
    assert blocks([1.0], [1.0, 1.0], higher_is_better=False).verdict == CANNOT_TELL


def test_identical_blocks_are_no_difference():
    e = blocks([5.0, 5.0, 5.0], [5.0] * 4, higher_is_better=False)
    assert e.verdict == NO_DIFFERENCE and e.ratio == 1.0 and e.p == 1.0


def test_false_keeps_of_a_change_without_effect_stay_at_alpha_over_two():
    rng = np.random.default_rng(11)
    better = 0
    trials = 2000
    for _ in range(trials):
        values = 50.0 * rng.lognormal(0, 0.05, 9) * (1 + 0.01 * np.arange(9))
        better += blocks(list(values[1::2]), list(values[0::2]),
                         higher_is_better=False).verdict == BETTER
    assert better / trials == pytest.approx(0.025, abs=0.012)


# --- helpers ---------------------------------------------------------------------------------


def test_log_sd_from_interval_inverts_a_symmetric_log_interval():
    sd = 0.04
    z = stats.norm.ppf(0.975)
    assert effect.log_sd_from_interval(10 * math.exp(-z * sd), 10 * math.exp(z * sd)) == \
        pytest.approx(sd)
    assert effect.log_sd_from_interval(-1.0, 10.0) is None
    assert effect.log_sd_from_interval(None, 10.0) is None


def test_standard_errors_of_a_median_and_a_mean():
    assert effect.median_log_sd([1.0]) is None
    values = [9.0, 10.0, 11.0, 10.5]
    sd = float(np.std(np.log(values), ddof=1))
    assert effect.median_log_sd(values) == pytest.approx(math.sqrt(math.pi / 2) * sd / 2)
    assert effect.mean_log_sd(values) == pytest.approx(
        np.std(values, ddof=1) / (np.mean(values) * 2))
    assert effect.mean_log_sd([1.0, -1.0]) is None


def test_text_and_round_trip():
    e = compare([Replicate(10.0, 0.001)], [Replicate(5.0, 0.001)], higher_is_better=False)
    assert e.text().startswith("better (-50.0%, ")
    assert effect.from_dict(e.to_dict()) == e
    assert effect.from_dict(None) is None
    assert effect.tally([e, e]) == {BETTER: 2, WORSE: 0, NO_DIFFERENCE: 0, CANNOT_TELL: 0}


def test_a_real_gain_is_found_in_blocks():
    """The procedure's power: a 20% faster change, 5% noise per block, 4 blocks."""
    rng = np.random.default_rng(12)
    found = 0
    for _ in range(200):
        around = 50.0 * rng.lognormal(0, 0.05, 5)
        cand = 40.0 * rng.lognormal(0, 0.05, 4)
        found += blocks(list(cand), list(around), higher_is_better=False).verdict == BETTER
    assert found >= 190, found


def test_an_interval_wider_than_ten_times_reads_as_that():
    e = compare([Replicate(v) for v in (10.0, 20.0)], [Replicate(v) for v in (11.0, 30.0)],
                higher_is_better=True, family=40)
    assert e.high / e.low > 10 and e.span_text() == "an interval over x10"
    assert e.text().startswith("cannot tell (+") and e.text().endswith(", an interval over x10)")

"""Intervals of positive quantities (beoperf.analysis.intervals): widened and combined on
the log scale, so that no bound reaches zero however wide the spread."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beoperf.analysis import intervals
from beoperf.sweep import history
from beoperf.sweep.precision import Point

medians = st.floats(min_value=1e-6, max_value=1e12)
ratios = st.floats(min_value=1.0, max_value=1e9)  # median / low, high / median
factors = st.floats(min_value=0.0, max_value=50.0)


@settings(max_examples=400, deadline=None)
@given(medians, ratios, ratios, factors, factors)
def test_widening_never_gives_a_bound_at_or_below_zero(median, down, up, k, extra):
    """Any positive interval around its median, widened by any factor up to 50 with any
    extra log half-width up to 50 (a spread of e^100): both bounds positive and finite,
    around the median, at least as wide as before when k >= 1; or no interval at all
    when the floats cannot hold it, never a bound of 0."""
    low, high = median / down, median * up
    got = intervals.widened(median, low, high, k, extra)
    if got is None:
        assert k * math.log(max(down, up)) > 700 or extra > 700 or \
            median * math.exp(math.hypot(k * math.log(up), extra)) > 1e300 or \
            median * math.exp(-math.hypot(k * math.log(down), extra)) < 1e-300
        return
    lo, hi = got
    assert 0 < lo <= median <= hi < math.inf
    if k >= 1:
        assert lo <= low * (1 + 1e-12) and hi >= high * (1 - 1e-12)


@settings(max_examples=200, deadline=None)
@given(medians, st.floats(min_value=1.0, max_value=10.0), st.floats(min_value=0.0,
                                                                     max_value=30.0))
def test_the_history_s_spread_never_takes_a_bound_to_zero(median, ratio, sd):
    """history.widen with a spread between runs of up to 3000% (s_b 30): positive."""
    got = history.widen(median, [median / ratio, median * ratio], sd)
    assert got is None or 0 < got[0] <= median <= got[1] < math.inf


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=1e-3, max_value=1e9), min_size=6, max_size=40),
       st.floats(min_value=1.0, max_value=3.0))
def test_a_points_repeat_interval_is_above_zero_for_any_positive_trials(medians_ns, inflation):
    """The precision loop's repeat interval (sqrt(2) x inflation, up to 3 as the loop's
    own cap) over any positive trial medians, spread over 12 orders of magnitude."""
    p = Point(1)
    p.trial_medians = list(medians_ns)
    got, (_median, low, high) = p.repeat_interval(inflation), p.median_ci()
    assert got is not None and 0 < got[0] <= low * (1 + 1e-12)
    assert high * (1 - 1e-12) <= got[1] < math.inf


def test_the_combination_is_in_quadrature_on_the_log_scale_by_hand():
    """median 10, [8, 12.5] (log half-widths ln 1.25 both sides), extra ln 1.25 x 0.75:
    each side ln 1.25 x hypot(1, 0.75) = 1.25 ln 1.25."""
    lo, hi = intervals.widened(10.0, 8.0, 12.5, 1.0, 0.75 * math.log(1.25))
    assert math.log(10 / lo) == pytest.approx(1.25 * math.log(1.25))
    assert math.log(hi / 10) == pytest.approx(1.25 * math.log(1.25))
    assert intervals.widened(10.0, 8.0, 12.5, 2.0) == pytest.approx((10 / 1.5625, 15.625))


@pytest.mark.parametrize("median, low, high", [
    (10.0, 0.0, 12.0), (10.0, -1.0, 12.0), (10.0, 11.0, 12.0), (10.0, 8.0, 9.0),
    (0.0, 0.0, 1.0), (math.nan, 1.0, 2.0), (10.0, 8.0, math.inf)])
def test_an_interval_that_is_not_one_of_a_positive_quantity_is_none(median, low, high):
    assert intervals.widened(median, low, high, 1.5) is None


def test_precision_text_says_not_measured_precisely_past_the_median():
    """A half-width up to the median is "+-x%"; past it the interval says little more than
    the order of magnitude: "not measured precisely (n trials, spread x)", the spread the
    ratio of its bounds."""
    assert intervals.precision_text(10.0, [9.0, 11.0], 12) == "+-10.0%"
    assert intervals.precision_text(10.0, [6.0, 18.0], 12, "±") == "±60.0%"  # (12 / 2) / 10
    assert intervals.precision_text(10.0, [1.0, 21.0], 12) == "+-100.0%"  # at the median
    assert intervals.imprecise(10.0, 1.0, 21.01) and not intervals.imprecise(10.0, 1.0, 21.0)
    assert intervals.precision_text(10.0, [1.0, 30.0], 12) == \
        "not measured precisely (12 trials, spread x30)"
    assert intervals.precision_text(10.0, [0.5, 60.0], 12) == \
        "not measured precisely (12 trials, spread x120)"
    assert intervals.precision_text(10.0, [5.0, 25.01], 1) == \
        "not measured precisely (1 trial, spread x5)"
    assert intervals.precision_text(10.0, [0.0, 25.0], 6) is None  # no bound of a time
    assert intervals.precision_text(None, [1.0, 2.0]) is None
    assert intervals.precision_text(1.0, None) is None
    assert intervals.spread_text(2.0, 3.0) == "x1.5" and intervals.spread_text(1, 2.5) == "x2.5"

"""A study's statistics on simulated blocks (fixed seeds): the effect the method finds,
the false verdicts it avoids on a drifting machine, the agreement of ``sandwiched`` with
scipy's one-sample t test, and the invariants of the order of blocks."""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np
import pytest
from scipy import stats

from beoperf import errors
from beoperf.analysis import effect
from beoperf.analysis import study as analysis
from beoperf.model.study import DEFAULT_ID, FactorLevel, FactorLevels, Figure
from study_sim import mtu_factor, simulate

STUDIES = 200
THREE = ("1500", "3000", "9000")


def verdicts(found, label: str) -> Counter:
    config = next(c.id for c in found.configurations if c.label == label)
    return Counter(e.effect["verdict"] for e in found.effects
                   if e.config == config and e.pair is None)


def test_a_20pct_effect_in_5pct_noise_is_found_in_195_of_200_studies():
    better = wrong = 0
    for seed in range(STUDIES):
        found = simulate({"MTU 9000": 0.20}, noise=0.05, seed=seed,
                         factors=[mtu_factor(THREE)])
        better += verdicts(found, "MTU 9000")["better"]
        wrong += verdicts(found, "MTU 3000")["better"] + verdicts(found, "MTU 3000")["worse"]
    assert better >= 195, better
    # the level without an effect is called better or worse at most at the family's alpha
    assert wrong <= 0.05 * STUDIES, wrong


def test_a_and_a_on_a_drifting_machine_is_not_called_better():
    """Two levels that change nothing, on a machine whose figure rises 1% a block (15%
    over the study), with a margin small enough that only the test decides: "better"
    at most at alpha."""
    better = 0
    for seed in range(STUDIES):
        found = simulate({}, noise=0.02, drift=0.01, seed=seed, margin=0.001,
                         factors=[mtu_factor(THREE)])
        better += sum(verdicts(found, lab)["better"] for lab in ("MTU 3000", "MTU 9000"))
        assert found.drift[0].slope_pct_per_block > 0
    assert better <= 0.05 * STUDIES, better


def test_the_drift_is_measured_and_warned_of():
    found = simulate({}, noise=0.005, drift=0.01, seed=3)
    d = found.drift[0]
    assert d.default_blocks == 7
    assert 0.5 < d.slope_pct_per_block < 1.5
    assert d.over_study_pct > 5 and any(w.startswith("drift: ") for w in found.warnings)
    calm = simulate({}, noise=0.005, seed=3)
    assert not any(w.startswith("drift: ") for w in calm.warnings)


def test_sandwiched_agrees_with_scipy_ttest_1samp():
    rng = np.random.default_rng(7)
    triples = [tuple(float(v) for v in np.exp(rng.normal(0, 0.05, 3)) * (1, 1.1, 1))
               for _ in range(8)]
    diffs = [math.log(c) - (math.log(a) + math.log(b)) / 2 for a, c, b in triples]
    test = stats.ttest_1samp(diffs, 0.0)
    ci = test.confidence_interval(1 - 0.05 / 3)
    found = effect.sandwiched(triples, higher_is_better=True, family=3)
    assert math.isclose(found.ratio, math.exp(np.mean(diffs)), rel_tol=1e-12)
    assert math.isclose(found.low, math.exp(ci.low), rel_tol=1e-12)
    assert math.isclose(found.high, math.exp(ci.high), rel_tol=1e-12)
    assert math.isclose(found.p, min(1.0, 3 * test.pvalue), rel_tol=1e-12)
    assert found.runs == 8 and found.baseline_runs == 16 and found.df == 7
    too_few = effect.sandwiched(triples[:1], higher_is_better=True)
    assert too_few.verdict == effect.CANNOT_TELL and too_few.reason


def test_blocks_is_sandwiched_over_its_neighbours():
    cand, around = [1.2, 1.25, 1.18], [1.0, 1.02, 0.99, 1.01]
    a = effect.blocks(cand, around, higher_is_better=True).to_dict()
    triples = [(around[i], c, around[i + 1]) for i, c in enumerate(cand)]
    b = effect.sandwiched(triples, higher_is_better=True, baseline_runs=4).to_dict()
    assert a == b


def _check_sandwiched(order: list[str], warmup: int) -> None:
    body = order[warmup:]
    assert order[:warmup] == [DEFAULT_ID] * warmup
    assert body[0] == DEFAULT_ID and body[-1] == DEFAULT_ID
    for i, c in enumerate(body):
        if c != DEFAULT_ID:
            assert body[i - 1] == DEFAULT_ID and body[i + 1] == DEFAULT_ID


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 99])
def test_the_schedule_sandwiches_every_block_and_shares_no_default(seed):
    ids = ["c0", "c1", "c2", "c3"]
    order = analysis.schedule(ids, 6, seed)
    _check_sandwiched(order, analysis.WARMUP)
    assert Counter(order[analysis.WARMUP:]) == {"c0": 19, "c1": 6, "c2": 6, "c3": 6}
    body = order[analysis.WARMUP:]
    for c in ids[1:]:
        neighbours = [k for i, x in enumerate(body) if x == c for k in (i - 1, i + 1)]
        assert len(neighbours) == len(set(neighbours)), (c, body)
    assert analysis.schedule(ids, 6, seed) == order
    assert any(analysis.schedule(ids, 6, s) != order for s in range(seed + 1, seed + 5))


def test_the_combined_phase_follows_the_rounds_sandwiched():
    order = analysis.schedule(["c0", "c1", "c2"], 4, 1)
    order += analysis.schedule_combined("c3", 4)
    _check_sandwiched(order, analysis.WARMUP)
    assert order[-8:] == ["c3", "c0"] * 4


def test_the_greedy_schedule_is_the_procedures_per_candidate():
    order = analysis.schedule(["c0", "c1", "c2"], 3, 5, design="greedy", warmup=2)
    assert order == ["c0", "c0"] + ["c0", "c1", "c0", "c1", "c0", "c1", "c0"] + \
        ["c0", "c2", "c0", "c2", "c0", "c2", "c0"]


def test_configurations_of_each_design():
    firewall = FactorLevels("firewall", "host", ["h1"],
                            [FactorLevel("default", None, default=True),
                             FactorLevel("flush", "flush")])
    one = analysis.configurations([mtu_factor(THREE), firewall])
    assert [c.label for c in one] == ["Default", "MTU 3000", "MTU 9000", "firewall flush"]
    assert [c.id for c in one] == ["c0", "c1", "c2", "c3"]
    full = analysis.configurations([mtu_factor(THREE), firewall], "factorial")
    assert len(full) == 6 and {c.role for c in full[1:]} == {"factorial"}
    assert {"mtu": "9000", "firewall": "flush"} in [c.levels for c in full]
    big = [mtu_factor(("1", "2", "3", "4", "5")), mtu_factor(("1", "2", "3", "4"))]
    with pytest.raises(errors.BadSpec, match="at most 16"):
        analysis.configurations(big, "factorial")
    with pytest.raises(errors.BadSpec, match="unknown design"):
        analysis.configurations(big, "random")


def test_helped_takes_the_best_level_per_factor_and_combines():
    found = simulate({"MTU 3000": 0.15, "MTU 9000": 0.30}, noise=0.02, seed=2,
                     factors=[mtu_factor(THREE)])
    assert analysis.helped(found, found.effects) == {"mtu": "9000"}
    assert analysis.combined_configuration(found, {"mtu": "9000"}) is None
    both = analysis.combined_configuration(found, {"mtu": "9000", "firewall": "flush"})
    assert both is not None and both.id == "c3" and both.role == "combined"
    with pytest.raises(errors.BadSpec, match="--decide-by"):
        analysis.helped(found, found.effects, "nope")


def test_impact_is_signed_as_an_improvement_for_rates_and_times():
    rate = simulate({"MTU 9000": 0.2}, noise=0.01, seed=4)
    row = rate.impact[0].rows[1]
    assert rate.impact[0].rows[0].impact_pct is None and 15 < row.impact_pct < 25
    time = simulate({"MTU 9000": -0.2}, noise=0.01, seed=4,
                    figure=Figure("latency_us@16", "us", False))
    assert 15 < time.impact[0].rows[1].impact_pct < 25
    assert re.match(r"MTU 9000: latency@16 better, -(19|20|21)% \[-\d+, -\d+\]$",
                    time.verdicts[0]), time.verdicts


def test_verdict_lines_say_a_skipped_level_was_not_measured():
    factor = mtu_factor(THREE)
    factor.levels[2].status = "skipped"
    factor.levels[2].why = ("the path does not carry 9000-byte frames (largest that "
                            "crossed: 1500)")
    found = simulate({}, noise=0.01, seed=1, factors=[factor])
    assert found.verdicts[1] == ("MTU 9000: not measured: the path does not carry 9000-byte "
                                 "frames (largest that crossed: 1500)")
    assert found.verdicts[0].startswith("MTU 3000: goodput@1M no difference shown")
    # the skipped level is not judged: the family is the one level measured
    assert "±10%" in found.method.statement and found.method.family == 1
    assert {e.config for e in found.effects} == {"c1"}


def test_greedy_records_its_baseline_as_default_plus_what_was_kept():
    found = simulate({}, noise=0.01, seed=1, factors=[mtu_factor(THREE)])
    assert analysis.baseline_configuration(found, {}).id == DEFAULT_ID
    base = analysis.baseline_configuration(found, {"mtu": "9000"})
    assert (base.id, base.label, base.role) == ("c3", "Default + MTU 9000", "combined")
    found.configurations.append(base)
    assert analysis.baseline_configuration(found, {"mtu": "9000"}) is base
    assert analysis.family_size(found) == 2


def test_several_pairs_are_judged_each_in_a_larger_family():
    found = simulate({"MTU 9000": 0.2}, noise=0.01, seed=6)
    rng = np.random.default_rng(6)
    for b in found.blocks:
        value = b.figures["goodput_bps@1M"]
        b.pairs = {p: {"goodput_bps@1M": value * float(np.exp(rng.normal(0, 0.01)))}
                   for p in ("h1>h0", "h2>h0")}
    analysis.analyse(found)
    per_pair = [e for e in found.effects if e.pair is not None]
    assert sorted(e.pair for e in per_pair) == ["h1>h0", "h2>h0"]
    assert all(e.effect["family"] == 2 and e.effect["verdict"] == "better" for e in per_pair)
    assert analysis.block_figures({"a": {"x": 4.0}, "b": {"x": 9.0, "y": 1.0}}) == \
        {"x": pytest.approx(6.0, rel=1e-12), "y": 1.0}


def test_a_configurations_curve_is_the_median_of_its_blocks_per_size():
    curves = [[(16, 1.0), (1024, 10.0)], [(16, 3.0), (1024, 0.0)], [(16, 2.0), (64, 5.0)]]
    assert analysis.median_curve(curves) == [(16, 2.0), (64, 5.0), (1024, 10.0)]


def test_factorial_main_effects_recover_each_levels_own_effect():
    """Two factors, 2 x 3 levels, effects that multiply (no interaction): each level's
    main effect contains its own ratio, the level without effect is not called better."""
    firewall = FactorLevels("firewall", "host", ["h1"],
                            [FactorLevel("default", None, default=True),
                             FactorLevel("flush", "flush")])
    effects = {"MTU 3000": 0.0, "MTU 9000": 0.10, "firewall flush": 0.20,
               "MTU 3000, firewall flush": 0.20, "MTU 9000, firewall flush": 0.32}
    found = simulate(effects, noise=0.02, seed=11, design="factorial",
                     factors=[mtu_factor(THREE), firewall])
    mains = {e.config: e.effect for e in found.main_effects}
    assert set(mains) == {"mtu=3000", "mtu=9000", "firewall=flush"}
    assert mains["mtu=9000"]["low"] < 1.10 < mains["mtu=9000"]["high"]
    assert mains["firewall=flush"]["low"] < 1.20 < mains["firewall=flush"]["high"]
    assert mains["mtu=3000"]["verdict"] != "better"
    assert all(e["family"] == 3 and e["df"] == 5 * 6 - 3 for e in mains.values())
    assert any(v.startswith("MTU 9000 (main effect): goodput@1M better") for v in found.verdicts)
    one = simulate({"MTU 9000": 0.1}, noise=0.02, seed=11)
    assert one.main_effects == []

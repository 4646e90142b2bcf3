"""Prediction against replay on real shaped links (network namespaces, tc tbf).

Six links, three tbf rates at two MTUs (tests/predict_links.py builds and shapes them):
each is swept, the mixed profile (64 B to 256 KiB) replayed over it, and the profile's
time predicted from the same link's model and from every other link's model scaled to
its rate.  The prediction from the link's own model must fall within 10% of the
replayed time; a scaled prediction must too wherever the method claims it (same MTU,
claimed classes carrying 90% of the time), and the method must claim some.

The machine is shared: a link whose own prediction misses is measured once more (both
the sweep and the replay) before the test decides; both results are in the message.
"""

from __future__ import annotations

import pytest

import netns
import predict_links as pl

RATES_MBIT = (50, 100, 200)
MTUS = (1500, 9000)
BOUND = 0.10
# each model's sweep: enough for the largest size's minimum trials at 50 Mbit/s (the budget
# is a hard limit: at 5 s the 256 KiB size was not measured, and the class outside the
# measured sizes not claimed)
BUDGET_S = 8.0

pytestmark = pytest.mark.netns


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    ok, why = netns.can_use_netns()
    if not ok:
        pytest.skip(f"needs network namespaces: {why}")
    out = tmp_path_factory.mktemp("predict")
    profile = out / "mixed.csv"
    profile.write_text(pl.PROFILE)
    links = [pl.Link(float(r), m) for m in MTUS for r in RATES_MBIT]
    retried: list[str] = []
    with pl.hosts() as (server, client):
        for link in links:
            pl.measure(server, client, link, out, budget=BUDGET_S, repeats=5, profile=profile)
        own = {r.target: r for r in pl.predictions(links, profile, out) if r.method == "measured"}
        for link in links:
            if abs(own[link.name].error) > BOUND:
                retried.append(f"{link.name}: {own[link.name].error:+.1%} at first")
                pl.measure(server, client, link, out, budget=BUDGET_S, repeats=5,
                           profile=profile)
    return pl.predictions(links, profile, out), retried


def test_own_model_predicts_the_replay_within_ten_percent(measured):
    rows, retried = measured
    own = [r for r in rows if r.method == "measured"]
    assert len(own) == len(RATES_MBIT) * len(MTUS)
    table = "\n".join(pl.table(own)) + f"\nmeasured again: {retried}"
    assert all(r.claimed for r in own), table
    assert all(abs(r.error) <= BOUND for r in own), table


def test_scaled_model_within_ten_percent_where_the_method_claims_it(measured):
    rows, retried = measured
    scaled = [r for r in rows if r.method == "scaled" and r.same_mtu]
    claimed = [r for r in scaled if r.claimed]
    table = "\n".join(pl.table(scaled)) + f"\nmeasured again: {retried}"
    assert claimed, "the method claims no scaled prediction:\n" + table
    assert all(abs(r.error) <= BOUND for r in claimed), table


def test_rates_order_the_replays(measured):
    """A sanity check of the links themselves: at each MTU a faster rate replays the
    profile faster (the large messages dominate it)."""
    rows, _ = measured
    for mtu in MTUS:
        times = [next(r.replayed_s for r in rows if r.target == f"{rate}mbit-mtu{mtu}")
                 for rate in RATES_MBIT]
        assert times == sorted(times, reverse=True), (mtu, times)

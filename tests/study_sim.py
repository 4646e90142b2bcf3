"""Simulated studies for the analysis and report tests: blocks whose figures follow a
stated effect, noise and drift, measured in the order ``analysis.study.schedule`` gives
(no system is touched; the statistics are what is tested)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from beoperf.analysis import study as analysis
from beoperf.model.study import (
    Block,
    FactorLevel,
    FactorLevels,
    Figure,
    MeasurementSpec,
    Method,
    Schedule,
    Study,
)


def mtu_factor(levels: tuple[str, ...] = ("1500", "9000")) -> FactorLevels:
    return FactorLevels("mtu", "host", ["h0", "h1"],
                        [FactorLevel(lv, None if i == 0 else lv, default=i == 0)
                         for i, lv in enumerate(levels)])


def simulate(effects: Mapping[str, float], *, noise: float, drift: float = 0.0,
             repeats: int = 6, seed: int = 1, margin: float = 0.1,
             figure: Figure | None = None, factors: list[FactorLevels] | None = None,
             base: float = 1e8, design: str = "one-at-a-time") -> Study:
    """A one-at-a-time study of ``factors`` (default: MTU 1500/9000) whose blocks measure
    ``base`` x (1 + the configuration's effect) x (1 + drift x block index) x
    lognormal(noise): ``effects`` maps a configuration label to its relative effect (0
    where missing), ``drift`` is linear, per block."""
    figure = figure or Figure("goodput_bps@1M", "bit/s", True)
    factors = factors or [mtu_factor()]
    configs = analysis.configurations(factors, design)
    order = analysis.schedule([c.id for c in configs], repeats, seed, design=design)
    rng = np.random.default_rng(seed)
    study = Study("mtu", design, True, "complete",
                  Schedule(seed, analysis.WARMUP, repeats, None, 60.0, margin, order),
                  Method("(to come)", margin=margin), factors=factors,
                  measurements=[MeasurementSpec("pingpong", {}, [figure])],
                  configurations=configs, pairs=[("h0", "h1")])
    label = {c.id: c.label for c in configs}
    for i, cid in enumerate(order):
        level = 1.0 + effects.get(label[cid], 0.0)
        trend = 1.0 + drift * i
        value = base * level * trend * float(np.exp(rng.normal(0.0, noise)))
        study.blocks.append(Block(i, cid, i < analysis.WARMUP, None, 2.0, 0.1,
                                  {figure.key: value}, {}, "ok", None))
    return analysis.analyse(study)

"""A study's design and conclusions: which configurations, in which order of blocks, and
what the blocks say (effects, what helped, drift, the impact table, one verdict line per
level).

Every verdict comes from ``analysis.effect``: a configuration's blocks are each taken
with the baseline block just before and just after it (``effect.sandwiched``), so a
machine that drifts over the study shows up as spread, not as an effect.  The family of a
study's verdicts (every configuration judged x every headline figure) is Bonferroni
corrected; the combination of what helped is a family of its own, as ``tune
--procedure``'s Combined row.  docs/STATISTICS.md ("Studies") has the method.

The suite (``suites/study.py``) builds the configurations and the order here, measures
the blocks into a ``model.study.Study`` and calls :func:`analyse` on it.
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from beoperf import errors
from beoperf.analysis import effect, greedy
from beoperf.analysis.effect import ALPHA, DEFAULT_MARGIN, Effect
from beoperf.model.study import (
    DEFAULT_ID,
    DEFAULT_LABEL,
    Block,
    Combined,
    Configuration,
    Drift,
    EffectEntry,
    FactorLevels,
    Figure,
    Impact,
    ImpactRow,
    Method,
    Study,
)

WARMUP = 2  # Default blocks measured first and dropped (a cold first measurement)
MAX_FACTORIAL = 16  # configurations of a factorial design, Default included
MAX_REDRAWS = 1000
DESIGNS = ("one-at-a-time", "greedy", "factorial")
SHOWN_NAMES = {"mtu": "MTU"}  # how a factor is named in a verdict line


# --------------------------------------------------------------------------- the design


def shown_factor(name: str) -> str:
    return SHOWN_NAMES.get(name, name)


def _default_level(factor: FactorLevels) -> str:
    """The label of a factor's Default level (its first level when none is marked)."""
    found = next((lv.label for lv in factor.levels if lv.default), None)
    if found is None and not factor.levels:
        raise errors.BadSpec(f"factor {factor.name}: no levels")
    return found if found is not None else factor.levels[0].label


def configurations(factors: Sequence[FactorLevels],
                   design: str = "one-at-a-time") -> list[Configuration]:
    """Default ("c0"), then for one-at-a-time and greedy each non-Default level alone
    ("MTU 9000"), for factorial every combination of levels (BadSpec over
    MAX_FACTORIAL)."""
    if design not in DESIGNS:
        raise errors.BadSpec(f"unknown design {design!r} (one of {', '.join(DESIGNS)})")
    out = [Configuration(DEFAULT_ID, DEFAULT_LABEL, {}, "default")]
    if design == "factorial":
        return out + _factorial(factors)
    for f in factors:
        default = _default_level(f)
        for lv in f.levels:
            if lv.label != default:
                out.append(Configuration(f"c{len(out)}", f"{shown_factor(f.name)} {lv.label}",
                                         {f.name: lv.label}, "level"))
    return out


def _factorial(factors: Sequence[FactorLevels]) -> list[Configuration]:
    grid = [[lv.label for lv in f.levels] for f in factors]
    total = math.prod(len(g) for g in grid)
    if total > MAX_FACTORIAL:
        raise errors.BadSpec(f"a factorial design of {total} configurations: at most "
                             f"{MAX_FACTORIAL} (fewer levels, or --design one-at-a-time)")
    defaults = [_default_level(f) for f in factors]
    out: list[Configuration] = []
    for combo in itertools.product(*grid):
        if list(combo) == defaults:
            continue
        levels = {f.name: label for f, label, d in zip(factors, combo, defaults, strict=True)
                  if label != d}
        label = ", ".join(f"{shown_factor(k)} {v}" for k, v in levels.items())
        out.append(Configuration(f"c{len(out) + 1}", label, levels, "factorial"))
    return out


def combined_configuration(study: Study, helped: Mapping[str, str]) -> Configuration | None:
    """The configuration that applies every level that helped (None: fewer than two
    helped, so there is nothing to combine), with the next free id."""
    if len(helped) < 2:
        return None
    used = {c.id for c in study.configurations}
    n = len(used)
    while f"c{n}" in used:
        n += 1
    label = "Combined: " + ", ".join(f"{shown_factor(k)} {v}" for k, v in helped.items())
    return Configuration(f"c{n}", label, dict(helped), "combined")


def schedule(configs: Sequence[str], repeats: int, seed: int, *,
             design: str = "one-at-a-time", default: str = DEFAULT_ID,
             warmup: int = WARMUP) -> list[str]:
    """The order of blocks (configuration ids), the ``warmup`` Default blocks first.

    One-at-a-time and factorial: ``repeats`` rounds, each a random permutation of the
    non-Default configurations with a Default block after each: A Ca A Cb A Cc A ...,
    ending on A.  A configuration never starts a round it ended the last one with
    (re-drawn), so no Default block lies between two blocks of the same configuration and
    a configuration's triples share no Default block (with one configuration they must:
    A C A C A).  Greedy: per candidate in the given order, A C A C ... C A with
    ``default`` standing for the baseline of the moment (Default plus what was kept), as
    ``tune --procedure`` measures.  The same seed gives the same order."""
    if repeats < 1:
        raise errors.BadSpec(f"repeats {repeats}: at least 1")
    others = [c for c in configs if c != default]
    order = [default] * warmup
    if design == "greedy":
        for c in others:
            order += [default] + [c, default] * repeats
        return order
    rng = random.Random(seed)
    order.append(default)
    last = None
    for _ in range(repeats):
        perm = _round(others, last, rng)
        for c in perm:
            order += [c, default]
        last = perm[-1] if perm else None
    return order


def schedule_combined(config: str, repeats: int, default: str = DEFAULT_ID) -> list[str]:
    """The combined configuration's blocks, to append to an order that ends on Default:
    C A C A ... C A (``repeats`` triples, as ``tune --procedure`` measures Combined)."""
    return [config, default] * repeats


def extra_round(configs: Sequence[str], last: str | None, seed: int, number: int,
                default: str = DEFAULT_ID) -> list[str]:
    """One more round for --precision, to append to an order that ends on Default: the
    configurations in a random order (the seed's, drawn anew for round ``number``), each
    followed by Default, never starting with ``last`` (the configuration the order's
    last round ended with) when there are two or more."""
    perm = _round(list(configs), last, random.Random(f"{seed}/{number}"))
    return [cid for c in perm for cid in (c, default)]


def half_width(entry: EffectEntry) -> float | None:
    """Half the width of an effect's interval over its ratio (0.01: the ratio ±1%, an
    interval 2 points wide around a ratio near 1; 2.9 to 3.5 around 3.2 is ±9%); None
    when it has no interval."""
    low, high, ratio = (entry.effect.get(k) for k in ("low", "high", "ratio"))
    if not all(isinstance(v, (int, float)) for v in (low, high, ratio)) or not ratio:
        return None
    return (float(high) - float(low)) / (2.0 * float(ratio))  # type: ignore[arg-type]


def too_wide(study: Study, figure: Figure, precision: float,
             leave_out: Sequence[str] = ()) -> dict[str, float | None]:
    """config -> its interval's half width on ``figure`` (None: no interval yet), for the
    judged configurations whose interval is wider than ±``precision`` (the family of
    ``effects``, so the width is the one the document states)."""
    found, _family = effects(study)
    out: dict[str, float | None] = {}
    for entry in found:
        if entry.figure != figure.key or entry.pair is not None or entry.config in leave_out:
            continue
        width = half_width(entry)
        if width is None or width > precision:
            out[entry.config] = width
    return out


def _round(others: Sequence[str], last: str | None, rng: random.Random) -> list[str]:
    perm = list(others)
    for _ in range(MAX_REDRAWS):
        rng.shuffle(perm)
        if len(perm) < 2 or perm[0] != last:
            return perm
    return perm  # (cannot happen with two or more configurations)


# --------------------------------------------------------------------------- the blocks


def geometric_mean(values: Sequence[float]) -> float | None:
    """The geometric mean of positive values (a block's figure over its pairs)."""
    if not values or min(values) <= 0:
        return None
    return float(math.exp(np.mean(np.log(np.asarray(values, dtype=float)))))


def block_figures(pairs: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """A block's figures from its pairs' (the geometric mean over the pairs that have
    each figure)."""
    keys = sorted({k for figs in pairs.values() for k in figs})
    out = {}
    for k in keys:
        found = geometric_mean([figs[k] for figs in pairs.values() if k in figs])
        if found is not None:
            out[k] = found
    return out


def median_curve(curves: Sequence[Sequence[tuple[float, float]]]) -> list[tuple[float, float]]:
    """A configuration's curve from its blocks' curves: per size, the median of the
    positive values measured at it (a size no block measured is left out), by size."""
    at: dict[float, list[float]] = {}
    for curve in curves:
        for size, value in curve:
            if value > 0 and math.isfinite(value):
                at.setdefault(size, []).append(value)
    return [(size, float(np.median(at[size]))) for size in sorted(at)]


def measured(study: Study) -> list[Block]:
    """The blocks after the warm-up, in the order measured."""
    return sorted((b for b in study.blocks if not b.warmup), key=lambda b: b.index)


def _value(block: Block, figure: str, pair: str | None) -> float | None:
    if block.status != "ok":
        return None
    figs = block.figures if pair is None else block.pairs.get(pair, {})
    value = figs.get(figure)
    return value if value is not None and value > 0 else None


def triples(study: Study, config: str, figure: str,
            pair: str | None = None) -> tuple[list[tuple[float, float, float]], str | None]:
    """The configuration's blocks, each with the baseline blocks just before and after it
    ((before, candidate, after) of ``figure``), and the baseline's configuration id: the
    one most of its blocks neighbour (Default; in greedy the state of the moment).  A
    block whose neighbour failed, is missing or is of another state is left out."""
    seq = measured(study)
    around: list[tuple[int, str, str]] = []
    for i, b in enumerate(seq):
        if b.config == config and 0 < i < len(seq) - 1:
            around.append((i, seq[i - 1].config, seq[i + 1].config))
    if not around:
        return [], None
    votes = Counter(c for _, a, z in around for c in (a, z) if c != config)
    if not votes:
        return [], None
    base = votes.most_common(1)[0][0]
    out = []
    for i, a, z in around:
        vals = [_value(seq[k], figure, pair) for k in (i - 1, i, i + 1)]
        if a == base and z == base and all(v is not None for v in vals):
            out.append((float(vals[0]), float(vals[1]), float(vals[2])))  # type: ignore[arg-type]
    return out, base


def effect_of(study: Study, config: str, figure: Figure, *, family: int = 1,
              pair: str | None = None, alpha: float = ALPHA) -> EffectEntry:
    """One configuration's effect on one figure against its neighbouring baseline
    blocks (greedy calls this to decide on a candidate as it goes)."""
    found, base = triples(study, config, figure.key, pair)
    margin = study.schedule.margin
    eff = effect.sandwiched(found, higher_is_better=figure.higher_is_better, family=family,
                            margin=margin, alpha=alpha)
    against = study.label_of(base) if base is not None else DEFAULT_LABEL
    return EffectEntry(config, figure.key, against, len(found), eff.to_dict(), pair)


def judged(study: Study) -> list[str]:
    """The configurations judged against their baseline: each level alone (or each
    combination of a factorial design) whose levels were all measured (a level the path
    check skipped, or one the time budget never reached, is not; so a greedy study has
    its final family from its first decision on); a configuration whose levels the
    factors do not list counts when it has a block after the warm-up."""
    seen = {b.config for b in measured(study)}
    out = []
    for c in study.configurations:
        if c.role not in ("level", "factorial"):
            continue
        statuses = [_level_status(study, name, label) for name, label in c.levels.items()]
        if None in statuses or not statuses:
            if c.id in seen:
                out.append(c.id)
        elif all(st == "measured" for st in statuses):
            out.append(c.id)
    return out


def _level_status(study: Study, name: str, label: str) -> str | None:
    factor = study.factor(name)
    level = factor.level(label) if factor is not None else None
    return None if level is None else level.status


def family_size(study: Study) -> int:
    """How many figures are judged at once: configurations judged x headline figures
    (what greedy decides with, so that its decisions and the final effects use one
    family; ``greedy.family_of``, as ``tune --procedure``'s)."""
    return greedy.family_of(len(judged(study)), len(study.figures()))


def baseline_configuration(study: Study, kept: Mapping[str, str]) -> Configuration:
    """Greedy's baseline of the moment, Default plus the levels kept so far: the
    configuration to record its blocks under (``schedule`` writes Default's id for it).
    Default itself when nothing is kept; else an existing configuration of role
    "combined" with those levels, or a new one (the caller appends it)."""
    if not kept:
        found = study.configuration(study.default_id())
        return found if found is not None else Configuration(DEFAULT_ID, DEFAULT_LABEL, {},
                                                             "default")
    for c in study.configurations:
        if c.role == "combined" and c.levels == dict(kept):
            return c
    used = {c.id for c in study.configurations}
    n = len(used)
    while f"c{n}" in used:
        n += 1
    label = "Default + " + ", ".join(f"{shown_factor(k)} {v}" for k, v in kept.items())
    return Configuration(f"c{n}", label, dict(kept), "combined")


def pair_names(study: Study) -> list[str]:
    """The pairs measured ("client>server"), when there are several (one pair's figure is
    the block's own)."""
    names = sorted({p for b in study.blocks for p in b.pairs})
    return names if len(names) > 1 else []


def effects(study: Study, *, alpha: float = ALPHA) -> tuple[list[EffectEntry], int]:
    """Every judged configuration x headline figure against its baseline, and the family
    size they were corrected for; with several pairs, each pair's too (family x pairs),
    after the headline ones."""
    figures = study.figures()
    seen = {b.config for b in measured(study)}
    configs = [c for c in judged(study) if c in seen]
    family = family_size(study)
    out = [effect_of(study, c, f, family=family, alpha=alpha) for c in configs for f in figures]
    pairs = pair_names(study)
    out += [effect_of(study, c, f, family=family * len(pairs), pair=p, alpha=alpha)
            for c in configs for f in figures for p in pairs]
    return out, family


def effect_value(entry: EffectEntry) -> Effect:
    """The stored effect as an ``Effect`` (DocumentError on a bad one)."""
    found = effect.from_dict(entry.effect)
    assert found is not None  # (a dict in, an Effect out)
    return found


def decide_figure(study: Study, decide_by: str | None = None) -> Figure | None:
    """The figure that decides what helped: ``decide_by`` (BadSpec when unknown), else the
    first figure of the first measurement."""
    figures = study.figures()
    if decide_by is None:
        return figures[0] if figures else None
    found = study.figure(decide_by)
    if found is None:
        raise errors.BadSpec(f"--decide-by {decide_by}: not a figure of this study (one of "
                             f"{', '.join(f.key for f in figures) or 'none'})")
    return found


def helped(study: Study, found: Sequence[EffectEntry],
           decide_by: str | None = None) -> dict[str, str]:
    """factor -> level: the levels alone that came out better on the deciding figure, at
    most one per factor (the best point estimate)."""
    figure = decide_figure(study, decide_by)
    if figure is None:
        return {}
    best: dict[str, tuple[float, str]] = {}
    for entry in found:
        config = study.configuration(entry.config)
        if (entry.pair is not None or entry.figure != figure.key or config is None
                or config.role != "level" or len(config.levels) != 1):
            continue
        eff = effect_value(entry)
        if eff.verdict != effect.BETTER or eff.ratio is None:
            continue
        (name, label), = config.levels.items()
        score = math.log(eff.ratio) * (1 if figure.higher_is_better else -1)
        if name not in best or score > best[name][0]:
            best[name] = (score, label)
    return {name: label for name, (_, label) in best.items()}


def combined_effects(study: Study, *, alpha: float = ALPHA) -> list[EffectEntry]:
    """The combined configuration against Default on every headline figure (a family of
    its own: the headline figures); none without a combined configuration."""
    if study.combined is None:
        return []
    figures = study.figures()
    return [effect_of(study, study.combined.config, f, family=max(1, len(figures)),
                      alpha=alpha) for f in figures]


# --------------------------------------------------------------------------- factorial


def _terms(study: Study, configs: Sequence[str]) -> list[tuple[str, str]]:
    """The non-Default levels (factor, level) that the configurations set, in order."""
    found: dict[tuple[str, str], None] = {}
    for cid in configs:
        config = study.configuration(cid)
        for item in (config.levels.items() if config is not None else ()):
            found[item] = None
    return list(found)


def main_effects(study: Study, *, alpha: float = ALPHA) -> list[EffectEntry]:
    """A factorial study's main effects: per headline figure, the log ratios of every
    configuration's triples regressed on indicators of the levels it sets (least squares,
    numpy.linalg.lstsq, no intercept: Default is zero), each level's coefficient with
    Student's t interval (df = triples - levels), Bonferroni over levels x figures.  Each
    entry's ``config`` names the level ("mtu=9000").  None for other designs."""
    if study.design != "factorial":
        return []
    seen = {b.config for b in measured(study)}
    configs = [c for c in judged(study) if c in seen]
    terms = _terms(study, configs)
    figures = study.figures()
    family = max(1, len(terms) * len(figures))
    out = []
    for f in figures:
        rows, ys = [], []
        for cid in configs:
            config = study.configuration(cid)
            levels = config.levels if config is not None else {}
            for a, c, b in triples(study, cid, f.key)[0]:
                ys.append(math.log(c) - (math.log(a) + math.log(b)) / 2.0)
                rows.append([1.0 if levels.get(name) == label else 0.0
                             for name, label in terms])
        out += _regressed(terms, np.asarray(rows, dtype=float).reshape(len(rows), len(terms)),
                          np.asarray(ys, dtype=float), f, family, study.schedule.margin, alpha)
    return out


def _regressed(terms: Sequence[tuple[str, str]], x: np.ndarray, y: np.ndarray, f: Figure,
               family: int, margin: float, alpha: float) -> list[EffectEntry]:
    from scipy import stats

    n, p = x.shape
    found = [Effect(effect.CANNOT_TELL, family=family, higher_is_better=f.higher_is_better,
                    margin=margin, runs=n) for _ in terms]
    rank = int(np.linalg.matrix_rank(x)) if n else 0
    if n - p < 2 or rank < p:
        for e in found:
            e.reason = (f"{n} triples cannot separate {p} levels' effects (needs at least "
                        f"{p + 2}, every level apart from the others)")
    else:
        beta = np.linalg.lstsq(x, y, rcond=None)[0]
        resid = y - x @ beta
        df = n - p
        cov = float(resid @ resid) / df * np.linalg.inv(x.T @ x)
        confidence = 1.0 - alpha / family
        q = float(stats.t.ppf(0.5 + confidence / 2.0, df))
        for k, e in enumerate(found):
            se = math.sqrt(max(float(cov[k, k]), 0.0))
            b = float(beta[k])
            e.ratio, e.low, e.high = math.exp(b), math.exp(b - q * se), math.exp(b + q * se)
            e.confidence, e.df = confidence, float(df)
            e.p = min(1.0, float(2.0 * stats.t.sf(abs(b) / se, df)) * family) if se > 0 \
                else (1.0 if b == 0 else 0.0)
            e.spread_source = f"least squares of {n} triples on {p} levels ({df} df)"
            e.verdict = effect.verdict_of(e.low, e.high, margin, f.higher_is_better)
    return [EffectEntry(f"{name}={label}", f.key, DEFAULT_LABEL, n, e.to_dict())
            for (name, label), e in zip(terms, found, strict=True)]


# --------------------------------------------------------------------------- drift, impact


def drift(study: Study) -> list[Drift]:
    """Per headline figure, how the Default blocks after the warm-up moved: the slope of
    log(figure) on the block index (scipy.stats.linregress), as % per block and over the
    study's blocks, and the spread about the line (% sd); None below 3 Default blocks."""
    from scipy import stats

    seq = measured(study)
    base = study.default_id()
    span = (seq[-1].index - seq[0].index) if seq else 0
    out: list[Drift] = []
    if not seq:
        return out
    for f in study.figures():
        pts = [(b.index, _value(b, f.key, None)) for b in seq if b.config == base]
        pts = [(i, v) for i, v in pts if v is not None]
        if len(pts) < 3:
            out.append(Drift(f.key, len(pts), None, None, None))
            continue
        x = np.asarray([i for i, _ in pts], dtype=float)
        y = np.log(np.asarray([v for _, v in pts], dtype=float))
        fit = stats.linregress(x, y)
        resid = y - (fit.intercept + fit.slope * x)
        out.append(Drift(f.key, len(pts), 100.0 * math.expm1(fit.slope),
                         100.0 * float(np.sqrt((resid ** 2).sum() / (len(pts) - 2))),
                         100.0 * math.expm1(fit.slope * span)))
    return out


def drift_warnings(study: Study, found: Sequence[Drift]) -> list[str]:
    """A warning per figure whose Default blocks moved by more than half the margin over
    the study (the sandwich cancels a linear drift, but a reader should know)."""
    limit = 100.0 * study.schedule.margin / 2.0
    return [f"drift: the Default blocks of {d.figure} moved {d.over_study_pct:+.1f}% over "
            f"the study (more than half the ±{100 * study.schedule.margin:g}% margin); each "
            "block is judged against its neighbours, so a steady drift cancels"
            for d in found if d.over_study_pct is not None and abs(d.over_study_pct) > limit]


def impact(study: Study) -> list[Impact]:
    """The tuning papers' table per headline figure: each configuration's mean and sd
    (ddof=1) over its blocks after the warm-up, and the impact against Default in %,
    signed so that positive is an improvement ((Default - mean)/Default for a time,
    (mean - Default)/Default for a rate)."""
    seq = measured(study)
    base = study.default_id()
    out: list[Impact] = []
    if not seq:
        return out
    for f in study.figures():
        rows = []
        base_mean = None
        for c in sorted(study.configurations, key=lambda c: c.id != base):
            vals = [v for b in seq if b.config == c.id
                    if (v := _value(b, f.key, None)) is not None]
            if not vals and c.id != base:
                continue
            mean = float(np.mean(vals)) if vals else None
            sd = float(np.std(vals, ddof=1)) if len(vals) > 1 else None
            if c.id == base:
                base_mean, pct = mean, None
            else:
                pct = _impact_pct(base_mean, mean, f.higher_is_better)
            rows.append(ImpactRow(c.label, mean, sd, len(vals), pct))
        out.append(Impact(f.key, f.unit, f.higher_is_better, rows))
    return out


def _impact_pct(base: float | None, mean: float | None, higher_is_better: bool) -> float | None:
    if base is None or mean is None or base <= 0:
        return None
    sign = 1.0 if higher_is_better else -1.0
    return 100.0 * sign * (mean - base) / base


# --------------------------------------------------------------------------- verdict lines


def figure_name(key: str) -> str:
    """A figure's short name in a verdict line: "latency_us@16" -> "latency@16"."""
    return re.sub(r"_[a-z]+(?=@|$)", "", key)


def _pct(value: float) -> str:
    return f"{value:+.0f}" if abs(value) >= 10 else f"{value:+.1f}"


def effect_words(eff: Effect) -> str:
    """'better, +6.1% [+4.8, +7.3]', 'no difference shown', 'cannot tell (+4.1% [-24,
    +41])', 'cannot tell (a block without a positive figure)'."""
    span = eff.interval_pct()
    if eff.verdict == effect.NO_DIFFERENCE:
        return eff.verdict
    if eff.change_pct is None or span is None:
        return f"{eff.verdict} ({eff.reason})" if eff.reason else eff.verdict
    numbers = f"{_pct(eff.change_pct)}% [{_pct(span[0])}, {_pct(span[1])}]"
    if eff.verdict == effect.CANNOT_TELL:
        return f"{eff.verdict} ({numbers})"
    return f"{eff.verdict}, {numbers}"


def _figure_words(entries: Sequence[EffectEntry]) -> str:
    parts = [f"{figure_name(e.figure)} {effect_words(effect_value(e))}" for e in entries]
    return "; ".join(parts) if parts else "no figure judged"


def verdict_lines(study: Study) -> list[str]:
    """One line per non-Default level, in the order of the factors: each figure's verdict
    against Default and what is known of the level ("the path carries 9000-byte
    frames"), or why it was not measured; then the combined configuration's line."""
    lines = []
    for config in study.configurations:
        if config.role not in ("level", "factorial"):
            continue
        lines.append(_config_line(study, config))
    if study.combined is not None and study.combined.effects:
        label = study.label_of(study.combined.config)
        lines.append(f"{label}: {_figure_words(study.combined.effects)}")
    for term in dict.fromkeys(e.config for e in study.main_effects):
        name, _, label = term.partition("=")
        mine = [e for e in study.main_effects if e.config == term]
        lines.append(f"{shown_factor(name)} {label} (main effect): {_figure_words(mine)}")
    return lines


def _config_line(study: Study, config: Configuration) -> str:
    notes = []
    for name, label in config.levels.items():
        factor = study.factor(name)
        level = factor.level(label) if factor is not None else None
        if level is not None and level.status != "measured":
            why = f": {level.why}" if level.why else ""
            return f"{config.label}: not measured{why}"
        if level is not None and level.why:
            notes.append(level.why)
    mine = [e for e in study.effects if e.config == config.id and e.pair is None]
    if not mine and not study.applied:
        return f"{config.label}: planned, {study.schedule.repeats} blocks against Default"
    if not mine:
        return f"{config.label}: not measured: no block of it was measured"
    return "; ".join([f"{config.label}: {_figure_words(mine)}", *notes])


# --------------------------------------------------------------------------- the whole


def method_of(study: Study, family: int, alpha: float = ALPHA) -> Method:
    """The method, in words and figures; the margin is printed (``--margin``, default
    effect.DEFAULT_MARGIN) since it decides "no difference shown"."""
    s = study.schedule
    margin = s.margin
    order = ("per candidate A C A ... C A, the baseline Default plus the levels kept"
             if study.design == "greedy" else
             f"in rounds of a random order (seed {s.seed}), a Default block after each")
    confidence = 1.0 - alpha / max(1, family)
    statement = (
        f"Each configuration measured in {s.repeats} blocks"
        f"{' or more' if s.precision is not None else ''}, each between two baseline "
        f"blocks ({order}; the first {s.warmup} Default blocks dropped as warm-up). A "
        "block's figure is compared with the mean of its two neighbours on the log scale, "
        "which cancels a drift that is linear over the three blocks; the mean of those log "
        f"ratios gets Student's t interval at {confidence:.2%} ({1 - alpha:.0%} "
        f"Bonferroni-corrected for {family} figure(s) x configuration(s) at once). "
        f"An interval within ±{100 * margin:g}% is 'no difference shown' (the margin: "
        "--margin, default "
        f"{100 * DEFAULT_MARGIN:g}%); otherwise 'better' or 'worse' when it excludes no "
        "change, else 'cannot tell'. The combination of what helped is judged against "
        "Default as a family of its own.")
    if s.precision is not None:
        statement += (f" With --precision: after the {s.repeats} planned blocks, a "
                      "round more at a time of the levels whose interval on the deciding "
                      f"figure was wider than ±{100 * s.precision:g}%, up to "
                      f"{s.max_repeats} blocks of a configuration; the stop looks at an "
                      "interval's width, never at where it lies, so it does not steer the "
                      "verdict.")
    if study.design == "factorial":
        statement += (" Main effects: every configuration's log ratios regressed on "
                      "indicators of the levels it sets (least squares, no interaction "
                      "terms), each level's coefficient with Student's t interval, "
                      "Bonferroni over levels x figures.")
    correction = (f"Bonferroni over {family} (configurations judged x headline figures)"
                  if family > 1 else None)
    return Method(statement, alpha, family, correction, margin, s.warmup)


def analyse(study: Study, *, alpha: float = ALPHA) -> Study:
    """Fill in the study's conclusions from its blocks: the effects, the combined effects
    (when a combined configuration was measured), the impact table, the drift (and its
    warnings), the verdict lines and the method.  Returns the same study."""
    study.effects, family = effects(study, alpha=alpha)
    if study.combined is not None:
        study.combined.effects = combined_effects(study, alpha=alpha)
    study.main_effects = main_effects(study, alpha=alpha)
    study.impact = impact(study)
    study.drift = drift(study)
    study.warnings = [w for w in study.warnings if not w.startswith("drift: ")]
    study.warnings += drift_warnings(study, study.drift)
    study.verdicts = verdict_lines(study)
    study.method = method_of(study, family, alpha)
    return study


def new_combined(config: Configuration) -> Combined:
    """The study's ``combined`` record for a combined configuration (effects to come)."""
    return Combined(config.id, dict(config.levels), [])

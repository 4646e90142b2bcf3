"""One honest comparison: is a figure better, worse, no different, or can we not tell?

Every verdict beoperf prints about a change (``compare``, the ``--sweep`` table, ``tune
--procedure``, the node and HPCC comparisons) comes from here.  docs/STATISTICS.md has the
method and the measurements behind it; in short:

* A **run is one replicate** of the machine's state.  The trials inside a run share its
  neighbours, frequency and cache state, and the level of a whole run moves from one run
  to the next by more than its trials scatter (5-15% on shared VMs).  A test over the
  trials of two runs therefore asks "do these two runs differ?", which a drifting machine
  answers "yes" for two runs of the same setup.  So the unit here is the run: its figure
  (a median, a mean), with the uncertainty of that figure inside the run (``within_sd``)
  and the spread between runs (``Spread``).
* Figures are positive (times, rates), so everything is on the log scale: an effect is a
  ratio, its interval never crosses zero, and a halving and a doubling are equally far.
* The spread between runs comes from the runs themselves when a side has been repeated
  (the replicates' own variance, Student's t), from the runs' history (earlier runs of the
  same setup), or, with one run a side and no history, from a stated default
  (``DEFAULT_BETWEEN_SD``).  Its source is always part of the result.
* Testing many figures at once (every message size, every metric, every change of a
  procedure) widens each interval to the Bonferroni level 1 - alpha / family, so that the
  chance of any false "better" or "worse" in the family stays at alpha.
* Four verdicts: *no difference shown* when the interval of the ratio lies within
  +-``margin`` (whether or not it excludes 1: any effect is smaller than the margin);
  otherwise *better* or *worse* when it excludes 1; *cannot tell* when it includes 1 and
  reaches beyond the margin, or when no interval can be had.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from types import ModuleType

import numpy as np

from beoperf.model import narrow
from beoperf.model.document import JsonObject

ALPHA = 0.05
DEFAULT_BETWEEN_SD = 0.10  # a run's level between runs, relative, when nothing says more
DEFAULT_MARGIN = 0.10  # a change within +-10% counts as none
Z95 = 1.959963984540054
WIDE = 10.0  # an interval of a ratio whose ends are further apart than this: "over x10"

BETTER = "better"
WORSE = "worse"
NO_DIFFERENCE = "no difference shown"
CANNOT_TELL = "cannot tell"
VERDICTS = (BETTER, WORSE, NO_DIFFERENCE, CANNOT_TELL)


@dataclass(frozen=True)
class Replicate:
    """One run's figure: its value (> 0) and the standard deviation of log(value) inside
    the run (None: the source gives no interval, e.g. an imported file)."""

    value: float
    within_sd: float | None = None


@dataclass(frozen=True)
class Spread:
    """The spread of a run's level between runs: the standard deviation of log(figure),
    the degrees of freedom it was estimated with (None: a stated value, taken as known),
    and where it came from, in words ("4 earlier runs of this setup")."""

    sd: float
    df: float | None
    source: str


DEFAULT_SPREAD = Spread(DEFAULT_BETWEEN_SD, None,
                        f"the default of {DEFAULT_BETWEEN_SD:.0%} (no repeated runs, no history)")


@dataclass
class Effect:
    """A candidate's figure against the baseline's: the ratio (candidate / baseline), its
    interval at ``confidence`` (already corrected for ``family`` figures tested at once),
    the verdict, and what the interval was made of."""

    verdict: str
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    p: float | None = None  # two-sided, Bonferroni-adjusted (x family, at most 1)
    confidence: float | None = None
    family: int = 1
    higher_is_better: bool = False
    margin: float = DEFAULT_MARGIN
    runs: int | None = None  # replicates of the candidate
    baseline_runs: int | None = None
    within_pct: float | None = None  # the figures' own uncertainty inside their runs (+-%)
    between_pct: float | None = None  # a run's level between runs (+-%, 95%)
    spread_source: str | None = None
    df: float | None = None  # of the interval's quantile (None: normal)
    reason: str | None = None  # why there is no interval, or what it lacks

    @property
    def change_pct(self) -> float | None:
        return None if self.ratio is None else (self.ratio - 1.0) * 100.0

    def interval_pct(self) -> tuple[float, float] | None:
        if self.low is None or self.high is None:
            return None
        return (self.low - 1.0) * 100.0, (self.high - 1.0) * 100.0

    def span_text(self) -> str | None:
        """The interval of the change: '-18..-6.2%', or 'an interval over x10' when its
        high end is more than WIDE times its low one (a ratio known to no better than an
        order of magnitude reads as that, not as -99.9..+157885%); None without one."""
        span = self.interval_pct()
        if span is None or self.low is None or self.high is None:
            return None
        if self.low <= 0 or self.high / self.low > WIDE:
            return f"an interval over x{WIDE:g}"
        return f"{_pct(span[0])}..{_pct(span[1])}%"

    def text(self) -> str:
        """One cell: 'better (-12.3%, -18.0..-6.2%)', 'cannot tell (+4.1%, -24..+41%)',
        'cannot tell (no common size)'."""
        span = self.span_text()
        if self.change_pct is None or span is None:
            return f"{self.verdict} ({self.reason})" if self.reason else self.verdict
        return f"{self.verdict} ({self.change_pct:+.1f}%, {span})"

    def spread_text(self) -> str:
        """What the interval holds, in words: 'within runs +-1.2%, between runs +-28%
        (the default of 10% ...)'."""
        parts = []
        if self.within_pct is not None:
            parts.append(f"within runs ±{self.within_pct:.2g}%")
        if self.between_pct is not None:
            parts.append(f"between runs ±{self.between_pct:.2g}% from {self.spread_source}")
        if self.family > 1:
            parts.append(f"corrected for {self.family} figures at once")
        return ", ".join(parts)

    def to_dict(self) -> JsonObject:
        return asdict(self)


def _pct(value: float) -> str:
    return f"{value:+.0f}" if abs(value) >= 10 else f"{value:+.1f}"


def log_sd_from_interval(low: float | None, high: float | None,
                         confidence: float = 0.95) -> float | None:
    """The standard deviation of log(figure) that a symmetric-on-the-log-scale interval
    at ``confidence`` implies; None for a missing or non-positive bound."""
    if low is None or high is None or not 0 < low <= high:
        return None
    z = _stats().norm.ppf(0.5 + confidence / 2.0)
    return (math.log(high) - math.log(low)) / (2.0 * z)


def median_log_sd(values: Sequence[float]) -> float | None:
    """The standard error of log(median) of positive observations, from their spread
    (sqrt(pi/2) sd / sqrt(n), the median's asymptotic efficiency); None below 2."""
    logs = np.log(np.asarray([v for v in values if v > 0], dtype=float))
    if logs.size < 2:
        return None
    return float(math.sqrt(math.pi / 2.0) * logs.std(ddof=1) / math.sqrt(logs.size))


def mean_log_sd(values: Sequence[float]) -> float | None:
    """The standard error of the log of a mean of positive observations (delta method:
    sd / (mean sqrt(n))); None below 2 observations."""
    arr = np.asarray(values, dtype=float)
    if arr.size < 2 or not np.all(arr > 0):
        return None
    return float(arr.std(ddof=1) / (arr.mean() * math.sqrt(arr.size)))


def verdict_of(low: float, high: float, margin: float, higher_is_better: bool) -> str:
    """The verdict of a ratio interval [low, high] (candidate / baseline).  An interval
    inside +-margin is "no difference shown" even when it excludes 1: whatever the effect
    is, it is smaller than the margin, and a tight interval around a drift of a percent
    (four blocks of a tuning procedure can give -0.9..-0.5%) is not a reason to keep a
    change or to call a run worse."""
    if low >= 1.0 / (1.0 + margin) and high <= 1.0 + margin:
        return NO_DIFFERENCE
    if low > 1.0 or high < 1.0:
        up = low > 1.0
        return BETTER if up == higher_is_better else WORSE
    return CANNOT_TELL


def _stats() -> ModuleType:
    """scipy.stats, imported when a figure is first judged: its import takes a second or
    more, and `beoperf tune`, `node` and `cluster` load this module to build their
    options (their --help and bad-input errors need not wait for it)."""
    from scipy import stats

    return stats


def _quantile(confidence: float, df: float | None) -> float:
    tail = 0.5 + confidence / 2.0
    return float(_stats().norm.ppf(tail) if df is None else _stats().t.ppf(tail, df))


def _two_sided_p(z: float, df: float | None) -> float:
    return float(2.0 * (_stats().norm.sf(abs(z)) if df is None else _stats().t.sf(abs(z), df)))


@dataclass(frozen=True)
class Side:
    """One side of a comparison on the log scale: the mean of its runs' log figures, their
    sum of squares about it, how many runs, and each run's own uncertainty where known."""

    log_mean: float
    ss: float
    n: int
    within: tuple[float, ...] = ()
    unknown_within: int = 0  # runs without their own interval


def side_of(reps: Sequence[Replicate]) -> Side:
    logs = np.log([r.value for r in reps])
    return Side(float(logs.mean()), float(((logs - logs.mean()) ** 2).sum()), int(logs.size),
                tuple(r.within_sd for r in reps if r.within_sd is not None),
                sum(r.within_sd is None for r in reps))


def side_of_summary(mean: float, sd: float | None, n: int) -> Side:
    """A side known only by its runs' mean, standard deviation and count (an HPCC scaling
    study's point): the log of the mean, and sd/mean as the log figures' spread (delta
    method)."""
    spread = 0.0 if sd is None or n < 2 else (sd / mean) ** 2 * (n - 1)
    return Side(math.log(mean), spread, n, (), n)


def compare(base: Sequence[Replicate], cand: Sequence[Replicate], *,
            higher_is_better: bool, prior: Spread | None = None, family: int = 1,
            margin: float = DEFAULT_MARGIN, alpha: float = ALPHA) -> Effect:
    """The candidate's runs against the baseline's (each run one replicate).

    With a repeated side the spread between runs is the replicates' own (pooled with a
    history ``prior`` when that has degrees of freedom); with one run a side it is the
    ``prior`` (default: ``DEFAULT_SPREAD``) plus both runs' own uncertainty."""
    found = Effect(CANNOT_TELL, family=max(1, family), higher_is_better=higher_is_better,
                   margin=margin, runs=len(cand), baseline_runs=len(base))
    if not base or not cand or any(not (r.value > 0 and math.isfinite(r.value))
                                   for r in (*base, *cand)):
        found.reason = "no positive figure on one side"
        return found
    return judge(side_of(base), side_of(cand), found, prior or DEFAULT_SPREAD, alpha)


def compare_summaries(base: tuple[float, float | None, int],
                      cand: tuple[float, float | None, int], *, higher_is_better: bool,
                      family: int = 1, margin: float = DEFAULT_MARGIN,
                      alpha: float = ALPHA) -> Effect:
    """As ``compare``, for sides known by (mean, standard deviation, runs)."""
    found = Effect(CANNOT_TELL, family=max(1, family), higher_is_better=higher_is_better,
                   margin=margin, runs=cand[2], baseline_runs=base[2])
    means_ok = all(m > 0 and math.isfinite(m) for m in (base[0], cand[0]))
    if not means_ok or min(base[2], cand[2]) < 1:
        found.reason = "no positive figure on one side"
        return found
    return judge(side_of_summary(*base), side_of_summary(*cand), found, DEFAULT_SPREAD, alpha)


def judge(b: Side, c: Side, found: Effect, prior: Spread, alpha: float = ALPHA) -> Effect:
    """The interval of the ratio and the verdict (see ``compare``), into ``found``."""
    within = [*b.within, *c.within]
    mean_w2 = float(np.mean(np.square(within))) if within else 0.0
    df_r = b.n + c.n - 2
    df: float | None
    if df_r >= 1:
        var, df, source = _with_replicates((b.ss + c.ss) / df_r, df_r, prior, mean_w2)
        var_d = var * (1.0 / b.n + 1.0 / c.n)
        between = math.sqrt(var)  # a run's figure between runs, its own noise included
    else:
        var_d = sum(w * w for w in within) + 2.0 * prior.sd ** 2
        df, source, between = prior.df, prior.source, prior.sd
    d = c.log_mean - b.log_mean
    found.confidence = 1.0 - alpha / found.family
    half = _quantile(found.confidence, df) * math.sqrt(var_d)
    found.ratio, found.low, found.high = math.exp(d), math.exp(d - half), math.exp(d + half)
    found.p = min(1.0, _two_sided_p(d / math.sqrt(var_d), df) * found.family) \
        if var_d > 0 else (1.0 if d == 0 else 0.0)
    found.df, found.spread_source = df, source
    found.within_pct = 100.0 * Z95 * math.sqrt(mean_w2) if within else None
    found.between_pct = 100.0 * Z95 * between
    if b.unknown_within or c.unknown_within:
        found.reason = "a run without its own interval counts only the spread between runs"
    found.verdict = verdict_of(found.low, found.high, found.margin, found.higher_is_better)
    return found


def _with_replicates(var_r: float, df_r: int, prior: Spread,
                     mean_w2: float) -> tuple[float, float, str]:
    """(variance of one run's log figure, its df, its source) from repeated runs, pooled
    with a prior that has degrees of freedom (a history), not with a stated default."""
    runs = f"the repeated runs ({df_r} degree{'s' if df_r != 1 else ''} of freedom)"
    if prior.df is None or prior.df <= 0:
        return var_r, df_r, runs
    var_p = prior.sd ** 2 + mean_w2
    df = df_r + prior.df
    return (df_r * var_r + prior.df * var_p) / df, df, f"{runs} and {prior.source}"


def blocks(candidate: Sequence[float], around: Sequence[float], *, higher_is_better: bool,
           family: int = 1, margin: float = DEFAULT_MARGIN, alpha: float = ALPHA) -> Effect:
    """A change measured in blocks, each between two blocks of the state it is compared
    with (A C A C ... C A: ``around`` has one more block than ``candidate``).

    Each candidate block is compared with the mean of its two neighbours on the log
    scale, which cancels a drift that is linear over the three blocks and a cold first
    measurement; the differences' mean gets Student's t interval (one-sample t test, as
    scipy.stats.ttest_1samp), so the spread is the blocks' own (see ``sandwiched``)."""
    if len(around) != len(candidate) + 1:
        found = Effect(CANNOT_TELL, family=max(1, family), higher_is_better=higher_is_better,
                       margin=margin, runs=len(candidate), baseline_runs=len(around))
        found.reason = SANDWICH_NEEDS
        return found
    triples = [(around[i], c, around[i + 1]) for i, c in enumerate(candidate)]
    return sandwiched(triples, higher_is_better=higher_is_better, family=family,
                      margin=margin, alpha=alpha, baseline_runs=len(around))


SANDWICH_NEEDS = "needs at least 2 blocks, each between two baseline blocks"


def sandwiched(triples: Sequence[tuple[float, float, float]], *, higher_is_better: bool,
               family: int = 1, margin: float = DEFAULT_MARGIN, alpha: float = ALPHA,
               baseline_runs: int | None = None) -> Effect:
    """A candidate measured in blocks, each given with the baseline blocks just before and
    just after it: (before, candidate, after).

    The figure of a triple is log c - (log a + log b) / 2, which cancels a drift linear
    over the three blocks; the figures' mean gets Student's t interval (one-sample t test,
    scipy.stats.ttest_1samp) at the family's Bonferroni level, and ``verdict_of`` judges
    it.  Triples, not one list of neighbours: in a study's A C1 A C2 A C1 ... one A block
    neighbours both C1 and C2, so a candidate's neighbours are no contiguous list.
    ``baseline_runs`` is how many distinct baseline blocks the triples hold (default
    2 per triple: none shared)."""
    found = Effect(CANNOT_TELL, family=max(1, family), higher_is_better=higher_is_better,
                   margin=margin, runs=len(triples),
                   baseline_runs=2 * len(triples) if baseline_runs is None else baseline_runs)
    if len(triples) < 2:
        found.reason = SANDWICH_NEEDS
        return found
    if min(v for t in triples for v in t) <= 0:
        found.reason = "a block without a positive figure"
        return found
    before = np.log(np.asarray([t[0] for t in triples], dtype=float))
    after = np.log(np.asarray([t[2] for t in triples], dtype=float))
    diffs = np.log(np.asarray([t[1] for t in triples], dtype=float)) - (before + after) / 2.0
    found.confidence = 1.0 - alpha / found.family
    found.df = float(diffs.size - 1)
    d = float(diffs.mean())
    sd = float(diffs.std(ddof=1))
    if sd == 0.0:
        found.low = found.high = found.ratio = math.exp(d)
        found.p = 1.0 if d == 0 else 0.0
    else:
        test = _stats().ttest_1samp(diffs, 0.0)
        ci = test.confidence_interval(found.confidence)
        found.ratio, found.low, found.high = math.exp(d), math.exp(ci.low), math.exp(ci.high)
        found.p = min(1.0, float(test.pvalue) * found.family)
    found.between_pct = 100.0 * Z95 * sd / math.sqrt(1.5)  # a block's own, neighbours out
    found.spread_source = f"the {diffs.size} blocks against their neighbours"
    found.verdict = verdict_of(found.low, found.high, margin, higher_is_better)
    return found


_OPTIONAL_NUMBERS = ("ratio", "low", "high", "p", "confidence", "within_pct", "between_pct",
                     "df")


def from_dict(d: JsonObject | None) -> Effect | None:
    """An Effect stored by ``to_dict`` (None stays None); each value is narrowed to its
    field's type (DocumentError names one that is not)."""
    if d is None:
        return None
    return Effect(narrow.text_at(d, "verdict"), family=narrow.integer_at(d, "family"),
                  higher_is_better=narrow.flag_at(d, "higher_is_better"),
                  margin=narrow.num_at(d, "margin"), runs=narrow.opt_int_at(d, "runs"),
                  baseline_runs=narrow.opt_int_at(d, "baseline_runs"),
                  spread_source=narrow.opt_text_at(d, "spread_source"),
                  reason=narrow.opt_text_at(d, "reason"),
                  **{k: narrow.opt_num_at(d, k) for k in _OPTIONAL_NUMBERS})


def tally(effects: Sequence[Effect]) -> dict[str, int]:
    """How many of each verdict (every verdict present, zero or not)."""
    counts = dict.fromkeys(VERDICTS, 0)
    for e in effects:
        counts[e.verdict] = counts.get(e.verdict, 0) + 1
    return counts

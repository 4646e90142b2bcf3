"""Outages, congestion and level shifts in a monitor's probe history: pure array functions.

Everything here works on numpy arrays indexed by cycle or by window (a window is a
fixed number of consecutive cycles) and returns indices; turning them into times and
milliseconds is the report's job.  RTTs are microseconds, losses are fractions.

Congestion and level shifts come from a change-point segmentation (PELT, exact for a
penalised least-squares cost) of three windowed statistics of the small-probe RTT:
the median, the interquartile range and the loss.  Segments are then classified
against a *baseline*: a stable state (normal dispersion and loss) that lasts at least
``persist_windows``.  A change of baseline level is a level shift (a path change: a
new stable level, dispersion unchanged, persisting); a stretch above the baseline in
level, dispersion or loss that is not itself a lasting stable state is congestion.
"Above" means by more than the baseline's own window-to-window wander (SPREADS robust
SDs of its windows' medians and IQRs) and than the probing host's own noise
(NOISE_FLOOR_US): a few seconds of scheduler jitter on a fast quiet path are not
congestion.
Edges found at window resolution are then moved to the cycle by `refine_edge`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np

from beoperf.analysis.stats import mad
from beoperf.model.monitor import NOISE_FLOOR_US

DISPERSION_RATIO = 1.5  # IQR above this multiple of the baseline's is "elevated"
LEVEL_TOLERANCE = 0.05  # level changes under 5 % of the level ...
LEVEL_TOLERANCE_IQR = 1.0  # ... and under one baseline IQR are not changes
LOSS_TOLERANCE = 0.01  # loss 1 point above the baseline's (and significant) is elevated
MIN_LOST = 3  # fewer lost probes than this never make loss "elevated"
MIN_IQR_US = 1.0  # the clock's resolution: PELT takes no noise as smaller
# The probing host's own noise: a segment's IQR is taken as at least this, so level
# changes and IQRs within it are neither congestion nor level shifts.  Between two
# namespaces on a 2-core VM the small-probe RTT's median wanders from 37 to 78 us and
# its IQR from 9 to 38 us over 20 s phases with the path unchanged
# (bench/bench_host_noise.py), and went from 106 to 28 us when other work kept the
# CPUs out of idle in one test run.  (NOISE_FLOOR_US, 100 µs, is the report's default
# parameter: model/monitor.py, so that the CLI reads it without numpy.)
PENALTY_PER_CHANNEL = 3.0  # PELT penalty: this x channels x log(windows), in noise units
SPREADS = 3.0  # an elevation must also exceed this many of the baseline's window-to-window
#                spreads (robust SD of its windows' medians, or IQRs): what a baseline
#                wanders by on its own is not congestion, however small its IQR


def runs_of_true(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, stops) of the maximal runs of True in a 1-D boolean array; stops exclusive."""
    padded = np.concatenate(([False], np.asarray(mask, dtype=bool), [False]))
    edges = np.flatnonzero(padded[1:] != padded[:-1])
    return edges[0::2], edges[1::2]


def find_outages(failed: np.ndarray, breaks: np.ndarray,
                 min_cycles: int) -> list[tuple[int, int]]:
    """Outages as (first, stop) cycle indices, stop exclusive.

    failed: per cycle, True when no probe of the cycle was answered.
    breaks: per cycle, True when a not-monitored gap comes just before it; a run of
      failed cycles is cut there (nothing is known about the gap).
    min_cycles: the shortest run of failed cycles that counts as an outage.
    """
    if min_cycles < 1:
        raise ValueError(f"outage_cycles must be at least 1, got {min_cycles}")
    out = []
    segment_starts = np.concatenate(([0], np.flatnonzero(breaks[1:]) + 1, [failed.size]))
    for lo, hi in zip(segment_starts[:-1], segment_starts[1:], strict=True):
        starts, stops = runs_of_true(failed[lo:hi])
        out += [(int(lo + a), int(lo + b)) for a, b in zip(starts, stops, strict=True)
                if b - a >= min_cycles]
    return out


def grouped_quantiles(groups: np.ndarray, values: np.ndarray, qs: tuple[float, ...],
                      n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Quantiles (linear interpolation, as numpy's default) of `values` within each group.

    groups: integer group index 0..n_groups-1 of each value (any order); NaN values are
    dropped.  Returns (quantiles of shape (n_groups, len(qs)), counts); rows of empty
    groups are NaN.
    """
    keep = ~np.isnan(values)
    g, v = groups[keep], values[keep]
    v = v[np.argsort(g + _unit_half(v))]  # by group, then by value: 7x faster than lexsort
    counts = np.bincount(g, minlength=n_groups)[:n_groups]
    starts = np.cumsum(counts) - counts
    out = np.full((n_groups, len(qs)), np.nan)
    has = counts > 0
    n, first = counts[has], starts[has]
    for j, q in enumerate(qs):
        pos = q * (n - 1)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, n - 1)
        out[has, j] = v[first + lo] + (pos - lo) * (v[first + hi] - v[first + lo])
    return out, counts


def _unit_half(v: np.ndarray) -> np.ndarray:
    """`v` mapped monotonically into [0, 0.5), so that group + this sorts by both."""
    if v.size == 0:
        return v
    lo, span = float(v.min()), float(np.ptp(v))
    return (v - lo) / (2.0 * span * (1.0 + 1e-9)) if span > 0 else np.zeros_like(v)


# --- windows and change points -----------------------------------------------------------


@dataclass(frozen=True)
class Windows:
    """Statistics of consecutive windows of cycles (all arrays have one entry per window)."""

    width: int  # cycles per window (the last window may hold up to 2 x width - 1)
    first_cycle: np.ndarray  # index of the window's first cycle in the analysed sequence
    median: np.ndarray  # median small-probe RTT, µs (NaN: no answered small probe)
    iqr: np.ndarray  # p75 - p25 of the small-probe RTT, µs
    rows: np.ndarray  # probes scheduled
    lost: np.ndarray  # probes not answered

    @property
    def count(self) -> int:
        return int(self.first_cycle.size)


def window_width(n_cycles: int, small_per_cycle: float, target_windows: int = 4000,
                 min_small: int = 24) -> int:
    """Cycles per window: about `target_windows` windows, but at least `min_small`
    small probes in each (so medians and IQRs mean something)."""
    floor = int(np.ceil(min_small / max(small_per_cycle, 1e-9)))
    return max(floor, n_cycles // target_windows, 1)


def window_stats(cycle_of_rtt: np.ndarray, rtt_us: np.ndarray, rows: np.ndarray,
                 lost: np.ndarray, width: int) -> Windows:
    """Windowed statistics over a sequence of cycles.

    cycle_of_rtt, rtt_us: answered small probes (index into the cycle sequence, RTT µs).
    rows, lost: per cycle, probes scheduled and probes not answered.
    """
    n_windows = max(1, rows.size // width)
    win_of_cycle = np.minimum(np.arange(rows.size) // width, n_windows - 1)
    q, _ = grouped_quantiles(win_of_cycle[cycle_of_rtt], rtt_us, (0.25, 0.5, 0.75), n_windows)
    return Windows(width=width, first_cycle=np.arange(n_windows) * width,
                   median=q[:, 1], iqr=q[:, 2] - q[:, 0],
                   rows=np.bincount(win_of_cycle, weights=rows, minlength=n_windows),
                   lost=np.bincount(win_of_cycle, weights=lost, minlength=n_windows))


def _fill_nan(x: np.ndarray) -> np.ndarray:
    """NaNs replaced by the previous finite value (the next one at the start; 0 if none)."""
    ok = ~np.isnan(x)
    if not ok.any():
        return np.zeros_like(x)
    idx = np.where(ok, np.arange(x.size), 0)
    np.maximum.accumulate(idx, out=idx)
    filled = x[idx]
    filled[: np.argmax(ok)] = x[np.argmax(ok)]
    return filled


def _noise_scale(x: np.ndarray, floor: float) -> float:
    """Robust standard deviation of the noise around a piecewise-constant signal:
    MAD of the first differences / sqrt(2), steps barely move it."""
    if x.size < 3:
        return floor
    return max(1.4826 * mad(np.diff(x)) / np.sqrt(2.0), floor)


def change_signal(w: Windows) -> np.ndarray:
    """The windows as an (n, 3) signal in noise units: median, IQR, loss."""
    loss = w.lost / np.maximum(w.rows, 1)
    median, iqr = _fill_nan(w.median), _fill_nan(w.iqr)
    loss_floor = 0.5 / max(float(np.median(w.rows)), 1.0)  # one lost probe is not a change
    return np.column_stack([median / _noise_scale(median, MIN_IQR_US),
                            iqr / _noise_scale(iqr, MIN_IQR_US),
                            loss / _noise_scale(loss, loss_floor)])


def pelt(signal: np.ndarray, penalty: float, min_size: int = 2) -> list[int]:
    """Change points of a piecewise-constant multivariate signal (PELT, least squares).

    signal: (n, d) array.  Returns the segment boundaries as sorted indices, ending
    with n (so [0, b0), [b0, b1), ... are the segments).
    """
    n = signal.shape[0]
    if n < 2 * min_size:
        return [n]
    csum = np.vstack([np.zeros(signal.shape[1]), np.cumsum(signal, axis=0)])
    csq = np.concatenate(([0.0], np.cumsum(np.einsum("ij,ij->i", signal, signal))))
    best = np.full(n + 1, np.inf)
    best[0] = -penalty
    last = np.zeros(n + 1, dtype=np.int64)
    cands = np.array([0])
    for t in range(min_size, n + 1):
        diff = csum[t] - csum[cands]
        cost = (csq[t] - csq[cands]) - np.einsum("ij,ij->i", diff, diff) / (t - cands)
        total = best[cands] + cost
        k = int(np.argmin(total))
        best[t], last[t] = total[k] + penalty, cands[k]
        cands = cands[total <= best[t]]
        if t + 1 - min_size >= min_size:
            cands = np.append(cands, t + 1 - min_size)
    bounds = [n]
    while last[bounds[-1]] > 0:
        bounds.append(int(last[bounds[-1]]))
    return bounds[::-1]


def default_penalty(n_windows: int, channels: int = 3) -> float:
    return PENALTY_PER_CHANNEL * channels * float(np.log(max(n_windows, 2)))


# --- classification ----------------------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    """A stretch of windows between two change points, with its statistics."""

    first: int  # first window
    stop: int  # one past the last window
    level: float  # median of the windows' median RTT, µs
    iqr: float  # median of the windows' IQR, µs
    rows: float
    lost: float
    medians: tuple[float, ...] = field(default=(), repr=False)  # each window's median, µs
    iqrs: tuple[float, ...] = field(default=(), repr=False)  # each window's IQR, µs
    floor: float = 0.0  # the probing host's noise, µs: thresholds use no smaller IQR

    @property
    def length(self) -> int:
        return self.stop - self.first

    @property
    def tol_iqr(self) -> float:
        """The IQR that thresholds use: the measured one, or the noise floor."""
        return max(self.iqr, self.floor)

    @property
    def loss(self) -> float:
        return self.lost / self.rows if self.rows else 0.0


def robust_sd(x: np.ndarray) -> float:
    """1.4826 x the median absolute deviation (the SD for normal data); 0 for < 2 values."""
    return 1.4826 * mad(x) if x.size >= 2 else 0.0


def segments(w: Windows, bounds: list[int], floor: float = NOISE_FLOOR_US) -> list[Segment]:
    """The segments between the change points `bounds` (as pelt returns them); `floor`:
    the probing host's own noise (µs of RTT)."""
    median, iqr = _fill_nan(w.median), _fill_nan(w.iqr)
    out, lo = [], 0
    for hi in bounds:
        out.append(Segment(lo, hi, float(np.median(median[lo:hi])),
                           max(float(np.median(iqr[lo:hi])), MIN_IQR_US),
                           float(w.rows[lo:hi].sum()), float(w.lost[lo:hi].sum()),
                           tuple(median[lo:hi].tolist()), tuple(iqr[lo:hi].tolist()), floor))
        lo = hi
    return out


@dataclass(frozen=True)
class Plateau:
    """Stable segments at one level, in time order (others may lie between them)."""

    members: tuple[Segment, ...]
    level: float  # time-weighted median of the members' levels, µs
    iqr: float  # time-weighted median of their IQRs, µs
    loss: float  # fraction of their probes not answered
    level_spread: float = 0.0  # robust SD of all its windows' medians, µs
    iqr_spread: float = 0.0  # and of their IQRs, µs
    floor: float = 0.0  # the probing host's noise, µs (as Segment.floor)

    @classmethod
    def of(cls, members: list[Segment]) -> Plateau:
        weights = np.array([s.length for s in members], dtype=float)
        rows = sum(s.rows for s in members)

        def wmedian(attr: str) -> float:
            return _weighted_median(np.array([getattr(s, attr) for s in members]), weights)

        def spread(attr: str) -> float:
            return robust_sd(np.array([x for s in members for x in getattr(s, attr)]))

        return cls(tuple(members), wmedian("level"), wmedian("iqr"),
                   sum(s.lost for s in members) / rows if rows else 0.0,
                   spread("medians"), spread("iqrs"), max(s.floor for s in members))

    @property
    def tol_iqr(self) -> float:
        return max(self.iqr, self.floor)

    @property
    def length(self) -> int:
        return sum(s.length for s in self.members)

    @property
    def first(self) -> int:
        return self.members[0].first

    @property
    def stop(self) -> int:
        return self.members[-1].stop


def _weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    order = np.argsort(values)
    cum = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cum, cum[-1] / 2.0)])


def loss_elevated(lost: float, rows: float, base_loss: float) -> bool:
    """Is `lost` of `rows` clearly more than a baseline loss fraction `base_loss`?"""
    if rows <= 0 or lost < MIN_LOST:
        return False
    sigma = np.sqrt(max(base_loss, 1.0 / rows) * (1.0 - base_loss) / rows)
    return lost / rows > base_loss + max(LOSS_TOLERANCE, 3.0 * sigma)


def same_level(a: float, b: float, iqr: float) -> bool:
    """Are two RTT levels (µs) the same for practical purposes?"""
    return abs(a - b) <= max(LEVEL_TOLERANCE * min(a, b), LEVEL_TOLERANCE_IQR * iqr)


def _stable(segs: list[Segment]) -> list[bool]:
    """Per segment: normal dispersion and loss, judged against the time-weighted
    medians of all segments (most of the time a link is not congested)."""
    weights = np.array([s.length for s in segs], dtype=float)
    iqr_ref = _weighted_median(np.array([s.tol_iqr for s in segs]), weights)
    loss_ref = _weighted_median(np.array([s.loss for s in segs]), weights)
    return [s.tol_iqr <= DISPERSION_RATIO * iqr_ref
            and not loss_elevated(s.lost, s.rows, loss_ref)
            for s in segs]


def plateaus(segs: list[Segment], stable: list[bool]) -> list[Plateau]:
    """Stable segments grouped in time order: a stable segment joins the current group
    when at its level (its running, time-weighted mean), else it starts a new one;
    unstable segments are skipped."""
    groups: list[list[Segment]] = []
    level = iqr = weight = 0.0
    for seg, ok in zip(segs, stable, strict=True):
        if not ok:
            continue
        if groups and same_level(seg.level, level, iqr):
            groups[-1].append(seg)
            weight += seg.length
            level += (seg.level - level) * seg.length / weight
            iqr += (seg.tol_iqr - iqr) * seg.length / weight
        else:
            groups.append([seg])
            level, iqr, weight = seg.level, seg.tol_iqr, float(seg.length)
    return [Plateau.of(g) for g in groups]


def baselines(plats: list[Plateau], persist_windows: int) -> list[Plateau]:
    """The plateaus that last: at least `persist_windows` (else the longest one), with
    neighbours at the same level merged (a short plateau between them was not one)."""
    if not plats:
        return []
    long = [p for p in plats if p.length >= persist_windows]
    long = long or [max(plats, key=lambda p: p.length)]
    merged = [list(long[0].members)]
    for prev, p in pairwise(long):
        if same_level(p.level, prev.level, prev.tol_iqr):
            merged[-1] += p.members
        else:
            merged.append(list(p.members))
    return [Plateau.of(m) for m in merged]


@dataclass(frozen=True)
class Episode:
    """Congestion: windows [first, stop) above the baseline `base`."""

    first: int
    stop: int
    base: Plateau


@dataclass(frozen=True)
class Shift:
    """A level shift at window `at`: the baseline goes from `before` to `after`."""

    at: int
    before: Plateau
    after: Plateau


def _baseline_at(bases: list[Plateau], window: int) -> Plateau:
    """The baseline in force at a window: the last one begun by then (else the first)."""
    current = bases[0]
    for b in bases:
        if b.first <= window:
            current = b
    return current


def elevated(level: float, iqr: float, lost: float, rows: float, base: Plateau) -> bool:
    """Is a stretch (RTT level and IQR in µs, probes lost of rows) above a baseline in
    level, dispersion or loss?  Level and dispersion must also be above what the
    baseline's windows wander by on their own (SPREADS robust SDs)."""
    higher = (level > base.level + SPREADS * base.level_spread
              and not same_level(level, base.level, base.tol_iqr))
    wider = iqr > max(DISPERSION_RATIO * base.tol_iqr, base.tol_iqr + SPREADS * base.iqr_spread)
    return higher or wider or loss_elevated(lost, rows, base.loss)


def _flagged(segs: list[Segment], bases: list[Plateau], min_size: int) -> list[bool]:
    """Per segment: above the baseline in force, and not a mere step between levels (a
    short segment wide only because its windows hold both neighbours' levels)."""
    members = {id(s) for b in bases for s in b.members}
    flags = []
    for i, seg in enumerate(segs):
        base = _baseline_at(bases, seg.first)
        up = id(seg) not in members and elevated(seg.level, seg.iqr, seg.lost, seg.rows, base)
        if up and 0 < i < len(segs) - 1 and seg.length <= min_size:
            up = not (_step(seg, segs[i - 1], segs[i + 1], base)
                      and not elevated(seg.level, 0.0, seg.lost, seg.rows, base))
        flags.append(up)
    return flags


def _step(seg: Segment, before: Segment, after: Segment, base: Plateau) -> bool:
    """Is `seg` the passage between two different levels: its level between theirs and
    its IQR no wider than the step plus the baseline's usual dispersion?"""
    lo, hi = sorted((before.level, after.level))
    between = (lo <= seg.level <= hi or same_level(seg.level, lo, base.tol_iqr)
               or same_level(seg.level, hi, base.tol_iqr))
    return (between and not same_level(lo, hi, base.tol_iqr)
            and seg.iqr <= hi - lo + DISPERSION_RATIO * base.tol_iqr)


def _transition_start(segs: list[Segment], k: int, before: Plateau, after: Plateau,
                      flags: list[bool], min_size: int) -> int:
    """Index of the first segment of the move from `before` to `after`, where `after`
    begins at segment k: the segments just before k that lie between the two levels
    (stable ones, or short ones: a window holding both levels is wide) belong to it."""
    lo_level, hi_level = sorted((before.level, after.level))
    tol = max(LEVEL_TOLERANCE * lo_level, LEVEL_TOLERANCE_IQR * before.tol_iqr)
    while k > 0 and segs[k - 1].first >= before.stop:
        seg = segs[k - 1]
        if not (lo_level - tol <= seg.level <= hi_level + tol
                and (not flags[k - 1] or seg.length <= min_size)):
            break
        k -= 1
    return k


def classify(segs: list[Segment], persist_windows: int,
             min_size: int = 2) -> tuple[list[Episode], list[Shift]]:
    """Congestion episodes and level shifts among segments (see the module's docstring)."""
    bases = baselines(plateaus(segs, _stable(segs)), persist_windows) if segs else []
    if not bases:
        return [], []
    flags = _flagged(segs, bases, min_size)
    index = {s.first: i for i, s in enumerate(segs)}
    shifts = []
    for before, after in pairwise(bases):
        k = _transition_start(segs, index[after.first], before, after, flags, min_size)
        flags[k:index[after.first]] = [False] * (index[after.first] - k)
        shifts.append(Shift(segs[k].first, before, after))
    episodes = [Episode(segs[a].first, segs[b - 1].stop, _baseline_at(bases, segs[a].first))
                for a, b in zip(*runs_of_true(np.array(flags)), strict=True)]
    return episodes, shifts


def _rank_split(x: np.ndarray, rising: bool) -> int:
    """First guess of where x steps up (or down): the standardised CUSUM of its ranks."""
    ranks = np.empty(x.size)
    ranks[np.argsort(x, kind="stable")] = np.arange(1, x.size + 1)
    k = np.arange(1, x.size)
    z = (np.cumsum(ranks)[:-1] - k * (x.size + 1) / 2.0) / np.sqrt(k * (x.size - k))
    return int(np.argmin(z) if rising else np.argmax(z)) + 1


def _threshold_split(x: np.ndarray, split: int, rising: bool) -> int:
    """Split where fewest values are on the wrong side of the midpoint between the two
    sides' medians (values before it should be below if `rising`, above if not)."""
    threshold = (np.median(x[:split]) + np.median(x[split:])) / 2.0
    high = x > threshold
    first, second = (high, ~high) if rising else (~high, high)
    before = np.cumsum(first)[:-1]  # wrong ones before the split at 1..n-1
    after = second.sum() - np.cumsum(second)[:-1]
    return int(np.argmin(before + after)) + 1


def refine_edge(stat: np.ndarray, base: float, edge: int, reach: int, rising: bool) -> int:
    """Move a change found at `edge` (at window resolution) to the best cycle nearby.

    stat: a per-cycle statistic (the median small-probe RTT, µs; NaN = none answered);
    base: its baseline level.  Within `reach` cycles of `edge`, the deviation
    |stat - base| is split in two: from near to away from the base if `rising`, else
    the other way (a rank CUSUM, then a few rounds of "fewest values on the wrong side
    of the midpoint").  Returns the first cycle after the split; `edge` unchanged when
    the two sides' median deviations are not 1.5x apart (a change in loss alone, say).
    """
    lo, hi = max(edge - reach, 0), min(edge + reach, stat.size)
    dev = np.abs(stat[lo:hi] - base)
    where = np.flatnonzero(~np.isnan(dev))
    if where.size < 4:
        return edge
    x = dev[where]
    split = _rank_split(x, rising)
    for _ in range(4):
        new = _threshold_split(x, split, rising)
        if new == split:
            break
        split = new
    before, after = float(np.median(x[:split])), float(np.median(x[split:]))
    small, large = (before, after) if rising else (after, before)
    if not large > 1.5 * small:
        return edge
    return lo + int(where[split])


def detect(w: Windows, persist_windows: int,
           noise_floor_us: float = NOISE_FLOOR_US) -> tuple[list[Episode], list[Shift]]:
    """Change points of the windows' statistics, then classification."""
    if w.count == 0 or np.isnan(w.median).all():
        return [], []
    bounds = pelt(change_signal(w), default_penalty(w.count))
    return classify(segments(w, bounds, noise_floor_us), persist_windows)

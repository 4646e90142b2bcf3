"""Reading a sweep: latency, peak, saturation, n1/2, the Hockney model, collapses.

Definitions (the README and `beoperf pingpong --help` repeat them):

- throughput collapse: a run of consecutive sizes each of whose throughput is
  below 1/COLLAPSE_FACTOR (1/10) of the best throughput at any smaller size;
  reported with its first and last size, the number of sizes, and its factor
  (that best throughput, and where it was reached, over the lowest throughput
  in the range). Healthy curves stay far from it: protocol switches
  (eager/rendezvous, MSS/MTU boundaries) cost at most 1.65x in the NetPIPE,
  IMB and OSU fixtures, and single noisy sizes on a loaded 2-CPU loopback up
  to 7x; a socket buffer too small for the message stalls on delayed ACKs
  and costs 1000x and more (16 KiB buffers on loopback: 6.6 us at 48 KiB,
  then 44-385 ms from 64 KiB). Partial stalls between the two are not
  flagged (64 KiB buffers on loopback reached 9.7x at 768 KiB once).
  Every figure below is computed on the healthy sizes only, those in no
  collapse (a collapse is a stall, not a property of the link's model);
  the collapsed sizes stay in the result and on the graphs, flagged.
- throughput dip: a run of consecutive healthy sizes each of whose throughput,
  even at the top of its 95% interval, is below the bottom of the interval of
  some smaller size and of some larger size: the curve falls and comes back,
  by more than the intervals of the sizes allow (noise inside them is never
  a dip, however deep in percent). A dip is reported with its first and last
  size and its depth (the lowest median throughput in it over the lower median
  of the nearest sizes on either side whose intervals lie above all of it);
  sizes without an interval (imports) are not judged. A bond in balance-rr
  mode reorders segments and dips at some sizes (the bonding study: 6, 16,
  24, 64 and 256 KB at about 80% of 200 Mbit/s). The intervals are the run's
  own (``ci95_median_us``, widened by the run's pass autocorrelation): the
  sizes compared are of one run.
- latency: the per-size median one-way time of the middle size among the
  sizes up to LATENCY_MAX_SIZE bytes (or the smallest size, if none is that
  small), ordered by that median (the lower middle for an even count): the
  median of the per-size medians, and always one size's own measured median.
  Its p99 and its 95% confidence interval are that size's (the CI of the
  median over trial medians, `SizeResult.ci95_halfwidth_us`), so that the
  figure, its spread and its precision all speak about the same
  measurement; `latency_size` names it;
- peak: the highest per-size median throughput, and its size;
- empty messages (size 0, NetPIPE's, IMB's and OSU's first row) have a time and no
  throughput: they count for the latency (among the small sizes) and are left out of
  everything else (peak, slopes, collapses, dips, n1/2, the fits); a run of empty
  messages only has a peak of 0 at size 0, "no throughput";
- local slope s(n): d log t / d log n, from a least-squares line through the
  points within one octave of n on either side (SLOPE_HALF_WINDOW_OCTAVES),
  in log-log space;
  s = 0 where time does not grow with size (latency-bound), s = 1 where it
  grows linearly (bandwidth-bound);
- saturation point: the smallest size from which s(n) >= SATURATED_SLOPE at
  every larger measured size: past it, time grows linearly with size;
- saturation interval: from the largest size below the saturation point with
  s(n) <= LATENCY_SLOPE (the end of the latency-bound range) to the
  saturation point;
- n1/2: the size at which throughput first reaches half its peak
  (interpolated in log size between the two measured sizes around it);
- Hockney model t(n) = alpha + beta * n, fitted by least squares on relative
  error (weights 1/t^2, so small and large sizes count alike); 1/beta is the
  asymptotic bandwidth; piecewise: the sizes where the model changes
  (MSS/MTU boundaries, eager/rendezvous switches) are found by segmented
  regression, the number of pieces chosen by BIC.
- a model is given only where it is physical: the Hockney fit needs a positive
  latency alpha and a weighted R^2 of at least MIN_R2 (0.9: below it the sizes do
  not follow one line, and alpha and 1/beta describe no link); the piecewise fit
  needs a positive alpha in its first piece, a positive time at both ends of every
  piece, and a weighted R^2 of at least MIN_R2 over all its points.  A fit that
  fails is "no model" with the reason (``model_problem``, ``pieces_problem``; the
  Hockney fit itself stays in ``rejected`` for the record): a noisy loopback run
  once gave alpha = -143 us, which is no latency.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, field

import numpy as np

from beoperf.model.document import JsonObject
from beoperf.model.pingpong import RunResult

LATENCY_MAX_SIZE = 16
COLLAPSE_FACTOR = 10.0
SLOPE_HALF_WINDOW_OCTAVES = 1.0
SATURATED_SLOPE = 0.9
LATENCY_SLOPE = 0.1
MAX_BREAKS = 3
MIN_PIECE_POINTS = 4
MAX_SEGMENT_POINTS = 600  # the piecewise fit needs (m+1)^2 floats; skipped above this
ANALYSES_KEPT = 32  # analyses kept (analyze_run): those of every run one command reads
MIN_R2 = 0.9  # a fit explaining less of the (relative) variation is no model


@dataclass
class Fit:
    """t(n) = alpha + beta*n over a size range; alpha in us, bandwidth in bits/s."""

    first_size: int
    last_size: int
    points: int
    alpha_us: float
    beta_us_per_byte: float
    bandwidth_bps: float | None  # 1/beta; None when beta <= 0 (time does not grow)
    r2: float


@dataclass
class Collapse:
    """Consecutive sizes whose throughput fell below 1/COLLAPSE_FACTOR of the best at a
    smaller size (see the module docstring); throughputs in bit/s."""

    first_size: int
    last_size: int
    points: int  # sizes in the range
    factor: float  # reference_bps / lowest_bps
    reference_size: int  # where the best throughput below the range was reached
    reference_bps: float
    lowest_size: int
    lowest_bps: float

    def text(self) -> str:
        """One line for a warning: where, how many sizes, how deep, against what."""
        where = (f"at {self.first_size} B" if self.points == 1 else
                 f"at {self.first_size}..{self.last_size} B ({self.points} sizes)")
        return (f"throughput collapse {where}: down to 1/{self.factor:.0f} of the "
                f"{self.reference_bps / 1e6:.0f} Mbit/s reached at {self.reference_size} B")


@dataclass
class Dip:
    """Consecutive sizes whose throughput falls below a smaller and a larger size's by
    more than their intervals allow (see the module docstring); throughputs in bit/s."""

    first_size: int
    last_size: int
    points: int  # sizes in the range
    lowest_size: int
    lowest_bps: float
    before_size: int  # the nearest smaller size clearly above the whole dip
    before_bps: float
    after_size: int  # the nearest larger size clearly above the whole dip
    after_bps: float

    @property
    def depth(self) -> float:
        """The lowest median throughput in the dip over the lower of the two around it."""
        return self.lowest_bps / min(self.before_bps, self.after_bps)

    def text(self) -> str:
        """One line for a warning: where, how deep, against which sizes."""
        where = (f"at {self.first_size} B" if self.points == 1 else
                 f"at {self.first_size}..{self.last_size} B ({self.points} sizes)")
        return (f"throughput dip {where}: down to {_mbit(self.lowest_bps)} Mbit/s "
                f"({self.depth:.0%}) between {_mbit(self.before_bps)} Mbit/s at "
                f"{self.before_size} B and {_mbit(self.after_bps)} Mbit/s at "
                f"{self.after_size} B, beyond the 95% intervals")


def _mbit(bps: float) -> str:
    """A rate in Mbit/s, three significant figures below 100, whole numbers above."""
    mbit = bps / 1e6
    return f"{mbit:.0f}" if mbit >= 100 else f"{mbit:.3g}"


@dataclass
class CurveAnalysis:
    """The figures of one sweep; all but `collapses` come from the healthy sizes only."""

    latency_us: float
    latency_p99_us: float | None
    latency_method: str
    latency_size: int  # the size whose median is latency_us
    latency_ci95_halfwidth_us: float | None  # that size's CI of the median
    peak_bps: float
    peak_size: int
    saturation_size: int | None
    saturation_interval: tuple[int, int] | None
    n_half: float | None
    hockney: Fit | None  # None: too few sizes, or not physical (model_problem says why)
    pieces: list[Fit] = field(default_factory=list)  # [] unless a physical piecewise fit
    thresholds: list[int] = field(default_factory=list)
    slopes: list[float | None] = field(default_factory=list)  # per size; None where collapsed
    collapses: list[Collapse] = field(default_factory=list)
    dips: list[Dip] = field(default_factory=list)  # among the healthy sizes
    model_problem: str | None = None  # why the Hockney fit is not a model
    pieces_problem: str | None = None  # why the piecewise fit is not one
    rejected: Fit | None = None  # the Hockney fit that was not given, for the record

    def to_dict(self) -> JsonObject:
        return asdict(self)

    def collapse_note(self, first: str = "latency") -> str | None:
        """What a reader must know when some sizes were left out (None when none was);
        ``first``: the small-message figure's name (:func:`latency_name`)."""
        if not self.collapses:
            return None
        return (f"{first}, peak, saturation, n1/2 and the fits use the sizes outside the "
                "collapse" + ("s" if len(self.collapses) > 1 else ""))


def collapses(sizes: np.ndarray, bps: np.ndarray,
              factor: float = COLLAPSE_FACTOR) -> list[Collapse]:
    """The throughput collapses of a sweep (sizes ascending), in size order."""
    best_before = np.concatenate([[0.0], np.maximum.accumulate(bps)[:-1]])
    flagged = bps * factor < best_before
    found = []
    i = 0
    while i < len(sizes):
        if not flagged[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(sizes) and flagged[j + 1]:
            j += 1
        ref = int(np.argmax(bps[:i]))
        low = i + int(np.argmin(bps[i:j + 1]))
        found.append(Collapse(first_size=int(sizes[i]), last_size=int(sizes[j]), points=j - i + 1,
                              factor=float(bps[ref] / bps[low]), reference_size=int(sizes[ref]),
                              reference_bps=float(bps[ref]), lowest_size=int(sizes[low]),
                              lowest_bps=float(bps[low])))
        i = j + 1
    return found


def dips(sizes: np.ndarray, bps: np.ndarray, low: np.ndarray,
         high: np.ndarray) -> list[Dip]:
    """The throughput dips of a sweep (sizes ascending; ``low`` and ``high``: each size's
    throughput interval, NaN where it has none), in size order."""
    known = np.nonzero(np.isfinite(low) & np.isfinite(high))[0]
    if known.size < 3:
        return []
    lo, hi = low[known], high[known]
    before = np.concatenate([[-np.inf], np.maximum.accumulate(lo)[:-1]])
    after = np.concatenate([np.maximum.accumulate(lo[::-1])[::-1][1:], [-np.inf]])
    flagged = hi < np.minimum(before, after)
    found, i = [], 0
    while i < known.size:
        if not flagged[i]:
            i += 1
            continue
        j = i
        while j + 1 < known.size and flagged[j + 1]:
            j += 1
        found.append(_dip(sizes, bps, known, lo, hi, i, j))
        i = j + 1
    return found


def _dip(sizes: np.ndarray, bps: np.ndarray, known: np.ndarray, lo: np.ndarray,
         hi: np.ndarray, i: int, j: int) -> Dip:
    """The dip of the judged sizes i..j (indices into ``known``), against the nearest
    smaller and larger sizes clearly above all of it (each exists: the size of the range
    with the highest top has one on either side)."""
    top = float(hi[i:j + 1].max())
    left = int(known[int(np.nonzero(lo[:i] > top)[0][-1])])
    right = int(known[j + 1 + int(np.nonzero(lo[j + 1:] > top)[0][0])])
    inside = known[i:j + 1]
    low = int(inside[int(np.argmin(bps[inside]))])
    return Dip(first_size=int(sizes[known[i]]), last_size=int(sizes[known[j]]),
               points=j - i + 1, lowest_size=int(sizes[low]), lowest_bps=float(bps[low]),
               before_size=int(sizes[left]), before_bps=float(bps[left]),
               after_size=int(sizes[right]), after_bps=float(bps[right]))


def throughput_interval(bps: np.ndarray, median_us: np.ndarray,
                        band_us: list[tuple[float, float] | None]) -> tuple[np.ndarray, np.ndarray]:
    """Each size's throughput interval from its time interval (NaN where none): the rate
    is inversely proportional to the time, so the time's top gives the rate's bottom."""
    low, high = np.full(len(bps), np.nan), np.full(len(bps), np.nan)
    for k, band in enumerate(band_us):
        if band is not None and 0 < band[0] <= median_us[k] <= band[1]:
            low[k] = bps[k] * median_us[k] / band[1]
            high[k] = bps[k] * median_us[k] / band[0]
    return low, high


def time_name(mode: str | None) -> str:
    """What one sample of a sweep is, in words: in stream mode the time per message (a
    trial's time over its messages, sent back to back: never a latency), else the one-way
    time (half a round trip; bidir: one exchange)."""
    return "time per message" if mode == "stream" else "one-way time"


def latency_name(mode: str | None) -> str:
    """The name of the small-message figure: "latency", or in stream mode "time per
    message" (nothing waits for an answer, so it is no latency)."""
    return "time per message" if mode == "stream" else "latency"


def latency(sizes: np.ndarray, median_us: np.ndarray,
            what: str = "one-way time") -> tuple[int, str]:
    """Index of the latency size (see the module docstring) and how it was chosen
    (``what``: the name of a sample, :func:`time_name`)."""
    small = np.nonzero(sizes <= max(LATENCY_MAX_SIZE, int(sizes[0])))[0]
    order = small[np.argsort(median_us[small], kind="stable")]
    pick = int(order[(len(order) - 1) // 2])
    if len(small) == 1:
        return pick, f"median {what} at the smallest size, {int(sizes[pick])} B"
    middle = "middle" if len(small) % 2 else "lower middle"
    return pick, (f"median {what} at {int(sizes[pick])} B, the {middle} of the per-size "
                  f"medians over the {len(small)} sizes {int(sizes[small[0]])}.."
                  f"{int(sizes[small[-1]])} B")


def local_slopes(sizes: np.ndarray, times: np.ndarray,
                 half_octaves: float = SLOPE_HALF_WINDOW_OCTAVES) -> np.ndarray:
    """d log t / d log n at every point, from a line through the points within
    half_octaves of it in size (a window in log size, not in points, so that
    the +-perturbation sizes, nearly equal in log size, cannot tip it)."""
    x, y = np.log(sizes.astype(float)), np.log(times)
    reach = half_octaves * math.log(2.0)
    out = np.empty(len(x))
    for i in range(len(x)):
        near = np.abs(x - x[i]) <= reach + 1e-12
        xs, ys = x[near], y[near]
        dx = xs - xs.mean()
        denom = float((dx * dx).sum())
        out[i] = float((dx * (ys - ys.mean())).sum() / denom) if denom > 0 else 0.0
    return out


def saturation(sizes: np.ndarray, slopes: np.ndarray) -> tuple[int | None, tuple[int, int] | None]:
    """Saturation point and interval from the local slopes (see module docstring)."""
    below = np.nonzero(slopes < SATURATED_SLOPE)[0]
    start = int(below[-1]) + 1 if below.size else 0
    if start >= len(sizes):
        return None, None
    point = int(sizes[start])
    flat = np.nonzero(slopes[:start] <= LATENCY_SLOPE)[0]
    lower = int(sizes[flat[-1]]) if flat.size else int(sizes[0])
    return point, (lower, point)


def n_half(sizes: np.ndarray, bps: np.ndarray) -> float | None:
    """Size where throughput first reaches half of its peak (log-interpolated)."""
    target = bps.max() / 2.0
    idx = int(np.argmax(bps >= target))
    if idx == 0:
        return float(sizes[0]) if bps[0] >= target else None
    x0, x1 = math.log(sizes[idx - 1]), math.log(sizes[idx])
    y0, y1 = bps[idx - 1], bps[idx]
    frac = (target - y0) / (y1 - y0) if y1 != y0 else 1.0
    return float(math.exp(x0 + frac * (x1 - x0)))


class _Moments:
    """Prefix sums that give the weighted Hockney fit of any size range in O(1).

    With u = 1/t and v = n/t, minimising sum(((alpha + beta*n)/t - 1)^2) is the
    linear least squares [u v] [alpha beta]' ~ 1.
    """

    def __init__(self, sizes: np.ndarray, times: np.ndarray) -> None:
        u, v = 1.0 / times, sizes / times
        zero = np.zeros(1)
        self.c = {k: np.concatenate([zero, np.cumsum(a)])
                  for k, a in (("uu", u * u), ("uv", u * v), ("vv", v * v), ("u", u), ("v", v),
                               ("one", np.ones_like(u)))}

    def fit(self, i: np.ndarray | int, j: np.ndarray | int) -> tuple:
        """(alpha, beta, sse, u-sum, uu-sum, count) for ranges [i, j)."""
        s = {k: c[j] - c[i] for k, c in self.c.items()}
        det = s["uu"] * s["vv"] - s["uv"] ** 2
        safe = np.where(np.abs(det) > 0, det, np.inf)
        alpha = (s["u"] * s["vv"] - s["v"] * s["uv"]) / safe
        beta = (s["v"] * s["uu"] - s["u"] * s["uv"]) / safe
        sse = (s["one"] - 2 * (alpha * s["u"] + beta * s["v"]) + alpha**2 * s["uu"]
               + 2 * alpha * beta * s["uv"] + beta**2 * s["vv"])
        return alpha, beta, np.maximum(sse, 0.0), s["u"], s["uu"], s["one"]


def hockney(sizes: np.ndarray, times: np.ndarray, moved: float = 1.0) -> Fit:
    """Least-squares t = alpha + beta*n on relative error; R^2 in the same weighting.

    `moved` is how many times n bytes cross the link per sample (2 in bidir
    mode), so that 1/beta is comparable with the throughput figures."""
    alpha, beta, sse, su, suu, count = _Moments(sizes, times).fit(0, len(sizes))
    tbar = su / suu if suu > 0 else 0.0  # weighted mean of t with weights 1/t^2
    ss_tot = float((((times - tbar) / times) ** 2).sum())
    r2 = 1.0 - float(sse) / ss_tot if ss_tot > 0 else 1.0
    return Fit(first_size=int(sizes[0]), last_size=int(sizes[-1]), points=int(count),
               alpha_us=float(alpha), beta_us_per_byte=float(beta),
               bandwidth_bps=moved * 8e6 / float(beta) if beta > 0 else None, r2=r2)


def fit_problem(fit: Fit) -> str | None:
    """Why a Hockney fit is no model of a link (see the module docstring), or None."""
    problems = []
    if not fit.alpha_us > 0:
        problems.append(f"its latency alpha is not positive ({fit.alpha_us:.3g} us)")
    if not fit.r2 >= MIN_R2:
        problems.append(f"it explains too little: weighted R^2 {fit.r2:.3f}, below {MIN_R2:g} "
                        "(the times do not follow one line)")
    return " and ".join(problems) or None


def pieces_problem(sizes: np.ndarray, times: np.ndarray, pieces: list[Fit]) -> str | None:
    """Why a piecewise fit is no model (see the module docstring), or None."""
    if not pieces:
        return None
    if not pieces[0].alpha_us > 0:
        return f"its first piece's latency alpha is not positive ({pieces[0].alpha_us:.3g} us)"
    model = np.empty_like(times)
    for p in pieces:
        ends = p.alpha_us + p.beta_us_per_byte * np.array([p.first_size, p.last_size], float)
        if not (ends > 0).all():
            return (f"its piece {p.first_size}..{p.last_size} B gives a time <= 0 within its "
                    "own sizes")
        inside = (sizes >= p.first_size) & (sizes <= p.last_size)
        model[inside] = p.alpha_us + p.beta_us_per_byte * sizes[inside]
    weighted = np.sum(1.0 / times) / np.sum(1.0 / times**2)  # mean of t, weights 1/t^2
    total = float((((times - weighted) / times) ** 2).sum())
    r2 = 1.0 - float((((times - model) / times) ** 2).sum()) / total if total > 0 else 1.0
    if not r2 >= MIN_R2:
        return f"it explains too little: weighted R^2 {r2:.3f} over its points, below {MIN_R2:g}"
    return None


def segment(sizes: np.ndarray, times: np.ndarray, max_breaks: int = MAX_BREAKS,
            min_points: int = MIN_PIECE_POINTS) -> list[int]:
    """Indices where a new piece starts (the break points), number chosen by BIC."""
    m = len(sizes)
    ii, jj = np.meshgrid(np.arange(m + 1), np.arange(m + 1), indexing="ij")
    cost = _Moments(sizes, times).fit(ii, jj)[2]
    cost = np.where(jj - ii >= min_points, cost, np.inf)  # cost[i, j]: piece [i, j)
    best = cost[0].copy()  # best[j]: prefix [0, j) in k+1 pieces
    back: list[np.ndarray] = []
    results: dict[int, tuple[float, list[int]]] = {0: (best[m], [])}
    for k in range(1, max_breaks + 1):
        total = best[:, None] + cost  # prefix [0, i) then piece [i, j)
        arg = np.argmin(total, axis=0)
        best = total[arg, np.arange(m + 1)]
        back.append(arg)
        if np.isfinite(best[m]):
            results[k] = (best[m], _trace(back, m))
    return _choose_by_bic(results, m)


def _trace(back: list[np.ndarray], m: int) -> list[int]:
    breaks, j = [], m
    for arg in reversed(back):
        j = int(arg[j])
        breaks.append(j)
    return sorted(breaks)


def _choose_by_bic(results: dict, m: int) -> list[int]:
    def bic(k: int) -> float:
        sse = max(float(results[k][0]), 1e-12 * m)
        return m * math.log(sse / m) + (3 * k + 2) * math.log(m)

    usable = [k for k, r in results.items() if np.isfinite(r[0])]
    return results[min(usable, key=bic)][1] if usable else []


def analyze_run(run: RunResult) -> CurveAnalysis | None:
    """The analysis of a RunResult (None when it has no sizes).

    Computed once per set of figures and kept (the segmentation is the costly part): the
    document's summary and analysis, the text, the plots and the HTML of one run all ask
    for it, each from its own RunResult of the same document.  Keyed by the figures it
    is computed from, a kept analysis is never one of other figures.
    """
    if not run.sizes:
        return None
    sizes = run.sizes
    times = tuple(s.central_time_us() for s in sizes)
    return _analyze_figures(
        tuple(s.size for s in sizes), times,
        tuple(s.time_us.get("p99") for s in sizes), tuple(s.central_bps() for s in sizes),
        tuple(s.ci95_halfwidth_us for s in sizes),
        time_name((getattr(run, "parameters", None) or {}).get("mode")),
        tuple(_own_band(s.ci95_median_us, t, _inflation(run)) for s, t in zip(sizes, times,
                                                                            strict=True)))


def _inflation(run: RunResult) -> float:
    """How much the run's pass autocorrelation widens its intervals (1: not at all)."""
    value = (getattr(run, "sweep", None) or {}).get("interval_inflation")
    return float(value) if isinstance(value, (int, float)) and value >= 1.0 else 1.0


def _own_band(band: list[float] | None, median: float,
              inflation: float) -> tuple[float, float] | None:
    """A size's interval of its median within the run, widened by ``inflation`` on the
    log scale (as ``compare`` does); None without a usable one."""
    if not band or len(band) != 2 or not 0 < band[0] <= median <= band[1]:
        return None
    return (median * (band[0] / median) ** inflation, median * (band[1] / median) ** inflation)


@functools.lru_cache(maxsize=ANALYSES_KEPT)
def _analyze_figures(sizes: tuple[int, ...], times: tuple[float, ...],
                     p99: tuple[float | None, ...], bps: tuple[float, ...],
                     ci95: tuple[float | None, ...], what: str,
                     bands: tuple[tuple[float, float] | None, ...]) -> CurveAnalysis:
    return analyze(list(sizes), list(times), list(p99), list(bps), list(ci95), what,
                   list(bands))


def _moved_per_message(n: np.ndarray, t_us: np.ndarray, bps: np.ndarray) -> float:
    """How many times a message's size each sample moves: 2 for bidir, else 1 (from the
    stored rates and times; 1 when they give no finite figure, as a crafted file's
    astronomical times overflow the product)."""
    with np.errstate(over="ignore", invalid="ignore"):
        ratio = float(np.median(bps * t_us * 1e-6 / (8.0 * n))) if len(n) else 1.0
    return max(1.0, round(ratio)) if math.isfinite(ratio) else 1.0


def analyze(sizes: list[int], median_us: list[float], p99_us: list[float | None],
            bps: list[float], ci95_us: list[float | None] | None = None,
            what: str = "one-way time",
            bands_us: list[tuple[float, float] | None] | None = None) -> CurveAnalysis:
    """Everything above for one sweep (sizes ascending); `ci95_us` is each size's CI
    half-width of the median, when known; `what` names a sample (:func:`time_name`);
    `bands_us` each size's [low, high] interval of its median time within the run, when
    known (the dips are judged on them)."""
    n_all = np.asarray(sizes, dtype=float)
    thr_all = np.asarray(bps, dtype=float)
    t_all = np.asarray(median_us, dtype=float)
    empty = n_all == 0  # empty messages: a latency, no throughput, no place on a log axis
    found = collapses(n_all[~empty], thr_all[~empty])
    keep = ~empty
    for c in found:
        keep &= (n_all < c.first_size) | (n_all > c.last_size)
    n, t, thr = n_all[keep], t_all[keep], thr_all[keep]
    at = np.nonzero(keep)[0]  # healthy index -> index among all sizes
    timed = np.nonzero(keep | empty)[0]  # the latency's candidates: healthy and empty
    lat, method = latency(n_all[timed], t_all[timed], what)
    lat = int(timed[lat])
    p99, ci = p99_us[lat], (ci95_us or [None] * len(n_all))[lat]
    moved = _moved_per_message(n, t, thr)
    slopes = local_slopes(n, t) if len(n) >= 3 else np.zeros(len(n))
    sat, interval = saturation(n, slopes) if len(n) >= 3 else (None, None)
    fit = hockney(n, t, moved) if len(n) >= 2 else None
    problem = fit_problem(fit) if fit is not None else None
    segmentable = 2 * MIN_PIECE_POINTS <= len(n) <= MAX_SEGMENT_POINTS  # O(m^2) memory
    breaks = segment(n, t) if segmentable else []
    bounds = [0, *breaks, len(n)] if len(n) else [0]
    pieces = [hockney(n[a:b], t[a:b], moved) for a, b in zip(bounds, bounds[1:], strict=False)]
    broken = pieces_problem(n, t, pieces) if breaks else None
    if broken:
        breaks = []
    low, high = throughput_interval(thr, t, [b for b, k in zip(bands_us or [None] * len(n_all),
                                                              keep, strict=True) if k])
    all_slopes: list[float | None] = [None] * len(n_all)
    for i, slope in zip(at, slopes, strict=True):
        all_slopes[int(i)] = float(slope)
    peak = int(thr.argmax()) if len(n) else None  # None: only empty messages, no rate
    return CurveAnalysis(
        latency_us=float(t_all[lat]), latency_p99_us=None if p99 is None else float(p99),
        latency_method=method, latency_size=int(n_all[lat]),
        latency_ci95_halfwidth_us=None if ci is None else float(ci),
        peak_bps=0.0 if peak is None else float(thr[peak]),
        peak_size=0 if peak is None else int(n[peak]),
        saturation_size=sat, saturation_interval=interval,
        n_half=n_half(n, thr) if len(n) else None,
        hockney=None if problem else fit, pieces=pieces if breaks else [],
        thresholds=[int(n[b]) for b in breaks], slopes=all_slopes, collapses=found,
        dips=dips(n, thr, low, high),
        model_problem=problem, pieces_problem=broken, rejected=fit if problem else None)

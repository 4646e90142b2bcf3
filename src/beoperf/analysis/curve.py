"""Reading a sweep: latency, peak, saturation, n1/2 and the Hockney model.

Definitions (the README and `beoperf pingpong --help` repeat them):

- latency: the median of the per-size median one-way times over the sizes up
  to LATENCY_MAX_SIZE bytes (or the smallest size, if none is that small);
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
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

LATENCY_MAX_SIZE = 16
SLOPE_HALF_WINDOW_OCTAVES = 1.0
SATURATED_SLOPE = 0.9
LATENCY_SLOPE = 0.1
MAX_BREAKS = 3
MIN_PIECE_POINTS = 4
MAX_SEGMENT_POINTS = 600  # the piecewise fit needs (m+1)^2 floats; skipped above this


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
class CurveAnalysis:
    latency_us: float
    latency_p99_us: float | None
    latency_method: str
    peak_bps: float
    peak_size: int
    saturation_size: int | None
    saturation_interval: tuple[int, int] | None
    n_half: float | None
    hockney: Fit | None
    pieces: list[Fit] = field(default_factory=list)
    thresholds: list[int] = field(default_factory=list)
    slopes: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def latency(sizes: np.ndarray, median_us: np.ndarray,
            p99_us: list[float | None]) -> tuple[float, float | None, str]:
    """Median of the per-size medians (and p99s, if known) over the smallest sizes."""
    small = sizes <= max(LATENCY_MAX_SIZE, int(sizes[0]))
    count = int(small.sum())
    method = (f"median of the per-size median one-way times over the {count} size(s) "
              f"{int(sizes[0])}..{int(sizes[small][-1])} B")
    p99 = [p99_us[i] for i in np.nonzero(small)[0]]
    p99_value = None if any(q is None for q in p99) else float(np.median(p99))
    return float(np.median(median_us[small])), p99_value, method


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
    tbar = su / suu  # weighted mean of t with weights 1/t^2
    ss_tot = float((((times - tbar) / times) ** 2).sum())
    r2 = 1.0 - float(sse) / ss_tot if ss_tot > 0 else 1.0
    return Fit(first_size=int(sizes[0]), last_size=int(sizes[-1]), points=int(count),
               alpha_us=float(alpha), beta_us_per_byte=float(beta),
               bandwidth_bps=moved * 8e6 / float(beta) if beta > 0 else None, r2=r2)


def segment(sizes: np.ndarray, times: np.ndarray, max_breaks: int = MAX_BREAKS,
            min_points: int = MIN_PIECE_POINTS) -> list[int]:
    """Indices where a new piece starts (the break points), number chosen by BIC."""
    m = len(sizes)
    ii, jj = np.meshgrid(np.arange(m + 1), np.arange(m + 1), indexing="ij")
    cost = _Moments(sizes, times).fit(ii, jj)[2]
    cost = np.where(jj - ii >= min_points, cost, np.inf)  # cost[i, j]: piece [i, j)
    best = cost[0].copy()  # best[j]: prefix [0, j) in k+1 pieces
    back: list[np.ndarray] = []
    results = {0: (best[m], [])}
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


def analyze_run(run: Any) -> CurveAnalysis | None:
    """The analysis of a RunResult (None when it has no sizes).

    Kept on the run (keyed by its size count), since plots, tables and the JSON
    all ask for it and the segmentation is the costly part.
    """
    if not run.sizes:
        return None
    cached = getattr(run, "_analysis", None)
    if cached is not None and cached[0] == len(run.sizes):
        return cached[1]
    result = _analyze_sizes(run)
    run._analysis = (len(run.sizes), result)
    return result


def _analyze_sizes(run: Any) -> CurveAnalysis:
    times = [s.central_time_us() for s in run.sizes]
    p99 = [s.time_us.get("p99") for s in run.sizes]
    return analyze([s.size for s in run.sizes], times, p99, [s.central_bps() for s in run.sizes])


def analyze(sizes: list[int], median_us: list[float], p99_us: list[float | None],
            bps: list[float]) -> CurveAnalysis:
    """Everything above for one sweep (sizes ascending)."""
    n = np.asarray(sizes, dtype=float)
    t = np.asarray(median_us, dtype=float)
    lat, lat99, method = latency(n, t, list(p99_us))
    thr = np.asarray(bps, dtype=float)
    moved = max(1.0, round(float(np.median(thr * t * 1e-6 / (8.0 * n)))))  # 2 for bidir
    slopes = local_slopes(n, t) if len(n) >= 3 else np.zeros(len(n))
    sat, interval = saturation(n, slopes) if len(n) >= 3 else (None, None)
    fit = hockney(n, t, moved) if len(n) >= 2 else None
    segmentable = 2 * MIN_PIECE_POINTS <= len(n) <= MAX_SEGMENT_POINTS  # O(m^2) memory
    breaks = segment(n, t) if segmentable else []
    bounds = [0, *breaks, len(n)]
    pieces = [hockney(n[a:b], t[a:b], moved) for a, b in zip(bounds, bounds[1:], strict=False)]
    return CurveAnalysis(
        latency_us=lat, latency_p99_us=lat99, latency_method=method,
        peak_bps=float(thr.max()), peak_size=int(n[int(thr.argmax())]),
        saturation_size=sat, saturation_interval=interval, n_half=n_half(n, thr),
        hockney=fit, pieces=pieces if breaks else [], thresholds=[int(n[b]) for b in breaks],
        slopes=[float(s) for s in slopes])

"""Comparing runs: one row of figures per run, and whether each differs from a baseline.

The figures of a row are those of `beoperf.analysis.curve` (latency and its p99,
peak throughput and where it is reached, saturation point, n1/2, the Hockney
alpha and 1/beta, and the throughput collapses those figures leave out); the
change against the baseline (the first run unless told otherwise) is that of
the latency and peak figures shown.

Significance
------------
The verdict speaks about the very figure whose change is shown: it tests the
observations behind that figure, and its percentage is that change.

Observations: the per-trial medians (`SizeResult.trial_medians_us`). Single
round trips are not independent (consecutive ones share the machine's state
for tens of milliseconds), trials are: they are the unit pingpong's confidence
interval is built on, and the unit here.

- latency: the trial medians (one-way, us) at each run's latency size (the
  size whose median is the latency figure, `CurveAnalysis.latency_size`; the
  two runs' sizes may differ, all are at most 16 B);
- peak: the trial medians at each run's peak size (the size whose throughput
  is the peak figure), each turned into throughput (bit/s = k / t, k = the
  size's median throughput times its median time, so the mode's factor is
  kept), so that two sizes can be compared.

Test: two-sided Mann-Whitney U (Wilcoxon rank-sum), normal approximation
with tie correction and continuity correction (`mann_whitney_u`). It assumes
no distribution (trial medians are skewed, with a long tail towards slow), only
that the observations are independent. With fewer than MIN_TRIALS (6)
observations on either side the approximation is poor and the verdict is
"too few trials".

A change is called significant only when p < ALPHA (0.05) AND the figures
shown differ by more than `min_change` (default 2%, the precision
`beoperf pingpong` aims for by default). The test speaks about the trials of
these two runs; but on a shared machine a whole run shifts by a percent or two
against the next (other tenants, frequency scaling, interrupt and scheduler
placement, cache and TLB state), and that shift is common to all trials of a
run, so no number of trials averages it away. With enough trials any such
shift reaches p < 0.05; the threshold keeps it from being announced as an
effect. A run without trial data (an import from NetPIPE, IMB or OSU, or an
older result) gets "n/a (source lacks trial data)".

Impact (`render_impact`, the shape of published tuning studies): the mean and
variance (ddof=1) of the latency observations above, and (baseline mean -
mean) / baseline mean in percent: positive means lower latency.

Throughput collapses (`beoperf.analysis.curve.collapses`) are listed per run in
every format; a run's figures, and so its changes and verdicts, leave them out.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from beoperf.analysis.curve import (
    Collapse,
    CurveAnalysis,
    analyze_run,
)
from beoperf.model import comparison
from beoperf.model.document import Document
from beoperf.model.pingpong import RunResult, SizeResult

ALPHA = 0.05
MIN_TRIALS = 6
DEFAULT_MIN_CHANGE = 0.02

SIGNIFICANT = "significant"
NOT_SIGNIFICANT = "not significant"
TOO_FEW = "too few trials"
NO_TRIAL_DATA = "n/a (source lacks trial data)"


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Two-sided Mann-Whitney U test; returns (U of `a`, p).

    U is the number of pairs (x from a, y from b) with x > y, ties counted one
    half (so U(a, b) + U(b, a) = len(a) * len(b)). p is from the normal
    approximation: mean n1*n2/2, variance n1*n2/12 * ((n+1) - sum(t^3 - t) /
    (n(n-1))) over the groups of t tied values, and |U - mean| reduced by 0.5
    (continuity); p = 1 when all values are equal. As scipy.stats.mannwhitneyu
    with method="asymptotic".
    """
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        raise ValueError("mann_whitney_u needs at least one observation on each side")
    ranks, ties = _ranks([*a, *b])
    u = sum(ranks[:n1]) - n1 * (n1 + 1) / 2.0
    n = n1 + n2
    variance = n1 * n2 / 12.0 * ((n + 1) - ties / (n * (n - 1)))
    if variance <= 0:
        return u, 1.0
    z = max(0.0, abs(u - n1 * n2 / 2.0) - 0.5) / math.sqrt(variance)
    return u, min(1.0, math.erfc(z / math.sqrt(2.0)))


def _ranks(values: list[float]) -> tuple[list[float], float]:
    """1-based ranks (ties get their mean rank) and the tie term sum(t^3 - t)."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    ties = 0.0
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2.0 + 1.0
        t = j - i + 1
        ties += t**3 - t
        i = j + 1
    return ranks, ties


@dataclass
class Significance:
    """One comparison of a run with the baseline (latency or peak)."""

    verdict: str  # SIGNIFICANT, NOT_SIGNIFICANT, TOO_FEW, NO_TRIAL_DATA
    size: int | None = None  # message size of the run's observations (bytes)
    baseline_size: int | None = None
    n: int | None = None  # observations (trials) of the run
    baseline_n: int | None = None
    median: float | None = None  # median observation: us (latency) or bit/s (peak)
    baseline_median: float | None = None
    change_pct: float | None = None  # of the figures shown: + = slower (latency), faster (peak)
    u: float | None = None  # Mann-Whitney U of the run's observations
    p: float | None = None
    min_change_pct: float | None = None

    def text(self) -> str:
        """The verdict for a table cell: what was compared, p, and why when not significant.

        E.g. "significant (-24.9% at 1 B, p<0.001)", "not significant (+1.2% at
        1 B, p=0.01 but <= 2%)", "too few trials (4 vs 12)".
        """
        if self.verdict == TOO_FEW:
            return f"{TOO_FEW} ({self.n} vs {self.baseline_n})"
        if self.p is None or self.change_pct is None:
            return self.verdict
        where = f"{self.size} B" if self.size == self.baseline_size else \
            f"{self.size} vs {self.baseline_size} B"
        p = "p<0.001" if self.p < 0.001 else f"p={self.p:.2g}"
        if self.p < ALPHA and self.verdict == NOT_SIGNIFICANT:
            p += f" but <= {self.min_change_pct:g}%"
        return f"{self.verdict} ({self.change_pct:+.1f}% at {where}, {p})"


@dataclass
class Row:
    """The figures of one run and, unless it is the baseline, its comparison."""

    label: str
    baseline: bool
    latency_us: float
    latency_p99_us: float | None
    peak_bps: float
    peak_size: int
    saturation_size: int | None
    n_half: float | None
    alpha_us: float | None
    bandwidth_bps: float | None  # 1/beta of the Hockney fit
    latency_change_pct: float | None  # of latency_us against the baseline's; + = slower
    peak_change_pct: float | None  # of peak_bps against the baseline's; + = faster
    latency_test: Significance | None
    peak_test: Significance | None
    latency_size: int  # the size whose median is latency_us: the latency observations'
    latency_mean_us: float | None  # of the latency observations (or the source's own time)
    latency_variance: float | None  # us^2, ddof=1; None without trial data
    impact_pct: float | None  # (baseline mean - mean) / baseline mean * 100
    collapses: list[Collapse]  # throughput collapses, left out of every figure above


def rows(runs: Sequence[RunResult], baseline_index: int = 0,
         min_change: float = DEFAULT_MIN_CHANGE,
         labels: Sequence[str] | None = None) -> list[Row]:
    """One Row per run (in order), compared with runs[baseline_index].

    `min_change` is a fraction (0.02 = 2%); labels default to run.label().
    Every run needs at least one measured size (ValueError otherwise).
    """
    if not 0 <= baseline_index < len(runs):
        raise ValueError(f"baseline index {baseline_index} is not among {len(runs)} run(s)")
    analyses = [_analysis(run) for run in runs]
    names = list(labels) if labels is not None else [run.label() for run in runs]
    base, base_analysis = runs[baseline_index], analyses[baseline_index]
    out = []
    for i, (run, analysis) in enumerate(zip(runs, analyses, strict=True)):
        if i == baseline_index:
            out.append(_baseline_row(names[i], run, analysis))
        else:
            out.append(_row(names[i], run, analysis, base, base_analysis, min_change))
    return out


def _analysis(run: RunResult) -> CurveAnalysis:
    analysis = analyze_run(run)
    if analysis is None:
        raise ValueError("no message sizes measured")
    return analysis


def _figures(label: str, run: RunResult, analysis: CurveAnalysis,
             baseline: bool) -> dict[str, Any]:
    fit = analysis.hockney
    mean, variance = _mean_variance(run, _size(run, analysis.latency_size))
    return {"label": label, "baseline": baseline, "latency_us": analysis.latency_us,
            "latency_p99_us": analysis.latency_p99_us, "peak_bps": analysis.peak_bps,
            "peak_size": analysis.peak_size, "saturation_size": analysis.saturation_size,
            "n_half": analysis.n_half, "alpha_us": fit.alpha_us if fit else None,
            "bandwidth_bps": fit.bandwidth_bps if fit else None,
            "latency_size": analysis.latency_size, "latency_mean_us": mean,
            "latency_variance": variance, "collapses": list(analysis.collapses)}


def _baseline_row(label: str, run: RunResult, analysis: CurveAnalysis) -> Row:
    return Row(**_figures(label, run, analysis, True), latency_change_pct=None,
               peak_change_pct=None, latency_test=None, peak_test=None, impact_pct=None)


def _row(label: str, run: RunResult, analysis: CurveAnalysis, base: RunResult,
         base_analysis: CurveAnalysis, min_change: float) -> Row:
    figures = _figures(label, run, analysis, False)
    base_mean = _mean_variance(base, _size(base, base_analysis.latency_size))[0]
    impact = (base_mean - figures["latency_mean_us"]) / base_mean * 100.0 if base_mean else None
    latency_change = _change(analysis.latency_us, base_analysis.latency_us)
    peak_change = _change(analysis.peak_bps, base_analysis.peak_bps)
    latency_test = _test(
        _trials(run, _size(run, analysis.latency_size)),
        _trials(base, _size(base, base_analysis.latency_size)),
        analysis.latency_size, base_analysis.latency_size, latency_change, min_change)
    peak_test = _test(
        _throughputs(run, _size(run, analysis.peak_size)),
        _throughputs(base, _size(base, base_analysis.peak_size)),
        analysis.peak_size, base_analysis.peak_size, peak_change, min_change)
    return Row(**figures, latency_change_pct=latency_change, peak_change_pct=peak_change,
               latency_test=latency_test, peak_test=peak_test, impact_pct=impact)


def _change(value: float, reference: float) -> float | None:
    return (value - reference) / reference * 100.0 if reference else None


def _size(run: RunResult, size: int) -> SizeResult:
    """The measured size the analysis named (it is always one of the run's)."""
    return next(s for s in run.sizes if s.size == size)


def _trials(run: RunResult, size: SizeResult) -> list[float] | None:
    """The trial medians, or None for imports and results without them."""
    if run.source is not None or not size.trial_medians_us:
        return None
    return [float(t) for t in size.trial_medians_us]


def _mean_variance(run: RunResult, size: SizeResult) -> tuple[float, float | None]:
    """Mean and variance (ddof=1) of the trial medians; the source's own time without them."""
    obs = _trials(run, size)
    if obs is None:
        return size.central_time_us(), None
    return statistics.fmean(obs), statistics.variance(obs) if len(obs) > 1 else None


def _throughputs(run: RunResult, size: SizeResult) -> list[float] | None:
    """Trial medians as bit/s: k / t with k from the size's own median figures."""
    obs = _trials(run, size)
    if obs is None:
        return None
    k = size.central_bps() * size.central_time_us()
    return [k / t for t in obs]


def _test(obs: list[float] | None, base_obs: list[float] | None, size: int, base_size: int,
          change_pct: float | None, min_change: float) -> Significance:
    """Mann-Whitney U on the observations behind two figures whose change is change_pct."""
    found = Significance(NO_TRIAL_DATA, size=size, baseline_size=base_size,
                         change_pct=change_pct, min_change_pct=min_change * 100.0)
    if obs is None or base_obs is None:
        return found
    found.n, found.baseline_n = len(obs), len(base_obs)
    found.median, found.baseline_median = statistics.median(obs), statistics.median(base_obs)
    if min(len(obs), len(base_obs)) < MIN_TRIALS:
        found.verdict = TOO_FEW
        return found
    found.u, found.p = mann_whitney_u(obs, base_obs)
    big = change_pct is not None and abs(change_pct) > min_change * 100.0
    found.verdict = SIGNIFICANT if found.p < ALPHA and big else NOT_SIGNIFICANT
    return found


# --- the document --------------------------------------------------------------------------

def describe_test(min_change: float = DEFAULT_MIN_CHANGE) -> dict[str, Any]:
    """The test as data (JSON) and as the one footer line (`statement`)."""
    statement = (
        "Test: two-sided Mann-Whitney U (normal approximation, tie- and continuity-corrected) "
        "on the per-trial medians behind each figure (latency: at each run's latency size; "
        "peak: as throughput at each run's peak size); significant = "
        f"p < {ALPHA:g} and the figures differ by more than {min_change * 100:g}% (the "
        f"change shown); fewer than {MIN_TRIALS} trials on a side: too few trials.")
    return {"name": "Mann-Whitney U, two-sided",
            "approximation": "normal, with tie correction and continuity correction",
            "observations": "per-trial medians of the one-way time (SizeResult.trial_medians_us)",
            "latency_observations": "trial medians (us) at each run's latency size (the size "
                                    "whose median is the latency figure)",
            "peak_observations": "trial medians as throughput (bit/s) at each run's peak size "
                                 "(the size whose throughput is the peak figure)",
            "alpha": ALPHA, "min_change_pct": min_change * 100.0, "min_trials": MIN_TRIALS,
            "significant_if": f"p < {ALPHA:g} and |change of the figures shown| > "
                              f"{min_change * 100:g}%",
            "statement": statement}


def document(table: Sequence[Row], min_change: float = DEFAULT_MIN_CHANGE,
             meta: dict[str, Any] | None = None) -> Document:
    """The comparison as a document (kind "comparison"): the rows and the test used."""
    body = {"baseline": next((r.label for r in table if r.baseline), "?"),
            "min_change": min_change, "test": describe_test(min_change),
            "rows": [asdict(r) for r in table]}
    return Document(comparison.KIND, body, dict(meta or {}))


def rows_of(doc: Document) -> list[Row]:
    """The typed rows of a comparison document (as `rows` made them)."""
    def test(d: dict | None) -> Significance | None:
        return Significance(**d) if d is not None else None

    out = []
    for r in doc.body["rows"]:
        r = dict(r)
        r["latency_test"], r["peak_test"] = test(r["latency_test"]), test(r["peak_test"])
        r["collapses"] = [Collapse(**c) for c in r["collapses"]]
        out.append(Row(**r))
    return out

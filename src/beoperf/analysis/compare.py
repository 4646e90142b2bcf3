"""Comparing runs: one row of figures per run, and whether each differs from a baseline.

The figures of a row are those of `beoperf.analysis.curve` (latency and its p99,
peak throughput and where it is reached, saturation point, n1/2, the Hockney
alpha and 1/beta); the change against the baseline (the first run unless told
otherwise) is that of the latency and peak figures shown.

Significance
------------
Observations: the per-trial medians (`SizeResult.trial_medians_us`). Single
round trips are not independent (consecutive ones share the machine's state
for tens of milliseconds), trials are: they are the unit pingpong's confidence
interval is built on, and the unit here.

- latency: the trial medians (one-way, us) at the smallest message size both
  runs measured;
- peak: the trial medians at the baseline's peak size if the run measured that
  size too, else at each run's own peak size; each turned into throughput
  (bit/s = k / t, k = the size's median throughput times its median time, so
  the mode's factor is kept), so that two sizes can be compared.

Test: two-sided Mann-Whitney U (Wilcoxon rank-sum), normal approximation
with tie correction and continuity correction (`mann_whitney_u`). It assumes
no distribution (trial medians are skewed, with a long tail towards slow), only
that the observations are independent. With fewer than MIN_TRIALS (6)
observations on either side the approximation is poor and the verdict is
"too few trials".

A change is called significant only when p < ALPHA (0.05) AND the medians of
the two samples differ by more than `min_change` (default 2%, the precision
`beoperf pingpong` aims for by default). The test speaks about the trials of
these two runs; but on a shared machine a whole run shifts by a percent or two
against the next (other tenants, frequency scaling, interrupt and scheduler
placement, cache and TLB state), and that shift is common to all trials of a
run, so no number of trials averages it away. With enough trials any such
shift reaches p < 0.05; the threshold keeps it from being announced as an
effect. A run without trial data (an import from NetPIPE, IMB or OSU, or an
older result) gets "n/a (source lacks trial data)".

Impact (`render_impact`, the shape of published tuning studies): the mean and
variance (ddof=1) of the latency observations, and (baseline mean - mean) /
baseline mean in percent: positive means lower latency.
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from beoperf.analysis.curve import LATENCY_MAX_SIZE, CurveAnalysis, analyze_run
from beoperf.results.model import RunResult, SizeResult

ALPHA = 0.05
MIN_TRIALS = 6
DEFAULT_MIN_CHANGE = 0.02

SIGNIFICANT = "significant"
NOT_SIGNIFICANT = "not significant"
TOO_FEW = "too few trials"
NO_TRIAL_DATA = "n/a (source lacks trial data)"
NO_COMMON_SIZE = "n/a (no size in common)"


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

    verdict: str  # SIGNIFICANT, NOT_SIGNIFICANT, TOO_FEW, NO_TRIAL_DATA, NO_COMMON_SIZE
    size: int | None = None  # message size of the run's observations (bytes)
    baseline_size: int | None = None
    n: int | None = None  # observations (trials) of the run
    baseline_n: int | None = None
    median: float | None = None  # median observation: us (latency) or bit/s (peak)
    baseline_median: float | None = None
    change_pct: float | None = None  # of the medians: + = slower (latency), faster (peak)
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
    latency_size: int | None  # size of the latency observations (smallest common size)
    latency_mean_us: float | None  # of the latency observations (or the source's own time)
    latency_variance: float | None  # us^2, ddof=1; None without trial data
    impact_pct: float | None  # (baseline mean - mean) / baseline mean * 100


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


def _figures(label: str, analysis: CurveAnalysis, baseline: bool) -> dict[str, Any]:
    fit = analysis.hockney
    return {"label": label, "baseline": baseline, "latency_us": analysis.latency_us,
            "latency_p99_us": analysis.latency_p99_us, "peak_bps": analysis.peak_bps,
            "peak_size": analysis.peak_size, "saturation_size": analysis.saturation_size,
            "n_half": analysis.n_half, "alpha_us": fit.alpha_us if fit else None,
            "bandwidth_bps": fit.bandwidth_bps if fit else None}


def _baseline_row(label: str, run: RunResult, analysis: CurveAnalysis) -> Row:
    first = run.sizes[0]
    mean, variance = _mean_variance(run, first)
    return Row(**_figures(label, analysis, True), latency_change_pct=None, peak_change_pct=None,
               latency_test=None, peak_test=None, latency_size=first.size,
               latency_mean_us=mean, latency_variance=variance, impact_pct=None)


def _row(label: str, run: RunResult, analysis: CurveAnalysis, base: RunResult,
         base_analysis: CurveAnalysis, min_change: float) -> Row:
    pair = _smallest_common(run, base)
    mean = variance = impact = None
    if pair is not None:
        mean, variance = _mean_variance(run, pair[0])
        base_mean = _mean_variance(base, pair[1])[0]
        impact = (base_mean - mean) / base_mean * 100.0 if base_mean else None
    return Row(**_figures(label, analysis, False),
               latency_change_pct=_change(analysis.latency_us, base_analysis.latency_us),
               peak_change_pct=_change(analysis.peak_bps, base_analysis.peak_bps),
               latency_test=_latency_test(run, base, pair, min_change),
               peak_test=_peak_test(run, analysis, base, base_analysis, min_change),
               latency_size=pair[0].size if pair else None, latency_mean_us=mean,
               latency_variance=variance, impact_pct=impact)


def _change(value: float, reference: float) -> float | None:
    return (value - reference) / reference * 100.0 if reference else None


def _size(run: RunResult, size: int) -> SizeResult | None:
    return next((s for s in run.sizes if s.size == size), None)


def _smallest_common(run: RunResult, base: RunResult) -> tuple[SizeResult, SizeResult] | None:
    common = {s.size for s in run.sizes} & {s.size for s in base.sizes}
    if not common:
        return None
    size = min(common)
    return _size(run, size), _size(base, size)  # type: ignore[return-value]


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


def _latency_test(run: RunResult, base: RunResult, pair: tuple[SizeResult, SizeResult] | None,
                  min_change: float) -> Significance:
    if pair is None:
        return Significance(NO_COMMON_SIZE)
    return _test(_trials(run, pair[0]), _trials(base, pair[1]), pair[0].size, pair[1].size,
                 min_change)


def _peak_test(run: RunResult, analysis: CurveAnalysis, base: RunResult,
               base_analysis: CurveAnalysis, min_change: float) -> Significance:
    base_size = _size(base, base_analysis.peak_size)
    size = _size(run, base_analysis.peak_size) or _size(run, analysis.peak_size)
    assert size is not None and base_size is not None
    return _test(_throughputs(run, size), _throughputs(base, base_size), size.size,
                 base_size.size, min_change)


def _throughputs(run: RunResult, size: SizeResult) -> list[float] | None:
    """Trial medians as bit/s: k / t with k from the size's own median figures."""
    obs = _trials(run, size)
    if obs is None:
        return None
    k = size.central_bps() * size.central_time_us()
    return [k / t for t in obs]


def _test(obs: list[float] | None, base_obs: list[float] | None, size: int, base_size: int,
          min_change: float) -> Significance:
    found = Significance(NO_TRIAL_DATA, size=size, baseline_size=base_size,
                         min_change_pct=min_change * 100.0)
    if obs is None or base_obs is None:
        return found
    found.n, found.baseline_n = len(obs), len(base_obs)
    found.median, found.baseline_median = statistics.median(obs), statistics.median(base_obs)
    found.change_pct = _change(found.median, found.baseline_median)
    if min(len(obs), len(base_obs)) < MIN_TRIALS:
        found.verdict = TOO_FEW
        return found
    found.u, found.p = mann_whitney_u(obs, base_obs)
    big = found.change_pct is not None and abs(found.change_pct) > min_change * 100.0
    found.verdict = SIGNIFICANT if found.p < ALPHA and big else NOT_SIGNIFICANT
    return found


# --- rendering -----------------------------------------------------------------------------

def describe_test(min_change: float = DEFAULT_MIN_CHANGE) -> dict[str, Any]:
    """The test as data (JSON) and as the one footer line (`statement`)."""
    statement = (
        "Test: two-sided Mann-Whitney U (normal approximation, tie- and continuity-corrected) "
        "on the per-trial medians (latency: at the smallest size both runs measured; peak: "
        "as throughput at the baseline's peak size, else at each run's own); significant = "
        f"p < {ALPHA:g} and the medians differ by more than {min_change * 100:g}%; "
        f"fewer than {MIN_TRIALS} trials on a side: too few trials.")
    return {"name": "Mann-Whitney U, two-sided",
            "approximation": "normal, with tie correction and continuity correction",
            "observations": "per-trial medians of the one-way time (SizeResult.trial_medians_us)",
            "latency_observations": "trial medians (us) at the smallest size both runs measured",
            "peak_observations": "trial medians as throughput (bit/s) at the baseline's peak "
                                 "size if the run has it, else at each run's own peak size",
            "alpha": ALPHA, "min_change_pct": min_change * 100.0, "min_trials": MIN_TRIALS,
            "significant_if": f"p < {ALPHA:g} and |change of the medians| > "
                              f"{min_change * 100:g}%",
            "statement": statement}


def _baseline_label(table: Sequence[Row]) -> str:
    return next((r.label for r in table if r.baseline), "?")


def _notes(table: Sequence[Row], min_change: float) -> list[str]:
    return [f"Baseline: {_baseline_label(table)}. One-way times; latency = median of the "
            f"per-size medians over sizes <= {LATENCY_MAX_SIZE} B; Mbit/s = 10^6 bit/s; "
            "change: latency + = slower, peak + = faster.",
            describe_test(min_change)["statement"]]


COLUMNS = ("run", "latency us", "p99 us", "peak Mbit/s", "peak at B", "saturation B",
           "n1/2 B", "alpha us", "1/beta Mbit/s", "latency change", "latency verdict",
           "peak change", "peak verdict")
NUMERIC = {1, 2, 3, 4, 5, 6, 7, 8, 9, 11}


def _fmt(value: float | None, spec: str, scale: float = 1.0) -> str:
    return "n/a" if value is None else format(value / scale, spec)


def _cells(row: Row) -> list[str]:
    def change(value: float | None) -> str:
        return "-" if row.baseline else _fmt(value, "+.1f") + ("%" if value is not None else "")

    def verdict(test: Significance | None) -> str:
        return "baseline" if test is None else test.text()

    return [row.label, _fmt(row.latency_us, ".2f"), _fmt(row.latency_p99_us, ".2f"),
            _fmt(row.peak_bps, ".1f", 1e6), str(row.peak_size), _fmt(row.saturation_size, ".0f"),
            _fmt(row.n_half, ".0f"), _fmt(row.alpha_us, ".2f"),
            _fmt(row.bandwidth_bps, ".1f", 1e6), change(row.latency_change_pct),
            verdict(row.latency_test), change(row.peak_change_pct), verdict(row.peak_test)]


def _aligned(header: Sequence[str], body: list[list[str]], numeric: set[int],
             gap: str = "  ") -> list[str]:
    widths = [max(len(r[i]) for r in [list(header), *body]) for i in range(len(header))]
    lines = []
    for cells in [list(header), *body]:
        parts = [c.rjust(w) if i in numeric else c.ljust(w)
                 for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
        lines.append(gap.join(parts).rstrip())
    return lines


def render_table(table: Sequence[Row], min_change: float = DEFAULT_MIN_CHANGE) -> str:
    """Aligned plain text: one line per run, then the notes and the test."""
    lines = _aligned(COLUMNS, [_cells(r) for r in table], NUMERIC)
    return "\n".join([*lines, "", *_notes(table, min_change)]) + "\n"


def render_markdown(table: Sequence[Row], min_change: float = DEFAULT_MIN_CHANGE) -> str:
    """A pipe table, then the notes and the test as a paragraph."""
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    align = ["---:" if i in NUMERIC else "---" for i in range(len(COLUMNS))]
    out = [line(COLUMNS), line(align), *(line(_cells(r)) for r in table)]
    return "\n".join([*out, "", *(f"{n}  " for n in _notes(table, min_change))]).rstrip() + "\n"


CSV_FIELDS = ("label", "baseline", "latency_us", "latency_p99_us", "peak_Mbit_s", "peak_size_B",
              "saturation_size_B", "n_half_B", "alpha_us", "inv_beta_Mbit_s",
              "latency_change_pct", "latency_verdict", "latency_p", "latency_test_size_B",
              "latency_test_change_pct", "peak_change_pct", "peak_verdict", "peak_p",
              "peak_test_size_B", "peak_test_change_pct",
              "latency_mean_us", "latency_variance_us2", "impact_pct")


def _num(value: float | None, scale: float = 1.0) -> str:
    return "" if value is None else format(value / scale, ".10g")


def _test_fields(test: Significance | None) -> list[str]:
    if test is None:
        return ["baseline", "", "", ""]
    return [test.verdict, _num(test.p), _num(test.size), _num(test.change_pct)]


def _csv_record(r: Row) -> list[str]:
    return [r.label, "1" if r.baseline else "0", _num(r.latency_us), _num(r.latency_p99_us),
            _num(r.peak_bps, 1e6), _num(r.peak_size), _num(r.saturation_size), _num(r.n_half),
            _num(r.alpha_us), _num(r.bandwidth_bps, 1e6), _num(r.latency_change_pct),
            *_test_fields(r.latency_test), _num(r.peak_change_pct), *_test_fields(r.peak_test),
            _num(r.latency_mean_us), _num(r.latency_variance), _num(r.impact_pct)]


def render_csv(table: Sequence[Row], min_change: float = DEFAULT_MIN_CHANGE) -> str:
    """Header and one record per run; units in the header names, bare numbers in cells.

    The test is not in the CSV (it would break the table); callers print
    describe_test(min_change)["statement"] elsewhere (the CLI: on stderr).
    """
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    writer.writerows(_csv_record(r) for r in table)
    return buf.getvalue()


def render_json(table: Sequence[Row], min_change: float = DEFAULT_MIN_CHANGE) -> str:
    """{"format", "baseline", "test": {...}, "rows": [row objects]}; SI units as named."""
    doc = {"format": "beoperf.compare", "baseline": _baseline_label(table),
           "test": describe_test(min_change), "rows": [asdict(r) for r in table]}
    return json.dumps(doc, indent=1, allow_nan=False) + "\n"


IMPACT_COLUMNS = ("Configuration", "Latency mean (variance)", "Impact")


def impact_lines(entries: Sequence[tuple[str, float | None, float | None, float | None]],
                 ) -> list[str]:
    """The tuning studies' table: (label, mean, variance, impact % or None for the
    baseline) per row, as 'Default 50.03 (4.31) -' ... 'Combined 21.31 (2.09) 57.40%'."""
    def cells(label: str, mean: float | None, variance: float | None,
              impact: float | None) -> list[str]:
        return [label, f"{_fmt(mean, '.2f')} ({_fmt(variance, '.2f')})",
                "-" if impact is None else f"{impact:.2f}%"]

    return _aligned(IMPACT_COLUMNS, [cells(*e) for e in entries], set(), gap="   ")


def _impact_entry(row: Row) -> tuple[str, float | None, float | None, float | None]:
    impact = None if row.baseline else row.impact_pct
    return row.label, row.latency_mean_us, row.latency_variance, impact


def render_impact(table: Sequence[Row], min_change: float = DEFAULT_MIN_CHANGE) -> str:
    """The tuning-study shape: label, latency mean (variance), impact in % of the baseline."""
    lines = impact_lines([_impact_entry(r) for r in table])
    sizes = sorted({r.latency_size for r in table if r.latency_size is not None})
    size_text = "/".join(str(s) for s in sizes) or "n/a"
    note = (f"Latency: mean and variance (ddof=1) of the per-trial medians of the one-way time "
            f"at {size_text} B (smallest size in common with the baseline), us; impact = "
            f"(baseline mean - mean) / baseline mean; baseline: {_baseline_label(table)}.")
    verdicts = "; ".join(f"{r.label}: {r.latency_test.text()}" for r in table
                         if r.latency_test is not None)
    notes = [note, f"Latency change: {verdicts}." if verdicts else "",
             describe_test(min_change)["statement"]]
    if any(r.latency_mean_us is not None and r.latency_variance is None for r in table):
        notes.append("Variance n/a: the source lacks trial data; its own time is shown as mean.")
    return "\n".join([*lines, "", *(n for n in notes if n)]) + "\n"


RENDERERS = {"table": render_table, "markdown": render_markdown, "csv": render_csv,
             "json": render_json, "impact": render_impact}

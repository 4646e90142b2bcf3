"""Comparing ping-pong runs: one row of figures per configuration, and whether each is
better, worse, no different, or cannot be told apart from the baseline.

The figures of a row are those of `beoperf.analysis.curve` (latency and its p99, peak
throughput and where it is reached, saturation point, n1/2, the Hockney alpha and 1/beta,
and the throughput collapses those figures leave out).  Runs given the same label are
repeated runs of one configuration: one row, whose figures are the medians over its runs.

The verdicts (``beoperf.analysis.effect``, docs/STATISTICS.md) compare like with like:

- **latency**: the median one-way time at one size every run measured: the baseline's
  latency size (the middle small size, see curve.py), or the common size <= 16 B nearest
  to it; lower is better;
- **peak**: each run's highest median throughput over the sizes every run measured (the
  same statistic over the same sizes; where each run reaches it is shown beside it, and
  the sizes' verdicts say where the curves differ); higher is better;
- **every common size**: the median one-way time of each size every run measured, as a
  family (each interval widened for the number of sizes), summed up as "better at 38 of
  124 sizes (64 KiB..8 MiB)".

Each run is one replicate: its figure, that figure's uncertainty inside the run (the
median's interval over its trials, widened by the run's pass autocorrelation), and the
spread of a run's level between runs: from the repeated runs of a configuration when there
are any, else from the runs' history (``sweep.between_runs``: earlier runs of the same
setup, or borrowed from the host's other setups, which is said), else the stated default.

Impact (`render_impact`, the shape of published tuning studies): the mean and variance
(ddof=1) of the trial medians at the latency size, and (baseline mean - mean) / baseline
mean in percent: positive means lower latency.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TypedDict

from beoperf.analysis import effect
from beoperf.analysis.curve import (
    LATENCY_MAX_SIZE,
    Collapse,
    CurveAnalysis,
    analyze_run,
    latency_name,
)
from beoperf.analysis.effect import DEFAULT_MARGIN, Effect, Replicate, Spread
from beoperf.analysis.efficiency import efficiency
from beoperf.model import comparison, jsonvalue, narrow
from beoperf.model.document import Document, DocumentError, JsonObject, JsonValue
from beoperf.model.pingpong import RunResult, SizeResult

HEADLINE_FAMILY = 2  # latency and peak are judged together


class SizeEffect(TypedDict):
    """One common size's verdict: the ratio of its median times and that ratio's interval
    (rounded to 6 digits, as stored)."""

    size: int
    verdict: str
    ratio: float | None
    low: float | None
    high: float | None


def _size_effect_of(o: JsonObject) -> SizeEffect:
    return {"size": narrow.integer_at(o, "size"), "verdict": narrow.text_at(o, "verdict"),
            "ratio": narrow.opt_num_at(o, "ratio"), "low": narrow.opt_num_at(o, "low"),
            "high": narrow.opt_num_at(o, "high")}


@dataclass
class Row:
    """The figures of one configuration (the medians over its runs) and, unless it is the
    baseline, its verdicts against the baseline."""

    label: str
    baseline: bool
    runs: int
    mode: str | None  # of its first run: in stream mode the "latency" is a time per message
    latency_us: float
    latency_p99_us: float | None
    peak_bps: float
    peak_size: int
    saturation_size: int | None
    n_half: float | None
    alpha_us: float | None
    bandwidth_bps: float | None  # 1/beta of the Hockney fit
    latency_size: int | None  # the size the latency verdict compares (every run measured it)
    peak_test_size: int | None  # where the first run's peak over the common sizes is
    peak_baseline_size: int | None  # and the baseline's first run's
    latency_change_pct: float | None  # of the compared latency; + = slower
    peak_change_pct: float | None  # of the compared throughput; + = faster
    latency_test: Effect | None
    peak_test: Effect | None
    sizes_compared: int  # sizes every run of both sides measured
    size_verdicts: dict[str, int] | None  # verdict -> how many of those sizes
    size_effects: list[SizeEffect] = field(default_factory=list)  # per common size
    differs: list[str] = field(default_factory=list)  # settings unlike the baseline's
    latency_mean_us: float | None = None  # trial medians at latency_size (or the source's)
    latency_variance: float | None = None  # us^2, ddof=1; None without trial data
    impact_pct: float | None = None  # (baseline mean - mean) / baseline mean * 100
    collapses: list[Collapse] = field(default_factory=list)
    # the peak against the link (analysis.efficiency; medians over the runs): the link's
    # speed, the peak's share of it and of its goodput limit; or why the link is unknown
    link_bps: float | None = None
    peak_of_link: float | None = None
    peak_of_goodput: float | None = None
    efficiency_unknown: str | None = None

    def efficiency_text(self) -> str:
        """'96.1% (102.0% of goodput)', '96.1%' without the goodput limit, or 'unknown'."""
        if self.peak_of_link is None:
            return "unknown"
        goodput = (f" ({self.peak_of_goodput:.1%} of goodput)"
                   if self.peak_of_goodput is not None else "")
        return f"{self.peak_of_link:.1%}{goodput}"

    def sizes_text(self) -> str:
        """'better at 38 of 124 sizes (65533..8388611 B), cannot tell at 86' (the baseline:
        '-')."""
        if self.size_verdicts is None:
            return "-"
        parts = []
        for verdict, count in self.size_verdicts.items():
            if count:
                where = _span([e["size"] for e in self.size_effects if e["verdict"] == verdict])
                parts.append(f"{verdict} at {count}" + (f" ({where})" if verdict in (
                    effect.BETTER, effect.WORSE) else ""))
        return f"of {self.sizes_compared} sizes: " + ", ".join(parts) if parts else "no size"


def _span(sizes: list[int]) -> str:
    return f"{min(sizes)}..{max(sizes)} B" if len(sizes) > 1 else f"{sizes[0]} B"


@dataclass
class _Group:
    label: str
    runs: list[RunResult]
    analyses: list[CurveAnalysis]


def rows(runs: Sequence[RunResult], baseline_index: int = 0,
         margin: float = DEFAULT_MARGIN, labels: Sequence[str] | None = None) -> list[Row]:
    """One Row per configuration (runs sharing a label are one, in first-seen order),
    compared with the configuration of runs[baseline_index].

    `margin` is a fraction (0.10: a change within +-10% counts as none).  Without
    ``labels`` each run is its own configuration (run.label(), numbered where two agree).
    Every run needs at least one measured size (ValueError otherwise)."""
    if not 0 <= baseline_index < len(runs):
        raise ValueError(f"baseline index {baseline_index} is not among {len(runs)} run(s)")
    names = list(labels) if labels is not None else _own_labels(runs)
    groups = _groups(runs, names)
    base = next(g for g in groups if g.label == names[baseline_index])
    return [_row(g, base, margin) for g in groups]


def _own_labels(runs: Sequence[RunResult]) -> list[str]:
    names = [run.label() for run in runs]
    return [f"{n} #{i + 1}" if names.count(n) > 1 else n for i, n in enumerate(names)]


def _groups(runs: Sequence[RunResult], names: Sequence[str]) -> list[_Group]:
    found: dict[str, _Group] = {}
    for run, name in zip(runs, names, strict=True):
        analysis = analyze_run(run)
        if analysis is None:
            raise ValueError("no message sizes measured")
        group = found.setdefault(name, _Group(name, [], []))
        group.runs.append(run)
        group.analyses.append(analysis)
    return list(found.values())


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _median_int(values: Sequence[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return statistics.median_low(known) if known else None


def _figures(g: _Group, base: _Group, common: Sequence[int]) -> Row:
    """The row of a group's own figures, as the baseline's row (no verdict yet)."""
    a = g.analyses
    lat = latency_size(base, common)
    mean, variance = _mean_variance(g.runs, lat)
    latency, peak = _median([x.latency_us for x in a]), _median([x.peak_bps for x in a])
    peak_at = _median_int([x.peak_size for x in a])
    link, of_link, of_goodput, unknown = _efficiency(g)
    assert latency is not None and peak is not None and peak_at is not None  # measured
    return Row(label=g.label, baseline=True, runs=len(g.runs),
               mode=_text_or_none(g.runs[0].parameters.get("mode")), latency_us=latency,
               latency_p99_us=_median([x.latency_p99_us for x in a]), peak_bps=peak,
               peak_size=peak_at, saturation_size=_median_int([x.saturation_size for x in a]),
               n_half=_median([x.n_half for x in a]),
               alpha_us=_median([x.hockney.alpha_us if x.hockney else None for x in a]),
               bandwidth_bps=_median([x.hockney.bandwidth_bps if x.hockney else None
                                      for x in a]),
               latency_size=lat, peak_test_size=peak_size(g.runs[0], common),
               peak_baseline_size=peak_size(base.runs[0], common), latency_change_pct=None,
               peak_change_pct=None, latency_test=None, peak_test=None,
               sizes_compared=len(common), size_verdicts=None, latency_mean_us=mean,
               latency_variance=variance, collapses=[c for x in a for c in x.collapses],
               link_bps=link, peak_of_link=of_link, peak_of_goodput=of_goodput,
               efficiency_unknown=unknown)


def _efficiency(g: _Group) -> tuple[float | None, float | None, float | None, str | None]:
    """The group's link speed, the peak's shares of it and of its goodput limit (medians
    over its runs), or the first reason a run's link is unknown."""
    found = [efficiency(run, x.peak_bps, x.peak_size) for run, x in zip(g.runs, g.analyses,
                                                                        strict=True)]
    unknown = next((e.unknown for e in found if e.link_bps is None), None)
    if unknown is not None:
        return None, None, None, unknown
    return (_median([e.link_bps for e in found]), _median([e.peak_of_link for e in found]),
            _median([e.peak_of_goodput for e in found]), None)


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _row(g: _Group, base: _Group, margin: float) -> Row:
    common = _common_sizes([*g.runs, *base.runs])
    row = _figures(g, base, common)
    if g is base:
        return row
    lat, mean = row.latency_size, row.latency_mean_us
    prior = spread_of([*g.runs, *base.runs])
    lat_test = (_effect(g.runs, base.runs, lat, prior, HEADLINE_FAMILY, margin, rate=False)
                if _mode(g) == _mode(base) else _unlike_modes(g, base, margin))
    peak_test = _peak_effect(g.runs, base.runs, common, prior, margin)
    per_size = [_effect(g.runs, base.runs, s, prior, len(common), margin, rate=False)
                for s in common]
    base_mean = _mean_variance(base.runs, lat)[0]
    row.baseline, row.differs = False, differences(g.runs[0], base.runs[0])
    row.latency_change_pct, row.peak_change_pct = lat_test.change_pct, peak_test.change_pct
    row.latency_test, row.peak_test = lat_test, peak_test
    row.size_verdicts = effect.tally(per_size)
    row.size_effects = [_size_entry(s, e) for s, e in zip(common, per_size, strict=True)]
    row.impact_pct = ((base_mean - mean) / base_mean * 100.0
                      if base_mean and mean is not None else None)
    return row


def _mode(g: _Group) -> str:
    return str(g.runs[0].parameters.get("mode") or "pingpong")


def _unlike_modes(g: _Group, base: _Group, margin: float) -> Effect:
    """No latency verdict between runs of two modes: a stream's small-message time is a
    time per message (size over its bandwidth, osu_bw's), not a ping-pong's one-way time,
    and a bidir run's is an exchange's."""
    return Effect(effect.CANNOT_TELL, family=HEADLINE_FAMILY, margin=margin,
                  reason=f"not compared: a {_mode(g)} run's {latency_name(_mode(g))} against "
                         f"a {_mode(base)} run's {latency_name(_mode(base))}")


SETTINGS = ("mode", "transport", "sndbuf", "rcvbuf", "nocache", "integrity", "nodelay",
            "busy_poll", "congestion", "client_cpu", "server_cpu")
FACTS = (("host", "hostname"), ("host", "kernel"), ("interface", "mtu"),
         ("socket", "congestion"))


def settings_of(run: RunResult) -> dict[str, object]:
    """What a reader must know to call two runs like or unlike: the parameters that shape
    the figures, the peer, and this end's host, kernel, MTU and congestion control."""
    found: dict[str, object] = {k: run.parameters.get(k) for k in SETTINGS}
    # --streams and --reverse (stream mode): absent in a run of one stream forward
    found["streams"] = run.parameters.get("streams") or 1
    found["reverse"] = bool(run.parameters.get("reverse"))
    # --udp --rate (stream mode): absent in a TCP run
    found["udp_rate"] = run.parameters.get("udp_rate")
    found["peer"] = str(run.meta.get("peer", "")).split(" port ")[0] or None
    for part, key in FACTS:
        section = run.local.get(part) if isinstance(run.local, dict) else None
        found[f"{part}.{key}"] = section.get(key) if isinstance(section, dict) else None
    return found


def differences(run: RunResult, base: RunResult) -> list[str]:
    """'sndbuf 65536 -> 262144', one per setting the first runs of two configurations
    disagree on (imports say nothing of theirs)."""
    if run.source is not None or base.source is not None:
        return []
    mine, theirs = settings_of(run), settings_of(base)
    return [f"{k} {theirs[k]} -> {mine[k]}" for k in mine if mine[k] != theirs[k]]


def _size_entry(size: int, e: Effect) -> SizeEffect:
    return {"size": size, "verdict": e.verdict, "ratio": _round(e.ratio), "low": _round(e.low),
            "high": _round(e.high)}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _common_sizes(runs: Sequence[RunResult]) -> list[int]:
    sets = [{s.size for s in run.sizes} for run in runs]
    return sorted(set.intersection(*sets)) if sets else []


def latency_size(base: _Group, common: Sequence[int]) -> int | None:
    """The size the latency verdict compares: the baseline's latency size when every run
    measured it, else the common size <= 16 B nearest to it (None: there is none)."""
    own = base.analyses[0].latency_size
    if own in common:
        return own
    small = [s for s in common if s <= max(LATENCY_MAX_SIZE, own)]
    return min(small, key=lambda s: (abs(s - own), s)) if small else None


def peak_size(run: RunResult, common: Sequence[int]) -> int | None:
    """The common size of the run's highest median throughput (None: no common size)."""
    if not common:
        return None
    by_size = {s.size: s for s in run.sizes}
    return max(common, key=lambda n: by_size[n].central_bps())


def _peak_effect(runs: Sequence[RunResult], base: Sequence[RunResult], common: Sequence[int],
                 prior: Spread, margin: float) -> Effect:
    """Each run's peak over the common sizes (with the uncertainty of the size it is at)
    against the baseline's."""
    if not common:
        return Effect(effect.CANNOT_TELL, family=HEADLINE_FAMILY, higher_is_better=True,
                      margin=margin, reason="no size that every run measured")

    def reps(group: Sequence[RunResult]) -> list[Replicate]:
        out = []
        for run in group:
            size = peak_size(run, common)
            assert size is not None  # common is not empty
            at = _size(run, size)
            out.append(Replicate(at.central_bps(), within_sd(run, at)))
        return out

    return effect.compare(reps(base), reps(runs), higher_is_better=True, prior=prior,
                          family=HEADLINE_FAMILY, margin=margin)


def _size(run: RunResult, size: int) -> SizeResult:
    return next(s for s in run.sizes if s.size == size)


def within_sd(run: RunResult, size: SizeResult) -> float | None:
    """The standard deviation of log(the size's median) inside its run: from the median's
    order-statistic interval over trials, widened by the run's pass autocorrelation
    (``sweep.interval_inflation``); from the trial medians' spread when the interval is
    missing; None for an import or a size of one trial."""
    if run.source is not None:
        return None
    inflation = jsonvalue.number(run.sweep, "interval_inflation") or 1.0
    band = size.ci95_median_us
    sd = effect.log_sd_from_interval(*band) if band and len(band) == 2 else None
    if sd is None and size.trial_medians_us:
        sd = effect.median_log_sd(size.trial_medians_us)
    return None if sd is None else sd * max(1.0, inflation)


def _replicates(runs: Sequence[RunResult], size: int, rate: bool) -> list[Replicate]:
    out = []
    for run in runs:
        s = _size(run, size)
        value = s.central_bps() if rate else s.central_time_us()
        out.append(Replicate(value, within_sd(run, s)))
    return out


def _effect(runs: Sequence[RunResult], base: Sequence[RunResult], size: int | None,
            prior: Spread, family: int, margin: float, rate: bool) -> Effect:
    if size is None:
        return Effect(effect.CANNOT_TELL, family=family, higher_is_better=rate, margin=margin,
                      reason=f"no size <= {LATENCY_MAX_SIZE} B that every run measured"
                      if not rate else "no size that every run measured")
    return effect.compare(_replicates(base, size, rate), _replicates(runs, size, rate),
                          higher_is_better=rate, prior=prior, family=family, margin=margin)


def spread_of(runs: Sequence[RunResult]) -> Spread:
    """The spread between runs the runs' history gave them (``sweep.between_runs``): their
    own setups' earlier runs (pooled, the degrees of freedom of the best-documented), else
    the spread borrowed from the host's other setups (said so), else the default."""
    found = _between(runs)
    own = [(h.own_sd, h.earlier_runs) for h in found if h.own_sd and h.earlier_runs > 0]
    if own:
        n = sum(k for _, k in own)
        sd = (sum(k * s * s for s, k in own) / n) ** 0.5
        most = max(k for _, k in own)
        return Spread(sd, float(most), f"the history ({most} earlier run"
                      f"{'s' if most != 1 else ''} of the same setup)")
    host = [(h.host_sd, h.host_setups) for h in found if h.host_sd]
    if host:
        sd = max(s for s, _ in host)
        setups = max(k for _, k in host)
        return Spread(sd, float(setups), f"the history, borrowed from {setups} other setup"
                      f"{'s' if setups != 1 else ''} of this host")
    return effect.DEFAULT_SPREAD


@dataclass(frozen=True)
class _History:
    """What a run's history says of the spread between runs (``sweep.between_runs``):
    its own setup's relative SD over how many earlier runs, and the host's other setups'
    (0: none said)."""

    own_sd: float
    earlier_runs: int
    host_sd: float
    host_setups: int


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else 0.0


def _between(runs: Sequence[RunResult]) -> list[_History]:
    out = []
    for run in runs:
        found = (run.sweep or {}).get("between_runs")
        if isinstance(found, dict):
            out.append(_History(_number(found.get("own_relative_sd")),
                                int(_number(found.get("earlier_runs"))),
                                _number(found.get("host_relative_sd")),
                                int(_number(found.get("host_setups"))) or 1))
    return out


def _trials(run: RunResult, size: SizeResult) -> list[float] | None:
    """The trial medians, or None for imports and results without them."""
    if run.source is not None or not size.trial_medians_us:
        return None
    return [float(t) for t in size.trial_medians_us]


def _mean_variance(runs: Sequence[RunResult], size: int | None,
                   ) -> tuple[float | None, float | None]:
    """Mean and variance (ddof=1) of the trial medians at ``size`` over the runs; the
    sources' own times without them."""
    if size is None:
        return None, None
    obs: list[float] = []
    own: list[float] = []
    for run in runs:
        s = _size(run, size)
        trials = _trials(run, s)
        if trials is None:
            own.append(s.central_time_us())
        else:
            obs.extend(trials)
    if not obs:
        return statistics.fmean(own), None
    return statistics.fmean(obs), statistics.variance(obs) if len(obs) > 1 else None


# --- the document --------------------------------------------------------------------------

def statement(margin: float = DEFAULT_MARGIN) -> str:
    """The method in one footer line."""
    return (
        "Verdicts: each run is one replicate of the machine's state; the ratio of the "
        "figures (candidate / baseline) on the log scale, its interval from both runs' own "
        "uncertainty and the spread between runs (repeated runs, else the runs' history, "
        f"else {effect.DEFAULT_BETWEEN_SD:.0%}); latency and peak as a family of "
        f"{HEADLINE_FAMILY}, the sizes as a family of their number (Bonferroni); better or "
        "worse: the interval excludes no change; no difference shown: it lies within "
        f"+-{margin:.0%}; cannot tell: wider.  docs/STATISTICS.md.")


def describe_test(margin: float = DEFAULT_MARGIN) -> JsonObject:
    """The method as data (JSON) and as the one footer line (`statement`)."""
    return {"name": "ratio of run figures, runs as replicates",
            "alpha": effect.ALPHA, "margin": margin,
            "default_between_sd": effect.DEFAULT_BETWEEN_SD,
            "headline_family": HEADLINE_FAMILY, "correction": "Bonferroni",
            "latency": "median one-way time at the baseline's latency size (or the common "
                       f"size <= {LATENCY_MAX_SIZE} B nearest), lower is better",
            "peak": "each run's highest median throughput over the sizes every run "
                    "measured, higher is better",
            "statement": statement(margin)}


@dataclass
class Comparison:
    """A comparison document's body, typed: the baseline's label, the margin, the method
    as data (``test``: its keys differ between versions, its ``statement`` is always
    there) and the rows."""

    baseline: str
    margin: float
    test: JsonObject
    rows: list[Row]

    @property
    def statement(self) -> str:
        """The method's footer line ('' when the file has none)."""
        found = self.test.get("statement")
        return found if isinstance(found, str) else ""

    def body(self) -> JsonObject:
        return {"baseline": self.baseline, "margin": self.margin, "test": self.test,
                "rows": [_row_body(r) for r in self.rows]}

    def to_document(self, meta: JsonObject | None = None) -> Document:
        return Document(comparison.KIND, self.body(), dict(meta or {}))

    @classmethod
    def from_document(cls, doc: Document) -> Comparison:
        """The typed body of a comparison document (DocumentError: another kind, or a
        value of the wrong type)."""
        if doc.kind != comparison.KIND:
            raise DocumentError(f"a beoperf {doc.kind} document, not a comparison")
        b: JsonObject = doc.body
        return cls(narrow.text_at(b, "baseline"), narrow.num_at(b, "margin"),
                   narrow.obj(b.get("test"), "test"),
                   [_row_of(r) for r in narrow.objects_or_empty(b, "rows")])


def _effect_of(value: JsonValue) -> Effect | None:
    return None if value is None else effect.from_dict(narrow.obj(value, "effect"))


def _collapse_of(o: JsonObject) -> Collapse:
    ints = {k: narrow.integer_at(o, k) for k in ("first_size", "last_size", "points",
                                               "reference_size", "lowest_size")}
    return Collapse(**ints, factor=narrow.num_at(o, "factor"),
                    reference_bps=narrow.num_at(o, "reference_bps"),
                    lowest_bps=narrow.num_at(o, "lowest_bps"))


def _row_of(o: JsonObject) -> Row:
    """A stored row as a Row (every value narrowed to its field's type)."""
    verdicts = o.get("size_verdicts")
    num, size = narrow.opt_num_at, narrow.opt_int_at
    return Row(label=narrow.text_at(o, "label"), baseline=narrow.flag_at(o, "baseline"),
               runs=narrow.integer_at(o, "runs"), mode=narrow.opt_text_at(o, "mode"),
               latency_us=narrow.num_at(o, "latency_us"),
               peak_bps=narrow.num_at(o, "peak_bps"),
               peak_size=narrow.integer_at(o, "peak_size"),
               latency_test=_effect_of(o.get("latency_test")),
               peak_test=_effect_of(o.get("peak_test")),
               sizes_compared=narrow.integer_at(o, "sizes_compared"),
               size_verdicts=(None if verdicts is None
                              else narrow.int_map_or_empty(o, "size_verdicts")),
               size_effects=[_size_effect_of(e)
                             for e in narrow.objects_or_empty(o, "size_effects")],
               differs=narrow.texts_or_empty(o, "differs"),
               collapses=[_collapse_of(c) for c in narrow.objects_or_empty(o, "collapses")],
               latency_p99_us=num(o, "latency_p99_us"), n_half=num(o, "n_half"),
               alpha_us=num(o, "alpha_us"), bandwidth_bps=num(o, "bandwidth_bps"),
               latency_change_pct=num(o, "latency_change_pct"),
               peak_change_pct=num(o, "peak_change_pct"),
               latency_mean_us=num(o, "latency_mean_us"),
               latency_variance=num(o, "latency_variance"), impact_pct=num(o, "impact_pct"),
               saturation_size=size(o, "saturation_size"),
               latency_size=size(o, "latency_size"), peak_test_size=size(o, "peak_test_size"),
               peak_baseline_size=size(o, "peak_baseline_size"),
               link_bps=num(o, "link_bps"), peak_of_link=num(o, "peak_of_link"),
               peak_of_goodput=num(o, "peak_of_goodput"),
               efficiency_unknown=narrow.opt_text_at(o, "efficiency_unknown"))


def document(table: Sequence[Row], margin: float = DEFAULT_MARGIN,
             meta: JsonObject | None = None) -> Document:
    """The comparison as a document (kind "comparison"): the rows and the method used."""
    return Comparison(next((r.label for r in table if r.baseline), "?"), margin,
                      describe_test(margin), list(table)).to_document(meta)


def rows_of(doc: Document) -> list[Row]:
    """The typed rows of a comparison document (as `rows` made them)."""
    return Comparison.from_document(doc).rows


# a row's fields that version 3 added, left out when unknown so that a version 1 or 2 body
# read typed gives back the stored one
_OPTIONAL_ROW = ("link_bps", "peak_of_link", "peak_of_goodput", "efficiency_unknown")


def _row_body(row: Row) -> JsonObject:
    out: JsonObject = asdict(row)
    for key in _OPTIONAL_ROW:
        if out.get(key) is None:
            del out[key]
    return out

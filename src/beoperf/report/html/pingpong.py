"""A ping-pong run in the HTML report: the headline figures with their spread, the fitted
model, the conditions, the three graphs (throughput, signature, saturation) and every
size's statistics.

The figures are those of the curve analysis (`beoperf.analysis.curve`, recomputed from
the measured sizes as every beoperf reader does); the latency and the peak are one
size's stored median each, and are marked with where they are stored.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from beoperf.analysis import intervals
from beoperf.analysis.curve import CurveAnalysis, Fit, analyze_run, latency_name, time_name
from beoperf.analysis.efficiency import Efficiency, efficiency
from beoperf.analysis.pingpong import interval_of, within_run
from beoperf.model import jsonvalue
from beoperf.model.document import Document, JsonObject
from beoperf.model.pingpong import DROPPED, RunResult, SizeResult
from beoperf.report import renderer
from beoperf.report.html import svg, tails, udp, under_load
from beoperf.report.html.markup import (
    Markup,
    details,
    esc,
    figure,
    heading,
    join,
    num,
    pairs,
    para,
    table,
    text_of,
)
from beoperf.report.pingpong import (
    between_runs_text,
    direction_text,
    history_text,
    interval_text,
    streams_lines,
)
from beoperf.units import format_rate, format_size, size_tick

GBIT_FROM_BPS = 1e9


def run_of(doc: Document) -> RunResult:
    return RunResult.from_document(doc)


def time_text(us: float) -> str:
    """A time in microseconds in the unit that fits: 500 ns, 20 µs, 1.5 ms, 2 s."""
    for unit, scale in (("s", 1e6), ("ms", 1e3), ("µs", 1.0)):
        if abs(us) >= scale:
            return f"{us / scale:.4g} {unit}"
    return f"{us * 1e3:.4g} ns"


def _key(i: int, path: str) -> str:
    return f"body.sizes.{i}.{path}"


@renderer("pingpong", "title")
def title(doc: Document, **_options: Any) -> str:
    run = run_of(doc)
    if run.source:
        return f"Imported result {run.label()} ({run.source.get('format', 'other tool')})"
    p = run.parameters
    host = run.local.get("host")
    if isinstance(host, str):  # MPI: rank 0's host to rank 1's
        here, peer = f"rank 0 on {host}", f"rank 1 on {run.remote.get('host', '?')}"
    else:
        here = str(jsonvalue.section(run.local, "host").get("hostname")
                   or doc.meta.get("host", "?"))
        peer = str(doc.meta.get("peer", "?")).split(" port ")[0]
    mtu = jsonvalue.section(run.local, "interface").get("mtu")
    streams = direction_text(run)
    if p.get("udp_rate") is not None:
        streams = f"UDP at {format_rate(float(p['udp_rate']))}"  # type: ignore[arg-type]
    return (f"Ping-pong {p.get('mode', '?')} over {p.get('transport', 'tcp')}: {here} to "
            f"{peer}" + (f", MTU {mtu}" if mtu else "") + (f", {streams}" if streams else ""))


def _analysis(run: RunResult) -> CurveAnalysis | None:
    try:
        return analyze_run(run) if run.sizes else None
    except Exception:  # noqa: BLE001 - shown as "no analysis", never a lost section
        return None


# --------------------------------------------------------------------------- figures


def headline(run: RunResult, a: CurveAnalysis) -> Markup:
    """Latency, peak, saturation, n1/2: value, spread, where it was measured."""
    i_lat = next(i for i, s in enumerate(run.sizes) if s.size == a.latency_size)
    lat = run.sizes[i_lat]
    p99 = lat.time_us.get("p99")
    i_peak = next(i for i, s in enumerate(run.sizes) if s.size == a.peak_size)
    mode = jsonvalue.text(run.parameters, "mode")
    rows = [
        (f"{latency_name(mode)} ({'' if mode == 'stream' else 'one-way, '}median)",
         num(lat.time_us.get("median"), time_text(a.latency_us), _key(i_lat, "time_us.median")),
         join([esc(f"{_for_next_run(interval_text(run, lat, '±', 'µs'))}; "),
               esc("p99 "), num(p99, time_text(p99) if p99 is not None else "n/a",
                                _key(i_lat, "time_us.p99")),
               esc(f"; {lat.trials} trials, {lat.samples} samples")]),
         a.latency_method),
        ("peak throughput", num(run.sizes[i_peak].throughput_bps.get("from_median"),
                                format_rate(a.peak_bps),
                                _key(i_peak, "throughput_bps.from_median")),
         _spread(run.sizes[i_peak], time_name(mode)),
         f"at {format_size(a.peak_size)} ({a.peak_size} B), "
                                     "from the median time"),
        ("saturation point", format_size(a.saturation_size) if a.saturation_size else
         "not reached", "-", _saturation_words(a)),
        ("n1/2", format_size(a.n_half) if a.n_half else "-", "-",
         "size where throughput first reaches half the peak"),
    ]
    if a.peak_size > 0:
        rows.append(_efficiency_row(efficiency(run, a.peak_bps, a.peak_size)))
    return table(["figure", "value", "spread", "how"], rows, cls="headline",
                 caption="Headline figures (sizes outside any throughput collapse)")


def _efficiency_row(e: Efficiency) -> tuple[str, Markup, str, str]:
    """The peak as a share of the link and of its goodput limit (analysis.efficiency), or
    "unknown" and why."""
    if e.peak_of_link is None or e.link_bps is None:
        return "efficiency", num(None, "unknown"), "-", e.unknown or "-"
    shown = f"{e.peak_of_link:.1%} of the {format_rate(e.link_bps)} link"
    goodput = (f"{e.peak_of_goodput:.1%} of the goodput limit "
               f"{format_rate(e.goodput_limit_bps)} ({e.payload_bytes} B of TCP payload per "
               f"{e.frame_bytes} B of line time)"
               if e.peak_of_goodput is not None and e.goodput_limit_bps is not None else
               f"goodput limit unknown: {e.goodput_unknown}")
    if e.best_trial_of_link is not None:
        goodput += f"; best trial (NetPIPE's figure) {e.best_trial_of_link:.1%} of the link"
    how = f"link speed from {e.link_source}" + (f"; {e.link_note}" if e.link_note else "")
    if e.peak_of_link > 1:
        how += "; above the link's speed: a shaper's burst, or a link speed below the real one"
    return "efficiency", num(e.peak_of_link, shown), goodput, how


def _for_next_run(text: str) -> str:
    return text if text.startswith("no interval") else f"95% for a next run {text}"


def _spread(s: SizeResult, what: str = "one-way time") -> str:
    """The time's min..p90 at this size (``what``: its name in the run's mode), and the
    throughputs they give (the mode's factor kept: throughput x time is the same for every
    time of one size)."""
    lo, hi = s.time_us.get("min"), s.time_us.get("p90")
    if not (lo and hi):
        return "-"
    bits_us = s.central_bps() * s.central_time_us()
    return (f"{what} min..p90 {time_text(lo)}..{time_text(hi)} "
            f"({format_rate(bits_us / hi)}..{format_rate(bits_us / lo)})")


def _saturation_words(a: CurveAnalysis) -> str:
    if a.saturation_interval:
        lo, hi = a.saturation_interval
        return (f"time grows linearly from here on (local slope >= 0.9); interval "
                f"{format_size(lo)}..{format_size(hi)}")
    return "local slope d log t / d log n stays below 0.9 at the largest sizes"


def _fit_row(label: str, f: Fit) -> list[Any]:
    """A fit's row; a piece whose line meets 0 B below zero shows no alpha: that is an
    intercept of a line fitted far from 0 B, not a time (issue 25: "-2.27 ms")."""
    alpha = num(f.alpha_us, time_text(f.alpha_us)) if f.alpha_us > 0 else \
        "n/a (intercept below 0)"
    return [label, f"{format_size(f.first_size)}..{format_size(f.last_size)}", f.points,
            alpha,
            num(f.bandwidth_bps, format_rate(f.bandwidth_bps) if f.bandwidth_bps else
                "time does not grow"), num(f.r2, f"{f.r2:.4f}")]


def model_table(a: CurveAnalysis) -> Markup:
    """The Hockney fit and the pieces of the piecewise one (what `predict` uses); a fit
    that is not physical is "no model" with the reason, never a figure."""
    rows = [_fit_row("Hockney (all sizes)", a.hockney)] if a.hockney else []
    rows += [_fit_row(f"piece {k}", f) for k, f in enumerate(a.pieces, 1)]
    note = (f"protocol thresholds at {', '.join(format_size(t) for t in a.thresholds)}"
            if a.thresholds else "no threshold: one piece fits" if a.hockney else
            "no threshold")
    missing = [f"No model over all sizes: the fit t = alpha + n / bandwidth is not "
               f"physical: {a.model_problem}." if a.hockney is None and a.model_problem
               else None,
               f"No piecewise model: {a.pieces_problem}." if a.pieces_problem else None]
    return join([*(para(m, "none") for m in missing if m),
                 table(["model t(n) = alpha + n / bandwidth", "sizes", "points",
                        "alpha (at 0 B)", "1/beta", "R²"], rows, numeric=[2, 3, 4, 5],
                       caption="Fitted model (least squares on relative error)"),
                 para(f"{note} (segmented regression, pieces chosen by BIC).", "none")])


def conditions(run: RunResult, doc: Document) -> Markup:
    """What was measured where: both ends, the path, the parameters, the clock."""
    p, sweep = run.parameters, run.sweep or {}
    precision = jsonvalue.number(p, "precision")
    local, remote = run.local, run.remote
    clock = doc.meta.get("clock") or {}
    return pairs([
        ("mode", f"{p.get('mode')} over {p.get('transport', 'tcp')}"),
        ("streams", "; ".join(" ".join(line.split()[1:]) if i == 0 else " ".join(line.split())
                              for i, line in enumerate(streams_lines(run))) or None),
        ("peer", doc.meta.get("peer")),
        ("this end", _end(local)), ("other end", _end(remote)),
        ("sizes", f"{len(run.sizes)} ({format_size(run.sizes[0].size)}.."
                  f"{format_size(run.sizes[-1].size)})" if run.sizes else "none"),
        ("precision asked", f"±{precision * 100:g}% (95% CI of the median)"
         if precision is not None else None),
        ("options", ", ".join(f"{k}={text_of(p[k])}" for k in
                              ("sndbuf", "rcvbuf", "nocache", "integrity", "busy_poll")
                              if p.get(k)) or "defaults"),
        ("sweep", f"{sweep.get('passes')} passes in {sweep.get('elapsed_s')} s (budget "
                  f"{text_of(sweep.get('time_budget_s'))} s); interval inflation "
                  f"{sweep.get('interval_inflation')}" if sweep else None),
        ("spread between runs", between_runs_text(run, "±")),
        ("history", history_text(run)),
        ("clock", f"{clock.get('source')}, overhead {clock.get('overhead_ns')} ns"
         if clock else None),
        ("source", text_of(run.source) if run.source else None),
    ])


def _rank(end: JsonObject) -> str:
    """An MPI rank's end: where it ran and what carried its messages."""
    carried = jsonvalue.section(end, "transport")
    via = ", ".join(f"{k} {'/'.join(map(str, v))}" for k, v in carried.items()
                    if k != "how" and isinstance(v, list) and v)
    return "; ".join(x for x in (
        f"rank {end.get('rank')} on {end.get('host')}",
        f"cpus {text_of(end.get('cpus'))}" if end.get("cpus") is not None else None,
        f"carried by {via}" if via else None) if x)


def _end(end: JsonObject) -> str | None:
    if isinstance(end.get("host"), str):  # an MPI rank (transport mpi)
        return _rank(end)
    host, iface, sock = (jsonvalue.section(end, k) for k in ("host", "interface", "socket"))
    if not (host or iface or sock):
        return None
    parts = [host.get("hostname"), host.get("kernel"), host.get("cpu_model")]
    if iface:
        parts.append(f"interface {iface.get('name')} ({iface.get('driver') or 'no driver'}, "
                     f"MTU {iface.get('mtu')}, {iface.get('speed_mbps') or '?'} Mbit/s)")
    if sock:
        parts.append(f"socket buffers {sock.get('sndbuf')}/{sock.get('rcvbuf')} B granted, "
                     f"MSS {sock.get('mss')}, nodelay {text_of(sock.get('nodelay'))}"
                     + (f", congestion control {sock['congestion']}"
                        if sock.get("congestion") else ""))
    return "; ".join(str(x) for x in parts if x)


# --------------------------------------------------------------------------- graphs


def _edge(rows: list[SizeResult], statistic: str) -> list[float]:
    """One edge of the band (min or p90) per size; 0 where a size has none."""
    return [s.time_us.get(statistic) or 0.0 for s in rows]


class _Data:
    """The plotted arrays of a run (sizes with a positive time), in plot units."""

    def __init__(self, run: RunResult, a: CurveAnalysis | None) -> None:
        self.idx = [i for i, s in enumerate(run.sizes) if s.size > 0 and s.central_time_us() > 0]
        self.rows = [run.sizes[i] for i in self.idx]
        self.sizes = [float(s.size) for s in self.rows]
        self.time = [s.central_time_us() for s in self.rows]
        self.bps = [s.central_bps() for s in self.rows]
        top = max(self.bps, default=0.0)
        self.unit, self.scale = ("Gbit/s", 1e9) if top >= GBIT_FROM_BPS else ("Mbit/s", 1e6)
        self.a = a
        self.low, self.high = _edge(self.rows, "min"), _edge(self.rows, "p90")  # the band
        self.band = all(t > 0 for t in self.low + self.high)
        self.factor = [b * t for b, t in zip(self.bps, self.time, strict=True)]  # bit/s * us
        mode = jsonvalue.text(run.parameters, "mode")  # stream: per message, never a latency
        self.what, self.figure = time_name(mode), latency_name(mode)
        self.per = "per message" if mode == "stream" else "one-way"

    def thr(self, k: int, t_us: float) -> float:
        """Throughput (plot unit) of point k at another one-way time."""
        return self.factor[k] / t_us / self.scale

    def tip(self, k: int) -> str:
        """Hover text: size, throughput, one-way time, spread, trials, convergence."""
        s = self.rows[k]
        spread = (f", min..p90 {time_text(self.low[k])}..{time_text(self.high[k])}"
                  if self.band else "")
        late = ", NOT converged" if not s.converged else ""
        return (f"{size_tick(s.size)} B: {format_rate(self.bps[k])}; {self.per} "
                f"{time_text(self.time[k])}{spread} ({s.trials} trials{late})")

    def keys(self, path: str) -> list[str]:
        return [_key(i, path) for i in self.idx]

    def collapse_spans(self, in_time: bool) -> list[svg.Span]:
        """The collapses shaded red, the dips (beoperf.analysis.curve) orange."""
        out = []
        for c in (self.a.collapses if self.a else []):
            out += self._span(c.first_size, c.last_size, in_time, 1.15 if in_time else 1.3,
                              f"throughput collapse 1/{c.factor:.0f}", "span")
        for d in (self.a.dips if self.a else []):
            out += self._span(d.first_size, d.last_size, in_time, 1.05 if in_time else 1.1,
                              f"dip {d.depth:.0%}", "event")
        return out

    def _span(self, first: int, last: int, in_time: bool, pad: float, label: str,
              cls: str) -> list[svg.Span]:
        inside = [k for k, s in enumerate(self.sizes) if first <= s <= last]
        if not inside:
            return []
        xs = [self.time[k] for k in inside] if in_time else [self.sizes[k] for k in inside]
        return [svg.Span(min(xs) / pad, max(xs) * pad, label, cls)]

    def saturation_mark(self, x_of: Callable[[int], float],
                        y_of: Callable[[int], float]) -> list[tuple[float, float, str]]:
        sat = self.a.saturation_size if self.a else None
        for k, s in enumerate(self.sizes):
            if sat is not None and s == sat:
                return [(x_of(k), y_of(k), f"saturation point {format_size(sat)} ({sat} B)")]
        return []


def _size_axis(d: _Data) -> svg.Axis:
    lo, hi = svg.padded(min(d.sizes), max(d.sizes), True)
    return svg.Axis("message size (bytes; K = 1024)", lo, hi, log=True, base2=True,
                    tick_text=size_tick)


def _thr_axis(d: _Data) -> svg.Axis:
    values = [b / d.scale for b in d.bps]
    if d.band:
        values += [d.thr(k, t) for k, t in enumerate(d.low)]
    top = max(values, default=1.0) * 1.05 or 1.0
    power = "9" if d.unit == "Gbit/s" else "6"
    return svg.Axis(f"throughput ({d.unit}, 10^{power} bit/s)", 0.0, top,
                    tick_text=lambda v: f"{v:g}")


def _time_axis(d: _Data) -> svg.Axis:
    lows = d.low if d.band else d.time
    highs = d.high if d.band else d.time
    lo, hi = svg.padded(min(lows), max(highs), True)
    return svg.Axis(d.what, lo, hi, log=True, tick_text=time_text)


def throughput_chart(d: _Data) -> Markup:
    y = [b / d.scale for b in d.bps]
    bands = []
    if d.band:
        fast = [(d.sizes[k], d.thr(k, t)) for k, t in enumerate(d.low)]
        slow = [(d.sizes[k], d.thr(k, t)) for k, t in enumerate(d.high)]
        bands = [fast + slow[::-1]]
    line = svg.Line("median", d.sizes, y, [d.tip(k) for k in range(len(y))],
                    keys=d.keys("throughput_bps.from_median"), raw=d.bps, bands=bands,
                    marks=d.saturation_mark(lambda k: d.sizes[k], lambda k: y[k]))
    return svg.chart("Throughput against message size", _size_axis(d), _thr_axis(d), [line],
                     d.collapse_spans(False))


def signature_chart(d: _Data) -> Markup:
    y = [b / d.scale for b in d.bps]
    bands = []
    if d.band:
        fast = [(t, d.thr(k, t)) for k, t in enumerate(d.low)]
        slow = [(t, d.thr(k, t)) for k, t in enumerate(d.high)]
        bands = [fast + slow[::-1]]
    line = svg.Line("median", d.time, y, [d.tip(k) for k in range(len(y))],
                    keys=d.keys("throughput_bps.from_median"), raw=d.bps, bands=bands,
                    marks=d.saturation_mark(lambda k: d.time[k], lambda k: y[k]))
    first = "the smallest size" if d.figure != "latency" else "latency"
    return svg.chart(f"Signature: throughput against {d.what} (first point = {first})",
                     _time_axis(d), _thr_axis(d), [line], d.collapse_spans(True))


def saturation_chart(d: _Data) -> Markup:
    bands = []
    if d.band:
        bands = [list(zip(d.sizes, d.low, strict=True))
                 + list(zip(d.sizes, d.high, strict=True))[::-1]]
    line = svg.Line("median", d.sizes, d.time, [d.tip(k) for k in range(len(d.time))],
                    keys=d.keys("time_us.median"), raw=d.time, bands=bands,
                    marks=d.saturation_mark(lambda k: d.sizes[k], lambda k: d.time[k]))
    lines = [line]
    model = _model_line(d)
    if model is not None:
        lines.append(model)
    return svg.chart(f"Saturation: {d.what} against message size", _size_axis(d),
                     _time_axis(d), lines, d.collapse_spans(False))


def _model_line(d: _Data) -> svg.Line | None:
    """The fitted model (piecewise when it has pieces) at the measured sizes, dashed."""
    a = d.a
    fits = (a.pieces or ([a.hockney] if a.hockney else [])) if a is not None else []
    if not fits:
        return None  # no model: nothing to draw (model_table says why)
    xs, ys, tips = [], [], []
    for s in d.sizes:
        f = next((f for f in fits if f.first_size <= s <= f.last_size), None)
        if f is None:
            continue
        t = f.alpha_us + f.beta_us_per_byte * s
        if t > 0:
            xs.append(s)
            ys.append(t)
            tips.append(f"model at {format_size(s)}: {time_text(t)} (alpha "
                        f"{time_text(f.alpha_us)}, piece {format_size(f.first_size)}.."
                        f"{format_size(f.last_size)})")
    if not xs:
        return None
    return svg.Line("fitted model", xs, ys, tips, color=1, dashed=True)


def graphs(run: RunResult, a: CurveAnalysis | None, anchor: str) -> Markup:
    d = _Data(run, a)
    if len(d.sizes) < 2:
        return para("Too few sizes to draw (fewer than two with a positive time).", "none")
    statistic = (f"median {d.what} (median of the trial medians)"
                 if all(s.time_us.get("median") is not None for s in d.rows)
                 else "the source's own time statistic (import)")
    band = f"shaded band: {d.what} from the minimum to the 90th percentile; " \
        if d.band else "no spread in this result (the source lacks it); "
    cond = (f"mode {run.parameters.get('mode')} over {run.parameters.get('transport', 'tcp')}"
            f", {len(d.sizes)} sizes, peer {run.meta.get('peer', '?')}")
    text = esc(f"Line: {statistic}; {band}ring: saturation point; throughput in SI units "
               f"({d.unit}). Conditions: {cond}.")

    def caption(model: bool) -> Markup:
        lines = [svg.Line("median (hover a point for its values)", [], [], [])]
        lines += [svg.Line("fitted model (piecewise)", [], [], [], color=1)] if model else []
        extra = [("bandsw", "min..p90")] if d.band else []
        extra += [("spansw", "throughput collapse")] if a is not None and a.collapses else []
        extra += [("eventsw", "throughput dip (beyond the intervals)")] \
            if a is not None and a.dips else []
        return join([svg.legend(lines, extra), text])

    return join([figure(throughput_chart(d), caption(False), f"{anchor}-throughput",
                        "throughput"),
                 figure(signature_chart(d), caption(False), f"{anchor}-signature", "signature"),
                 figure(saturation_chart(d), caption(True), f"{anchor}-saturation",
                        "saturation")])


MAX_SIZE_ROWS = 1000  # a crafted run of 10^5 sizes must not make a 100 MB page


def size_table(run: RunResult) -> Markup:
    rows, classes = [], []
    for i, s in enumerate(run.sizes[:MAX_SIZE_ROWS]):
        t = s.time_us
        rows.append([num(s.size, str(s.size), _key(i, "size")), s.samples, s.trials,
                     num(t.get("median"), _us(t.get("median")), _key(i, "time_us.median"),
                         unit="µs"),
                     _interval_cell(s),
                     intervals.precision_text(t.get("median"), within_run(s), s.trials, "±")
                     or "-",
                     _us(t.get("min")), _us(t.get("p90")), _us(t.get("p99")),
                     num(s.throughput_bps.get("from_median"),
                         _mbps(s.throughput_bps.get("from_median")),
                         _key(i, "throughput_bps.from_median"), unit="Mbit/s"),
                     "yes" if s.converged else "no", s.corrupt])
        classes.append(None if s.converged and not s.corrupt else "warn")
    more = len(run.sizes) - len(rows)
    title = (f"Every size ({len(rows)}): times in µs, throughput in Mbit/s" if not more else
             f"The first {len(rows)} of {len(run.sizes)} sizes (the document has them all): "
             "times in µs, throughput in Mbit/s")
    return details(title,
                   table(["size B", "samples", "trials", "median", "95% for a next run",
                          "this run", "min", "p90", "p99", "Mbit/s", "converged", "corrupt"],
                         rows, numeric=range(0, 10), row_classes=classes, cls="sizes"))


def _interval_cell(s: SizeResult) -> str:
    """A size's interval for a next run: low..high, "not measured precisely (n trials,
    spread xS)" when wider than its median, or why it has none."""
    median, ci = s.time_us.get("median"), interval_of(s)
    if ci is None or median is None:
        if s.interval_note and DROPPED in s.interval_note:
            return "none: the file's bound was <= 0"  # (the whole note: the headline, JSON)
        return f"- ({s.interval_note})" if s.interval_note else "-"
    if intervals.imprecise(float(median), ci[0], ci[1]):
        return intervals.not_precise_text(s.trials, ci[0], ci[1])
    return f"{_us(ci[0])}..{_us(ci[1])}"


def _g4(v: float | None) -> str:
    """Four significant digits, never in exponent form (12,590 rather than 1.259e+04)."""
    if v is None or not math.isfinite(v):
        return "-"
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"


def _us(v: float | None) -> str:
    return _g4(v)


def _mbps(v: float | None) -> str:
    return "-" if v is None else _g4(v / 1e6)


@renderer("pingpong", "html")
def html(doc: Document, *, anchor: str = "run", **_options: Any) -> str:
    """The section body of one run."""
    run = run_of(doc)
    if run.parameters.get("udp_rate") is not None:  # --udp: goodput, loss and jitter
        return join([udp.headline(run), heading("Conditions"), conditions(run, doc),
                     udp.size_table(run)])
    a = _analysis(run)
    parts = [under_load.answer(run)]
    if a is not None:
        parts += [headline(run, a), model_table(a)]
    else:
        parts.append(para("No analysis: the run has no usable sizes.", "none"))
    parts += [heading("Conditions"), conditions(run, doc), heading("Graphs"),
              graphs(run, a, anchor),
              tails.section(run, a.latency_size if a is not None else None, anchor),
              under_load.section(run, anchor), size_table(run)]
    return join(parts)


"""Renderers of a ping-pong document: the summary a sweep prints, and NetPIPE's np.out.

The summary opens with the answer (what is wrong and what to do: beoperf.report.answer),
then the figures of the curve analysis (the same `compare` shows): the latency (in stream
mode the time per message) with its interval for a next run and the interval's two parts
(this run's own spread, and the spread between runs with where it came from), its p99,
the peak, saturation, n1/2 and the fitted model (or "no model" and why), and where the
history of earlier runs is.
"""

from __future__ import annotations

import csv
import io
import re
from typing import Any

from beoperf.analysis import effect, intervals, tails, under_load
from beoperf.analysis.curve import CurveAnalysis, analyze_run, latency_name
from beoperf.analysis.efficiency import efficiency
from beoperf.analysis.efficiency import text as efficiency_text
from beoperf.analysis.mpi import protocol_switch
from beoperf.analysis.pingpong import (
    BetweenRuns,
    Summary,
    between_runs,
    interval_of,
    precision_shortfall,
    size_text,
    summary,
    within_run,
)
from beoperf.analysis.stats import MIN_CI_SAMPLES
from beoperf.model import jsonvalue
from beoperf.model.document import Document
from beoperf.model.netpipe import netpipe_lines
from beoperf.model.pingpong import RunResult, SizeResult
from beoperf.report import conditions, renderer, udp
from beoperf.report.answer import (
    PRECISION,
    Level,
    Line,
    answer,
    from_strings,
    lines_of,
    plural,
    text_block,
)
from beoperf.report.tables import aligned


def run_of(doc: Document | RunResult) -> RunResult:
    return doc if isinstance(doc, RunResult) else RunResult.from_document(doc)


@renderer("pingpong", "text")
def text(doc: Document | RunResult, **_options: Any) -> str:
    """The summary of a run, one line per figure."""
    run = run_of(doc)
    s = summary(run)
    mode = run.parameters["mode"]
    lines = [f"beoperf pingpong: {run.meta.get('peer', '?')}, mode {mode}, "
             f"{s['sizes_measured']} of {run.parameters.get('sizes', len(run.sizes))} sizes "
             f"in {jsonvalue.number(run.meta, 'duration_s') or 0.0:.1f} s ({run.status})"]
    lines += text_block(lines_of(doc if isinstance(doc, Document) else run.to_document()),
                        "  ")
    lines += streams_lines(run, s.get("peak_size"))
    lines += under_load_lines(run)
    if udp.is_udp(run):  # datagrams at a rate: goodput, loss and jitter, not a curve
        lines += udp.text_lines(run)
    elif "latency_size" in s:
        lines += _latency_lines(run, s)
        lines.append(f"  throughput {s['peak_throughput_bps'] / 1e6:.2f} Mbit/s peak at "
                     f"{s['peak_size']} B (from the median time)" if s["peak_size"] else
                     "  throughput none: empty messages (0 B) carry no payload")
        if s["peak_size"]:
            lines.append("  efficiency " + efficiency_text(
                efficiency(run, s["peak_throughput_bps"], s["peak_size"])))
        lines += analysis_lines(run)
        switch = protocol_switch(run) if len(run.sizes) >= 3 else None
        if switch is not None:
            lines.append(f"  protocol   {switch.text()}")
    where = history_text(run)
    if where:
        lines.append(f"  history    {where}")
    lines += conditions.text_lines(run.meta)
    return "\n".join(lines) + "\n"


def under_load_lines(run: RunResult) -> list[str]:
    """--under-load: the answer (the deepest percentile both ways at the smallest size),
    the load's throughput, then per size the median and tails without the load and with
    it, and their ratio; none for a run without it."""
    if run.under_load is None:
        return []
    said = under_load.headline(run)
    lines = [f"  under load {said or 'no size was measured both ways'}",
             f"  load       {under_load.load_text(run)}"]
    status = run.under_load.get("status")
    if status != "complete":
        lines.append(f"             (the loaded sweep {status}: "
                     f"{run.under_load.get('status_reason') or 'no reason given'})")
    shown = ("median", *under_load.COMPARED[1:])
    verdicts = under_load.median_effects(run)
    body = [[f"{p.size} B", verdicts[p.size].verdict if p.size in verdicts else "-",
             *[_both(p, name) for name in shown]] for p in under_load.pairs(run)]
    if body:
        header = ["size", "median under load", *[f"{name}: idle -> load" for name in shown]]
        lines += ["    " + line for line in aligned(header, body, set(range(2, len(header))))]
        lines += [f"             (one-way times; n/a (n samples) where a side has too few "
                  f"for it: a percentile p needs {tails.MIN_BEYOND}/(1-p) samples;",
                  f"             median under load: compare's verdict on the median, "
                  f"+-{effect.DEFAULT_MARGIN:.0%} margin, every size at once)"]
    return lines


def _both(pair: under_load.Pair, name: str) -> str:
    """A figure idle and under load, and their ratio: "19.4 us -> 36.2 us x1.87"."""
    cells = []
    for loaded in (False, True):
        value = pair.value(name, loaded)
        side = pair.loaded if loaded else pair.idle
        cells.append(under_load.time_text(value) if value is not None else
                     f"n/a ({tails.samples_of(side.tail):,})")
    ratio = pair.ratio(name)
    return f"{cells[0]} -> {cells[1]}" + (f" x{ratio:.3g}" if ratio is not None else "")


@renderer("pingpong", "csv")
def csv_text(doc: Document | RunResult, **_options: Any) -> str:
    """One row per size and phase ("idle"; "load" under --under-load): samples, median
    and the tail percentiles (us; empty below the rule, with the sample count beside).
    A UDP run (--udp): one row per size of its figures (report.udp)."""
    run = run_of(doc)
    if udp.is_udp(run):
        return udp.csv_text(run)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["phase", "size_bytes", "samples", "median_us",
                     *[f"{name}_us" for name, _p in tails.PERCENTILES]])
    for phase, sizes in (("idle", run.sizes), ("load", run.loaded_sizes())):
        for z in sizes:
            median = z.time_us.get("median")
            writer.writerow([phase, z.size, tails.samples_of(z.tail) or z.samples,
                             "" if median is None else f"{median:.6g}",
                             *[_csv_value(tails.value_of(z.tail, name))
                               for name, _p in tails.PERCENTILES]])
    return out.getvalue()


def _csv_value(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


def direction_text(run: RunResult) -> str | None:
    """'4 streams, forward (this end sends)' for a run with --streams or --reverse;
    None for one stream forward (every run before them)."""
    n = run.parameters.get("streams") or 1
    reverse = bool(run.parameters.get("reverse"))
    if n == 1 and not reverse:
        return None
    way = "reverse (the server sends, this end receives)" if reverse else \
        "forward (this end sends)"
    return f"{n} stream{'s' if n != 1 else ''}, {way}"


def streams_lines(run: RunResult, peak_size: int | None = None) -> list[str]:
    """The streams and direction, and at the peak size (else the largest with them) the
    sum of the streams and their spread, naming the slowest and the fastest (iperf3's
    per-stream lines and SUM)."""
    said = direction_text(run)
    if said is None:
        return []
    out = [f"  streams    {said}"]
    with_streams = [z for z in run.sizes if z.streams_bps and len(z.streams_bps) > 1]
    if not with_streams:  # one stream (--reverse alone): its throughput is the figure
        return out
    size = next((z for z in with_streams if z.size == peak_size), with_streams[-1])
    rates = size.streams_bps or []
    total = size.throughput_bps.get("from_median")
    slow, fast = rates.index(min(rates)), rates.index(max(rates))
    out.append(f"  SUM        {(total or 0) / 1e6:.2f} Mbit/s at {size.size} B over the common "
               f"window; per stream {min(rates) / 1e6:.2f} (#{slow}, slowest) to "
               f"{max(rates) / 1e6:.2f} Mbit/s (#{fast}, fastest), each over its own time "
               f"(together {sum(rates) / 1e6:.2f})")
    return out


@renderer("pingpong", "np")
def netpipe(doc: Document | RunResult, **_options: Any) -> str:
    """NetPIPE 3.x np.out text (its units and statistic: see beoperf.model.netpipe)."""
    return "".join(line + "\n" for line in netpipe_lines(run_of(doc)))


def analysis_lines(run: RunResult) -> list[str]:
    """Saturation, n1/2 and the fitted model (definitions in beoperf.analysis.curve),
    then the throughput collapses those figures leave out."""
    a = analyze_run(run)
    if a is None:
        return []
    out = []
    if len(run.sizes) >= 3:
        if a.saturation_size is not None and a.saturation_interval is not None:
            low, high = a.saturation_interval
            sat = f"{a.saturation_size} B (interval {low}..{high} B)"
        else:
            sat = "not reached within the measured sizes" + (
                " outside the collapse" if a.collapses else "")
        half = f"{a.n_half:.0f} B" if a.n_half is not None else "-"
        out.append(f"  saturation {sat}; n1/2 {half}")
    if len(run.sizes) >= 3:
        out += model_lines(a)
    return out


def model_lines(a: CurveAnalysis) -> list[str]:
    """The fitted model, or "no model" with the reason (a fit with a latency <= 0 or an
    R^2 below 0.9 describes no link: beoperf.analysis.curve)."""
    breaks = (", ".join(str(b) for b in a.thresholds) + " B") if a.thresholds else "none"
    h = a.hockney
    if h is not None and h.bandwidth_bps:
        return [f"  model      t = {h.alpha_us:.2f} us + n / {h.bandwidth_bps / 1e6:.1f} "
                f"Mbit/s (R^2 {h.r2:.3f}); protocol thresholds at: {breaks}"]
    if h is not None or a.model_problem is None:
        return []
    pieces = (f"; the piecewise fit holds ({len(a.pieces)} pieces, thresholds at {breaks})"
              if a.pieces else f"; nor does the piecewise fit: {a.pieces_problem}"
              if a.pieces_problem else "")
    return [f"  model      no model: the fit t = alpha + n / bandwidth is not physical: "
            f"{a.model_problem}{pieces}"]


def between_runs_text(run: RunResult, pm: str = "+-") -> str:
    """The between-run part of the intervals, and where it came from, in one phrase: a
    spread borrowed from the host's other setups says so here, never elsewhere only (the
    text summary and the HTML report say it alike)."""
    b = between_runs(run)
    sd, n, m = b.relative_sd, b.earlier_runs, b.host_setups
    if b.source == "none" or sd is None:
        return f"between runs not known ({_why_none(b)})"
    rel = b.relative_halfwidth if b.relative_halfwidth is not None else \
        intervals.log_relative(intervals.between_runs_halfwidth(sd))
    own = f"{n} earlier run{'s' if n != 1 else ''} of this setup"
    host = f"{m} other setup{'s' if m != 1 else ''} of this host"
    whence = {"own": f"from {own}",
              "own+host": f"from {own} pooled with the spread borrowed from {host}",
              "host": f"borrowed from {host} "
                      f"({b.own_missing or 'no earlier run of this setup'})"}[b.source]
    return f"between runs {pm}{rel * 100:.1f}% {whence}"


def _why_none(b: BetweenRuns) -> str:
    return b.why_none or ("this result records none" if not b.recorded_any else
                          "no earlier run of this setup")


def history_text(run: RunResult) -> str | None:
    """Where the run's history is, what was read and whether the run was added: one line,
    every run that reads or writes a history says it once."""
    b = between_runs(run)
    if b.history is None:
        return None
    read = b.runs_read
    counted = (f"{read} earlier run{'s' if read != 1 else ''} of this setup read"
               if read is not None else "earlier runs read")
    kept = ("this run added" if b.recorded else "this run not added" if b.recorded is False
            else "")
    return f"{b.history} ({counted}{'; ' + kept if kept else ''})"


def interval_text(run: RunResult, size: SizeResult, pm: str = "+-", us: str = "us") -> str:
    """A size's interval for a next run and its two parts: "[15.1, 23.4] us: this run
    +-2.0%, between runs +-22.0% from 4 earlier runs of this setup"; an interval wider
    than its median is "not measured precisely (n trials, spread xS)"."""
    median, ci = size.time_us.get("median"), interval_of(size)
    if median is None or ci is None:
        return "no interval" + (f" ({size.interval_note})" if size.interval_note else
                                " (the source gives none)" if run.source else
                                f" (fewer than {MIN_CI_SAMPLES} trials)" if size.trials
                                < MIN_CI_SAMPLES else "")
    shown = (intervals.not_precise_text(size.trials, ci[0], ci[1])
             if intervals.imprecise(float(median), ci[0], ci[1])
             else f"[{_fixed(ci[0])}, {_fixed(ci[1])}] {us}")
    facts = between_runs(run)
    if facts.source == "none":  # the interval is this run's alone
        return f"{shown} for this run only; between runs not known: {_why_none(facts)}"
    own = intervals.precision_text(float(median), within_run(size), size.trials, pm)
    return f"{shown}: this run {own or 'no interval'}, {between_runs_text(run, pm)}"


def _fixed(us: float) -> str:
    return f"{us:.2f}" if us >= 0.1 else f"{us:.3g}"


def _latency_lines(run: RunResult, s: Summary) -> list[str]:
    """The analysis's latency with its interval for a next run and that interval's two
    parts, then the size, trials, samples and p99 of the same size."""
    size = next(x for x in run.sizes if x.size == s["latency_size"])
    p99 = s["latency_p99_us"]
    p99_text = f"; {p99:.2f} us p99" if p99 is not None else ""
    shown = interval_text(run, size)
    meaning = ("" if shown.startswith("no interval") else
               "; the interval is where a next run's median falls, 95%")
    stream = run.parameters.get("mode") == "stream"  # a time per message, no latency
    label, what = ("time/msg", "time per message") if stream else ("latency", "one-way")
    return [f"  {label:<10} {s['latency_median_us']:.2f} us median"
            f"{' ' if shown.startswith('[') else ', '}{shown}",
            f"             ({what} at {size.size} B, {size.trials} trials, {size.samples} "
            f"samples{p99_text}{meaning})", *tail_lines(size)]


def tail_lines(size: SizeResult) -> list[str]:
    """The deep tail at a size (beoperf.analysis.tails): p99, p99.9 and p99.99 from its
    histogram, each "n/a (n samples)" below the rule; none for a size without a tail
    (stream mode, files before version 6, imports)."""
    if not size.tail:
        return []
    shown = ", ".join(f"{name} {tails.percentile_text(size.tail, name)}"
                      for name in ("p99", "p99.9", "p99.99"))
    return [f"  {'tail':<10} {shown}",
            f"             (at {size.size} B, from a {tails.RATIO - 1:.0%} log histogram of "
            f"every sample; a percentile p needs {tails.MIN_BEYOND}/(1-p) samples)"]


# --------------------------------------------------------------------------- the answer

# stored warnings the answer works out again from the sizes (any beoperf's wording)
RECOMPUTED = re.compile(r"did not reach (the requested precision|±)|longer than the time "
                        r"budget of")


@answer("pingpong")
def what_is_wrong(doc: Document) -> list[Line]:
    """Why the run stopped, corrupted messages, throughput collapses and dips, the transport's and
    the shaper's warnings, the sizes short of their precision (one line, from the sizes:
    documents of any version read alike) and the notes of the history."""
    run = run_of(doc)
    out = _status(run)
    corrupt = [s.size for s in run.sizes if s.corrupt]
    if corrupt:
        out.append(Line(Level.FAIL, f"{sum(s.corrupt for s in run.sizes)} corrupted "
                                    f"message(s) at {_sizes(corrupt)}",
                        "check the NIC, its driver and the cable: a network must never "
                        "change data"))
    out += udp.answer_lines(run) if udp.is_udp(run) else _collapses(run)
    out += from_strings(w for w in run.warnings if not RECOMPUTED.search(w))
    out += precision_lines(run)
    if run.source:
        tool = run.source.get("format", "another tool")
        out.append(Line(Level.NOTE, f"imported from {tool}: the figures are that tool's, "
                                    "without beoperf's trials and intervals"))
    return out


def _status(run: RunResult) -> list[Line]:
    if run.status == "complete":
        return []
    text = (f"the sweep is {run.status}: {run.status_reason or 'no reason recorded'} "
            f"({plural(len(run.sizes), 'size')} kept)")
    if run.status == "interrupted":
        return [Line(Level.WARN, text, "run it again for the sizes not measured")]
    return [Line(Level.FAIL, text)]


def _collapses(run: RunResult) -> list[Line]:
    try:
        a = analyze_run(run) if run.sizes else None
    except Exception:  # noqa: BLE001 - no analysis: no collapse to name
        return []
    if a is None:
        return []
    first = latency_name(jsonvalue.text(run.parameters, "mode"))
    return [Line(Level.WARN, f"{c.text()}; {a.collapse_note(first)}",
                 "look for drops or a shaper at those sizes (--integrity, tc -s qdisc)")
            for c in a.collapses] + [
        Line(Level.WARN, d.text(), "measure those sizes again; if the dip stays, look at "
                                   "what changes there: a bond in balance-rr reorders "
                                   "segments, a protocol switch (eager/rendezvous), the MSS")
        for d in a.dips]


def precision_lines(run: RunResult) -> list[Line]:
    """The sizes whose interval is wider than asked, as one line, and a time budget the
    minimum trials alone overran."""
    out = []
    short = precision_shortfall(run.sizes, jsonvalue.number(run.parameters, "precision"))
    if short and not run.source:
        out.append(Line(Level.IMPRECISE, short, "a longer --time-budget, or a quieter "
                                               "machine; each size's interval is in the result",
                        PRECISION))
    facts = run.sweep or {}
    if facts.get("over_budget") and facts.get("hard_budget") is not True:  # the old budget
        out.append(Line(Level.IMPRECISE, f"the minimum {facts.get('min_trials')} trials of "
                                         f"every size took {facts.get('elapsed_s')} s, longer "
                                         f"than the time budget of {facts.get('time_budget_s')} s",
                        f"--time-budget {facts.get('elapsed_s')} or more, or fewer sizes",
                        PRECISION))
    return out


def _sizes(sizes: list[int]) -> str:
    shown = ", ".join(size_text(s) for s in sizes[:8])
    return ("size " if len(sizes) == 1 else "sizes ") + shown + \
        (f" and {len(sizes) - 8} more" if len(sizes) > 8 else "")

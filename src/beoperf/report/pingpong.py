"""Renderers of a ping-pong document: the summary a sweep prints, and NetPIPE's np.out.

The summary shows the figures of the curve analysis (the same `compare` shows): the
latency with its p99 and CI, the peak, saturation, n1/2 and the fitted model, then the
throughput collapses those figures leave out, the warnings and why a run stopped.
"""

from __future__ import annotations

import re
from typing import Any

from beoperf.analysis.curve import analyze_run, latency_name
from beoperf.analysis.mpi import protocol_switch
from beoperf.analysis.pingpong import precision_shortfall, size_text, summary
from beoperf.model.document import Document
from beoperf.model.netpipe import netpipe_lines
from beoperf.model.pingpong import RunResult
from beoperf.report import renderer
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
             f"in {float(run.meta.get('duration_s', 0.0)):.1f} s ({run.status})"]
    lines += text_block(lines_of(doc if isinstance(doc, Document) else run.to_document()),
                        "  ")
    if "latency_size" in s:
        lines.append(_latency_line(run, s))
        lines.append(f"  throughput {s['peak_throughput_bps'] / 1e6:.2f} Mbit/s peak at "
                     f"{s['peak_size']} B (from the median time)")
        lines += analysis_lines(run)
        between = between_runs_text(run)
        if between:
            lines.append(f"  intervals  {between}")
        switch = protocol_switch(run) if len(run.sizes) >= 3 else None
        if switch is not None:
            lines.append(f"  protocol   {switch.text()}")
    return "\n".join(lines) + "\n"


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
    if len(run.sizes) >= 3 and a.hockney and a.hockney.bandwidth_bps:
        h = a.hockney
        breaks = (", ".join(str(b) for b in a.thresholds) + " B") if a.thresholds else "none"
        out.append(f"  model      t = {h.alpha_us:.2f} us + n / {h.bandwidth_bps / 1e6:.1f} "
                   f"Mbit/s (R^2 {h.r2:.3f}); protocol thresholds at: {breaks}")
    return out


def between_runs_text(run: RunResult) -> str | None:
    """What the history of earlier runs added to the intervals, when it added anything
    (the text summary and the HTML report say it alike)."""
    facts = (run.sweep or {}).get("between_runs") or {}
    sd, n, m = facts.get("relative_sd"), facts.get("earlier_runs"), facts.get("host_setups", 0)
    if not facts.get("added_to_intervals") or not isinstance(sd, int | float) \
            or not isinstance(n, int) or not isinstance(m, int) or n < 0 or m < 0 \
            or n + m < 1:
        return None
    own = f"{n} earlier run{'s' if n != 1 else ''} of this setup"
    host = f"{m} other setup{'s' if m != 1 else ''} of this host"
    whence = (own if not m else f"{own} and {host}" if n else
              f"{host}; no earlier run of this setup")
    return (f"include the spread between runs: {float(sd) * 100:.1f}% (one run's level, "
            f"from {whence})")


def _latency_line(run: RunResult, s: dict[str, Any]) -> str:
    """The analysis's latency (in stream mode the time per message), with the p99, sample
    count and CI of the same size."""
    size = next(x for x in run.sizes if x.size == s["latency_size"])
    half = s["latency_ci95_halfwidth_us"]
    ci_text = (f", 95% CI +-{half:.2f} us (+-{half / s['latency_median_us'] * 100:.1f}%)"
               if half is not None and s["latency_median_us"] > 0 else "")
    p99 = s["latency_p99_us"]
    p99_text = f", {p99:.2f} us p99" if p99 is not None else ""
    stream = run.parameters.get("mode") == "stream"  # a time per message, no latency
    label, what = ("time/msg", "time per message") if stream else ("latency", "one-way")
    return (f"  {label:<10} {s['latency_median_us']:.2f} us median{p99_text} ({what}, "
            f"{size.size} B, {size.samples} samples{ci_text})")


# --------------------------------------------------------------------------- the answer

# stored warnings the answer works out again from the sizes (any beoperf's wording)
RECOMPUTED = re.compile(r"did not reach (the requested precision|±)|longer than the time "
                        r"budget of")


@answer("pingpong")
def what_is_wrong(doc: Document) -> list[Line]:
    """Why the run stopped, corrupted messages, throughput collapses, the transport's and
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
    out += _collapses(run)
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
    first = latency_name(run.parameters.get("mode"))
    return [Line(Level.WARN, f"{c.text()}; {a.collapse_note(first)}",
                 "look for drops or a shaper at those sizes (--integrity, tc -s qdisc)")
            for c in a.collapses]


def precision_lines(run: RunResult) -> list[Line]:
    """The sizes whose interval is wider than asked, as one line, and a time budget the
    minimum trials alone overran."""
    out = []
    short = precision_shortfall(run.sizes, run.parameters.get("precision"))
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

"""Renderers of a ping-pong document: the summary a sweep prints, and NetPIPE's np.out.

The summary shows the figures of the curve analysis (the same `compare` shows): the
latency with its p99 and CI, the peak, saturation, n1/2 and the fitted model, then the
throughput collapses those figures leave out, the warnings and why a run stopped.
"""

from __future__ import annotations

from typing import Any

from beoperf.analysis.curve import analyze_run
from beoperf.analysis.mpi import protocol_switch
from beoperf.analysis.pingpong import summary
from beoperf.model.document import Document
from beoperf.model.netpipe import netpipe_lines
from beoperf.model.pingpong import RunResult
from beoperf.report import renderer


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
    lines += [f"  warning: {warning}" for warning in run.warnings]
    if run.status_reason:
        lines.append(f"  stopped: {run.status_reason}")
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
    out += [f"  warning: {c.text()}; {a.collapse_note()}" for c in a.collapses]
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
    """The analysis's latency, with the p99, sample count and CI of the same size."""
    size = next(x for x in run.sizes if x.size == s["latency_size"])
    half = s["latency_ci95_halfwidth_us"]
    ci_text = (f", 95% CI +-{half:.2f} us (+-{half / s['latency_median_us'] * 100:.1f}%)"
               if half is not None and s["latency_median_us"] > 0 else "")
    p99 = s["latency_p99_us"]
    p99_text = f", {p99:.2f} us p99" if p99 is not None else ""
    return (f"  latency    {s['latency_median_us']:.2f} us median{p99_text} (one-way, "
            f"{size.size} B, {size.samples} samples{ci_text})")

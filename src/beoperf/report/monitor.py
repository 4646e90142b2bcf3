"""The monitor report (kind "monitor-report") as Markdown: what needs attention (its
answer), tables by day and week, by weekday and hour, the spikes, the outages, stretches
not monitored, congestion and level shifts (each saying what was looked for when there is
none), the plots, the method; and two reports compared (:func:`comparison_lines`).

Every number comes from the document; the plots (report/monitor_plots.py) are linked
when the document lists them.  ``text`` is the same Markdown: it is what
``beoperf monitor report`` prints.
"""

from __future__ import annotations

from typing import Any

from beoperf.analysis.monitor import iso, words_s
from beoperf.analysis.monitor_compare import Row
from beoperf.model.document import FORMAT, Document, JsonObject
from beoperf.model.monitor import REPORT_KIND, Bandwidth, MonitorReport, Period, WeekdayHours
from beoperf.report import renderer
from beoperf.report.answer import Level, Line, answer, from_strings, lines_of, markdown_block


def _f(x: float | None, digits: int = 3) -> str:
    """A document number as table text ('–' when missing)."""
    return "–" if x is None else f"{x:.{digits}f}"


def _mbps(bps: float | None) -> str:
    return "–" if bps is None else f"{bps / 1e6:.2f}"


def bandwidth_cell(b: Bandwidth) -> str:
    """A period's bandwidth cell: the median, '> X' (a lower bound: the probes cannot
    resolve more) or 'above link' (not a bandwidth); the warnings say why."""
    status = b.shown_status  # reports before issue 11: the median is the figure
    if status == "lower_bound":
        return f"> {_mbps(b.resolvable_bps)}"
    if status == "above_link":
        return f"above link ({b.above_link} of {b.cycles})"
    above = b.above_link or 0
    return _mbps(b.median) + (f" ({above} above link left out)" if above else "")


def _table(head: list[str], rows: list[list[str]], empty: str = "None.") -> list[str]:
    if not rows:
        return [empty, ""]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return lines + ["| " + " | ".join(r) + " |" for r in rows] + [""]


PERIOD_HEAD = ["monitored", "answered %", "uptime %", "one-way median ms", "mean ms",
               "p95 ms", "bandwidth median Mbit/s", "outage"]


def _period_cells(d: Period) -> list[str]:
    lat = d.one_way_ms
    return [f"{words_s(d.monitored_s)} ({_f(d.coverage_pct, 1)} %)",
            _f(d.answered_pct), _f(d.uptime_pct), _f(lat.median), _f(lat.mean),
            _f(lat.p95), bandwidth_cell(d.bandwidth_bps),
            words_s(d.outage_s) if d.outage_s else "–"]


def _md_summary(doc: MonitorReport) -> list[str]:
    s, r = doc.summary, doc.range
    lines = ["## Summary", "", *_table(["range", *PERIOD_HEAD],
                                       [["all", *_period_cells(s)]])]
    lines.append(f"Outages: {s.outages}; congestion events: {s.congestion_events}; "
                 f"level shifts: {s.level_shifts}; not monitored: "
                 f"{words_s(r.not_monitored_s)}.")
    for name, d in (("best_day", doc.best_day), ("worst_day", doc.worst_day)):
        if d is not None:
            lines.append(f"{name.replace('_', ' ').capitalize()}: {d.period} (answered "
                         f"{_f(d.answered_pct)} %, uptime {_f(d.uptime_pct)} %, one-way "
                         f"median {_f(d.one_way_median_ms)} ms).")
    return lines + [""]


def _md_periods(doc: MonitorReport) -> list[str]:
    lines = []
    tz = doc.method.parameters.zone_name
    for periods, title, label in ((doc.days, f"Per day ({tz})", "day"),
                                  (doc.weeks, f"Per week ({tz}, ISO weeks from Monday)",
                                   "week")):
        rows = [[d.period, *_period_cells(d)] for d in periods]
        lines += [f"## {title}", "", *_table([label, *PERIOD_HEAD], rows)]
    return lines


def profile_grid(doc: MonitorReport) -> tuple[list[int], list[WeekdayHours]]:
    """The hours and weekdays of the weekday x hour profile that hold probes (the table
    leaves out the rest: a week of data has 168 cells, a day 24)."""
    rows = [w for w in doc.week_profile or [] if any(w.probes)]
    hours = [h for h in range(24) if any(w.probes[h] for w in rows)]
    return hours, rows


def _md_profile(doc: MonitorReport) -> list[str]:
    hours, rows = profile_grid(doc)
    if not rows:
        return []
    tz = doc.method.parameters.zone_name
    head = ["weekday", *[f"{h:02d}h" for h in hours]]
    answered = [[w.weekday, *[_f(w.answered_pct[h], 1) for h in hours]] for w in rows]
    median = [[w.weekday, *[_f(w.one_way_median_ms[h]) for h in hours]] for w in rows]
    return [f"## By weekday and hour ({tz})", "",
            "Answered % (hours and weekdays without probes left out):", "",
            *_table(head, answered), "One-way median ms:", "", *_table(head, median)]


def spike_note(doc: MonitorReport) -> str | None:
    """When the path's own median RTT is at or above the lowest threshold, most probes
    count as spikes, which says nothing about stalls: the thresholds to give instead."""
    limits, median = doc.method.parameters.spike_rtt_ms, doc.summary.one_way_ms.median
    if not limits or median is None or 2.0 * median < min(limits):
        return None
    return (f"The path's median RTT ({2.0 * median:.3g} ms) is at or above the lowest "
            f"threshold ({min(limits):g} ms): most probes count as spikes. Give --spike "
            "thresholds above the path's own RTT.")


def spike_rows(doc: MonitorReport) -> tuple[list[str], list[list[str]]]:
    """The spike table: a column per threshold, a row for the whole range and each day
    (a cell: how many, and their share of the answered small probes)."""
    limits = [x.above_ms for x in doc.summary.spikes or []]
    head = ["period", *[f"RTT > {x:g} ms" for x in limits], "answered small probes"]
    rows = []
    for p in (doc.summary, *doc.days):
        if p.spikes is None or [x.above_ms for x in p.spikes] != limits:
            continue
        cells = [f"{x.count:,} ({_f(x.pct)} %)" for x in p.spikes]
        rows.append([p.period, *cells, f"{p.one_way_ms.count:,}"])
    return head, rows


def _md_spikes(doc: MonitorReport) -> list[str]:
    head, rows = spike_rows(doc)
    if not rows:
        return []
    note = spike_note(doc)
    return ["## Spikes (per day, " + doc.method.parameters.zone_name + ")", "",
            *_table(head, rows), *([note, ""] if note else [])]


def _md_outages(doc: MonitorReport) -> list[str]:
    rows = [[iso(o.start_utc), iso(o.end_utc), words_s(o.duration_s), str(o.cycles), o.kind,
             f"open (ends with the {o.ended_by})" if o.open else ""]
            for o in doc.outages]
    gaps = [[iso(g.start_utc), iso(g.end_utc), words_s(g.duration_s)]
            for g in doc.not_monitored]
    return ["## Outages", "", *_table(["start (UTC)", "end (UTC)", "duration", "cycles",
                                       "kind", "note"], rows, none_found(doc, "outages")),
            "## Not monitored", "", *_table(["from (UTC)", "to (UTC)", "duration"], gaps,
                                            none_found(doc, "not_monitored"))]


def _md_events(doc: MonitorReport) -> list[str]:
    rows = []
    for e in doc.congestion:
        b, lat = e.baseline, e.one_way_ms
        rows.append([iso(e.start_utc), iso(e.end_utc) + (" (open)" if e.open else ""),
                     words_s(e.duration_s), _f(lat.median), _f(b.one_way_ms), _f(e.ratio),
                     _f(e.added_ms), _f(lat.p95), f"{_f(lat.iqr)} ({_f(b.iqr_ms)})",
                     f"{_f(e.loss_pct)} ({_f(b.loss_pct)})"])
    shifts = [[iso(s.at_utc), _f(s.from_ms), _f(s.to_ms), _f(s.change_ms),
               f"{_f(s.iqr_before_ms)} / {_f(s.iqr_after_ms)}"]
              for s in doc.level_shifts]
    return ["## Congestion", "", *_table(
        ["start (UTC)", "end (UTC)", "duration", "one-way median ms", "baseline ms", "ratio",
         "added ms", "p95 ms", "IQR ms (baseline)", "loss % (baseline)"], rows,
        none_found(doc, "congestion")),
        "## Level shifts (path changes)", "", *_table(
            ["at (UTC)", "from ms", "to ms", "change ms", "IQR ms before / after"], shifts,
            none_found(doc, "level_shifts"))]


def none_found(doc: MonitorReport, what: str) -> str:
    """What was looked for, when a table of events has none (the report's own rules)."""
    p = doc.method.parameters
    if what in ("congestion", "level_shifts") and any(
            "too few to look for congestion" in w for w in doc.warnings):
        return "Not looked for: too few windows of cycles (see the warnings)."
    return {
        "outages": f"None: no {p.outage_cycles} or more cycles in a row "
                   "without an answered probe.",
        "not_monitored": f"None: the monitor ran throughout (no pause of more than "
                         f"{p.gap_periods} periods between cycles).",
        "congestion": "None: no stretch above the baseline's level, dispersion or loss "
                      "(windows of " + f"{p.window_cycles} cycles; the rule is "
                      "under Method).",
        "level_shifts": "None: no change from one stable baseline level to another.",
    }[what]


def no_bandwidth(found: MonitorReport | JsonObject) -> str:
    """Why a bandwidth plot has nothing to draw, from the report's own counts (a typed
    report or its body): never "no answered probes" when probes were answered."""
    doc = MonitorReport.of(found)
    status = doc.summary.bandwidth_bps.status
    if status == "above_link":
        return "no bandwidth figure: the estimates are above the link speed (see the warnings)"
    if status == "lower_bound":
        return "no bandwidth figure: the probes cannot resolve it (see the warnings)"
    if any("one probe size" in w for w in doc.warnings):
        return "no bandwidth estimate: the schedule has one probe size"
    answered, probes = doc.summary.answered, doc.summary.probes
    if not answered:
        return "no bandwidth estimate: no probe was answered in this range"
    return (f"no bandwidth estimate in this range: {answered:,} of {probes:,} probes were "
            "answered, but no cycle had an answered small probe and a slower large one")


@answer(REPORT_KIND)
def what_is_wrong(document: Document) -> list[Line]:
    """Outages (FAIL), congestion and level shifts (WARN), the report's own warnings (the
    bandwidth's are notes); nothing found: the uptime and what was looked at."""
    doc = MonitorReport.from_document(document)
    s = doc.summary
    out = []
    if s.outages:
        out.append(Line(Level.FAIL, f"{s.outages} outage(s), "
                                    f"{words_s(s.outage_s or 0.0)} in all (uptime "
                                    f"{_f(s.uptime_pct)} %)",
                        "the Outages table says when; look at the path then"))
    if s.congestion_events:
        out.append(Line(Level.WARN, f"{s.congestion_events} congestion event(s)",
                        "the Congestion table says when and by how much"))
    if s.level_shifts:
        out.append(Line(Level.WARN, f"{s.level_shifts} level shift(s) (path changes)",
                        "the Level shifts table says when and by how much"))
    for line in from_strings(doc.warnings):
        bandwidth = "bandwidth" in line.text and line.level == Level.WARN
        out.append(Line(Level.NOTE, line.text, line.todo, "the bandwidth estimate")
                   if bandwidth else line)
    if not any(line.level < Level.NOTE for line in out):
        out.append(Line(Level.OK, f"uptime {_f(s.uptime_pct)} % over "
                                  f"{words_s(doc.range.monitored_s)} monitored; no "
                                  "outage, congestion or level shift"))
    return out


def _generated(doc: Document) -> str:
    """The closing line: when, by which beoperf, in which document format."""
    when = str(doc.meta.get("utc_end", "")).replace("T", " ").removesuffix("Z")
    return (f"Generated {when} UTC by beoperf {doc.meta.get('beoperf', '?')} "
            f"({FORMAT} {doc.kind} v{doc.schema_version}).")


@renderer(REPORT_KIND, "markdown")
def markdown(document: Document, **_options: Any) -> str:
    """The report as Markdown (every number comes from the document)."""
    doc = MonitorReport.from_document(document)
    r, src = doc.range, doc.source
    lines = [f"# Link report: {src.host} over {src.transport}", "",
             f"{iso(r.from_utc)} to {iso(r.to_utc)} UTC; monitored "
             f"{words_s(r.monitored_s)}; {doc.summary.probes} {src.transport} "
             f"probes in {len(src.runs)} run(s) of `{src.db}`. "
             f"Latencies are one-way estimates: half the RTT of the small probes.",
             "", *markdown_block(lines_of(document)), *_md_summary(doc), *_md_periods(doc),
             *_md_profile(doc), *_md_spikes(doc), *_md_outages(doc), *_md_events(doc),
             "## Plots", ""]
    lines += [f"![{name}]({name})" for name in doc.plots] or [
        "Not drawn: `beoperf monitor report FILE -o DIR` writes them beside report.md."]
    lines += ["", "## Method", ""]
    lines += [f"- **{key.replace('_', ' ')}**: {text}" for key, text in doc.method.rules.items()]
    params = ", ".join(f"{k} = {v}" for k, v in doc.method.parameters.to_dict().items())
    lines += [f"- **parameters**: {params}", ""]
    if doc.warnings:
        lines += ["## Warnings", "", *[f"- {w}" for w in doc.warnings], ""]
    lines.append(_generated(document))
    return "\n".join(lines) + "\n"


@renderer(REPORT_KIND, "text")
def text(document: Document, **options: Any) -> str:
    """What `beoperf monitor report` prints: the Markdown."""
    return markdown(document, **options)


def comparison_lines(labels: tuple[str, str], rows: list[Row]) -> list[str]:
    """Two monitor reports compared, a line per figure: 'median one-way latency: class
    week 0.660 ms (5 days) vs vacation week 0.280 ms (5 days), -57.6% (-63..-51%),
    better', then what each interval was made of."""
    out = [f"# {labels[1]} against {labels[0]} (each day one replicate; lower is better)", ""]
    for r in rows:
        e = r.effect
        change = "" if e.change_pct is None else f", {e.change_pct:+.1f}%"
        span = e.span_text()
        out.append(f"- {r.figure}: {labels[0]} {_f(r.base_ms)} ms ({r.base_days} days) vs "
                   f"{labels[1]} {_f(r.cand_ms)} ms ({r.cand_days} days){change}"
                   + (f" ({span})" if span else "") + f": **{e.verdict}**"
                   + ("" if span or not e.reason else f" ({e.reason})"))
    notes = {r.effect.spread_text().replace("within runs", "within days")
             .replace("between runs", "between days").replace("the repeated runs", "the days")
             for r in rows if r.effect.spread_text()}
    out += ["", *[f"Intervals: {n}." for n in sorted(notes)],
            "Each side's figure is the geometric mean of its days' values (days monitored "
            "at least half of their length); the change is their ratio."]
    return out

"""The monitor report (kind "monitor-report") as Markdown: tables by day and week, the
outages, stretches not monitored, congestion and level shifts, the plots, the method.

Every number comes from the document; the plots (report/monitor_plots.py) are linked
when the document lists them.  ``text`` is the same Markdown: it is what
``beoperf monitor report`` prints.
"""

from __future__ import annotations

from typing import Any

from beoperf.analysis.monitor import iso, words_s
from beoperf.model.document import FORMAT, Document
from beoperf.model.monitor import REPORT_KIND
from beoperf.report import renderer


def _f(x: float | None, digits: int = 3) -> str:
    """A document number as table text ('–' when missing)."""
    return "–" if x is None else f"{x:.{digits}f}"


def _mbps(bps: float | None) -> str:
    return "–" if bps is None else f"{bps / 1e6:.2f}"


def bandwidth_cell(b: dict) -> str:
    """A period's bandwidth cell: the median, '> X' (a lower bound: the probes cannot
    resolve more) or 'above link' (not a bandwidth); the warnings say why."""
    status = b.get("status", "figure")  # reports before issue 11: the median is the figure
    if status == "lower_bound":
        return f"> {_mbps(b['resolvable_bps'])}"
    if status == "above_link":
        return f"above link ({b['above_link']} of {b['cycles']})"
    above = b.get("above_link", 0)
    return _mbps(b["median"]) + (f" ({above} above link left out)" if above else "")


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    if not rows:
        return ["(none)", ""]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return lines + ["| " + " | ".join(r) + " |" for r in rows] + [""]


PERIOD_HEAD = ["monitored", "answered %", "uptime %", "one-way median ms", "mean ms",
               "p95 ms", "bandwidth median Mbit/s", "outage"]


def _period_cells(d: dict) -> list[str]:
    lat = d["one_way_ms"]
    return [f"{words_s(d['monitored_s'])} ({_f(d['coverage_pct'], 1)} %)",
            _f(d["answered_pct"]), _f(d["uptime_pct"]), _f(lat["median"]), _f(lat["mean"]),
            _f(lat["p95"]), bandwidth_cell(d["bandwidth_bps"]),
            words_s(d["outage_s"]) if d["outage_s"] else "–"]


def _md_summary(doc: dict) -> list[str]:
    s, r = doc["summary"], doc["range"]
    lines = ["## Summary", "", *_table(["range", *PERIOD_HEAD],
                                       [["all", *_period_cells(s)]])]
    lines.append(f"Outages: {s['outages']}; congestion events: {s['congestion_events']}; "
                 f"level shifts: {s['level_shifts']}; not monitored: "
                 f"{words_s(r['not_monitored_s'])}.")
    for name in ("best_day", "worst_day"):
        d = doc[name]
        if d is not None:
            lines.append(f"{name.replace('_', ' ').capitalize()}: {d['period']} (answered "
                         f"{_f(d['answered_pct'])} %, uptime {_f(d['uptime_pct'])} %, one-way "
                         f"median {_f(d['one_way_median_ms'])} ms).")
    return lines + [""]


def _md_periods(doc: dict) -> list[str]:
    lines = []
    for key, title, label in (("days", "Per day (UTC)", "day"),
                              ("weeks", "Per week (UTC, ISO weeks from Monday)", "week")):
        rows = [[d["period"], *_period_cells(d)] for d in doc[key]]
        lines += [f"## {title}", "", *_table([label, *PERIOD_HEAD], rows)]
    return lines


def _md_outages(doc: dict) -> list[str]:
    rows = [[iso(o["start_utc"]), iso(o["end_utc"]), words_s(o["duration_s"]),
             str(o["cycles"]), o["kind"],
             f"open (ends with the {o['ended_by']})" if o["open"] else ""]
            for o in doc["outages"]]
    gaps = [[iso(g["start_utc"]), iso(g["end_utc"]), words_s(g["duration_s"])]
            for g in doc["not_monitored"]]
    return ["## Outages", "", *_table(["start (UTC)", "end (UTC)", "duration", "cycles",
                                       "kind", "note"], rows),
            "## Not monitored", "", *_table(["from (UTC)", "to (UTC)", "duration"], gaps)]


def _md_events(doc: dict) -> list[str]:
    rows = []
    for e in doc["congestion"]:
        b = e["baseline"]
        rows.append([iso(e["start_utc"]), iso(e["end_utc"]) + (" (open)" if e["open"] else ""),
                     words_s(e["duration_s"]), _f(e["one_way_ms"]["median"]),
                     _f(b["one_way_ms"]), _f(e["ratio"]), _f(e["added_ms"]),
                     _f(e["one_way_ms"]["p95"]), f"{_f(e['one_way_ms']['iqr'])} "
                     f"({_f(b['iqr_ms'])})", f"{_f(e['loss_pct'])} ({_f(b['loss_pct'])})"])
    shifts = [[iso(s["at_utc"]), _f(s["from_ms"]), _f(s["to_ms"]), _f(s["change_ms"]),
               f"{_f(s['iqr_before_ms'])} / {_f(s['iqr_after_ms'])}"]
              for s in doc["level_shifts"]]
    return ["## Congestion", "", *_table(
        ["start (UTC)", "end (UTC)", "duration", "one-way median ms", "baseline ms", "ratio",
         "added ms", "p95 ms", "IQR ms (baseline)", "loss % (baseline)"], rows),
        "## Level shifts (path changes)", "", *_table(
            ["at (UTC)", "from ms", "to ms", "change ms", "IQR ms before / after"], shifts)]


def _generated(doc: Document) -> str:
    """The closing line: when, by which beoperf, in which document format."""
    when = str(doc.meta.get("utc_end", "")).replace("T", " ").removesuffix("Z")
    return (f"Generated {when} UTC by beoperf {doc.meta.get('beoperf', '?')} "
            f"({FORMAT} {doc.kind} v{doc.schema_version}).")


@renderer(REPORT_KIND, "markdown")
def markdown(document: Document, **_options: Any) -> str:
    """The report as Markdown (every number comes from the document)."""
    doc = document.body
    r, src = doc["range"], doc["source"]
    lines = [f"# Link report: {src['host']} over {src['transport']}", "",
             f"{iso(r['from_utc'])} to {iso(r['to_utc'])} UTC; monitored "
             f"{words_s(r['monitored_s'])}; {doc['summary']['probes']} {src['transport']} "
             f"probes in {len(src['runs'])} run(s) of `{src['db']}`. "
             f"Latencies are one-way estimates: half the RTT of the small probes.",
             "", *_md_summary(doc), *_md_periods(doc), *_md_outages(doc), *_md_events(doc),
             "## Plots", ""]
    lines += [f"![{name}]({name})" for name in doc["plots"]] or [
        "Not drawn: `beoperf monitor report FILE -o DIR` writes them beside report.md."]
    lines += ["", "## Method", ""]
    lines += [f"- **{key.replace('_', ' ')}**: {text}" for key, text in doc["method"].items()
              if isinstance(text, str)]
    params = ", ".join(f"{k} = {v}" for k, v in doc["method"]["parameters"].items())
    lines += [f"- **parameters**: {params}", ""]
    if doc["warnings"]:
        lines += ["## Warnings", "", *[f"- {w}" for w in doc["warnings"]], ""]
    lines.append(_generated(document))
    return "\n".join(lines) + "\n"


@renderer(REPORT_KIND, "text")
def text(document: Document, **options: Any) -> str:
    """What `beoperf monitor report` prints: the Markdown."""
    return markdown(document, **options)

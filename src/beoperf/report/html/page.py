"""One self-contained HTML page of many documents: `beoperf report`.

The page is a header (what was read, when, by which command), a table of contents
grouped by kind (with each study's warning count), the warnings of every study in one
list, then one section per document.  Each section starts with what every document has
(the file it came from, its kind and version, host, beoperf version, UTC start and end
and the command line that made it) and the study's warnings, then the kind's own view.

A kind's view is its ``@renderer(kind, "html")`` (a module in this package, found when
the package is imported, so a new kind is one new file); its title and warnings are its
``"title"`` and ``"warnings"`` renderers when it has them.  A kind without an HTML view
(yet) gets the generic section: its metadata and its summary figures as a table.  A view
that fails on an odd but valid document falls back to the generic section too, with a
warning that says so: the report never loses a study for a rendering bug.

Nothing is fetched and nothing runs: CSS is inline, plots are inline SVG, there is no
script, and a Content-Security-Policy forbids any request and any script, so the file
opens from disk, offline, exactly as written.
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from beoperf import __version__
from beoperf.model.document import Document
from beoperf.report import RENDERERS
from beoperf.report.html import style
from beoperf.report.html.markup import (
    Markup,
    bullet_list,
    code,
    details,
    esc,
    join,
    num,
    pairs,
    para,
    table,
    tag,
    text_of,
)

# Kinds in the order a reader meets them (others follow, by name).
KIND_ORDER = ("pingpong", "comparison", "audit", "fleet-audit", "tune-plan", "procedure",
              "rollback", "monitor-report", "monitor-session", "node", "cluster", "scaling",
              "prediction", "replay")
KIND_NAMES = {"pingpong": "Ping-pong runs", "comparison": "Comparisons",
              "audit": "Node audits", "fleet-audit": "Fleet audits",
              "tune-plan": "Tune plans", "procedure": "Tuning procedures (impact tables)",
              "rollback": "Rollback snapshots", "monitor-report": "Link monitor reports",
              "monitor-session": "Link monitor sessions", "node": "Node suites",
              "cluster": "Cluster suites", "scaling": "Scaling studies",
              "prediction": "Predictions", "replay": "Replays"}
MAX_GENERIC_ROWS = 200
CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
       "base-uri 'none'; form-action 'none'")


@dataclass(frozen=True)
class Entry:
    """A document and where it was read from (as the report shows the path)."""

    source: str
    document: Document


def kind_rank(kind: str) -> tuple[int, str]:
    return (KIND_ORDER.index(kind), "") if kind in KIND_ORDER else (len(KIND_ORDER), kind)


def ordered(entries: Sequence[Entry]) -> list[Entry]:
    """By kind (KIND_ORDER), then by start time, then by path."""
    return sorted(entries, key=lambda e: (kind_rank(e.document.kind),
                                          str(e.document.meta.get("utc_start", "")), e.source))


# --------------------------------------------------------------------------- per document


def _own(doc: Document, fmt: str) -> Any:
    """The kind's renderer for ``fmt``, or None."""
    return RENDERERS.get((doc.kind, fmt))


def title_of(entry: Entry) -> str:
    """The study's title: the kind's "title" renderer, else kind, host and start."""
    fn = _own(entry.document, "title")
    if fn is not None:
        try:
            return str(fn(entry.document)).strip() or entry.source
        except Exception:  # noqa: BLE001 - a title never costs the report
            pass
    meta = entry.document.meta
    parts = [entry.document.kind, str(meta.get("host", "")), str(meta.get("utc_start", ""))]
    return " ".join(p for p in parts if p)


def warnings_of(entry: Entry) -> list[str]:
    """The study's warnings: the kind's "warnings" renderer (one per line), else the
    body's status and "warnings" list when it has them."""
    doc = entry.document
    fn = _own(doc, "warnings")
    if fn is not None:
        try:
            return [w for w in str(fn(doc)).splitlines() if w.strip()]
        except Exception as exc:  # noqa: BLE001
            return [f"the warnings of this study could not be listed ({type(exc).__name__})"]
    return generic_warnings(doc)


def generic_warnings(doc: Document) -> list[str]:
    """What any document may say about itself: a status that is not complete or ok, and
    its list of warnings."""
    body = doc.body if isinstance(doc.body, dict) else {}
    out = []
    status = body.get("status")
    if isinstance(status, str) and status not in ("complete", "ok", "stopped", "planned"):
        reason = body.get("status_reason") or body.get("stop_reason")
        out.append(f"status {status}" + (f": {reason}" if reason else ""))
    found = body.get("warnings")
    if isinstance(found, list):
        out += [text_of(w) for w in found]
    return out


def command_text(meta: dict[str, Any]) -> str | None:
    argv = meta.get("command_line")
    if isinstance(argv, list) and argv:
        return shlex.join(str(a) for a in argv)
    return None


def provenance(entry: Entry) -> Markup:
    """File, kind, host, beoperf version, UTC start and end, duration; the command line."""
    doc, meta = entry.document, entry.document.meta
    start, end = meta.get("utc_start"), meta.get("utc_end")
    when = f"{start} to {end}" if start and end and start != end else (start or end)
    facts = pairs([("file", tag("code", entry.source)),
                   ("kind", f"{doc.kind} (schema version {doc.schema_version})"),
                   ("host", meta.get("host")), ("beoperf", meta.get("beoperf")),
                   ("UTC", when),
                   ("duration", f"{meta['duration_s']} s" if "duration_s" in meta else None)],
                  cls="facts prov")
    command = command_text(meta)
    line = (tag("p", join([tag("span", "command line: ", class_="lbl"), code(command)]),
                class_="cmd") if command else
            para("command line: not recorded in this document", "cmd none"))
    return join([facts, line])


def warnings_box(warnings: Sequence[str]) -> Markup:
    if not warnings:
        return Markup("")
    return tag("div", join([tag("p", f"Warning{'s' if len(warnings) > 1 else ''}",
                                class_="wtitle"),
                            bullet_list([w for w in warnings], cls="warnings")]),
               class_="warnbox", role="note")


def body_of(entry: Entry, anchor: str) -> tuple[Markup, list[str]]:
    """The kind's view (or the generic one) and the warnings rendering added."""
    fn = _own(entry.document, "html")
    if fn is None:
        return generic_body(entry, None), []
    try:
        return Markup(fn(entry.document, anchor=anchor, source=entry.source)), []
    except Exception as exc:  # noqa: BLE001 - a rendering bug never costs the study
        why = f"the {entry.document.kind} view failed on this document ({type(exc).__name__}: " \
              f"{exc}); shown in the generic form"
        return generic_body(entry, why), [why]


def section(entry: Entry, number: int, anchor: str) -> tuple[Markup, str, list[str]]:
    """(section markup, title, warnings) of one document."""
    title = title_of(entry)
    body, more = body_of(entry, anchor)
    warnings = [*warnings_of(entry), *more]
    head = tag("h2", join([tag("span", f"{number}.", class_="no"), esc(f" {title}")]))
    markup = tag("section", join([head, provenance(entry), warnings_box(warnings), body]),
                 id=anchor, class_="study", data_kind=entry.document.kind,
                 data_source=entry.source, data_warnings=str(len(warnings)))
    return markup, title, warnings


# --------------------------------------------------------------------------- generic view


def flat(value: Any, prefix: str, out: list[tuple[str, Any]], depth: int = 0) -> None:
    """Scalars of a nested value as (dotted key, value), lists of scalars as one value."""
    if len(out) >= MAX_GENERIC_ROWS:
        return
    if isinstance(value, dict) and depth < 4:
        for k, v in value.items():
            flat(v, f"{prefix}.{k}" if prefix else str(k), out, depth + 1)
    elif isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
        out.append((prefix, f"({len(value)} entries)"))
    else:
        out.append((prefix, value))


def generic_body(entry: Entry, why: str | None) -> Markup:
    """Metadata and summary figures of a document beoperf has no HTML view for."""
    doc = entry.document
    body = doc.body if isinstance(doc.body, dict) else {}
    summary = body.get("summary") if isinstance(body.get("summary"), dict) else None
    rows: list[tuple[str, Any]] = []
    if summary is not None:
        flat(summary, "summary", rows)
    else:
        flat(body, "", rows)
    meta_rows: list[tuple[str, Any]] = []
    flat({k: v for k, v in doc.meta.items() if k != "command_line"}, "", meta_rows)
    note = why or (f"beoperf has no HTML view of {doc.kind} documents yet: their "
                   f"{'summary figures' if summary is not None else 'fields'} and "
                   f"metadata are listed; the whole document is {entry.source}.")
    return join([para(note, "generic"),
                 table(["figure", "value"], [(k, _generic_value(k, v)) for k, v in rows],
                       numeric=[1], caption="Summary" if summary is not None else "Fields",
                       cls="generic"),
                 details("Metadata", table(["key", "value"], meta_rows, cls="generic"))])


def _generic_value(key: str, value: Any) -> Markup | str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return num(value, text_of(value), key=f"body.{key}")
    return text_of(value)


# --------------------------------------------------------------------------- the page


def toc(items: Sequence[tuple[str, str, str, int]]) -> Markup:
    """Contents grouped by kind: (anchor, title, kind, warning count) per section."""
    groups: dict[str, list[Markup]] = {}
    for anchor, title, kind, nwarn in items:
        badge = tag("span", f"{nwarn} warning{'s' if nwarn > 1 else ''}", class_="badge") \
            if nwarn else Markup("")
        groups.setdefault(kind, []).append(
            tag("li", join([tag("a", title, href=f"#{anchor}"), badge])))
    blocks = [tag("li", join([tag("span", f"{KIND_NAMES.get(kind, kind)} ({len(links)})",
                                  class_="group"), tag("ol", join(links))]))
              for kind, links in groups.items()]
    return tag("nav", join([tag("h2", "Contents"), tag("ul", join(blocks), class_="toc")]),
               id="contents")


def all_warnings(items: Sequence[tuple[str, str, list[str]]]) -> Markup:
    """Every study's warnings in one list, each linked to its section."""
    lines = [tag("li", join([tag("a", title, href=f"#{anchor}"), esc(": "), esc(w)]))
             for anchor, title, warnings in items for w in warnings]
    if not lines:
        return tag("section", join([tag("h2", "Warnings"),
                                    para("None of the studies carries a warning.")]),
                   id="warnings", class_="overview")
    return tag("section", join([tag("h2", f"Warnings ({len(lines)})"),
                                tag("ul", join(lines), class_="warnings")]),
               id="warnings", class_="overview")


def page(entries: Sequence[Entry], notes: Sequence[str] = (), *, paths: Sequence[str] = (),
         command_line: Sequence[str] = (), generated_utc: str = "",
         title: str = "beoperf report") -> str:
    """The whole HTML document."""
    sections, contents, warns = [], [], []
    for number, entry in enumerate(ordered(entries), 1):
        anchor = f"s{number}"
        markup, stitle, warnings = section(entry, number, anchor)
        sections.append(markup)
        contents.append((anchor, f"{number}. {stitle}", entry.document.kind, len(warnings)))
        warns.append((anchor, f"{number}. {stitle}", warnings))
    counts = Counter(e.document.kind for e in entries)
    summary = "; ".join(f"{KIND_NAMES.get(k, k).lower()}: {n}" for k, n in
                        sorted(counts.items(), key=lambda kv: kind_rank(kv[0])))
    head = join([
        tag("h1", title),
        pairs([("documents", f"{len(entries)}: {summary}" if entries else "none found"),
               ("read from", " ".join(paths) or None),
               ("generated", f"{generated_utc} UTC by beoperf {__version__}"),
               ("command line", code(shlex.join(command_line)) if command_line else None)],
              cls="facts head")])
    skipped = tag("section", join([tag("h2", f"Files not included ({len(notes)})"),
                                   bullet_list(list(notes), cls="notes")]),
                  id="skipped", class_="overview") if notes else Markup("")
    body = join([tag("header", head), toc(contents), all_warnings(warns),
                 tag("main", join(sections)), skipped,
                 tag("footer", para("Every figure is from the documents listed; times are "
                                    "UTC. Hover a plotted point for its values."))])
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{style.CSS}</style></head>"
            f"<body>{body}</body></html>\n")

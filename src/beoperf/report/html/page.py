"""One self-contained HTML page of many documents: `beoperf report`.

The page opens with its answer: what needs attention in every study, FAILs first, then
warnings, figures short of their precision and notes (beoperf.report.answer: each
kind's ``@answer``), one line per topic that several studies share, each linked to its
study; then what was read, when and by which command, a table of contents grouped by
kind (each study's counts per level), then one section per document.  Each section
starts with its own answer, then what every document has (the file it came from, its
kind and version, host, beoperf version, UTC start and end and the command line that
made it), then the kind's own view.

A kind's view is its ``@renderer(kind, "html")`` (a module in this package, found when
the package is imported, so a new kind is one new file); its title is its ``"title"``
renderer when it has one.  A kind without an HTML view (yet) gets the generic section:
its metadata and its summary figures as a table.  A view that fails on an odd but valid
document falls back to the generic section too, with a warning that says so: the report
never loses a study for a rendering bug.

Nothing is fetched and nothing runs: CSS is inline, plots are inline SVG, there is no
script, and a Content-Security-Policy forbids any request and any script, so the file
opens from disk, offline, exactly as written.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from beoperf import __version__
from beoperf.model.document import Document
from beoperf.report import RENDERERS, answer
from beoperf.report.answer import LABELS, Level, Line, lines_of, problems
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

LEVEL_CLASS = {Level.FAIL: "fail", Level.WARN: "warn", Level.IMPRECISE: "imprecise",
               Level.NOTE: "note", Level.OK: "ok"}
MARK_CLASS = {Level.FAIL: "bad", Level.WARN: "warn", Level.IMPRECISE: "imprecise",
              Level.NOTE: "unk", Level.OK: "ok"}

# Kinds in the order a reader meets them (others follow, by name).
KIND_ORDER = ("pingpong", "comparison", "audit", "fleet-audit", "tune-plan", "procedure",
              "study", "study-rollback", "rollback", "monitor-report", "monitor-session",
              "node", "cluster", "scaling", "prediction", "replay")
KIND_NAMES = {"pingpong": "Ping-pong runs", "comparison": "Comparisons",
              "audit": "Node audits", "fleet-audit": "Fleet audits",
              "tune-plan": "Tune plans", "procedure": "Tuning procedures (impact tables)",
              "study": "Studies (factors x measurements, against Default)",
              "study-rollback": "Study rollback snapshots (one host)",
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


def answer_of(entry: Entry) -> list[Line]:
    """The study's answer (beoperf.report.answer: the kind's own, else its "warnings"
    renderer, else its status and stored warnings), ordered."""
    return lines_of(entry.document)


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


def verdict_item(line: Line, where: Markup | None = None) -> Markup:
    """One answer line: its level's mark, where it is from (the page's top block), the
    text, and what to do."""
    todo = tag("span", join([tag("span", "To do: ", class_="lbl"), esc(line.todo)]),
               class_="todo") if line.todo else Markup("")
    lead = join([where, esc(": ")]) if where is not None else Markup("")
    return tag("li", join([level_mark(line.level), tag("span", join([lead, esc(line.text)]),
                                                       class_="vtext"), todo]),
               class_=f"v {LEVEL_CLASS[line.level]}", data_level=LABELS[line.level].lower())


def level_mark(level: Level) -> Markup:
    return tag("span", LABELS[level], class_=f"mark {MARK_CLASS[level]}")


def answer_box(lines: Sequence[Line]) -> Markup:
    """A study's answer at the top of its section (nothing when it has none)."""
    if not lines:
        return Markup("")
    return tag("div", tag("ul", join(verdict_item(line) for line in lines), class_="verdicts"),
               class_="answer", role="note")


def body_of(entry: Entry, anchor: str) -> tuple[Markup, list[Line]]:
    """The kind's view (or the generic one) and the lines rendering added."""
    fn = _own(entry.document, "html")
    if fn is None:
        return generic_body(entry, None), []
    try:
        return Markup(fn(entry.document, anchor=anchor, source=entry.source)), []
    except Exception as exc:  # noqa: BLE001 - a rendering bug never costs the study
        why = f"the {entry.document.kind} view failed on this document ({type(exc).__name__}: " \
              f"{exc}); shown in the generic form"
        return generic_body(entry, why), [Line(Level.WARN, why)]


def section(entry: Entry, number: int, anchor: str) -> tuple[Markup, str, list[Line]]:
    """(section markup, title, answer lines) of one document: its title, its answer at
    the top, where it came from, then its view."""
    title = title_of(entry)
    body, more = body_of(entry, anchor)
    lines = answer.ordered([*answer_of(entry), *more])
    head = tag("h2", join([tag("span", f"{number}.", class_="no"), esc(f" {title}")]))
    markup = tag("section", join([head, answer_box(lines), provenance(entry), body]),
                 id=anchor, class_="study", data_kind=entry.document.kind,
                 data_source=entry.source, data_warnings=str(len(problems(lines))))
    return markup, title, lines


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


def badges(lines: Sequence[Line]) -> Markup:
    """How many lines of each level but OK, as small marks (the contents' entries)."""
    counts = Counter(line.level for line in lines if line.level != Level.OK)
    return join(tag("span", f"{n} {LABELS[level]}", class_=f"badge {LEVEL_CLASS[level]}")
                for level, n in sorted(counts.items()))


def toc(items: Sequence[tuple[str, str, str, list[Line]]]) -> Markup:
    """Contents grouped by kind: (anchor, title, kind, answer lines) per section."""
    groups: dict[str, list[Markup]] = {}
    for anchor, title, kind, lines in items:
        groups.setdefault(kind, []).append(
            tag("li", join([tag("a", title, href=f"#{anchor}"), badges(lines)])))
    blocks = [tag("li", join([tag("span", f"{KIND_NAMES.get(kind, kind)} ({len(links)})",
                                  class_="group"), tag("ol", join(links))]))
              for kind, links in groups.items()]
    return tag("nav", join([tag("h2", "Contents"), tag("ul", join(blocks), class_="toc")]),
               id="contents")


@dataclass(frozen=True)
class Study:
    """A section as the top block links to it."""

    anchor: str
    number: int
    title: str


def grouped(items: Sequence[tuple[Study, list[Line]]]) -> list[tuple[Line, list[Study]]]:
    """Every study's lines but OK, by level then study; lines of one topic and level
    from several studies are one (the first's text stands for the topic)."""
    out: list[tuple[Line, list[Study]]] = []
    by_topic: dict[tuple[Level, str], list[Study]] = {}
    for study, lines in items:
        for line in problems(lines):
            key = (line.level, line.topic)
            if line.topic and key in by_topic:
                if study not in by_topic[key]:
                    by_topic[key].append(study)
                continue
            studies = [study]
            if line.topic:
                by_topic[key] = studies
            out.append((line, studies))
    return sorted(out, key=lambda pair: pair[0].level)


def _link(study: Study, short: bool, number_only: bool = False) -> Markup:
    """The study's number and title; ``short``: the title's first words ("Audit of vm"),
    ``number_only``: the number alone."""
    text = (f"{study.number}." if number_only else
            f"{study.number}. {re.split('[:,]', study.title)[0]}" if short else
            f"{study.number}. {study.title}")
    return tag("a", text, href=f"#{study.anchor}")


def _top_item(line: Line, studies: list[Study], after: list[Study] | None = None) -> Markup:
    """A line of the top block; right after a line of the same study, only its number."""
    if len(studies) == 1:
        return verdict_item(line, _link(studies[0], short=after == studies))
    where = join([esc(f"{line.topic}, in {len(studies)} studies ("),
                  join(Markup(", ").join(_link(s, True, number_only=True) for s in studies)),
                  esc("); for example")])
    return verdict_item(Line(line.level, line.text, line.todo), where)


TOP_LINES = 10  # shown in the top block; the rest (and every note) one click away


def top_block(items: Sequence[tuple[Study, list[Line]]]) -> Markup:
    """The page's answer: every study's lines in one list by level, FAILs first, each
    linked to its section; notes and what does not fit folded below."""
    found = grouped(items)
    if not found:
        return tag("section", join([tag("h2", "Nothing needs attention"), para(
            f"None of the {len(items)} studies has a failure, a warning or a figure short "
            "of its precision.")]), id="answer", class_="overview top")
    shown = [(line, s) for line, s in found if line.level < Level.NOTE][:TOP_LINES]
    rest = [pair for pair in found if pair not in shown]
    counts = Counter(line.level for line, _ in found)
    head = "What needs attention (" + ", ".join(
        f"{n} {LABELS[level]}" for level, n in sorted(counts.items())) + ")"
    folded = details(f"{len(rest)} more: " + ", ".join(
        f"{n} {LABELS[level]}" for level, n in sorted(Counter(
            line.level for line, _ in rest).items())),
        tag("ul", _items(rest), class_="verdicts")) if rest else Markup("")
    return tag("section", join([tag("h2", head), tag("ul", _items(shown), class_="verdicts"),
                                folded]), id="answer", class_="overview top")


def _items(pairs: Sequence[tuple[Line, list[Study]]]) -> Markup:
    return join(_top_item(line, studies, pairs[k - 1][1] if k else None)
                for k, (line, studies) in enumerate(pairs))


def page(entries: Sequence[Entry], notes: Sequence[str] = (), *, paths: Sequence[str] = (),
         command_line: Sequence[str] = (), generated_utc: str = "",
         title: str = "beoperf report") -> str:
    """The whole HTML document."""
    sections, contents, studies = [], [], []
    for number, entry in enumerate(ordered(entries), 1):
        anchor = f"s{number}"
        markup, stitle, lines = section(entry, number, anchor)
        sections.append(markup)
        contents.append((anchor, f"{number}. {stitle}", entry.document.kind, lines))
        studies.append((Study(anchor, number, stitle), lines))
    counts = Counter(e.document.kind for e in entries)
    summary = "; ".join(f"{KIND_NAMES.get(k, k).lower()}: {n}" for k, n in
                        sorted(counts.items(), key=lambda kv: kind_rank(kv[0])))
    head = join([
        pairs([("documents", f"{len(entries)}: {summary}" if entries else "none found"),
               ("read from", " ".join(paths) or None),
               ("generated", f"{generated_utc} UTC by beoperf {__version__}"),
               ("command line", code(shlex.join(command_line)) if command_line else None)],
              cls="facts head")])
    skipped = tag("section", join([tag("h2", f"Files not included ({len(notes)})"),
                                   bullet_list(list(notes), cls="notes")]),
                  id="skipped", class_="overview") if notes else Markup("")
    body = join([tag("h1", title), top_block(studies), tag("header", head), toc(contents),
                 tag("main", join(sections)), skipped,
                 tag("footer", para("Every figure is from the documents listed; times are "
                                    "UTC. Hover a plotted point for its values."))])
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{style.CSS}</style></head>"
            f"<body>{body}</body></html>\n")

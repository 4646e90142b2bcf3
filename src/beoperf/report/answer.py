"""The answer first: what is wrong with a study and what to do, in a few ordered lines.

Each kind's renderer module (``report/<kind>.py``) registers ``@answer(kind)``: a function
of the document returning :class:`Line` s, each a :class:`Level`, the text and what to
do.  :func:`lines_of` orders them (FAIL, then WARN, IMPRECISE, NOTE, OK: what failed
before what was measured wrong, measured problems before figures short of their
precision) and merges repeats.  The text summaries print :func:`text_block` first; the
HTML report shows each study's lines at the top of its section and every study's, the
same topic from many studies on one line, at the top of the page.

A kind without an answer of its own gets the default: its HTML "warnings" renderer, or
else the document's status and its list of warnings, each string levelled by what it
says (:func:`level_of`), so documents written before this existed read the same way.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from beoperf.model.document import Document
from beoperf.report import RENDERERS, _load, conditions


class Level(IntEnum):
    """How bad a line is; the lower, the earlier it is shown."""

    FAIL = 0  # a check failed, a run failed, data corrupt, a node or a link down
    WARN = 1  # a measured problem: a setting to change, a slow node, congestion
    IMPRECISE = 2  # figures short of the precision asked (the system may be fine)
    NOTE = 3  # what a reader should know (the history used, an import's quirks)
    OK = 4  # nothing wrong, and what was looked at


LABELS = {Level.FAIL: "FAIL", Level.WARN: "WARN", Level.IMPRECISE: "IMPRECISE",
          Level.NOTE: "NOTE", Level.OK: "OK"}
LABEL_WIDTH = max(len(v) for v in LABELS.values())


@dataclass(frozen=True)
class Line:
    """One line of the answer.  ``topic`` names what the line is about in a few words
    ("sizes short of their precision"): the report's top block shows one line for a
    topic that several studies share, linking to each."""

    level: Level
    text: str
    todo: str = ""
    topic: str = ""


Answer = Callable[[Document], list[Line]]
ANSWERS: dict[str, Answer] = {}


def answer(kind: str) -> Callable[[Answer], Answer]:
    """Register ``fn`` as the answer of documents of ``kind``."""

    def deco(fn: Answer) -> Answer:
        ANSWERS[kind] = fn
        return fn

    return deco


def lines_of(doc: Document) -> list[Line]:
    """The document's answer, ordered; a kind without one gets the default.  Never
    raises: an answer that fails is itself a line (the figures below still show)."""
    try:
        _load(doc.kind)
    except ImportError:
        pass
    fn = ANSWERS.get(doc.kind)
    try:
        found = fn(doc) if fn is not None else default(doc)
    except Exception as exc:  # noqa: BLE001 - the answer never costs the document
        found = [Line(Level.WARN, f"what this {doc.kind} document says could not be worked "
                                  f"out ({type(exc).__name__}: {exc}); its figures follow")]
    # the conditions around the run (meta.conditions: every kind a run writes); a kind
    # that also stores them among its warnings gives the same lines, kept once
    meta = doc.meta if isinstance(doc.meta, dict) else {}
    return ordered([*found, *from_strings(conditions.warnings_of(meta))])


def ordered(lines: Iterable[Line]) -> list[Line]:
    """By level, in the order given within a level; a line given twice is kept once."""
    seen: set[Line] = set()
    out = []
    for line in lines:
        if line not in seen:
            seen.add(line)
            out.append(line)
    return sorted(out, key=lambda line: line.level)


def problems(lines: Iterable[Line]) -> list[Line]:
    """The lines that are not OK."""
    return [line for line in lines if line.level != Level.OK]


def text_block(lines: Sequence[Line], indent: str = "") -> list[str]:
    """The lines for a text summary: the label, the text, what to do below it."""
    out = []
    pad = " " * (LABEL_WIDTH + 1)
    for line in lines:
        out.append(f"{indent}{LABELS[line.level]:<{LABEL_WIDTH}} {line.text}")
        if line.todo:
            out.append(f"{indent}{pad}to do: {line.todo}")
    return out


def markdown_block(lines: Sequence[Line]) -> list[str]:
    """The lines as a Markdown list (a blank line after it when there are any)."""
    out = [f"- **{LABELS[line.level]}** {line.text}" + (f" *To do:* {line.todo}"
                                                        if line.todo else "")
           for line in lines]
    return [*out, ""] if out else []


# --------------------------------------------------------------------------- the default


def default(doc: Document) -> list[Line]:
    """A kind without an answer: its "warnings" renderer (HTML views), else its status
    and its stored warnings, each levelled by what it says."""
    fn = RENDERERS.get((doc.kind, "warnings"))
    if fn is not None:
        return from_strings(str(fn(doc)).splitlines())
    return status_lines(doc.body) + from_strings(stored_warnings(doc.body))


def status_lines(body: Any, what: str = "run") -> list[Line]:
    """A status that is not complete: failed is FAIL, stopped early WARN."""
    if not isinstance(body, dict):
        return []
    status = body.get("status")
    if not isinstance(status, str) or status in ("complete", "ok", "stopped", "planned"):
        return []
    reason = body.get("status_reason") or body.get("stop_reason")
    text = f"the {what} is {status}" + (f": {reason}" if reason else "")
    if status in ("interrupted", "partial"):
        return [Line(Level.WARN, text, "run it again for the rest; what was measured is "
                                       "kept in the document")]
    return [Line(Level.FAIL, text)]


def stored_warnings(body: Any) -> list[str]:
    found = body.get("warnings") if isinstance(body, dict) else None
    return [w if isinstance(w, str) else str(w) for w in found] if isinstance(found, list) \
        else []


PRECISION = "figures short of their precision"  # topics several kinds share
HISTORY = "how the history of earlier runs was used"

# What a stored warning says, from its words (documents keep warnings as strings; these
# patterns are those beoperf wrote and writes).  First match wins; the rest are WARN.
PATTERNS: tuple[tuple[Level, str, str], ...] = (
    (Level.WARN, HISTORY, r"^history: .*(not read|left out|capped)|"  # a hostile history
                          r"^history not used: .*(owned by uid|writable by group)"),
    (Level.NOTE, HISTORY, r"\bhistory\b|earlier run|spread between runs"),
    (Level.FAIL, "", r"\b(corrupt|did not answer|failed|no small probe was answered|"
                     r"validation)\b"),
    (Level.IMPRECISE, PRECISION,
     r"did not reach|precision|too few (trials|windows)|over budget|longer than the time "
     r"budget|only \d+ window"),
    (Level.NOTE, "", r"^(note|imported|the file also holds|\d+ \S+ tables in the file)"),
)


def level_of(text: str) -> tuple[Level, str]:
    """(level, topic) of a stored warning, from its words."""
    low = text.lower()
    for level, topic, pattern in PATTERNS:
        if re.search(pattern, low):
            return level, topic
    return Level.WARN, ""


def shape(text: str) -> str:
    """The text with its figures and quoted parts replaced: warnings that differ only in
    those say the same thing."""
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", text)
    return re.sub(r"[-+]?\d[\d.,]*", "#", text)


MANY = 3  # this many warnings of one shape are shown as one line


def from_strings(texts: Iterable[str], todo: str = "") -> list[Line]:
    """Stored warnings as lines; warnings that say the same thing with other figures
    (:func:`shape`), when there are MANY or more, are one line: the first, and how many
    more like it."""
    texts = [t.strip() for t in texts if t and t.strip()]
    groups: dict[str, list[str]] = {}
    for t in texts:
        groups.setdefault(shape(t), []).append(t)
    out = []
    for same in groups.values():
        level, topic = level_of(same[0])
        if len(same) >= MANY:
            text = f"{same[0]} (and {len(same) - 1} more like it)"
            out.append(Line(level, text, todo, topic))
        else:
            out += [Line(level, t, todo, topic) for t in same]
    return out


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 size', '3 sizes'."""
    return f"{n} {word if n == 1 else many or word + 's'}"


def listed(items: Sequence[Any], limit: int = 6) -> str:
    """The first ``limit`` items, comma-separated, then how many more."""
    shown = ", ".join(str(i) for i in items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")

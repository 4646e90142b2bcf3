"""HTML pieces every section is built from, each escaping what it is given.

Everything a document holds may be crafted (beoperf reads files other users wrote), so
no text reaches the page unescaped: :func:`esc` turns ``<``, ``>``, ``&`` and both quotes
into entities and control characters into U+FFFD, and every helper here calls it on its
text and attribute values.  Helpers take *text* (plain strings, escaped here) or *markup*
(strings this package built, of type :class:`Markup`), never a string of unknown origin
as markup.

A figure shown from a document is written with :func:`num`: the text a reader sees, and
``data-value`` (the number itself) and ``data-key`` (where it is stored in the document,
``body.sizes.3.time_us.median``) so that a test can check every shown figure against the
stored document.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from typing import Any

MAX_TEXT = 4000  # characters of one string from a document shown; the rest is counted


class Markup(str):
    """A string of HTML built by this package (safe to insert as it is)."""


def esc(value: Any, limit: int = MAX_TEXT) -> Markup:
    """Text (any value, as str) escaped for element content and quoted attributes, as
    Markup; control characters become U+FFFD; beyond ``limit`` characters it is cut and
    the rest counted.  Markup (already safe) is returned as it is."""
    if isinstance(value, Markup):
        return value
    text = value if isinstance(value, str) else str(value)
    if len(text) > limit:
        text = f"{text[:limit]}… ({len(text) - limit:,} more characters)"
    text = "".join(c if c.isprintable() or c in "\n\t" else "\ufffd" for c in text)
    return Markup(html.escape(text, quote=True))


def join(parts: Iterable[str]) -> Markup:
    """Markup pieces joined (each must already be markup)."""
    return Markup("".join(parts))


def _attrs(attrs: dict[str, Any]) -> str:
    out = []
    for name, value in attrs.items():
        if value is None or value is False:
            continue
        key = name.rstrip("_").replace("_", "-")
        out.append(f" {key}" if value is True else f' {key}="{esc(value)}"')
    return "".join(out)


def tag(name: str, content: str | None = "", **attrs: Any) -> Markup:
    """<name attrs>content</name>; content is escaped unless it is Markup."""
    inner = content if isinstance(content, Markup) else esc(content or "")
    return Markup(f"<{name}{_attrs(attrs)}>{inner}</{name}>")


def text_of(value: Any) -> str:
    """A document value as plain text: '-' for None, lists space-separated, booleans
    yes/no, floats with up to 6 significant digits."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list | tuple):
        return " ".join(text_of(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={text_of(v)}" for k, v in value.items())
    return str(value)


def num(value: float | int | None, shown: str, key: str | None = None,
        title: str | None = None, unit: str | None = None) -> Markup:
    """A figure: ``shown`` to the reader, the number in data-value, and data-key when it is
    a value stored in the document at that path (a test compares the two); ``unit`` names
    the unit of ``shown`` when the text leaves it to the column's header."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return tag("span", shown or "n/a", class_="n na", title=title)
    return tag("span", shown, class_="n", data_value=repr(value), data_key=key,
               data_unit=unit, title=title)


def table(head: Sequence[str], rows: Iterable[Sequence[Any]], *, numeric: Iterable[int] = (),
          caption: str | None = None, cls: str | None = None,
          row_classes: Sequence[str | None] | None = None,
          empty: str | None = None) -> Markup:
    """A table: header texts, rows of cells (text or Markup), right-aligned ``numeric``
    columns, an optional caption (text) and a class per row.  Without rows: ``empty``,
    what was looked for ("None: no ..."), under the caption, never a bare "(none)"."""
    right = set(numeric)
    head_cells = join(tag("th", h, class_="r" if i in right else None)
                      for i, h in enumerate(head))
    body = []
    for k, row in enumerate(rows):
        cls_row = row_classes[k] if row_classes is not None and k < len(row_classes) else None
        cells = join(tag("td", c if isinstance(c, Markup) else text_of(c),
                         class_="r" if i in right else None) for i, c in enumerate(row))
        body.append(tag("tr", cells, class_=cls_row))
    if not body:
        said = empty or "None."
        return tag("p", join([tag("span", f"{caption}: ", class_="lbl"), esc(said)])
                   if caption else said, class_="none")
    cap = tag("caption", caption) if caption else Markup("")
    return tag("div", tag("table", join([cap, tag("thead", tag("tr", head_cells)),
                                         tag("tbody", join(body))]), class_=cls),
               class_="tablewrap")


def pairs(items: Iterable[tuple[str, Any]], cls: str = "facts") -> Markup:
    """A definition list of (name, value text or Markup), skipping values that are None."""
    out = []
    for name, value in items:
        if value is None or value == "":
            continue
        out.append(tag("dt", name))
        out.append(tag("dd", value if isinstance(value, Markup) else text_of(value)))
    return tag("dl", join(out), class_=cls) if out else Markup("")


def para(content: str, cls: str | None = None) -> Markup:
    return tag("p", content, class_=cls)


def heading(text: str, level: int = 3, anchor: str | None = None) -> Markup:
    return tag(f"h{level}", text, id=anchor)


def details(summary: str, content: Markup, open_: bool = False) -> Markup:
    """A collapsible block (printed open: the CSS opens every <details> for print)."""
    return tag("details", join([tag("summary", summary), content]), open=open_)


def bullet_list(items: Iterable[str | Markup], cls: str | None = None) -> Markup:
    return tag("ul", join(tag("li", i) for i in items), class_=cls)


def code(text: str) -> Markup:
    return tag("code", text)


def figure(svg: Markup, caption: Markup | str, anchor: str | None = None,
           kind: str | None = None) -> Markup:
    """A plot with its caption (what is drawn, units, spread, conditions)."""
    return tag("figure", join([svg, tag("figcaption", caption)]), id=anchor,
               class_="plot", data_plot=kind)


def status_mark(status: str | None) -> Markup:
    """A verdict (pass, warn, fail, unknown, or any word) as a coloured label."""
    word = str(status or "unknown")
    cls = {"pass": "ok", "ok": "ok", "warn": "warn", "fail": "bad", "failed": "bad"}.get(
        word, "unk")
    return tag("span", word, class_=f"mark {cls}")

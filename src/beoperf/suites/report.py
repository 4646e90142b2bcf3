"""`beoperf report`: every document under some paths as one self-contained HTML page.

:func:`run` finds the documents (``model.collect``: bounded reads, no symlink followed
inside a tree, non-documents skipped with a note) and builds the page
(``report.html.page``).  Nothing is measured and nothing is written here: the CLI writes
the page through safeio.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from beoperf import errors
from beoperf.model.collect import collect
from beoperf.model.document import utc_now

HINT = "give the folders or files your runs were written to (beoperf writes .json documents)"


@dataclass(frozen=True)
class Spec:
    paths: tuple[str, ...]
    title: str = "beoperf report"
    command_line: tuple[str, ...] = ()


class Built(NamedTuple):
    """The page, how many documents it holds, and what was skipped (one line each)."""

    html: str
    documents: int
    notes: list[str]


def run(spec: Spec) -> Built:
    """The report of every document under ``spec.paths``; errors.InputError when there is
    none (with what was skipped, so the user sees why)."""
    from beoperf.report.html.page import Entry, page

    found = collect(list(spec.paths))
    notes = found.summary_notes()
    if not found.documents:
        shown = "; ".join(notes[:3]) + (f"; and {len(notes) - 3} more" if len(notes) > 3 else "")
        raise errors.InputError(f"no beoperf document under {' '.join(spec.paths)}"
                                + (f" ({shown})" if shown else ""), HINT)
    entries = [Entry(f.path, f.document) for f in found.documents]
    html = page(entries, notes, paths=spec.paths, command_line=spec.command_line,
                generated_utc=utc_now().replace("T", " ").removesuffix("Z"), title=spec.title)
    return Built(html, len(entries), notes)

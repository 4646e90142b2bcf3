"""Renderers: a document in, text out, one module per document kind.

``@renderer(kind, fmt)`` registers a function ``(document, **options) -> str`` for a
format ("text", "markdown", "csv", "json"; and for the HTML report "html", a study's
section, "title", its one-line name, and, for a kind without an answer, "warnings", one
per line: see report/html/); :func:`render` finds it.  What a document says is wrong and
what to do, by severity, is the kind's ``@answer`` (``report/answer.py``), which every view
shows first.  Renderers read only
documents (``beoperf.model``) and the analysis layer: they never measure, never touch the
system and never write files (the CLI writes what they return, through ``safeio``).
Plots live beside them (``report/plots.py``, ``report/monitor_plots.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from beoperf.model.document import Document

Renderer = Callable[..., str]
RENDERERS: dict[tuple[str, str], Renderer] = {}


def renderer(kind: str, fmt: str) -> Callable[[Renderer], Renderer]:
    """Register ``fn`` as the ``fmt`` renderer of documents of ``kind``."""

    def deco(fn: Renderer) -> Renderer:
        RENDERERS[(kind, fmt)] = fn
        return fn

    return deco


def json_text(doc: Document, **_options: Any) -> str:
    """The document itself, as stored (every kind has this one)."""
    return doc.dumps()


# the module of each kind's renderers (only that one is imported to render a document:
# a running monitor need not load numpy to print its session)
MODULES = {"pingpong": "beoperf.report.pingpong", "comparison": "beoperf.report.compare",
           "audit": "beoperf.report.audit", "fleet-audit": "beoperf.report.fleet",
           "tune-plan": "beoperf.report.tune", "rollback": "beoperf.report.tune",
           "procedure": "beoperf.report.tune", "monitor-report": "beoperf.report.monitor",
           "monitor-session": "beoperf.report.monitor_session",
           "prediction": "beoperf.report.prediction", "replay": "beoperf.report.prediction",
           "cluster": "beoperf.report.cluster", "scaling": "beoperf.report.cluster",
           "hpcc-comparison": "beoperf.report.cluster",
           "cluster-ring": "beoperf.report.cluster_mpi",
           "cluster-pairs": "beoperf.report.cluster_mpi",
           "cluster-mbw": "beoperf.report.cluster_mpi", "node": "beoperf.report.node",
           "cluster-rma": "beoperf.report.cluster_rma",
           "node-fleet": "beoperf.report.node", "node-comparison": "beoperf.report.node",
           "study": "beoperf.report.study",
           "study-rollback": "beoperf.report.study_rollback",
           "cluster-p2p": "beoperf.report.cluster_p2p",
           "cluster-coll": "beoperf.report.cluster_coll"}


HTML_FORMATS = ("html", "title", "warnings")  # a kind's section of the HTML report


def render(doc: Document, fmt: str = "text", **options: Any) -> str:
    """The document in ``fmt``; KeyError if that kind has no such renderer."""
    if fmt == "json":
        return json_text(doc)
    _load(doc.kind, fmt)
    return RENDERERS[(doc.kind, fmt)](doc, **options)


def for_terminal(text: str) -> str:
    """TEXT with every control character but newline and tab shown escaped ('\\x1b'): a
    document may be crafted, and its labels, host names and notes must not reach a
    terminal as escape sequences (clear the screen, retitle the window ...)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in "\n\t" else repr(c)[1:-1] for c in text)


def formats(kind: str) -> list[str]:
    """The formats a kind can be rendered in on its own (the HTML report's pieces, a
    section, its title and warnings, are not documents of their own)."""
    _load(kind)
    return sorted({"json", *(fmt for k, fmt in RENDERERS
                             if k == kind and fmt not in HTML_FORMATS)})


def _load(kind: str, fmt: str = "text") -> None:
    """Import the module of ``kind``'s renderers; for "html", "title" and "warnings" the
    HTML views too (report/html/, one module per kind, all imported with the package)."""
    import importlib

    if kind in MODULES:
        importlib.import_module(MODULES[kind])
    if fmt in HTML_FORMATS:
        importlib.import_module("beoperf.report.html")

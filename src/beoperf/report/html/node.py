"""Node documents in the HTML report: a node's suite (its tables as `beoperf node` prints
them), a fleet's outliers and node runs compared (as tables)."""

from __future__ import annotations

from typing import Any

from beoperf.model.document import Document
from beoperf.report import node as text
from beoperf.report import renderer
from beoperf.report.html.markup import Markup, esc, heading, join, para, table, tag


@renderer("node", "title")
def title(doc: Document, **_options: Any) -> str:
    parts = ", ".join(doc.body.get("parts", {})) or "no part"
    return f"Node suite on {doc.meta.get('host', '?')}: {parts}"


@renderer("node", "warnings")
def warnings(doc: Document, **_options: Any) -> str:
    b = doc.body
    failed = [m["id"] for m in b["metrics"] if m.get("ok") is False]
    out = [f"status {b['status']}: {b.get('status_reason') or ''}".rstrip(": ")
           ] if b["status"] != "complete" else []
    return "\n".join(out + ([f"checks failed: {', '.join(failed)}"] if failed else []))


def _block(lines: list[str]) -> Markup:
    return tag("pre", esc("\n".join(lines).strip("\n"), limit=1 << 20), class_="text")


@renderer("node", "html")
def section(doc: Document, **_options: Any) -> str:
    b = doc.body
    parts = [para(esc(line)) for line in text.condition_lines(b, doc.meta)]
    for name, lines in (("STREAM", text.stream_lines(b)), ("PEAK kernels", text.kernel_lines(b)),
                        ("DGEMM, RandomAccess, FFT", text.compute_lines(b)),
                        ("I/O", text.io_lines(b))):
        if lines:
            parts += [heading(name, 4), _block(lines)]
    return join(parts)


@renderer("node-fleet", "title")
def fleet_title(doc: Document, **_options: Any) -> str:
    return f"Node suite on {doc.body['nodes']}"


@renderer("node-fleet", "warnings")
def fleet_warnings(doc: Document, **_options: Any) -> str:
    return "\n".join(f"outlier node {n}: {len(ids)} metric(s)"
                     for n, ids in doc.body["outliers"].items())


@renderer("node-fleet", "html")
def fleet_section(doc: Document, **_options: Any) -> str:
    lines = text.fleet_lines(doc.body)
    return _block(lines)


@renderer("node-comparison", "title")
def comparison_title(doc: Document, **_options: Any) -> str:
    return f"Node runs compared against {doc.body['baseline']}"


@renderer("node-comparison", "html")
def comparison_section(doc: Document, **_options: Any) -> str:
    head, rows = text.comparison_rows(doc.body)
    numeric = {i for i, h in enumerate(head) if i >= 2 and h != "verdict"}
    return join([table(head, rows, numeric=numeric), para(esc(doc.body["test"]["statement"]))])

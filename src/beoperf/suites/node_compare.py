"""`beoperf compare` on node documents: each metric's change against the baseline and its
verdict (beoperf.analysis.node.compare_rows); files given the same label are repeated runs
of one configuration."""

from __future__ import annotations

from pathlib import Path

from beoperf import errors, safeio
from beoperf.analysis import node as analysis
from beoperf.model import node as node_doc
from beoperf.model.document import Document, DocumentError, load, make_meta
from beoperf.suites.results import check_label_count, input_error


def is_node_file(path: str) -> bool:
    """Whether a file is a node document (False for anything unreadable: the ping-pong
    loader then says what is wrong with it)."""
    try:
        raw = safeio.load_json(path, safeio.LIMITS["result"], "a result")
    except (safeio.FileInputError, OSError):
        return False
    return node_doc.is_node(raw)


def load_node(path: str) -> Document:
    try:
        doc = load(path)
    except (DocumentError, OSError) as exc:
        raise input_error(path, exc) from None
    if doc.kind != node_doc.KIND:
        raise errors.InputError(f"{path}: a {doc.kind} document among node documents",
                                "compare node documents with node documents")
    try:
        node_doc.NodeRun.from_document(doc)  # every field it is compared by, checked
    except DocumentError as exc:
        raise input_error(path, exc) from None
    return doc


def labels_of(given: tuple[str, ...] | None, paths: tuple[str, ...],
              docs: list[Document]) -> list[str]:
    check_label_count(given, paths)
    if given is not None:
        return list(given)
    names = [str(d.meta.get("host") or Path(p).name) for d, p in zip(docs, paths, strict=True)]
    return [f"{n} ({Path(p).name})" if names.count(n) > 1 else n
            for n, p in zip(names, paths, strict=True)]


def run(files: tuple[str, ...], labels: tuple[str, ...] | None, baseline: str | None,
        margin: float, command_line: tuple[str, ...] = ()) -> Document:
    docs = [load_node(f) for f in files]
    names = labels_of(labels, files, docs)
    index = 0
    if baseline is not None:
        matches = [i for i, (f, n) in enumerate(zip(files, names, strict=True))
                   if baseline in (f, n)]
        if not matches:
            raise errors.BadSpec(f"--baseline {baseline}: not among the files compared",
                                 "name one of the FILEs (or its label)")
        index = matches[0]
    runs = [node_doc.NodeRun.from_document(d) for d in docs]
    rows = analysis.compare_rows(runs, names, names[index], margin)
    unique = list(dict.fromkeys(names))
    compared = node_doc.NodeComparison(names[index], unique,
                                       [names.count(label) for label in unique], margin,
                                       analysis.describe_test(margin), rows)
    return compared.to_document(make_meta(list(command_line)))

"""Reference systems for the cluster suite and `beoperf compare`: the built-in ones named
by ``--reference NAME``, and every system of each ``--reference-file FILE`` (a CSV in the
built-in files' layout, or a beoperf cluster or scaling document)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from beoperf import errors, safeio
from beoperf.model import document
from beoperf.model.document import DocumentError
from beoperf.model.references_data import (
    ReferenceError,
    System,
    built_in,
    find,
    from_document,
    merge,
    read_csv,
)

MAX_REFERENCE_DOCUMENT = 16 * 1024 * 1024


def load_file(path: str) -> list[System]:
    """The systems of one reference file (CSV, or a beoperf JSON document)."""
    try:
        head = safeio.read_bytes(path, MAX_REFERENCE_DOCUMENT, "a reference file")[:64]
        if head.lstrip().startswith(b"{"):
            doc = document.load(path, MAX_REFERENCE_DOCUMENT, "a reference document")
            return [from_document(doc.kind, doc.body, path)]
        return read_csv(path)
    except (ReferenceError, DocumentError, safeio.FileInputError) as exc:
        raise errors.InputError(str(exc)) from None


def systems_for(names: Sequence[str], files: Sequence[str]) -> list[System]:
    """The named built-in (or file) systems, then every system of the files."""
    from_files = [s for f in files for s in load_file(f)]
    pool = merge([*from_files, *built_in()])
    chosen: list[System] = []
    try:
        for name in names:
            system = find(pool, name)
            if system not in chosen:
                chosen.append(system)
    except ReferenceError as exc:
        raise errors.BadSpec(str(exc), "see 'beoperf cluster references'") from None
    for system in merge(from_files):
        kept = find(pool, system.name)
        if kept not in chosen:
            chosen.append(kept)
    return chosen


def describe() -> list[tuple[str, str, list[int | None], str]]:
    """(name, description, process counts, source) of every built-in system."""
    return [(s.name, s.description, [p.np for p in s.points], Path(s.source).name)
            for s in built_in()]

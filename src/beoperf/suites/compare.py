"""`beoperf compare`: runs side by side against a baseline, as a comparison document."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from beoperf import errors
from beoperf.analysis import compare
from beoperf.analysis.compare import describe_test
from beoperf.analysis.effect import DEFAULT_MARGIN
from beoperf.model.document import Document, make_meta
from beoperf.model.pingpong import RunResult
from beoperf.suites import node_compare
from beoperf.suites.results import check_label_count, import_warnings, labels_for, load_result

__all__ = ["DEFAULT_MARGIN", "Spec", "run", "describe_test"]


@dataclass(frozen=True)
class Spec:
    files: tuple[str, ...]
    labels: tuple[str, ...] | None = None
    baseline: str | None = None  # one of the files (path) or a label; None: the first
    margin: float = DEFAULT_MARGIN  # a fraction in [0, 1): a change within it counts as none
    command_line: tuple[str, ...] = ()


def baseline_index(spec: Spec, labels: list[str]) -> int:
    """Position of the baseline among the files (same path) or the labels."""
    if spec.baseline is None:
        return 0
    wanted = Path(spec.baseline)
    for i, name in enumerate(spec.files):
        if name == spec.baseline or _same_file(Path(name), wanted):
            return i
    if spec.baseline in labels:
        return labels.index(spec.baseline)
    raise errors.BadSpec(f"--baseline {spec.baseline}: not among the files compared",
                         "name one of the FILEs (or its label)")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False


def run(spec: Spec, notes: list[str] | None = None) -> Document:
    """The comparison document; what the importers said of the files read (other tools'
    output) is appended to notes, for the command to show."""
    if not 0 <= spec.margin < 1:
        raise errors.BadSpec(f"--margin {spec.margin}: expected a fraction such as "
                             "0.1, or 10%", "see 'beoperf COMMAND --help'")
    check_label_count(spec.labels, spec.files)  # before any file is read
    if any(node_compare.is_node_file(f) for f in spec.files):
        return node_compare.run(spec.files, spec.labels, spec.baseline, spec.margin,
                                spec.command_line)
    runs = [load_result(f) for f in spec.files]
    for path, one in zip(spec.files, runs, strict=True):
        if all(s.size == 0 for s in one.sizes):
            raise errors.InputError(f"{path}: empty messages (0 B) only: no throughput to "
                                    "compare; a run with a size above 0 has a peak")
    if notes is not None:
        notes += import_warnings(spec.files, runs)
    names = labels_for(spec.labels, spec.files, runs)
    table = compare.rows(runs, baseline_index(spec, names), spec.margin, names)
    return compare.document(table, spec.margin, make_meta(list(spec.command_line)))


def document_of(runs: list[RunResult], labels: list[str],
                margin: float = DEFAULT_MARGIN) -> Document:
    """The comparison of runs already in memory, against the first (a config sweep's)."""
    return compare.document(compare.rows(runs, 0, margin, labels), margin)

"""`beoperf compare`: runs side by side against a baseline, as a comparison document."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from beoperf import errors
from beoperf.analysis import compare
from beoperf.analysis.compare import DEFAULT_MIN_CHANGE, describe_test
from beoperf.model.document import Document, make_meta
from beoperf.model.pingpong import RunResult
from beoperf.suites import node_compare
from beoperf.suites.results import check_label_count, labels_for, load_result

__all__ = ["DEFAULT_MIN_CHANGE", "Spec", "run", "describe_test"]


@dataclass(frozen=True)
class Spec:
    files: tuple[str, ...]
    labels: tuple[str, ...] | None = None
    baseline: str | None = None  # one of the files (path) or a label; None: the first
    min_change: float = DEFAULT_MIN_CHANGE  # a fraction in [0, 1)
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


def run(spec: Spec) -> Document:
    if not 0 <= spec.min_change < 1:
        raise errors.BadSpec(f"--min-change {spec.min_change}: expected a fraction such as "
                             "0.02, or 2%", "see 'beoperf COMMAND --help'")
    check_label_count(spec.labels, spec.files)  # before any file is read
    if any(node_compare.is_node_file(f) for f in spec.files):
        return node_compare.run(spec.files, spec.labels, spec.baseline, spec.min_change,
                                spec.command_line)
    runs = [load_result(f) for f in spec.files]
    names = labels_for(spec.labels, spec.files, runs)
    table = compare.rows(runs, baseline_index(spec, names), spec.min_change, names)
    return compare.document(table, spec.min_change, make_meta(list(spec.command_line)))


def document_of(runs: list[RunResult], labels: list[str],
                min_change: float = DEFAULT_MIN_CHANGE) -> Document:
    """The comparison of runs already in memory, against the first (a config sweep's)."""
    return compare.document(compare.rows(runs, 0, min_change, labels), min_change)

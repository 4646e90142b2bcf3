"""Result files given to `plot` and `compare`: loading, one-line errors, labels.

Any format the importers read (beoperf JSON of any version, NetPIPE, IMB, OSU), with every
problem an InputError naming the file.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from beoperf import errors
from beoperf.analysis.curve import analyze_run
from beoperf.model.document import DocumentError
from beoperf.model.importers import load_any
from beoperf.model.pingpong import RunResult


def input_error(path: str, exc: BaseException | str) -> errors.InputError:
    """One line naming the file, whatever the exception said."""
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    if not text.startswith(f"{path}:"):
        text = f"{path}: {text}"
    return errors.InputError(" ".join(text.split()))


def load_result(path: str) -> RunResult:
    """Any supported result with at least one size and usable figures."""
    try:
        run = load_any(Path(path))
        if not run.sizes:
            raise DocumentError("no measured sizes in this result")
        if not all(s.central_time_us() > 0 and (s.central_bps() > 0 or s.size == 0 ==
                                                 s.central_bps()) for s in run.sizes):
            raise DocumentError("a size with a time or throughput that is not positive (an "
                                "empty message's throughput is 0)")
        analyze_run(run)  # every derived figure can be computed
    except (ValueError, OSError) as exc:  # DocumentError is a ValueError
        raise input_error(path, exc) from None
    return run


def import_warnings(paths: Sequence[str], runs: Sequence[RunResult]) -> list[str]:
    """What the importer of another tool's file said about it (other tables left out, a job
    log after the table, ...), one line per warning naming the file; none for beoperf's own
    documents, whose warnings are the measurement's and are shown with its figures."""
    return [f"{path}: {warning}" for path, run in zip(paths, runs, strict=True)
            if run.source is not None for warning in run.warnings]


def check_label_count(labels: Sequence[str] | None, paths: Sequence[str]) -> None:
    """--label is all or nothing: one per file, in order."""
    if labels is not None and len(labels) != len(paths):
        raise errors.BadSpec(f"{len(labels)} --label for {len(paths)} file(s): "
                             "give one --label per file, in order, or none",
                             "see 'beoperf COMMAND --help'")


def labels_for(given: Sequence[str] | None, paths: Sequence[str],
               runs: Sequence[RunResult]) -> list[str]:
    """--label as given, else each run's own label; clashing labels get their file name."""
    check_label_count(given, paths)
    if given is not None:
        return list(given)
    labels = [run.label() for run in runs]
    counts = Counter(labels)
    return [f"{label} ({Path(path).name})" if counts[label] > 1 else label
            for label, path in zip(labels, paths, strict=True)]

"""Result files given on the command line: loading, one-line errors, labels.

Shared by `plot` and `compare`: any format the importers read, with every
problem reported as `beoperf: input error: FILE: what is wrong`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from beoperf.analysis.curve import analyze_run
from beoperf.cli import CliError, ExitStatus, UsageError
from beoperf.results.importers import load_any
from beoperf.results.model import ResultFormatError, RunResult


def input_error(path: str, exc: BaseException | str) -> CliError:
    """One line naming the file, whatever the exception said."""
    if isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror
    else:
        text = str(exc)
    if not text.startswith(f"{path}:"):
        text = f"{path}: {text}"
    return CliError(ExitStatus.ERROR, "input error", " ".join(text.split()))


def load_result(path: str) -> RunResult:
    """Any supported result with at least one size and usable figures."""
    try:
        run = load_any(Path(path))
        if not run.sizes:
            raise ResultFormatError("no measured sizes in this result")
        if not all(s.central_time_us() > 0 and s.central_bps() > 0 for s in run.sizes):
            raise ResultFormatError("a size with a time or throughput that is not positive")
        analyze_run(run)  # every derived figure can be computed
    except (ValueError, OSError) as exc:  # ResultFormatError is a ValueError
        raise input_error(path, exc) from None
    return run


def check_label_count(labels: list[str] | None, paths: list[str]) -> None:
    """--label is all or nothing: one per file, in order."""
    if labels is not None and len(labels) != len(paths):
        raise UsageError(f"{len(labels)} --label for {len(paths)} file(s): "
                         "give one --label per file, in order, or none")


def labels_for(given: list[str] | None, paths: list[str], runs: list[RunResult]) -> list[str]:
    """--label as given, else each run's own label; clashing labels get their file name."""
    check_label_count(given, paths)
    if given is not None:
        return list(given)
    labels = [run.label() for run in runs]
    counts = Counter(labels)
    return [f"{label} ({Path(path).name})" if counts[label] > 1 else label
            for label, path in zip(labels, paths, strict=True)]

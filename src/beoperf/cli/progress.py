"""A progress bar on a terminal, nothing at all otherwise."""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any


class Progress:
    """How many sizes are known to the requested precision, pass after pass."""

    def __init__(self, total: int, precision: float, enabled: bool) -> None:
        self.total, self.precision, self.enabled = total, precision, enabled
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> Progress:
        if self.enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as Bar

            self._bar = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), transient=True)
            self._bar.__enter__()
            self._task = self._bar.add_task("calibrating", total=self.total)
        return self

    def advance(self, passes: int, points: Sequence[Any]) -> None:
        """After a pass: its number, and each size's state (``converged``)."""
        if self._bar is not None:
            done = sum(1 for p in points if p.converged)
            self._bar.update(self._task, completed=done,
                             description=f"pass {passes}: sizes within "
                                         f"{self.precision * 100:g}%")

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.__exit__(exc_type, exc, tb)

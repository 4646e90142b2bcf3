"""A progress bar on a terminal, nothing at all otherwise."""

from __future__ import annotations

from types import TracebackType

from beoperf.results.model import SizeResult


class Progress:
    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.enabled = total, enabled
        self._bar = None
        self._task = None

    def __enter__(self) -> Progress:
        if self.enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as Bar

            self._bar = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), transient=True)
            self._bar.__enter__()
            self._task = self._bar.add_task("sizes", total=self.total)
        return self

    def advance(self, result: SizeResult) -> None:
        if self._bar is not None:
            mbps = result.throughput_bps["from_median"] / 1e6
            self._bar.update(self._task, advance=1,
                             description=f"{result.size:>9} B {result.time_us['median']:9.2f} us "
                                         f"{mbps:10.2f} Mbit/s")

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.__exit__(exc_type, exc, tb)

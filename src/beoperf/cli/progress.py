"""Progress of long work: on a terminal a bar over the time budget, with what is being
done and the time left; without one, at most a line per phase; at the end, one line of
what missed its precision (the caller's).

The bar runs on time, not on counts: the budget bounds the run (beoperf.sweep.precision),
so the share of it spent, and what is left of it, is the honest overall progress and ETA,
and it moves while a slow size is being measured (a bar over sizes stood at 0/124 for
half an hour on one).
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Progress:
    """A bar over ``budget_s`` seconds (none: elapsed time only) on a terminal
    (``enabled``); ``phase`` lines on stderr otherwise (``lines``)."""

    def __init__(self, budget_s: float | None, enabled: bool, lines: bool = False,
                 what: str = "measuring", precision: float | None = None,
                 hard: bool = True) -> None:
        self.budget_s, self.enabled, self.lines = budget_s, enabled, lines
        self.what, self.precision = what, precision
        self.hard = hard  # a hard budget: "at most" left; a soft one: "about"
        self._bar: Any = None
        self._task: Any = None
        self.started = time.monotonic()

    def __enter__(self) -> Progress:
        self.started = time.monotonic()
        if self.enabled:
            self._bar = _bar(self.budget_s, self.hard)
            self._bar.__enter__()
            self._task = self._bar.add_task(self.what, total=self.budget_s or None)
        return self

    def phase(self, text: str) -> None:
        """A new phase (a sweep's value, a test of a suite): the bar's text on a
        terminal, a line on stderr otherwise."""
        if self._bar is not None:
            self._bar.update(self._task, description=text)
        elif self.lines:
            _say(text)

    def update(self, text: str) -> None:
        """Within a phase (a pass): the bar's text on a terminal only."""
        if self._bar is not None:
            self._bar.update(self._task, description=text)

    def restart(self, budget_s: float | None) -> None:
        """A new phase with a budget of its own: the bar starts over."""
        self.budget_s = budget_s
        if self._bar is not None:
            self._bar.reset(self._task, total=budget_s or None)

    def advance(self, passes: int, points: Sequence[Any]) -> None:
        """After a pass of the precision loop: its number, and each point's state."""
        if self._bar is None:
            return
        done = sum(1 for p in points if getattr(p, "converged", False))
        within = f" within {self.precision * 100:g}%" if self.precision else " precise"
        self.update(f"{self.what}: pass {passes}, {done}/{len(points)}{within}")

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.__exit__(exc_type, exc, tb)
            self._bar = None


def _bar(budget_s: float | None, hard: bool = True) -> Any:
    """rich's progress display on stderr: text, a bar filled by the time spent of the
    budget, the time spent and the budget's time left ("at most" for a hard budget,
    "about" for a soft one, which the minimum trials may overrun)."""
    from rich.console import Console
    from rich.progress import BarColumn, ProgressColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as Bar
    from rich.progress_bar import ProgressBar
    from rich.text import Text

    class TimeBar(BarColumn):
        def render(self, task: Any) -> ProgressBar:
            total = task.total
            spent = min(task.elapsed or 0.0, total) if total else None
            return ProgressBar(total=total, completed=spent or 0, width=self.bar_width,
                               pulse=total is None, animation_time=task.get_time())

    class Left(ProgressColumn):
        def render(self, task: Any) -> Text:
            if not task.total:
                return Text("")
            left = max(0.0, task.total - (task.elapsed or 0.0))
            return Text(f"{'at most' if hard else 'about'} {_clock(left)} left")

    return Bar(TextColumn("{task.description}"), TimeBar(), TimeElapsedColumn(), Left(),
               console=Console(stderr=True), transient=True, refresh_per_second=4)


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds + 0.5), 60)
    if minutes < 60:
        return f"{minutes}:{secs:02d}"
    return f"{minutes // 60}:{minutes % 60:02d}:{secs:02d}"


PASS_LINE = re.compile(r"^(?P<what>.+): pass (?P<n>\d+), (?P<done>\d+) of (?P<of>\d+) "
                       r"figures within (?P<precision>\S+)$")


class PassLines:
    """The cluster tests' lines of progress from rank 0 (beoperf.suites.cluster_mpi):
    the lines of each pass go to the bar on a terminal and nowhere otherwise, but the
    first of each measurement (a phase) does; every other line passes through.  At the
    end, :meth:`summary` is one line: which measurements ended with figures outside
    their precision (from each one's last pass)."""

    def __init__(self, progress: Progress, say: Callable[[str], None] = _say,
                 budget_s: float | None = None) -> None:
        self.progress, self.say, self.budget_s = progress, say, budget_s  # per measurement
        self.last: dict[str, tuple[int, int, int, str]] = {}  # what -> passes, done, of

    def __call__(self, line: str) -> None:
        match = PASS_LINE.match(line.strip())
        if match is None:
            self.progress.phase(line) if self.progress.enabled else self.say(line)
            return
        what = match["what"]
        if what not in self.last:  # a new measurement: its own budget on the bar
            if self.progress.enabled:
                self.progress.restart(self.budget_s)
            else:
                self.say(f"{what}: measuring (a line per pass on a terminal only)")
        self.last[what] = (int(match["n"]), int(match["done"]), int(match["of"]),
                           match["precision"])
        self.progress.update(line)

    def summary(self) -> str | None:
        """'precision: ring latency 28 of 40 figures outside 5% after 9 passes; ...', or
        that every figure reached it; None if no pass was seen."""
        if not self.last:
            return None
        missed = [f"{what} {of - done} of {of} figures outside {precision} after {n} "
                  f"pass{'es' if n != 1 else ''}"
                  for what, (n, done, of, precision) in self.last.items() if done < of]
        if not missed:
            return f"precision: every figure of {len(self.last)} measurement(s) reached it"
        return "precision not reached: " + "; ".join(missed)


class PartsProgress:
    """A suite of parts (the node suite: stream, kernels, dgemm ...): on a terminal a bar
    over the parts with what runs now and the time so far; without one, a line when a
    part starts.  A progress text names its part first ("kernels: daxpy pass 3 ...")."""

    def __init__(self, parts: Sequence[str], enabled: bool, lines: bool = True,
                 say: Callable[[str], None] = _say) -> None:
        self.parts, self.enabled, self.lines, self.say = list(parts), enabled, lines, say
        self.current: str | None = None
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> PartsProgress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as Bar

            self._bar = Bar(TextColumn("{task.description}"), BarColumn(),
                            MofNCompleteColumn(), TextColumn("parts"), TimeElapsedColumn(),
                            console=Console(stderr=True), transient=True,
                            refresh_per_second=4)
            self._bar.__enter__()
            self._task = self._bar.add_task("starting", total=len(self.parts))
        return self

    def __call__(self, text: str) -> None:
        part = text.split(":", 1)[0].strip()
        if part in self.parts and part != self.current:
            self.current = part
            done = self.parts.index(part)
            if self._bar is not None:
                self._bar.update(self._task, completed=done)
            elif self.lines:
                self.say(f"part {done + 1} of {len(self.parts)}: {part}")
        if self._bar is not None:
            self._bar.update(self._task, description=text)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.__exit__(exc_type, exc, tb)
            self._bar = None


def precision_summary(metrics: Sequence[dict[str, Any]], precision: float | None = None
                      ) -> str | None:
    """One line of the figures that missed their precision, per part ("precision not
    reached: kernels 12 of 40 figures outside 2%"); None when every figure that has a
    precision reached it."""
    judged: dict[str, list[bool]] = {}
    for m in metrics:
        if isinstance(m.get("converged"), bool):
            judged.setdefault(str(m.get("part")), []).append(m["converged"])
    missed = [f"{part} {flags.count(False)} of {len(flags)} figures"
              for part, flags in judged.items() if not all(flags)]
    if not missed:
        return None
    within = f" outside {precision:.0%}" if precision else ""
    return f"precision not reached: {'; '.join(missed)}{within}"


class CountBar:
    """On a terminal, a bar over a count of steps known once the work is planned (a
    tuning procedure's measurements): the steps done, the time spent and the time left at
    the pace so far.  ``__call__(total)`` with a total sets it, with 0 counts a step."""

    def __init__(self, enabled: bool, what: str = "measuring") -> None:
        self.enabled, self.what = enabled, what
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> CountBar:
        if self.enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as Bar

            self._bar = Bar(TextColumn("{task.description}"), BarColumn(),
                            MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("left"),
                            TimeRemainingColumn(), console=Console(stderr=True),
                            transient=True, refresh_per_second=4)
            self._bar.__enter__()
            self._task = self._bar.add_task(self.what, total=None)
        return self

    def __call__(self, total: int) -> None:
        if self._bar is None:
            return
        if total:
            self._bar.update(self._task, total=total)
        else:
            self._bar.advance(self._task)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.__exit__(exc_type, exc, tb)
            self._bar = None

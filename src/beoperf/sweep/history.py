"""Earlier runs of the same setup, for intervals that hold from one run to the next.

One run cannot see how far the level of a whole run moves between runs: on a shared VM
every size of a sweep can sit 5-15% away from the sweep a minute later, while the passes
of one run agree to 2-3% (bench/RESULTS.md, P1-P6).  An interval computed inside a run
then misses the next run's median at most sizes.  So a run keeps its per-point medians
in a small history file of its setup (the options that shape the figures, and the peer),
and a later run adds the spread between runs that those files show:

    s_b^2 = mean over earlier runs r and common points k of (log m_k - log r_k)^2 / 2

(each difference holds two runs' level, hence the 2; within-run noise inflates it a
little, which errs on the wide side).  The interval where a repeat run's median falls
becomes ``median -+ hypot(within-run half-width, 1.96 sqrt(2) s_b median)``: the repeat
run has its own level too.  With no earlier run the interval is the within-run one, and
the document says so.

Where the files go: ``--history DIR``, else $BEOPERF_HISTORY, else /var/lib/beoperf/history
as root and $XDG_STATE_HOME/beoperf/history (~/.local/state) otherwise; ``off`` keeps
none.  The directory must be this user's own and writable by nobody else (created 0700);
a file is read bounded and validated, written atomically, and at most ``MAX_RUNS`` runs
no older than ``MAX_AGE_DAYS`` are kept.  Nothing here can fail a run: a history that
cannot be used is skipped with a note.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from beoperf import safeio

ENV = "BEOPERF_HISTORY"
OFF = "off"
FORMAT = "beoperf-history/1"
MAX_RUNS = 8  # earlier runs kept per setup
MAX_AGE_DAYS = 14  # older runs are dropped: the setup may have changed since
MAX_BYTES = 1024 * 1024
MAX_POINTS = 10_000  # per run
Z95 = 1.959964


class HistoryError(ValueError):
    """A history directory or file that cannot be used (the message says why)."""


def default_dir() -> Path:
    if os.geteuid() == 0:
        return Path("/var/lib/beoperf/history")
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "beoperf" / "history"


def resolve(option: str | None) -> Path | None:
    """The history directory from ``--history`` (None: not given), then $BEOPERF_HISTORY,
    then the default; None for 'off'."""
    text = option if option is not None else os.environ.get(ENV)
    if text is None or not text.strip():
        return default_dir()
    return None if text.strip().lower() == OFF else Path(text).expanduser()


def setup_key(suite: str, setup: Mapping[str, Any]) -> str:
    """A file name for one setup: the suite and a digest of what shapes its figures."""
    canon = json.dumps(dict(setup), sort_keys=True)
    return f"{suite}-{hashlib.sha256(canon.encode()).hexdigest()[:20]}"


def _own_dir(path: Path, create: bool) -> Path | None:
    """``path`` if it is a directory of this user's that nobody else may write; created
    (0700) if absent and ``create``; None if absent; HistoryError otherwise."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not create:
            return None
        try:
            os.makedirs(path, mode=0o700)  # made by another meanwhile: "cannot create"
            st = os.lstat(path)
        except OSError as exc:
            raise HistoryError(f"{path}: cannot create ({exc.strerror or exc})") from None
    except OSError as exc:
        raise HistoryError(f"{path}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise HistoryError(f"{path}: is {safeio.kind_of(st.st_mode)}, not a directory")
    if st.st_uid != os.geteuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise HistoryError(f"{path}: not a private directory of uid {os.geteuid()} "
                           f"(owner {st.st_uid}, mode {stat.S_IMODE(st.st_mode):04o})")
    return path


@dataclass
class Run:
    utc: str
    medians: dict[int, float]  # point -> median


def _parse_utc(text: Any) -> dt.datetime:
    try:
        if not isinstance(text, str) or len(text) > 40:
            raise ValueError
        when = dt.datetime.fromisoformat(text)  # 3.11: "Z" too
    except ValueError:
        raise ValueError("a run's utc is not an ISO 8601 time") from None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def parse(doc: Any, now: dt.datetime) -> list[Run]:
    """The runs of a history document, newest last, bounded and checked; ValueError if
    it is not one."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} document")
    runs = doc.get("runs")
    if not isinstance(runs, list) or len(runs) > 4 * MAX_RUNS:
        raise ValueError("no list of runs, or too many")
    out = []
    for run in runs:
        if not isinstance(run, dict):
            raise ValueError("a run is not an object")
        when = _parse_utc(run.get("utc"))
        points = run.get("medians")
        if not isinstance(points, list) or len(points) > MAX_POINTS:
            raise ValueError("a run has no list of medians, or too many")
        medians: dict[int, float] = {}
        for pair in points:
            if (not isinstance(pair, list) or len(pair) != 2 or type(pair[0]) is not int
                    or isinstance(pair[1], bool) or not isinstance(pair[1], int | float)):
                raise ValueError("a median is not [point, value]")
            if pair[0] < 1 or not (math.isfinite(pair[1]) and pair[1] > 0):
                raise ValueError("a median is out of range")
            medians[pair[0]] = float(pair[1])
        if now - when <= dt.timedelta(days=MAX_AGE_DAYS) and when <= now + dt.timedelta(1):
            out.append(Run(run["utc"], medians))
    return out[-MAX_RUNS:]


def between_run_sd(current: Mapping[int, float], earlier: Sequence[Run]) -> float | None:
    """The relative spread of one run's level (s_b above), or None without a common
    point with any earlier run."""
    total, count = 0.0, 0
    for run in earlier:
        for key, value in current.items():
            if key in run.medians and value > 0:
                total += math.log(value / run.medians[key]) ** 2
                count += 1
    return math.sqrt(total / count / 2.0) if count else None


def widen(median: float, interval: Sequence[float], sd: float) -> tuple[float, float]:
    """The within-run repeat interval with the between-run spread added."""
    extra = Z95 * math.sqrt(2.0) * sd * median
    low, high = interval
    return median - math.hypot(median - low, extra), median + math.hypot(high - median, extra)


@dataclass
class History:
    """The earlier runs of one setup, and the file that keeps them."""

    directory: Path
    key: str
    setup: dict[str, Any]
    runs: list[Run] = field(default_factory=list)
    note: str | None = None  # why the history could not be read, if it could not

    @property
    def path(self) -> Path:
        return self.directory / f"{self.key}.json"

    @classmethod
    def load(cls, directory: Path, suite: str, setup: Mapping[str, Any],
             now: dt.datetime | None = None) -> History:
        now = now or dt.datetime.now(dt.UTC)
        hist = cls(directory, setup_key(suite, setup), dict(setup))
        try:
            if _own_dir(directory, create=False) is None:
                return hist
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                try:
                    os.stat(hist.path.name, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    return hist  # the first run of this setup
                data = safeio.read_bytes_at(fd, hist.path.name, MAX_BYTES, "a history file",
                                            shown=str(hist.path))
            finally:
                os.close(fd)
            hist.runs = parse(safeio.parse_json(data, str(hist.path)), now)
        except safeio.FileInputError as exc:
            hist.note = f"history not used: {exc}"
        except (HistoryError, OSError, ValueError) as exc:
            hist.note = f"history not used: {hist.path}: {exc}"
        return hist

    def record(self, utc: str, medians: Mapping[int, float]) -> str | None:
        """Add this run (the oldest beyond MAX_RUNS go); a note if it could not be kept."""
        runs = [*self.runs, Run(utc, dict(medians))][-MAX_RUNS:]
        doc = {"format": FORMAT, "setup": self.setup,
               "runs": [{"utc": r.utc, "medians": [[k, v] for k, v in sorted(r.medians.items())]}
                        for r in runs]}
        try:
            _own_dir(self.directory, create=True)
            safeio.write_atomic(self.path, safeio.dump_json(doc, indent=None), mode=0o600)
        except (HistoryError, OSError, ValueError) as exc:
            return f"this run was not added to the history: {exc}"
        return None

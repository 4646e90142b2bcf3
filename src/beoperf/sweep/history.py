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
becomes, on the log scale (times are positive: beoperf.analysis.intervals),
``median x exp(-+hypot(within-run log half-width, 1.96 sqrt(2) s_b))``: the repeat run
has its own level too.  Both parts stay in the document: the within-run interval of
every size (``ci95_within_run_us``) and s_b with where it came from (``sweep.between_runs``).

How far a run's level moves is mostly the machine's doing (its neighbours, its CPUs'
wake-up states), so the other setups of the same host (host name and kernel) tell
something of a setup that has few runs of its own: their spread (s_b over every pair of
their runs, the root mean square over setups) counts as one earlier run of the setup,
pooled with its own (s^2 = (n s_own^2 + s_host^2) / (n + 1) after n earlier runs), and a
first run takes it alone.  With neither, the interval is the within-run one, and the
document says so.

A history is read, not trusted (a file in a directory shared by several nodes, or one
written by hand, may say anything): a median more than MAX_RATIO times away from the one
it is compared with (this run's at the same point, or another run's of the same file) is
not a level a machine moves by between two runs of one setup; that pair of points is left
out and the file and run are named in a warning.  The spread taken from what remains is
capped at MAX_RELATIVE_SD (the largest this project's shared VMs showed was 22%, a jump
of every size by 35%: bench/RESULTS.md H1), said in a warning when it applies, so a
history can widen an interval by a factor of exp(1.96 sqrt(2) MAX_RELATIVE_SD) = 2.0 at
most on each side, and never across zero (the widening is on the log scale).  A file
not owned by the user who runs beoperf, or writable by group or others, is not read
(as ssh's StrictModes), with a warning naming it; the directory itself must be this
user's and writable by nobody else, so no other user can put a file there.

A setup is what the caller says it is (``suites.pingpong.history_setup``: the options
that shape the figures, the peer, this host, its MTU and a digest of every setting a
tuning change or a study may touch, ``beoperf.audit.state``), so that a run before a
change and one after it are two setups, never one mixed history; a spread borrowed from
other setups is always said beside the interval it widens.

Where the files go (the history is on by default): ``--history DIR``, else
$BEOPERF_HISTORY, else /var/lib/beoperf/history as root and $XDG_STATE_HOME/beoperf/history
(~/.local/state) otherwise; ``off`` keeps none and reads none.  Every run that reads or
writes one says where, once (the summary's ``history`` line, from
``sweep.between_runs.history``).  The directory must be this user's own and writable by
nobody else (created 0700); a file is read bounded and validated, written atomically
(read again and written under a lock on the directory, so that two runs of one setup at
once both stay), and at most
``MAX_RUNS`` runs no older than ``MAX_AGE_DAYS`` are kept.  Nothing here can fail a run:
a history that cannot be used is skipped with a note.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import json
import math
import os
import re
import stat
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from beoperf import safeio
from beoperf.analysis import intervals
from beoperf.model.document import JsonObject, JsonValue

ENV = "BEOPERF_HISTORY"
OFF = "off"
FORMAT = "beoperf-history/1"
MAX_RUNS = 8  # earlier runs kept per setup
MAX_AGE_DAYS = 14  # older runs are dropped: the setup may have changed since
MAX_BYTES = 1024 * 1024
MAX_POINTS = 10_000  # per run
MIN_MEDIAN, MAX_MEDIAN = 1e-6, 1e12  # a median's range (the unit's: us for the ping-pong)
MAX_OTHER_SETUPS = 16  # other setups of this host whose spread is used: the newest
MAX_ENTRIES = 4096  # directory entries looked at for them
HOST_WEIGHT = 1.0  # the host's spread counts as this many earlier runs of a setup
SAME_HOST = ("local_host", "kernel")  # what makes another setup one of this host
MAX_SCAN_BYTES = 8 * 1024 * 1024  # read at most this much of other setups' files
LOCK_WAIT = 5.0  # seconds a run waits for another to finish adding itself, at most
MAX_RATIO = 10.0  # two medians of one point further apart than this are not compared
MAX_RELATIVE_SD = 0.25  # the spread between runs a history can give, at most
MAX_NAMED = 3  # files (or runs) named in one warning, at most


class HistoryError(ValueError):
    """A history directory or file that cannot be used (the message says why)."""


def default_dir() -> Path:
    return safeio.state_dir("history")


def resolve(option: str | None) -> Path | None:
    """The history directory from ``--history`` (None: not given), then $BEOPERF_HISTORY,
    then the default; None for 'off'."""
    text = option if option is not None else os.environ.get(ENV)
    if text is None or not text.strip():
        return default_dir()
    return None if text.strip().lower() == OFF else Path(text).expanduser()


def setup_key(suite: str, setup: JsonObject) -> str:
    """A file name for one setup: the suite and a digest of what shapes its figures."""
    canon = json.dumps(dict(setup), sort_keys=True)
    return f"{suite}-{hashlib.sha256(canon.encode()).hexdigest()[:20]}"


def _open_own_dir(path: Path, create: bool) -> int | None:
    """safeio.open_private_dir, its errors as HistoryError."""
    try:
        return safeio.open_private_dir(path, create)
    except safeio.PrivateDirError as exc:
        raise HistoryError(str(exc)) from None


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
        medians = _medians(run.get("medians"))
        if now - when <= dt.timedelta(days=MAX_AGE_DAYS) and when <= now + dt.timedelta(1):
            out.append(Run(run["utc"], medians))
    return out[-MAX_RUNS:]


def _medians(points: JsonValue | None) -> dict[int, float]:
    """A run's [[point, median], ...], checked; ValueError if it is not that."""
    if not isinstance(points, list) or len(points) > MAX_POINTS:
        raise ValueError("a run has no list of medians, or too many")
    medians: dict[int, float] = {}
    for pair in points:
        if (not isinstance(pair, list) or len(pair) != 2 or type(pair[0]) is not int
                or isinstance(pair[1], bool) or not isinstance(pair[1], int | float)):
            raise ValueError("a median is not [point, value]")
        try:
            value = float(pair[1])
        except OverflowError:  # an integer beyond any float
            value = math.inf
        if pair[0] < 1 or not MIN_MEDIAN <= value <= MAX_MEDIAN:
            raise ValueError("a median is out of range")
        medians[pair[0]] = value
    return medians


def _log_ratios(a: Mapping[int, float], b: Mapping[int, float]) -> tuple[list[float], int]:
    """The log ratios of two runs' medians at their common points, and how many common
    points were left out as further apart than MAX_RATIO (a median out of range is left
    out without being counted)."""
    limit = math.log(MAX_RATIO)
    logs, far = [], 0
    for key, value in a.items():
        if key in b and MIN_MEDIAN <= value <= MAX_MEDIAN:
            d = math.log(value) - math.log(b[key])
            if abs(d) > limit:
                far += 1
            else:
                logs.append(d)
    return logs, far


def _spread(pairs: Sequence[tuple[Mapping[int, float], Mapping[int, float]]]) -> float | None:
    """s_b over pairs of runs: sqrt(mean of the squared log ratios of their common points'
    medians / 2); None without a common point.  A median out of range, and a pair of
    points more than MAX_RATIO apart, are left out."""
    total, count = 0.0, 0
    for a, b in pairs:
        logs, _far = _log_ratios(a, b)
        total += sum(d * d for d in logs)
        count += len(logs)
    return math.sqrt(total / count / 2.0) if count else None


def implausible(current: Mapping[int, float], earlier: Sequence[Run]) -> list[Run]:
    """The earlier runs with a point more than MAX_RATIO away from this run's (left out
    of the spread: named in a warning)."""
    return [run for run in earlier if _log_ratios(current, run.medians)[1]]


def far_apart(runs: Sequence[Run]) -> bool:
    """Two runs of one file with a point more than MAX_RATIO apart."""
    return any(_log_ratios(later.medians, earlier.medians)[1]
               for i, later in enumerate(runs) for earlier in runs[:i])


def capped(sd: float | None) -> tuple[float | None, bool]:
    """The spread a history may give (at most MAX_RELATIVE_SD), and whether it was cut."""
    if sd is None or sd <= MAX_RELATIVE_SD:
        return sd, False
    return MAX_RELATIVE_SD, True


def named(names: Sequence[str]) -> str:
    """At most MAX_NAMED names, and how many more."""
    more = len(names) - MAX_NAMED
    return ", ".join(names[:MAX_NAMED]) + (f" and {more} more" if more > 0 else "")


def between_run_sd(current: Mapping[int, float], earlier: Sequence[Run]) -> float | None:
    """The relative spread of one run's level (s_b above): this run against each earlier
    one; None without a common point with any."""
    return _spread([(current, run.medians) for run in earlier])


def spread_within(runs: Sequence[Run]) -> float | None:
    """s_b of one setup from its own runs: over every pair of runs; None without a
    common point."""
    return _spread([(later.medians, earlier.medians)
                    for i, later in enumerate(runs) for earlier in runs[:i]])


def pooled_sd(own: float | None, earlier_runs: int, host: float | None) -> float | None:
    """The spread a run's intervals get: its setup's own (from ``earlier_runs`` runs)
    pooled with the host's, which counts as HOST_WEIGHT runs; either alone if the other
    is unknown."""
    if own is None or host is None:
        return host if own is None else own
    return math.sqrt((earlier_runs * own * own + HOST_WEIGHT * host * host)
                     / (earlier_runs + HOST_WEIGHT))


@dataclass
class _HostScan:
    """What the scan of this host's other setups found: their spread, how many gave it,
    and the files left out as untrusted or implausible (named in warnings)."""

    sd: float | None = None
    setups: int = 0
    untrusted: list[str] = field(default_factory=list)
    implausible: list[str] = field(default_factory=list)


def _host_spread(fd: int, suite: str, own: str, setup: JsonObject,
                 now: dt.datetime) -> _HostScan:
    """The spread between runs of the other setups of this host in the open directory
    ``fd`` and how many gave one: the MAX_OTHER_SETUPS newest that do, of the suite's
    files read newest first (regular files only, never through a link; MAX_SCAN_BYTES at
    most; a file that cannot be read or used, or of another host, is skipped: a
    directory shared by several nodes holds theirs too; one not this user's or writable
    by others, or whose runs are more than MAX_RATIO apart, is skipped and named).  No
    spread if the setup does not name its host and kernel."""
    scan = _HostScan()
    mine = {k: setup.get(k) for k in SAME_HOST}
    if any(v is None for v in mine.values()):
        return scan
    squares: list[float] = []
    read = 0
    for name, st in _newest_files(fd, suite, own):
        if len(squares) >= MAX_OTHER_SETUPS or read >= MAX_SCAN_BYTES:
            break
        if not trusted(st):
            scan.untrusted.append(name)
            continue
        try:
            data = safeio.read_bytes_at(fd, name, MAX_BYTES, "a history file", private=True)
            read += len(data)
            doc = safeio.parse_json(data, name)
            other = doc.get("setup") if isinstance(doc, dict) else None
            if not isinstance(other, dict) or any(other.get(k) != v for k, v in mine.items()):
                continue
            runs = parse(doc, now)
        except (safeio.FileInputError, OSError, ValueError):
            continue
        if far_apart(runs):
            scan.implausible.append(name)
            continue
        sd = spread_within(runs)
        if sd is not None:
            squares.append(sd * sd)
    if squares:
        scan.sd, scan.setups = math.sqrt(sum(squares) / len(squares)), len(squares)
    return scan


def trusted(st: os.stat_result) -> bool:
    """A file this user owns and nobody else may write (what safeio's private read
    checks on the open file; here to name the files left out)."""
    return st.st_uid == os.geteuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _newest_files(fd: int, suite: str, own: str) -> list[tuple[str, os.stat_result]]:
    """The regular files of the suite's setups other than ``own`` in the open directory
    ``fd`` (of its first MAX_ENTRIES entries), newest first, with their status."""
    pattern = re.compile(re.escape(suite) + r"-[0-9a-f]{20}\.json")
    found: list[tuple[float, str, os.stat_result]] = []
    with os.scandir(fd) as entries:
        for n, entry in enumerate(entries):
            if n >= MAX_ENTRIES:
                break
            if entry.name == own or not pattern.fullmatch(entry.name):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                found.append((st.st_mtime, entry.name, st))
    return [(name, st) for _when, name, st in sorted(found, key=lambda f: (f[0], f[1]),
                                                     reverse=True)]


def _lock(fd: int) -> None:
    """An exclusive lock on the open directory ``fd`` (released when it is closed),
    waiting LOCK_WAIT seconds at most: anyone who may read the directory may lock it,
    and a run must not hang on that; HistoryError then."""
    deadline = time.monotonic() + LOCK_WAIT
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise HistoryError(f"another process has held the history directory's "
                                   f"lock for {LOCK_WAIT:g} s") from None
            time.sleep(0.05)


def widen(median: float, interval: Sequence[float], sd: float) -> tuple[float, float] | None:
    """The within-run repeat interval with the between-run spread added, on the log scale
    (beoperf.analysis.intervals.widened: both bounds stay positive however wide the
    spread); None if the within-run interval is not one of a positive quantity."""
    low, high = interval
    return intervals.widened(median, low, high, extra=intervals.between_runs_halfwidth(sd))


@dataclass
class History:
    """The earlier runs of one setup, and the file that keeps them."""

    directory: Path
    key: str
    setup: JsonObject  # what makes runs one setup (suites.pingpong.history_setup)
    runs: list[Run] = field(default_factory=list)
    note: str | None = None  # why the history could not be read, if it could not
    host_sd: float | None = None  # the spread between runs of this host's other setups
    host_setups: int = 0  # how many other setups gave it
    now: dt.datetime | None = None  # the time the runs' ages were taken at (load's)
    untrusted: list[str] = field(default_factory=list)  # other setups' files not read
    implausible: list[str] = field(default_factory=list)  # and those left out as such

    @property
    def path(self) -> Path:
        return self.directory / f"{self.key}.json"

    @classmethod
    def load(cls, directory: Path, suite: str, setup: JsonObject,
             now: dt.datetime | None = None) -> History:
        now = now or dt.datetime.now(dt.UTC)
        hist = cls(directory, setup_key(suite, setup), dict(setup), now=now)
        try:
            fd = _open_own_dir(directory, create=False)
            if fd is None:
                return hist
            try:
                try:
                    scan = _host_spread(fd, suite, hist.path.name, setup, now)
                    hist.host_sd, hist.host_setups = scan.sd, scan.setups
                    hist.untrusted, hist.implausible = scan.untrusted, scan.implausible
                except OSError:
                    pass  # the setup's own runs may still be read
                try:
                    os.stat(hist.path.name, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    return hist  # the first run of this setup
                data = safeio.read_bytes_at(fd, hist.path.name, MAX_BYTES, "a history file",
                                            shown=str(hist.path), private=True)
            finally:
                os.close(fd)
            hist.runs = parse(safeio.parse_json(data, str(hist.path)), now)
        except safeio.FileInputError as exc:
            hist.note = f"history not used: {exc}"
        except (HistoryError, OSError, ValueError) as exc:
            hist.note = f"history not used: {hist.path}: {exc}"
        return hist

    def warnings(self, current: Mapping[int, float]) -> list[str]:
        """What of the history was left out and why, against this run's medians
        ``current``: other setups' files not this user's or writable by others, or with
        runs too far apart; this setup's runs with a point too far from this run's."""
        notes = []
        if self.untrusted:
            notes.append(f"history: not read, not owned by uid {os.geteuid()} or writable "
                         f"by group or others: {named(self.untrusted)} in {self.directory}")
        if self.implausible:
            notes.append(f"history: left out, runs more than {MAX_RATIO:g}x apart at a "
                         f"point: {named(self.implausible)} in {self.directory}")
        far = implausible(current, self.runs)
        if far:
            notes.append(f"history: {self.path}: points more than {MAX_RATIO:g}x from this "
                         f"run's left out, of the run(s) of {named([r.utc for r in far])}")
        return notes

    def record(self, utc: str, medians: Mapping[int, float]) -> str | None:
        """Add this run to the file as it is now, under a lock on the directory (runs of
        the setup that ended meanwhile stay; the oldest beyond MAX_RUNS go); a note if it
        could not be kept.  A file that could not be read is left as it is."""
        if self.note:
            return f"this run was not added to the history: {self.path} was left as it is"
        if len(medians) > MAX_POINTS:
            return f"this run was not added to the history: more than {MAX_POINTS} sizes"
        kept = {k: float(f"{v:.7g}") for k, v in medians.items()
                if MIN_MEDIAN <= v <= MAX_MEDIAN}  # what parse takes, 7 digits
        try:
            fd = _open_own_dir(self.directory, create=True)
            assert fd is not None
            try:
                # runs of this setup that ended while this one ran are kept: the file is
                # read again under a lock on the directory, and this run added to it
                _lock(fd)
                runs = sorted([*self._current(fd), Run(utc, kept)],
                              key=lambda r: _parse_utc(r.utc))[-MAX_RUNS:]
                data = self._encoded(runs)
                # what load reads: the newest runs that fit (one of MAX_POINTS always does)
                while len(data) > MAX_BYTES and len(runs) > 1:
                    runs = runs[1:]
                    data = self._encoded(runs)
                safeio.write_atomic_at(fd, self.path.name, data, mode=0o600,
                                       shown=str(self.path))
            finally:
                os.close(fd)  # and the lock with it
        except safeio.FileInputError as exc:
            return f"this run was not added to the history: {exc}; the file was left as it is"
        except (HistoryError, OSError, ValueError) as exc:
            return f"this run was not added to the history: {exc}"
        return None

    def _current(self, fd: int) -> list[Run]:
        """The setup's runs in the file as it is now (none if there is none);
        FileInputError or ValueError if it cannot be read, then it is not written."""
        try:
            data = safeio.read_bytes_at(fd, self.path.name, MAX_BYTES, "a history file",
                                        shown=str(self.path))
        except safeio.FileInputError:
            try:
                os.stat(self.path.name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                return []
            raise
        runs = parse(safeio.parse_json(data, str(self.path)), self.now or dt.datetime.now(dt.UTC))
        return sorted(runs, key=lambda r: _parse_utc(r.utc))

    def _encoded(self, runs: list[Run]) -> bytes:
        doc = {"format": FORMAT, "setup": self.setup,
               "runs": [{"utc": r.utc, "medians": [[k, v] for k, v in sorted(r.medians.items())]}
                        for r in runs]}
        return safeio.dump_json(doc, indent=None).encode()

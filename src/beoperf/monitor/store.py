"""The monitor's SQLite store: one row per probe, committed one cycle at a time.

WAL mode with ``synchronous=FULL``: a committed cycle survives a kill -9 (and a power
loss); a cycle in flight is one transaction, so it is either all there or absent.  The
schema version lives in ``meta``; opening a database of another version is refused.

One monitor writes a database at a time (:func:`lock`: a flock on DB.lock beside it,
released by the kernel however the holder ends); reports read it without changing it
(:func:`read`: read-only connections that see what a running monitor committed;
:func:`report_probes` is the report's one query).  All of beoperf's SQL is here.

Times are UTC seconds since the epoch (REAL).  RTTs are microseconds, measured on the
monotonic clock; a probe that did not get an answer has ``rtt_us`` NULL.
"""

from __future__ import annotations

import errno
import fcntl
import json
import math
import os
import sqlite3
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import astuple, dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, TypeVar

from beoperf import errors, safeio
from beoperf.model.monitor import LAST_UTC, OUTCOMES, TRANSPORTS
from beoperf.monitor.schedule import MAX_PERIOD_S

if TYPE_CHECKING:
    from beoperf.analysis.monitor_cycles import Probes

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    id          INTEGER PRIMARY KEY,
    started_utc REAL    NOT NULL,
    ended_utc   REAL,
    host        TEXT    NOT NULL,
    address     TEXT,
    transport   TEXT    NOT NULL,
    period_s    REAL    NOT NULL,
    config      TEXT    NOT NULL,   -- JSON: the schedule, budget, timeouts, command line
    stop_reason TEXT                -- NULL while running (or killed)
);
CREATE TABLE IF NOT EXISTS probes (
    id         INTEGER PRIMARY KEY,
    run_id     INTEGER NOT NULL REFERENCES runs(id),
    cycle      INTEGER NOT NULL,    -- cycle number within the run (0, 1, ...)
    slot       INTEGER NOT NULL,    -- probe number within the cycle
    t_utc      REAL    NOT NULL,    -- when the probe was sent
    size       INTEGER NOT NULL,    -- payload bytes
    wire_bytes INTEGER NOT NULL,    -- bytes sent, with IP/ICMP/UDP/TCP headers
    transport  TEXT    NOT NULL,    -- icmp | tcp | udp
    outcome    TEXT    NOT NULL CHECK (outcome IN ('ok', 'timeout', 'unreachable',
                                                    'refused', 'error')),
    rtt_us     REAL,                -- NULL unless outcome = 'ok'
    error      TEXT,
    UNIQUE (run_id, cycle, slot)
);
CREATE INDEX IF NOT EXISTS probes_time ON probes (t_utc);
CREATE INDEX IF NOT EXISTS probes_size_time ON probes (size, t_utc);
"""


class StoreError(errors.BeoperfError):
    """The database cannot be used (not SQLite, another schema version, locked ...): exit
    status 1 in every command, as any beoperf error that names no other condition."""

    category = "monitor database"


@dataclass(frozen=True)
class Probe:
    """One probe's row (without its run and cycle, which the writer adds)."""

    slot: int
    t_utc: float
    size: int
    wire_bytes: int
    transport: str
    outcome: str
    rtt_us: float | None = None
    error: str | None = None


def check_path(path: str, *, must_exist: bool) -> None:
    """StoreError unless ``path`` is a regular file (or absent, if not ``must_exist``).

    Checked before SQLite opens it: a FIFO would hang the open, a device is never a
    database, a directory is a mistake (symlinks are followed, as SQLite follows them)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if must_exist:
            raise StoreError(f"{path} does not exist") from None
        return
    except OSError as exc:
        raise StoreError(f"{path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise StoreError(f"{path}: is {safeio.kind_of(mode)}, not a database file")


def _uri(path: str, query: str = "") -> str:
    """A file: URI from the absolute path, so that "?", "#" and "%" in it stay literal."""
    return Path(path).absolute().as_uri() + (f"?{query}" if query else "")


def connect(path: str, *, timeout: float = 10.0) -> sqlite3.Connection:
    """Open the store for writing, creating and initialising it if absent; StoreError
    with the reason if it cannot be used or cannot be written."""
    check_path(path, must_exist=False)
    try:
        db = sqlite3.connect(_uri(path), uri=True, timeout=timeout, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("PRAGMA foreign_keys=ON")
        version = _schema_version(db)
        if version is None:
            _initialise(db)
        elif version != SCHEMA_VERSION:
            raise StoreError(f"{path} has monitor schema version {version}; this beoperf "
                             f"reads version {SCHEMA_VERSION}")
        _check_writable(db)
    except sqlite3.DatabaseError as exc:
        raise _open_error(path, exc) from None
    return db


def _check_writable(db: sqlite3.Connection) -> None:
    """Raise sqlite3.OperationalError now if the database cannot be written.

    SQLite opens a file it may not write read-only without a word (and a WAL database
    on a read-only mount if its -shm exists); the first write would fail mid-run."""
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("UPDATE meta SET value = value WHERE key = 'schema_version'")
    finally:
        db.execute("ROLLBACK")


WRITABLE_HINT = ("give a --db that this user can write, in a directory it can write (SQLite "
                 "keeps -wal and -shm files beside the database, beoperf a .lock file)")


def _open_error(path: str, exc: sqlite3.DatabaseError) -> StoreError:
    text = str(exc)
    if "readonly" in text or "unable to open" in text:
        return StoreError(f"{path}: cannot be written ({text})", WRITABLE_HINT)
    return StoreError(f"{path}: {text}")


# --------------------------------------------------------------------------- reading

T = TypeVar("T")
SQLITE_MAGIC = b"SQLite format 3\x00"


def _quiescent_wal(path: str) -> os.stat_result | None:
    """The file's stat if it is a WAL-mode database with no -wal file beside it, else None.

    Such a database is complete in its main file: the last connection to close
    checkpointed the WAL into it and deleted the -wal and -shm files."""
    if os.path.lexists(path + "-wal"):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError:
        return None  # SQLite says why
    try:
        st, header = os.fstat(fd), os.pread(fd, 20, 0)
    finally:
        os.close(fd)
    # bytes 18 and 19 of the header, the write and read format versions, are 2 in WAL mode
    if len(header) == 20 and header.startswith(SQLITE_MAGIC) and header[18:20] == b"\x02\x02":
        return st
    return None


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_ino, a.st_dev, a.st_size, a.st_mtime_ns, a.st_ctime_ns) == \
        (b.st_ino, b.st_dev, b.st_size, b.st_mtime_ns, b.st_ctime_ns)


def read(path: str, query: Callable[[sqlite3.Connection], T], *,
         timeout: float = 10.0) -> T:
    """``query(db)`` on a read-only connection to the store at ``path``, which is never
    changed (not a byte, not its mode or times); StoreError if it cannot be read.

    The connection is ``mode=ro``: SQLite writes neither the database nor a journal.  A
    WAL-mode database is read through its -wal file and the -shm index, which is how
    the committed cycles of a monitor still running (or killed) are seen; but when
    there is no -wal file, a mode=ro connection would create the -wal and -shm files
    (and leave them).  So a WAL database without a -wal file is read with
    ``immutable=1`` instead: no locks, no -wal or -shm, the main file alone, which then
    holds everything committed.  Should a monitor start meanwhile, its cycles go to a
    new -wal file, not to the main file, until a checkpoint; a checkpoint (after
    1000 pages, or when it stops) rewrites the main file, so the file is checked after
    the query and read again, the ordinary way, if it changed.
    """
    check_path(path, must_exist=True)
    for attempt in range(3):
        before = _quiescent_wal(path) if attempt < 2 else None
        query_args = "mode=ro&immutable=1" if before else "mode=ro"
        try:
            db = sqlite3.connect(_uri(path, query_args), uri=True, timeout=timeout,
                                 isolation_level=None)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{path}: {exc}") from None
        try:
            db.execute("PRAGMA query_only=ON")
            result = _checked_query(path, db, query)
        except sqlite3.DatabaseError as exc:
            if before is None or _same_file(before, os.stat(path)):
                raise StoreError(f"{path}: {exc}") from None
            continue  # read while a checkpoint rewrote it: read again
        finally:
            db.close()
        if before is None or _same_file(before, os.stat(path)):
            return result
    raise AssertionError("unreachable: the last attempt reads the ordinary way")


def _checked_query(path: str, db: sqlite3.Connection,
                   query: Callable[[sqlite3.Connection], T]) -> T:
    version = _schema_version(db)
    if version is None:
        raise StoreError(f"{path} is not a beoperf monitor database (no meta table)")
    if version != SCHEMA_VERSION:
        raise StoreError(f"{path} has monitor schema version {version}; this beoperf "
                         f"reads version {SCHEMA_VERSION}")
    return query(db)


# --------------------------------------------------------------------------- one writer

LOCK_SUFFIX = ".lock"
MAX_LOCK_BYTES = 64


def lock_path(path: str) -> str:
    """The lock file of a database: beside its real path (all names of one database,
    symlinks and relative paths included, share one lock)."""
    return os.path.realpath(path) + LOCK_SUFFIX


def lock(path: str) -> int:
    """Hold the database's lock file for as long as this process lives; its descriptor.

    An exclusive flock(2): the kernel releases it when the holder exits, however it
    exits (kill -9 too), so a lock is never stale.  StoreError naming the holder's pid if
    another process holds it.  The lock file is opened without following a symlink at
    its name (O_NOFOLLOW) and not inherited (O_CLOEXEC); anything but a small regular
    file with one link owned by this user is refused, not used; the pid is written over
    the start of the file, which is never truncated."""
    name = lock_path(path)
    _check_lock_file(name, os.lstat(name) if os.path.lexists(name) else None)
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK
    try:
        fd = os.open(name, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a symlink appeared since the check
            _check_lock_file(name, os.lstat(name))
        raise StoreError(f"{path}: cannot be written (its lock file {name}: "
                         f"{exc.strerror or exc})", WRITABLE_HINT) from None
    try:
        _check_lock_file(name, os.fstat(fd))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreError(f"{path} is in use by another beoperf monitor "
                             f"(pid {_holder(fd)}, lock {name})",
                             "stop it first, or give another --db") from None
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_lock_file(name: str, st: os.stat_result | None) -> None:
    if st is None:
        return
    if stat.S_ISLNK(st.st_mode):
        raise StoreError(f"{name}: the lock file is a symbolic link; refusing to follow it",
                         "remove it")
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        what = safeio.kind_of(st.st_mode) if not stat.S_ISREG(st.st_mode) else \
            f"a file with {st.st_nlink} hard links"
        raise StoreError(f"{name}: the lock file is {what}; refusing to use it", "remove it")
    if st.st_uid != os.geteuid():
        raise StoreError(f"{name}: the lock file is owned by uid {st.st_uid}, not by uid "
                         f"{os.geteuid()} who runs beoperf; refusing to use it",
                         "remove it after checking who made it")
    if st.st_size > MAX_LOCK_BYTES:  # a lock file holds a pid, nothing else
        raise StoreError(f"{name}: {st.st_size:,} bytes, not a beoperf lock file; refusing "
                         "to write into it", "move it away, or give another --db")


def _holder(fd: int, wait: float = 0.5) -> str:
    """The pid the lock file names ("?" if it names none yet: the holder writes it just
    after taking the lock, so this retries for a moment)."""
    deadline = time.monotonic() + wait
    while True:
        first = os.pread(fd, 32, 0).split(b"\n", 1)[0].strip()
        if first.isdigit() or time.monotonic() > deadline:
            return first.decode() if first.isdigit() else "?"
        time.sleep(0.02)


def _schema_version(db: sqlite3.Connection) -> int | None:
    row = db.execute("SELECT name FROM sqlite_master WHERE type='table' AND name='meta'")
    if row.fetchone() is None:
        return None
    got = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    if got is None:
        raise StoreError("meta table without a schema_version")
    try:
        return int(got[0])
    except ValueError:
        raise StoreError(f"bad schema_version {got[0]!r}") from None


def _initialise(db: sqlite3.Connection) -> None:
    with transaction(db):
        for statement in SCHEMA.split(";"):
            if statement.strip():
                db.execute(statement)
        db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)",
                   (str(SCHEMA_VERSION),))
        db.execute("INSERT OR IGNORE INTO meta VALUES ('created_utc', ?)", (repr(time.time()),))


class transaction:  # noqa: N801 - used as a context manager, like sqlite3's own
    """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on an exception)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.db.execute("ROLLBACK" if exc_type else "COMMIT")


def start_run(db: sqlite3.Connection, *, host: str, address: str | None, transport: str,
              period_s: float, config: dict, started_utc: float | None = None) -> int:
    """A new run row; its id."""
    with transaction(db):
        cur = db.execute(
            "INSERT INTO runs (started_utc, host, address, transport, period_s, config) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (time.time() if started_utc is None else started_utc, host, address, transport,
             period_s, json.dumps(config, sort_keys=True)))
        return int(cur.lastrowid or 0)


def end_run(db: sqlite3.Connection, run_id: int, reason: str,
            ended_utc: float | None = None) -> None:
    with transaction(db):
        db.execute("UPDATE runs SET ended_utc = ?, stop_reason = ? WHERE id = ?",
                   (time.time() if ended_utc is None else ended_utc, reason, run_id))


def write_cycle(db: sqlite3.Connection, run_id: int, cycle: int, probes: Iterable[Probe]) -> None:
    """All probes of one cycle in one transaction (all or nothing)."""
    rows = [(run_id, cycle, *astuple(p)) for p in probes]
    for row in rows:
        if row[7] not in OUTCOMES:
            raise ValueError(f"unknown outcome {row[7]!r}")
    with transaction(db):
        db.executemany(
            "INSERT INTO probes (run_id, cycle, slot, t_utc, size, wire_bytes, transport, "
            "outcome, rtt_us, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)


def recent_traffic(db: sqlite3.Connection, seconds: float,
                   now: float | None = None) -> tuple[int, float]:
    """(wire bytes, seconds since the first of them) of the probes sent in the last
    ``seconds``; (0, 0.0) if none."""
    now = time.time() if now is None else now
    row = db.execute("SELECT coalesce(sum(wire_bytes), 0), min(t_utc) FROM probes "
                     "WHERE t_utc >= ?", (now - seconds,)).fetchone()
    if row[1] is None:
        return 0, 0.0
    return int(row[0]), max(0.0, now - float(row[1]))


def probes_between(db: sqlite3.Connection, t_from: float | None = None,
                   t_to: float | None = None) -> Iterator[tuple]:
    """(t_utc, size, transport, outcome, rtt_us, run_id, cycle, slot) in time order."""
    lo = float("-inf") if t_from is None else t_from
    hi = float("inf") if t_to is None else t_to
    yield from db.execute(
        "SELECT t_utc, size, transport, outcome, rtt_us, run_id, cycle, slot FROM probes "
        "WHERE t_utc >= ? AND t_utc < ? ORDER BY t_utc", (lo, hi))


def runs(db: sqlite3.Connection, source: str = "the monitor database") -> list[dict]:
    """Every run, its config parsed; StoreError for a row this beoperf never writes."""
    cur = db.execute("SELECT id, started_utc, ended_utc, host, address, transport, period_s, "
                     "config, stop_reason FROM runs ORDER BY id")
    names = [d[0] for d in cur.description]
    return [_checked_run(dict(zip(names, row, strict=True)), source) for row in cur]


def _number(x: object, positive: bool = False) -> bool:
    return isinstance(x, int | float) and math.isfinite(x) and (x > 0 or not positive)


def _schedule_ok(steps: object) -> bool:
    """None, or steps as the monitor writes them (the report reads their sizes)."""
    return steps is None or isinstance(steps, list) and all(
        isinstance(s, dict) and isinstance(s.get("size"), int) and not isinstance(
            s["size"], bool) for s in steps)


def _checked_run(item: dict, source: str) -> dict:
    """A run row with its config parsed, or StoreError naming what is wrong with it (a
    database written by hand, or damaged: never a traceback in a report)."""
    try:
        config = json.loads(item["config"]) if isinstance(item["config"], str) else None
    except ValueError:
        config = None
    problems = [name for name, ok in (
        ("config", isinstance(config, dict) and _schedule_ok(config.get("schedule"))),
        ("host", isinstance(item["host"], str)),
        ("address", item["address"] is None or isinstance(item["address"], str)),
        ("transport", item["transport"] in TRANSPORTS),
        ("period_s", _number(item["period_s"], positive=True)
         and item["period_s"] <= MAX_PERIOD_S),
        ("started_utc", _number(item["started_utc"])),
        ("ended_utc", item["ended_utc"] is None or _number(item["ended_utc"])),
        ("stop_reason", item["stop_reason"] is None or isinstance(item["stop_reason"], str)),
    ) if not ok]
    if problems:
        raise StoreError(f"{source}: run {item['id']} has a bad {', '.join(problems)}: not "
                         "a database beoperf wrote")
    return item | {"config": config}


# --------------------------------------------------------------------------- the report

_OUTCOME_CASE = "CASE outcome " + " ".join(
    f"WHEN '{name}' THEN {code}" for code, name in enumerate(OUTCOMES)) + " END"
# one row per probe: time, RTT (-1: none), run << 32 | cycle, size << 3 | outcome code
_REPORT_SELECT = (f"SELECT t_utc, coalesce(rtt_us, -1.0), run_id * 4294967296 + cycle, "
                  f"size * 8 + {_OUTCOME_CASE} FROM probes WHERE t_utc >= ? AND t_utc < ?")


def report_probes(path: str, t_from: float | None = None, t_to: float | None = None,
                  host: str | None = None,
                  transport: str | None = None) -> tuple[Probes, list[dict]]:
    """The probes sent in [t_from, t_to) (None: no bound) to ``host`` over ``transport``
    (None: any), in time order, as arrays, and the runs they belong to (no probe: empty
    arrays and no run).  One query, straight into numpy (a million rows in about a
    second), on a connection that changes nothing (:func:`read`); StoreError if the
    database cannot be read."""
    import numpy as np  # only the report needs it, not a running monitor

    from beoperf.analysis.monitor_cycles import Probes

    row = np.dtype([("t", "f8"), ("rtt", "f8"), ("key", "i8"), ("code", "i8")])

    def query(db: sqlite3.Connection) -> tuple[np.ndarray, dict[int, dict]]:
        all_runs = {r["id"]: r for r in runs(db, path)}
        sql, args = _REPORT_SELECT, [-np.inf if t_from is None else t_from,
                                     np.inf if t_to is None else t_to]
        if host is not None or transport is not None:
            ids = [i for i, r in all_runs.items() if host in (None, r["host"])
                   and transport in (None, r["transport"])]
            sql += f" AND run_id IN ({','.join('?' * len(ids))})"
            args += ids
        try:
            return np.fromiter(db.execute(sql + " ORDER BY t_utc", args), dtype=row), all_runs
        except (ValueError, TypeError, OverflowError) as exc:
            raise StoreError(f"{path}: a probe row beoperf never writes ({exc})") from None

    rows, all_runs = read(path, query)
    if rows.size and not (0 <= rows["t"].min() and rows["t"].max() <= LAST_UTC):
        raise StoreError(f"{path}: a probe row beoperf never writes (sent at "
                         f"{rows['t'].min()!r} .. {rows['t'].max()!r} s after 1970)")
    rtt = np.where(rows["rtt"] < 0, np.nan, rows["rtt"])
    probes = Probes(rows["t"], rtt, rows["code"] & 7, rows["code"] >> 3, rows["key"])
    run_ids = np.unique(probes.run).tolist()
    orphans = [i for i in run_ids if i not in all_runs]
    if orphans:
        raise StoreError(f"{path}: probes of run {orphans[0]}, which it does not list: not a "
                         "database beoperf wrote")
    return probes, [all_runs[i] for i in run_ids]

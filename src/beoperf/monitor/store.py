"""The monitor's SQLite store: one row per probe, committed one cycle at a time.

WAL mode with ``synchronous=FULL``: a committed cycle survives a kill -9 (and a power
loss); a cycle in flight is one transaction, so it is either all there or absent.  The
schema version lives in ``meta``; opening a database of another version is refused.

Times are UTC seconds since the epoch (REAL).  RTTs are microseconds, measured on the
monotonic clock; a probe that did not get an answer has ``rtt_us`` NULL.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import astuple, dataclass
from pathlib import Path

SCHEMA_VERSION = 1
OUTCOMES = ("ok", "timeout", "unreachable", "refused", "error")

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


class StoreError(Exception):
    """The database cannot be used (not SQLite, another schema version, locked ...)."""


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


def connect(path: str, *, create: bool = True, timeout: float = 10.0) -> sqlite3.Connection:
    """Open (and, if ``create``, initialise) the store; StoreError with the reason if unusable."""
    # a URI (for mode=rw), built from the absolute path so "?", "#" and "%" stay literal
    uri = Path(path).absolute().as_uri() + ("" if create else "?mode=rw")
    try:
        db = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("PRAGMA foreign_keys=ON")
        version = _schema_version(db)
        if version is None:
            if not create:
                raise StoreError(f"{path} is not a beoperf monitor database (no meta table)")
            _initialise(db)
        elif version != SCHEMA_VERSION:
            raise StoreError(f"{path} has monitor schema version {version}; this beoperf "
                             f"reads version {SCHEMA_VERSION}")
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: {exc}") from None
    return db


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

    def __exit__(self, exc_type, exc, tb) -> None:
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


def runs(db: sqlite3.Connection) -> list[dict]:
    cur = db.execute("SELECT id, started_utc, ended_utc, host, address, transport, period_s, "
                     "config, stop_reason FROM runs ORDER BY id")
    names = [d[0] for d in cur.description]
    out = []
    for row in cur:
        item = dict(zip(names, row, strict=True))
        item["config"] = json.loads(item["config"])
        out.append(item)
    return out

"""Replaying an application's message profile against a peer, timed in C.

Each message class of the profile (``model.profile``) is sent as one timed trial of the
transport (``engines.base.Transport.trial``: the C loop times the whole trial with
CLOCK_MONOTONIC), on a session of its pattern's mode:

* pingpong: ceil(count / 2) round trips (a round trip is two messages, one each way);
  the class's time is the trial's time x count / (2 x round trips);
* bidir: count exchanges (both ends send one message at once);
* stream: count messages one way, back to back (the receiver times them).

A class counting more than MAX_TIMED_MESSAGES messages (or MAX_TIMED_BYTES bytes) sends
that many instead, and its time is scaled to its count the same way; a warning names it.

Before each class's timed trial one untimed repetition of its size warms the path (as
the sweep's warm-up does: the model it is compared with is of warm messages).  The whole
profile runs ``repeats`` times, class after class; every repeat's time is kept.

The transport is looked up by name (``engines.get``), or opened by the caller's
``opener`` (MPI: a session on the job's two ranks, suites/mpi_replay.py); the server
serves one session at a time, so patterns run one session after another, and
concurrency above 1 (several pairs at once) is not replayed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from beoperf import _core, errors, interrupts
from beoperf.engines import Peer, Transport, TransportError
from beoperf.engines.base import SessionParams
from beoperf.model.document import JsonObject
from beoperf.model.profile import PATTERNS, Entry, Profile
from beoperf.sweep.driver import open_transport

MAX_TRIAL_REPS = 1 << 26  # below the server's per-run limit (1 << 27)
# What one class's timed trial sends at most, per repeat: a profile may count 10^15
# messages (decades of sending); a class over either is timed on this many and its time
# scaled to its count, with a warning.
MAX_TIMED_MESSAGES = 1 << 22
MAX_TIMED_BYTES = 1 << 33
METHOD = ("Each message class is one timed trial in C (CLOCK_MONOTONIC) after one untimed "
          "warm-up message: pingpong as round trips (two messages each), bidir as "
          "exchanges, stream as messages one way back to back; the profile runs once per "
          "repeat, class after class, one session per pattern; the total is the sum of "
          "each class's median over the repeats.")


@dataclass
class ClassReplay:
    entry: Entry
    times_s: list[float] = field(default_factory=list)
    messages_timed: int = 0


@dataclass
class ReplayOutcome:
    classes: list[ClassReplay]
    facts: tuple[JsonObject, JsonObject] = field(default_factory=lambda: ({}, {}))
    warnings: list[str] = field(default_factory=list)
    status: str = "complete"
    reason: str | None = None
    error: BaseException | None = None


Opener = Callable[[SessionParams], Transport]
"""Opens a connected session of a pattern's parameters (for a transport that needs more
than a peer to open, e.g. MPI's session of the job)."""


def timed_messages(e: Entry) -> int:
    """Messages of the class that are sent and timed (its count, or the cap)."""
    cap = max(2, min(MAX_TIMED_MESSAGES, MAX_TIMED_BYTES // e.size))
    return min(e.count, cap)


def plan(e: Entry) -> tuple[int, int]:
    """(repetitions of the trial, messages they move) for one class; its time is the
    trial's scaled by count / messages moved."""
    messages = timed_messages(e)
    if e.pattern == "pingpong":
        reps = math.ceil(messages / 2)
        return reps, 2 * reps
    return messages, messages


def capped_warning(entries: list[Entry]) -> str | None:
    """The line that says which classes are timed on part of their count (None: none)."""
    capped = [e for e in entries if timed_messages(e) < e.count]
    if not capped:
        return None
    named = ", ".join(f"{e.size} B x {e.count:,}" for e in capped[:3])
    return (f"{len(capped)} class(es) timed on part of their count, their time scaled to "
            f"it (at most {MAX_TIMED_MESSAGES:,} messages or {MAX_TIMED_BYTES >> 30} GiB "
            f"a class per repeat): {named}{' ...' if len(capped) > 3 else ''}")


class _Session:
    """One transport session of one pattern, with its pool and sequence numbers."""

    def __init__(self, peer: Peer, pattern: str, max_size: int, transport: str,
                 timeout: float, opener: Opener | None = None) -> None:
        params: SessionParams = {"mode": pattern, "max_size": max_size,
                                 "transport": transport, "integrity": False,
                                 "nocache": False, "nodelay": True}
        self.client: Transport = opener(params) if opener is not None else \
            open_transport(peer, params, timeout=timeout)
        self.pool = _core.Pool(max_size)
        self.seq = 0

    def trial_ns(self, size: int, reps: int) -> int:
        """Elapsed ns of ``reps`` repetitions, in chunks the peer accepts."""
        total = 0
        while reps > 0:
            n = min(reps, MAX_TRIAL_REPS)
            trial = self.client.trial(size, n, self.pool, self.seq)
            self.seq += n
            if trial.corrupt:
                raise errors.IntegrityError(f"{trial.corrupt} corrupted message(s) at {size} B")
            total += trial.elapsed_ns
            reps -= n
        return total


def _run_pattern(peer: Peer, pattern: str, classes: list[ClassReplay], repeats: int,
                 transport: str, timeout: float, out: ReplayOutcome,
                 progress: Callable[[str], None] | None, opener: Opener | None = None) -> None:
    session = _Session(peer, pattern, max(c.entry.size for c in classes), transport, timeout,
                       opener)
    try:
        if not out.facts[0]:
            out.facts = session.client.facts()
        for r in range(repeats):
            for c in classes:
                reps, moved = plan(c.entry)
                session.trial_ns(c.entry.size, 1)  # warm-up, untimed
                elapsed = session.trial_ns(c.entry.size, reps)
                c.times_s.append(elapsed * 1e-9 * c.entry.count / moved)
                c.messages_timed = moved
            if progress:
                progress(f"{pattern}: repeat {r + 1} of {repeats} done")
        out.warnings += [w for w in session.client.warnings if w not in out.warnings]
    finally:
        session.client.close()


def replay(peer: Peer, profile: Profile, *, repeats: int = 3, transport: str = "tcp",
           timeout: float = 10.0, progress: Callable[[str], None] | None = None,
           opener: Opener | None = None) -> ReplayOutcome:
    """Every class of ``profile`` timed ``repeats`` times (see the module docstring).
    Whatever stops it (Ctrl-C, SIGTERM, a lost peer), the classes timed so far are kept
    and the outcome says why it stopped."""
    crowded = [e for e in profile.entries if e.concurrency > 1]
    if crowded:
        raise errors.BadSpec(f"replay sends one pair's messages; {len(crowded)} class(es) "
                             f"have concurrency > 1 (e.g. {crowded[0].size} B x "
                             f"{crowded[0].concurrency})", "replay those with concurrency 1, "
                             "or predict them only")
    out = ReplayOutcome([ClassReplay(e) for e in profile.entries])
    capped = capped_warning(profile.entries)
    if capped:
        out.warnings.append(capped)
    try:
        for pattern in PATTERNS:
            mine = [c for c in out.classes if c.entry.pattern == pattern]
            if mine:
                _run_pattern(peer, pattern, mine, repeats, transport, timeout, out, progress,
                             opener)
    except KeyboardInterrupt as exc:
        out.status, out.reason, out.error = "interrupted", interrupts.reason(exc), exc
    except (errors.BeoperfError, OSError, TransportError) as exc:
        out.status, out.reason, out.error = "failed", str(exc), exc
    return out

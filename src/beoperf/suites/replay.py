"""`beoperf replay`: an application's message profile sent to a peer and timed.

:func:`run` reads the profile, replays it against ``beoperf serve`` on HOST (or an
embedded server on loopback) with the transport named (``sweep.replay``), and returns
the replay document with, when it did not complete, the error to report after saving it.
"""

from __future__ import annotations

import contextlib
import socket
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from beoperf import engines, errors, units
from beoperf.engines import Peer
from beoperf.model.document import Document, make_meta, utc_now
from beoperf.model.prediction import REPLAY
from beoperf.model.profile import Profile, ProfileError, read_profile
from beoperf.suites import serve
from beoperf.sweep.replay import METHOD, ClassReplay, ReplayOutcome, replay

HINT = "see 'beoperf replay --help'"
DEFAULT_PORT = 5202
MAX_REPEATS = 1000


@dataclass(frozen=True)
class Spec:
    profile: str
    host: str | None = None  # None: an embedded server on loopback
    port: int = DEFAULT_PORT
    family: int = socket.AF_UNSPEC
    transport: str = "tcp"
    repeats: int = 3
    timeout: float = 10.0
    profile_format: str = "auto"
    command_line: tuple[str, ...] = ()
    mpi: str | None = None  # transport mpi: openmpi or mpich (None: Open MPI if installed)


class Replayed(NamedTuple):
    document: Document
    error: errors.BeoperfError | None = None
    interrupt: KeyboardInterrupt | None = None


def load(spec: Spec) -> Profile:
    if not 1 <= spec.repeats <= MAX_REPEATS:
        raise errors.BadSpec(f"--repeats {spec.repeats}: give 1 to {MAX_REPEATS}", HINT)
    serve.check_seconds("--timeout", spec.timeout)
    engines.get(spec.transport)  # BadSpec naming the known ones
    try:
        return read_profile(spec.profile, spec.profile_format)
    except ProfileError as exc:
        raise errors.InputError(str(exc), "a CSV size,count[,pattern,concurrency], an IMB "
                                          "or OSU output, or an mpiP report") from None


@contextlib.contextmanager
def peer(spec: Spec, profile: Profile) -> Iterator[tuple[str, int]]:
    if spec.host:
        yield spec.host, spec.port
        return
    loopback = "::1" if spec.family == socket.AF_INET6 else "127.0.0.1"
    need = 4 * max(e.size for e in profile.entries)
    with serve.embedded(loopback, max_memory=max(need, 64 * units.KIB * units.KIB)) as port:
        yield loopback, port


def run(spec: Spec, progress: Callable[[str], None] | None = None) -> Replayed | None:
    """The replay; over MPI (suites/mpi_replay.py) None on ranks other than 0."""
    if spec.transport == "mpi":
        from beoperf.suites import mpi_replay

        return mpi_replay.run(spec, progress)
    profile = load(spec)
    started_utc, started = utc_now(), time.monotonic()
    with peer(spec, profile) as (host, port):
        out = replay(Peer(host, port, spec.family), profile, repeats=spec.repeats,
                     transport=spec.transport, timeout=spec.timeout, progress=progress)
    doc = replay_document(spec, profile, out, started_utc, started, f"{host} port {port}")
    if isinstance(out.error, KeyboardInterrupt):
        return Replayed(doc, None, out.error)
    if out.error is not None:
        return Replayed(doc, engines.get(spec.transport).failure(out.error, host))
    return Replayed(doc)


def replay_document(spec: Spec, profile: Profile, out: ReplayOutcome, started_utc: str,
                    started: float, peer_text: str, **meta_extra: Any) -> Document:
    meta = make_meta(list(spec.command_line), utc_start=started_utc,
                     duration_s=round(time.monotonic() - started, 3), peer=peer_text,
                     **meta_extra)
    body = {"profile": profile.to_dict(), "transport": spec.transport,
            "peer": peer_text, "repeats": spec.repeats,
            "classes": [class_row(c) for c in out.classes], "total_s": totals(out),
            "local": out.facts[0], "remote": out.facts[1], "status": out.status,
            "status_reason": out.reason, "warnings": out.warnings, "method": METHOD}
    return Document(REPLAY, body, meta)


def class_row(c: ClassReplay) -> dict:
    t = c.times_s
    return {"size": c.entry.size, "count": c.entry.count, "pattern": c.entry.pattern,
            "concurrency": c.entry.concurrency, "label": c.entry.label, "times_s": t,
            "median_s": statistics.median(t) if t else None, "min_s": min(t, default=None),
            "max_s": max(t, default=None), "messages_timed": c.messages_timed}


def totals(out: ReplayOutcome) -> dict:
    """The profile's time: the sum of each class's median over the repeats (a stall of
    the machine in one repeat of one class does not move it), and every complete
    repeat's own total with their median, min and max."""
    done = min((len(c.times_s) for c in out.classes), default=0)
    per = [sum(c.times_s[r] for c in out.classes) for r in range(done)]
    typical = sum(statistics.median(c.times_s) for c in out.classes) if done else None
    return {"per_repeat": per, "median": typical,
            "median_of_repeats": statistics.median(per) if per else None,
            "min": min(per, default=None), "max": max(per, default=None)}

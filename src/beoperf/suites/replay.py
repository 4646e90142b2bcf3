"""`beoperf replay`: an application's message profile sent to a peer and timed.

:func:`run` reads the profile, replays it against ``beoperf serve`` on HOST (or an
embedded server on loopback) with the transport named (``sweep.replay``), and returns
the replay document with, when it did not complete, the error to report after saving it.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from beoperf import engines, errors, units
from beoperf.engines import Peer
from beoperf.model.document import Document, JsonObject, make_meta, utc_now
from beoperf.model.profile import Profile, ProfileError, read_profile
from beoperf.model.replay import ClassTimes, Replay, Totals
from beoperf.suites import serve
from beoperf.sweep.replay import METHOD, ReplayOutcome, replay
from beoperf.sysinfo import around

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
        watch = around.Watch().start()
        out = replay(Peer(host, port, spec.family), profile, repeats=spec.repeats,
                     transport=spec.transport, timeout=spec.timeout, progress=progress)
        conditions, notes = watch.stop()
    out.warnings += notes
    doc = replay_document(spec, profile, out, started_utc, started, f"{host} port {port}",
                          conditions=conditions)
    if isinstance(out.error, KeyboardInterrupt):
        return Replayed(doc, None, out.error)
    if out.error is not None:
        return Replayed(doc, engines.get(spec.transport).failure(out.error, host))
    return Replayed(doc)


def replay_document(spec: Spec, profile: Profile, out: ReplayOutcome, started_utc: str,
                    started: float, peer_text: str, launch: JsonObject | None = None,
                    conditions: JsonObject | None = None) -> Document:
    """The replay's document; ``launch``: how the job was launched (an MPI rank's);
    ``conditions``: the machine and the network counters around it (sysinfo.around)."""
    meta = make_meta(list(spec.command_line), utc_start=started_utc,
                     duration_s=round(time.monotonic() - started, 3), peer=peer_text)
    if conditions is not None:
        meta["conditions"] = conditions
    if launch is not None:
        meta["launch"] = launch
    classes = [ClassTimes.of(c.entry, c.times_s, c.messages_timed) for c in out.classes]
    return Replay(profile=profile, transport=spec.transport, peer=peer_text,
                  repeats=spec.repeats, classes=classes, total_s=Totals.of(classes),
                  local=out.facts[0], remote=out.facts[1], status=out.status,
                  status_reason=out.reason, warnings=out.warnings, method=METHOD,
                  meta=meta).to_document()

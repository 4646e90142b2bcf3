"""`beoperf replay --transport mpi`: an application's message profile between two MPI
ranks, timed by the MPI transport's C loops (no Python between messages).

Without a launcher around it, :func:`run` starts the two ranks on this machine (shared
memory: the embedded default, as `beoperf pingpong --transport mpi` does) through the
launcher layer (mpirun of Open MPI or MPICH, ``Spec.mpi``) and reads rank 0's document
from its marked output line (launch/mpi_job.py: bounded, a rank hung in MPI_Finalize is
ended).  Started as a rank (`mpirun -np 2 beoperf replay --transport mpi PROFILE`), it
runs as one: rank 0 replays (sweep/replay.py, each pattern a session of the MPI
transport on the job's session), rank 1 answers, other ranks wait.

``python -m beoperf.cli.rank replay SPEC`` is what the launcher starts (:func:`rank`).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Callable

from beoperf import errors, interrupts, launch
from beoperf.engines.base import Peer, SessionParams
from beoperf.launch import channel, ranks
from beoperf.launch.base import LaunchSpec
from beoperf.launch.mpi_job import (
    MpiJob,
    job_environment,
    launch_meta,
    launch_record,
    rank_environment,
)
from beoperf.model import narrow
from beoperf.model.document import JsonObject, utc_now
from beoperf.model.mpi_options import MpiOptions
from beoperf.suites.mpi_pingpong import rank_session
from beoperf.suites.replay import Replayed, Spec, load, replay_document
from beoperf.sweep.replay import replay
from beoperf.sysinfo import around

START_MARGIN_S = 60.0  # the job's deadline beyond its own bound: starting, finalizing
PER_MESSAGE_S = 0.01  # a generous bound on one message on any link two local ranks use


def run(spec: Spec, progress: Callable[[str], None] | None = None) -> Replayed | None:
    """As a rank when a launcher started this process (None for ranks other than 0), else
    by launching two ranks here."""
    info = ranks.rank_of()
    if info is not None:
        return run_as_rank(spec, info, progress)
    return run_launched(spec)


# --------------------------------------------------------------------------- as a rank


def run_as_rank(spec: Spec, info: ranks.RankInfo,
                progress: Callable[[str], None] | None = None) -> Replayed | None:
    profile = load(spec)
    from beoperf.engines import mpi

    session = rank_session()
    if session.size < 2:
        raise errors.BadSpec(f"the MPI job has {session.size} rank: a replay needs 2",
                             "mpirun -np 2 beoperf replay --transport mpi PROFILE")
    if session.rank != 0:
        if session.rank == 1:
            mpi.serve(session)
        mpi.idle(session)
        return None
    started_utc, started = utc_now(), time.monotonic()

    class Session(mpi.MpiTransport):
        def close(self, abort: bool = False) -> None:
            """Each pattern's session ends here; the responder's ends once, at the end."""

    def opener(params: SessionParams) -> mpi.MpiTransport:
        transport = Session(Peer("rank 1", 1), params, timeout=spec.timeout, session=session)
        transport.connect()
        return transport

    try:
        out = replay(Peer("rank 1", 1), profile, repeats=spec.repeats, transport="mpi",
                     timeout=spec.timeout, progress=progress, opener=opener)
    finally:
        session.comm.send({"op": "bye"}, dest=1, tag=mpi.CONTROL_TAG)
        session.comm.Barrier()  # every rank: the replay is over
    local = out.facts[0]
    if local:
        local["mpi"] = session.facts
    peer = f"MPI rank 1 on {out.facts[1].get('host', '?')}" if out.facts[1] else "MPI rank 1"
    doc = replay_document(spec, profile, out, started_utc, started, peer,
                          launch=launch_meta(info))
    if isinstance(out.error, KeyboardInterrupt):
        return Replayed(doc, None, out.error)
    if out.error is not None:
        error = out.error if isinstance(out.error, errors.BeoperfError) else \
            errors.Failed(f"the MPI replay stopped: {out.error}")
        return Replayed(doc, error)
    return Replayed(doc)


# --------------------------------------------------------------------------- launching


def options(spec: Spec) -> MpiOptions:
    if spec.mpi not in (None, "openmpi", "mpich"):
        raise errors.BadSpec(f"--mpi {spec.mpi}: openmpi or mpich", "see 'beoperf replay "
                             "--help'")
    impl = spec.mpi or ("openmpi" if launch.get("openmpi").available() else "mpich")
    return MpiOptions(implementation=impl)


def deadline_of(spec: Spec, messages: int) -> float:
    """The job's bound: every message of every repeat at PER_MESSAGE_S, and the margin."""
    return START_MARGIN_S + spec.repeats * messages * PER_MESSAGE_S + 2 * spec.timeout


def run_launched(spec: Spec) -> Replayed:
    """Start the two ranks here, wait (bounded), read rank 0's document."""
    profile = load(spec)  # a bad profile is said here, before any rank starts
    opts = options(spec)
    impl = opts.implementation or "openmpi"
    launcher = launch.get(impl)
    if not launcher.available():
        raise errors.BadSpec(f"no mpirun of {impl} here (Debian: mpirun.{impl})",
                             "apt-get install openmpi-bin (or mpich), or choose --mpi")
    argv = (sys.executable, "-m", "beoperf.cli.rank", "replay",
            json.dumps(dataclasses.asdict(spec), separators=(",", ":")))
    made = launcher.command(LaunchSpec(argv, ranks_per_host=2, env=rank_environment(opts, impl),
                                       bind=opts.bind))
    record = launch_record(impl, made, rank_environment(opts, impl), "SPEC")
    env = job_environment(made, record)
    messages = sum(e.count for e in profile.entries)
    job = MpiJob(list(made.argv), env, deadline_of(spec, messages))
    watch = around.Watch().start()
    job.run()
    doc, error, warnings = job.result(impl)
    doc.meta["conditions"], notes = watch.stop()
    if warnings or notes:
        doc.body["warnings"] = list(doc.body.get("warnings") or []) + warnings + notes
    why = doc.body.get("status_reason")
    if isinstance(why, str) and interrupts.relayed(why, job.interrupt) != why:
        doc.body["status_reason"] = interrupts.relayed(why, job.interrupt)
    return Replayed(doc, error, job.interrupt)


# --------------------------------------------------------------------------- a rank

USAGE = ("beoperf.cli.rank replay: run by 'beoperf replay --transport mpi' as a rank of an "
         "MPI job")


def spec_from_plan(plan: JsonObject) -> Spec:
    """The spec run_launched passed; ValueError if it is not one."""
    return Spec(profile=narrow.text_at(plan, "profile"),
                host=narrow.opt_text_at(plan, "host"),
                port=narrow.integer_at(plan, "port"), family=narrow.integer_at(plan, "family"),
                transport=narrow.text_at(plan, "transport"),
                repeats=narrow.integer_at(plan, "repeats"),
                timeout=narrow.num_at(plan, "timeout"),
                profile_format=narrow.text_at(plan, "profile_format"),
                command_line=tuple(narrow.texts_or_none(plan.get("command_line"), "command_line")),
                mpi=narrow.opt_text_at(plan, "mpi"))


def rank(plan: JsonObject) -> int:
    """A rank of the job :func:`run_launched` starts (``python -m beoperf.cli.rank replay
    PLAN``): rank 0 sends its document and any error (launch/channel.py)."""
    return channel.as_rank_of_plan(plan, spec_from_plan, run_as_rank, USAGE)

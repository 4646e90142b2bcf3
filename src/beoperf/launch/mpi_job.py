"""An MPI job beoperf launches (`pingpong --transport mpi`, `replay --transport mpi`,
`cluster ring | pairs | mbw`), from both sides.

The launching side: :func:`choose_launcher` (mpirun of Open MPI or MPICH, or srun),
:func:`rank_environment` (what every rank gets), :func:`launch_record` (what the
document says of the launch, passed to the ranks in ``BEOPERF_MPI_LAUNCH``), and
:class:`MpiJob`: the launcher run as a guarded :class:`beoperf.launch.job.Job` with a
deadline, rank 0's result and error read from their marked lines
(:mod:`beoperf.launch.channel`).  Once the result has arrived a job that does not end (a
rank hung in MPI_Finalize, as MPICH over TCP was seen to) is ended FINALIZE_GRACE_S
later, ranks and all, instead of at the deadline; the result is kept with a warning that
says so.  Ctrl-C asks rank 0 (SIGUSR1, which mpirun and hydra forward) to stop after its
current trial and send what it measured.

The rank side: :func:`finalize_at_exit` (MPI_Finalize at exit, bounded) and
:func:`launch_meta` (how the job was started, for the document).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from typing import Any, TypedDict

from beoperf import errors
from beoperf.launch import base, channel, ranks
from beoperf.launch.job import Job
from beoperf.model.document import Document, JsonObject, from_json
from beoperf.model.mpi_options import MpiOptions

FINALIZE_GRACE_S = 8.0  # the launching process ends a job this long after the result
FINALIZE_S = 20.0  # a rank still in MPI_Finalize after this is ended (faulthandler)
STOP_GRACE_S = 15.0  # after Ctrl-C: how long rank 0 has to send what it measured
KEEP_BYTES = 1024 * 1024  # of the job's output kept (each stream: its start and its end)
ROOT_NOTE = ("Open MPI refuses to run as root unless told: beoperf passed "
             "--allow-run-as-root to mpirun because it runs as root")


# --------------------------------------------------------------------------- launching


def choose_launcher(opts: MpiOptions) -> tuple[base.Launcher, str, str]:
    """(launcher, its name, the MPI implementation) for these options."""
    impl = opts.implementation
    if impl is None:
        impl = "openmpi" if base.get("openmpi").available() else "mpich"
    name = opts.launcher
    if name is None:
        name = "srun" if (not opts.hosts and os.environ.get("SLURM_JOB_ID")) else "mpirun"
    if name == "srun":
        from beoperf.launch.srun import Srun

        return Srun(mpi="pmix" if impl == "openmpi" else "pmi2"), "srun", impl
    launcher = base.get(impl)
    if not launcher.available():
        raise errors.BadSpec(f"no mpirun of {impl} here (Debian: mpirun.{impl})",
                             "apt-get install openmpi-bin (or mpich), or choose --mpi")
    return launcher, impl, impl


def rank_environment(opts: MpiOptions, impl: str) -> dict[str, str]:
    """What every rank gets: the implementation (so that it loads the right ABI) and the
    user's MPI variables."""
    return {ranks.IMPL_VAR: impl, "MPI4PY_MPIABI": impl, **dict(opts.env)}


class LaunchRecord(TypedDict):
    """What the document says of beoperf's launch (launch_record), passed to the ranks in
    LAUNCHED_VAR and recorded by rank 0 as the meta's "launch"."""

    started_by: str
    launcher: str
    argv: list[str]
    environment: dict[str, str]
    notes: list[str]


def launch_record(name: str, made: base.Launch, rank_env: dict[str, str],
                  placeholder: str) -> LaunchRecord:
    """What the document says of beoperf's launch: the launcher, its argv (the last word,
    the ranks' plan, as ``placeholder``), the variables set, and notes."""
    notes = [ROOT_NOTE] if "--allow-run-as-root" in made.argv else []
    return {"started_by": "beoperf", "launcher": name,
            "argv": list(made.argv[:-1]) + [placeholder],
            "environment": dict(made.env) | rank_env, "notes": notes}


def job_environment(made: base.Launch, record: LaunchRecord) -> dict[str, str]:
    """The launcher's environment: this process's, the launch's, and the record."""
    return {**os.environ, **made.env, channel.LAUNCHED_VAR: json.dumps(record)}


class MpiJob:
    """The launcher's process and every rank it starts, run with a deadline; see the
    module's docstring."""

    def __init__(self, argv: list[str], env: dict[str, str], deadline: float | None,
                 progress: Callable[[str], None] | None = None) -> None:
        self.argv, self.env, self.deadline = argv, env, deadline
        self.reader = channel.Reader(progress)
        self.job = Job(argv, env=env, on_line=self.reader, keep=KEEP_BYTES)
        self.returncode: int | None = None
        self.timed_out = self.hung_after_result = False
        self.interrupt: KeyboardInterrupt | None = None

    def run(self) -> None:
        try:
            self.job.start()
        except OSError as exc:
            raise errors.Failed(f"cannot start {self.argv[0]}: {exc.strerror}") from None
        try:
            try:
                self._watch()
            except KeyboardInterrupt as exc:  # rank 0 stops after its trial and reports
                self.interrupt = exc
                self.job.signal(signal.SIGUSR1)
                self._watch(time.monotonic() + STOP_GRACE_S)
        finally:
            self.job.close()
        self.returncode = self.job.returncode

    def _watch(self, until: float | None = None) -> None:
        """Wait for the job; end it at the deadline (or ``until``), or FINALIZE_GRACE_S
        after rank 0's result."""
        started = time.monotonic()
        limit = until if until is not None else (
            started + self.deadline if self.deadline is not None else None)
        while self.job.wait(0) is None:
            now = time.monotonic()
            result_at = self.reader.result_at
            if result_at is not None and now - result_at > FINALIZE_GRACE_S:
                self.hung_after_result = True
                self.job.stop()
            elif limit is not None and now > limit:
                self.timed_out = until is None
                self.job.stop()
            else:
                self.job.wait(0.1)

    @property
    def err(self) -> str:
        return self.job.stderr_text()

    def last_error(self) -> str:
        lines = [ln.strip() for ln in self.err.splitlines() if ln.strip()
                 and not set(ln.strip()) <= {"-"}]
        return " / ".join(lines[-3:])[-600:] if lines else "no message"

    def result(self, name: str) -> tuple[Document, errors.BeoperfError | None, list[str]]:
        """Rank 0's document (any kind) and error, and what went wrong around them (how
        the job ended after the result); the error of the job when it sent no document."""
        data = self.reader.result("rank 0's result")
        if data is None:
            raise self._no_result(name)
        doc = from_json(data, "rank 0's result")
        warnings = []
        if self.hung_after_result or self.timed_out:
            warnings.append(f"the MPI job did not end within {FINALIZE_GRACE_S:g} s of rank 0 "
                            "sending its result (a rank hung, e.g. in MPI_Finalize): it was "
                            "ended")
        elif self.returncode not in (0, None) and self.interrupt is None:
            warnings.append(f"{name} exited with status {self.returncode} after rank 0 sent "
                            f"its result: {self.last_error()}")
        return doc, self.reader.error(), warnings

    def _no_result(self, name: str) -> errors.BeoperfError:
        if self.interrupt is not None:
            return errors.Failed("interrupted before rank 0 sent any result")
        if self.timed_out:
            return errors.Failed(f"the MPI job did not finish within {self.deadline:g} s and "
                                 f"sent no result: {self.last_error()}",
                                 "is every host reachable by the launcher? (--mpi-agent, "
                                 "--mpi-interface)")
        own = self.reader.error()
        if own is not None:
            return own
        return errors.Failed(f"{name} exited with status {self.returncode} and no result: "
                             f"{self.last_error()}")


# --------------------------------------------------------------------------- as a rank


def finalize_at_exit(session: Any) -> None:
    """MPI_Finalize when the process exits (after the result is written), ended after
    FINALIZE_S if the library hangs in it."""
    import atexit
    import faulthandler

    def finalize() -> None:
        faulthandler.dump_traceback_later(FINALIZE_S, exit=True)
        try:
            session.finalize()
        finally:
            faulthandler.cancel_dump_traceback_later()

    atexit.register(finalize)


def launch_meta(info: ranks.RankInfo) -> JsonObject:
    """How the job was started: by beoperf (its launcher's argv, passed down: the
    LaunchRecord) or by the user's launcher."""
    given = os.environ.get(channel.LAUNCHED_VAR)
    if given:
        with contextlib.suppress(ValueError):
            record = json.loads(given)
            if isinstance(record, dict):
                return record
    return {"started_by": info.launcher, "ranks": info.size}

"""`beoperf pingpong --transport mpi`: the sweep between two MPI ranks.

Two ways in:

* **beoperf launches the job** (a plain process): the two ranks are started through the
  launcher layer (``mpirun`` of Open MPI or MPICH's hydra, or ``srun``) on the hosts given
  (none: both here, over shared memory), each running ``python -m beoperf.cli.rank
  pingpong SPEC`` (:func:`rank`); rank 0 sends the finished document on its standard
  output (one marked line, :mod:`beoperf.launch.channel`) *before* MPI_Finalize, and this
  process reads it back (:mod:`beoperf.launch.mpi_job`).  The job has a deadline
  (the time budget plus a margin): a rank that hangs (MPICH was seen to hang in
  MPI_Finalize) is ended with its launcher and all it started, and what rank 0 wrote
  is kept.  Ctrl-C here asks rank 0 (SIGUSR1, which mpirun and hydra forward) to stop
  after its current trial and send what it measured.
* **the user's mpirun or srun started this process as a rank**: rank 0 measures and
  returns the document (the CLI writes it as usual), rank 1 answers, other ranks wait.

Either way rank 0 drives the same precision loop as TCP (``sweep.driver.run_sweep`` over
the MPI transport), so sizes, statistics, the .np output and the analysis are the same.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from beoperf import errors, interrupts
from beoperf.analysis.pingpong import document
from beoperf.engines.base import Peer, SessionParams
from beoperf.launch import channel, ranks
from beoperf.launch.base import LaunchSpec
from beoperf.launch.mpi_job import (
    MpiJob,
    choose_launcher,
    finalize_at_exit,
    job_environment,
    launch_meta,
    launch_record,
    rank_environment,
)
from beoperf.model import jsonvalue, narrow
from beoperf.model.document import JsonObject, make_meta, utc_now
from beoperf.model.mpi_options import IMPLEMENTATIONS, LAUNCHERS, RECV_MODES, MpiOptions
from beoperf.model.pingpong import RunResult
from beoperf.suites.pingpong import (
    HINT,
    Measured,
    Progress,
    Spec,
    no_history,
    shaper_notes,
    validate,
    warnings_of,
)
from beoperf.sweep.driver import SweepOutcome, run_sweep, shaper_probe
from beoperf.sysinfo import around

if TYPE_CHECKING:  # imported at run time only where a rank uses it (as below)
    from beoperf.engines.mpi import Session

START_MARGIN_S = 120.0  # the deadline beyond the time budget: start-up, analysis, finalize

# --------------------------------------------------------------------------- checking

def hosts_from(text: str | None, hostfile: str | None) -> tuple[str, ...]:
    """The hosts of --hosts (a list or a ClusterShell node set: 'node[01-02]') or of a
    hostfile (Open MPI's 'host slots=N', MPICH's 'host:N' or plain lines), in order, each
    once (launch/hosts.py, the one host parser); none named: () (both ranks here, not
    the Slurm allocation).  BadSpec for names that cannot be hosts, InputError for a
    hostfile that cannot be read."""
    if text is None and hostfile is None:
        return ()
    from beoperf.launch.plan import resolve_hosts

    found = resolve_hosts(text, hostfile, environ={})
    return found.names if found is not None else ()


def validate_mpi(spec: Spec) -> MpiOptions:
    """The MPI options of a spec (the defaults if none), checked; BadSpec otherwise."""
    validate(spec)
    opts = spec.mpi or MpiOptions()
    if opts.implementation not in (None, *IMPLEMENTATIONS):
        raise errors.BadSpec(f"--mpi {opts.implementation!r}: choose "
                             f"{', '.join(IMPLEMENTATIONS)}", HINT)
    if opts.launcher not in (None, *LAUNCHERS):
        raise errors.BadSpec(f"--launcher {opts.launcher!r}: choose {', '.join(LAUNCHERS)}",
                             HINT)
    if opts.recv not in RECV_MODES:
        raise errors.BadSpec(f"--recv {opts.recv!r}: choose {', '.join(RECV_MODES)}", HINT)
    if not 1 <= opts.window <= 4096:
        raise errors.BadSpec(f"--window {opts.window}: give 1 to 4096 messages", HINT)
    if spec.host:
        raise errors.BadSpec(f"--transport mpi runs between MPI ranks: give --hosts "
                             f"{spec.host},... instead of the peer {spec.host}", HINT)
    if len(opts.hosts) > 2:
        raise errors.BadSpec(f"{len(opts.hosts)} hosts: a ping-pong runs between two ranks "
                             "on one or two hosts", HINT)
    if spec.integrity and spec.mode == "stream" and opts.window > 2:
        raise errors.BadSpec("--integrity in stream mode needs each message of a window in "
                             "its own buffer, and there are two", "use --window 2")
    return opts


def parameters(spec: Spec, opts: MpiOptions, implementation: str) -> SessionParams:
    """The session's parameters: the sweep's, the MPI options' (MpiOptions.params), the
    library's name and --link-speed when given (the ranks' orders carry none of it)."""
    out: SessionParams = {**spec.params(), **opts.params(), "transport": "mpi",
                          "mpi": implementation}
    if spec.link_speed is not None:
        out["link_speed_bps"] = spec.link_speed
    return out


# --------------------------------------------------------------------------- as a rank


def run_as_rank(spec: Spec, info: ranks.RankInfo, progress: Progress | None = None,
                hold: contextlib.ExitStack | None = None) -> Measured | None:
    """This process is a rank: rank 0 measures and returns the result, rank 1 answers,
    other ranks wait; None for every rank but 0.  MPI_Finalize runs at exit, bounded."""
    opts = validate_mpi(spec)
    from beoperf.engines import mpi

    session = rank_session()
    if session.size < 2:
        raise errors.BadSpec(f"the MPI job has {session.size} rank: a ping-pong needs 2",
                             "mpirun -np 2 beoperf pingpong --transport mpi")
    if session.rank == 1:
        mpi.serve(session)
    if session.rank != 0:
        mpi.idle(session)
        return None
    return measure(spec, opts, session, info, progress, hold)


def rank_session() -> Session:
    """This rank's MPI session (engines.mpi.Session), its MPI chosen first (which may
    restart this process: MPICH), MPI_Finalize at exit, bounded."""
    from beoperf.engines import mpi

    ranks.prepare(ranks.implementation_here())
    session = mpi.Session.open()
    ranks.remove_shim()
    finalize_at_exit(session)
    return session


def measure(spec: Spec, opts: MpiOptions, session: Session, info: ranks.RankInfo,
            progress: Progress | None, hold: contextlib.ExitStack | None) -> Measured:
    """Rank 0: the sweep against rank 1, and its document."""
    from beoperf.engines.mpi import MpiTransport

    started_utc, started = utc_now(), time.monotonic()
    impl = jsonvalue.text(session.facts, "implementation") or "unknown"
    params = parameters(spec, opts, impl)
    transport = MpiTransport(Peer("rank 1", 1), params, timeout=spec.timeout, session=session)
    transport.connect()
    remote_hosts = bool(set(opts.hosts) - {"localhost"})  # else no shaper can be in the way
    # a job the user started: rank 0 watches its host (beoperf's own launch: beoperf does)
    watch = around.Watch(me=os.getppid()).start() \
        if launch_meta(info).get("started_by") != "beoperf" else None
    try:
        cfg = dataclasses.replace(spec.sweep(), settle=remote_hosts)
        outcome = run_sweep(transport, cfg, on_pass=progress)
        if outcome.status == "complete" and spec.mode != "stream" and remote_hosts:
            outcome.facts.update(shaper_check(spec, params, session))
        if hold is not None:
            hold.enter_context(interrupts.deferred())
        local, remote = transport.facts()
    finally:
        transport.close()
    session.comm.Barrier()  # every rank: the measurement is over
    local["mpi"] = session.facts
    local["placement"] = [*placement(local, remote)]
    meta = make_meta(list(spec.command_line), utc_start=started_utc,
                     duration_s=round(time.monotonic() - started, 3),
                     peer=f"MPI rank 1 on {remote.get('host', '?')}",
                     launch=launch_meta(info))
    notes: list[str] = []
    if watch is not None:
        meta["conditions"], notes = watch.stop()
    result = RunResult(parameters=jsonvalue.as_object(params), local=local, remote=remote,
                       meta=meta,
                       sizes=outcome.sizes, status=outcome.status, status_reason=outcome.reason,
                       warnings=warnings_of(transport.warnings, outcome,
                                            params.get("precision")),
                       sweep=outcome.facts)
    result.warnings += [*shaper_notes(result, local), *notes]
    no_history(result, "no history is kept for MPI runs")
    return Measured(document(result), result, *stopped(outcome))


def shaper_check(spec: Spec, params: SessionParams, session: Session) -> JsonObject:
    """After a ping-pong or bidir sweep between hosts, as for TCP (suites.pingpong): does
    a shaper's burst hold every message?  A stream session on the same two ranks settles
    its trial length; a failure costs only this check."""
    from beoperf.engines.mpi import MpiTransport

    class Borrowed(MpiTransport):
        def close(self, abort: bool = False) -> None:
            """The sweep's transport ends the responder's session, not this one."""

    def open_stream(stream_params: SessionParams) -> MpiTransport:
        return Borrowed(Peer("rank 1", 1), stream_params, timeout=spec.timeout, session=session)

    try:
        return shaper_probe(Peer("rank 1", 1), params, list(spec.sizes), timeout=spec.timeout,
                            trial_time=spec.trial_time, open_stream=open_stream)
    except (errors.BeoperfError, OSError) as exc:
        return {"shaper": None, "shaper_check": f"not done: {exc}"}


def placement(local: JsonObject, remote: JsonObject) -> list[JsonObject]:
    """Each rank's host and the CPUs it may run on (its binding)."""
    return [{k: end.get(k) for k in ("rank", "host", "processor_name", "cpus", "net_namespace")}
            for end in (local, remote)]


def stopped(outcome: SweepOutcome) -> tuple[errors.BeoperfError | None,
                                            KeyboardInterrupt | None]:
    if outcome.status == "interrupted" and isinstance(outcome.error, KeyboardInterrupt):
        return None, outcome.error
    if outcome.error is None:
        return None, None
    if isinstance(outcome.error, errors.BeoperfError):
        return outcome.error, None
    return errors.Failed(f"the MPI sweep stopped: {type(outcome.error).__name__}: "
                         f"{outcome.error}", "the sizes measured before it were kept"), None


# --------------------------------------------------------------------------- launching


def spec_text(spec: Spec) -> str:
    """The spec as JSON for the ranks' command line (command_line kept: the user's)."""
    return json.dumps(dataclasses.asdict(spec), separators=(",", ":"))


def spec_from_text(text: str) -> Spec:
    """The spec a launcher passed (spec_text), rebuilt; ValueError if it is not one."""
    return spec_from_plan(json.loads(text))


def spec_from_plan(plan: JsonObject) -> Spec:
    """The spec from its JSON (spec_text), each value checked; ValueError if it is not
    one."""
    mpi, history = plan.get("mpi"), narrow.opt_text_at(plan, "history")
    return Spec(
        sizes=tuple(narrow.ints_or_none(plan.get("sizes"), "sizes")),
        host=narrow.opt_text_at(plan, "host"),
        port=narrow.integer_at(plan, "port"), family=narrow.integer_at(plan, "family"),
        transport=narrow.text_at(plan, "transport"), mode=narrow.text_at(plan, "mode"),
        precision=narrow.num_at(plan, "precision"),
        time_budget=narrow.opt_num_at(plan, "time_budget"),
        max_time=narrow.opt_num_at(plan, "max_time"),
        trial_time=narrow.num_at(plan, "trial_time"), seed=narrow.opt_int_at(plan, "seed"),
        timeout=narrow.num_at(plan, "timeout"), integrity=narrow.flag_at(plan, "integrity"),
        nocache=narrow.flag_at(plan, "nocache"), sndbuf=narrow.opt_int_at(plan, "sndbuf"),
        rcvbuf=narrow.opt_int_at(plan, "rcvbuf"), nodelay=narrow.flag_at(plan, "nodelay"),
        busy_poll=narrow.opt_int_at(plan, "busy_poll"),
        congestion=narrow.opt_text_at(plan, "congestion"),
        client_cpu=narrow.opt_int_at(plan, "client_cpu"),
        server_cpu=narrow.opt_int_at(plan, "server_cpu"),
        place_embedded=narrow.flag_at(plan, "place_embedded"),
        perturbation=narrow.opt_int_at(plan, "perturbation"),
        command_line=tuple(narrow.texts_or_none(plan.get("command_line"), "command_line")),
        mpi=options_from_plan(mpi) if isinstance(mpi, dict) else None,
        history=Path(history) if history is not None else None,
        link_speed=narrow.opt_num_at(plan, "link_speed"))


def options_from_plan(plan: JsonObject) -> MpiOptions:
    """The MPI options of a spec's JSON, each value checked; ValueError if they are not."""
    pairs = [p for p in jsonvalue.items(plan, "env") if isinstance(p, list)]
    if any(len(p) != 2 or not all(isinstance(v, str) for v in p) for p in pairs):
        raise ValueError("'env': not a list of [name, value] pairs")
    return MpiOptions(
        hosts=tuple(narrow.texts_or_none(plan.get("hosts"), "hosts")),
        implementation=narrow.opt_text_at(plan, "implementation"),
        launcher=narrow.opt_text_at(plan, "launcher"), window=narrow.integer_at(plan, "window"),
        sync=narrow.flag_at(plan, "sync"), recv=narrow.text_at(plan, "recv"),
        bind=narrow.text_at(plan, "bind"), agent=narrow.opt_text_at(plan, "agent"),
        interface=narrow.opt_text_at(plan, "interface"),
        env=tuple((str(name), str(value)) for name, value in pairs),
        launcher_args=tuple(narrow.texts_or_none(plan.get("launcher_args"), "launcher_args")),
        deadline=narrow.opt_num_at(plan, "deadline"))


def launch_spec(spec: Spec, opts: MpiOptions, impl: str) -> LaunchSpec:
    argv = (sys.executable, "-m", "beoperf.cli.rank", "pingpong", spec_text(spec))
    try:
        return LaunchSpec(argv, hosts=opts.hosts, ranks_per_host=1 if len(opts.hosts) == 2
                          else 2, env=rank_environment(opts, impl), bind=opts.bind,
                          agent=opts.agent, interface=opts.interface, extra=opts.launcher_args)
    except ValueError as exc:
        raise errors.BadSpec(str(exc), HINT) from None


def deadline_of(spec: Spec, opts: MpiOptions) -> float | None:
    if opts.deadline is not None:
        return opts.deadline
    if spec.time_budget is None:
        return None
    return spec.time_budget + START_MARGIN_S + 2 * spec.timeout


def run_launched(spec: Spec, hold: contextlib.ExitStack | None = None) -> Measured:
    """Start the two ranks, wait for the job (bounded), and read rank 0's document."""
    opts = validate_mpi(spec)
    launcher, name, impl = choose_launcher(opts)
    try:
        made = launcher.command(launch_spec(spec, opts, impl))
    except ValueError as exc:
        raise errors.BadSpec(f"{name}: {exc}", HINT) from None
    record = launch_record(name, made, rank_environment(opts, impl), "SPEC")
    job = MpiJob(list(made.argv), job_environment(made, record), deadline_of(spec, opts))
    watch = around.Watch().start()
    job.run()
    if hold is not None:
        hold.enter_context(interrupts.deferred())
    return measured(job, name, watch)


def measured(job: MpiJob, name: str, watch: around.Watch | None = None) -> Measured:
    """Rank 0's ping-pong document and error (if it sent them), with what went wrong
    around, and the conditions on this host around the job (``watch``: the MPI library
    owns the data sockets, so only the host's counters are known)."""
    doc, error, warnings = job.result(name)
    run = RunResult.from_document(doc)
    run.warnings += warnings
    if watch is not None:
        run.meta["conditions"], notes = watch.stop()
        run.warnings += notes
    reason = interrupts.relayed(run.status_reason, job.interrupt)
    changed = (watch is not None or run.warnings != doc.body.get("warnings")
               or reason != run.status_reason)
    run.status_reason = reason
    doc = document(run) if changed else doc
    return Measured(doc, run, error, job.interrupt)


# --------------------------------------------------------------------------- entry


def run(spec: Spec, progress: Progress | None = None,
        hold: contextlib.ExitStack | None = None) -> Measured | None:
    """The sweep: as a rank when a launcher started this process (None for ranks other
    than 0), else by launching the two ranks."""
    info = ranks.rank_of()
    if info is not None:
        return run_as_rank(spec, info, progress, hold)
    return run_launched(spec, hold)


USAGE = ("beoperf.cli.rank pingpong: run by 'beoperf pingpong --transport mpi' as a rank of "
         "an MPI job")


def rank(plan: JsonObject) -> int:
    """A rank of the job :func:`run_launched` starts (``python -m beoperf.cli.rank
    pingpong PLAN``): rank 0 sends its document and any error (launch/channel.py)."""
    return channel.as_rank_of_plan(plan, spec_from_plan, run_as_rank, USAGE)


# --------------------------------------------------------------------------- --sweep

ENV_KEY = "mpi-env:"


def is_mpi_sweep(spec: Spec, key: str) -> bool:
    """Whether a --sweep needs this module: TCP against MPI, an MPI variable, or any
    setting of an MPI sweep."""
    return key == "transport" or key.startswith(ENV_KEY) or spec.transport == "mpi"


def configure(spec: Spec, key: str, value: Any) -> Spec:
    """The spec with one swept setting changed: the transport (the TCP run goes to the
    second MPI host's `beoperf serve` unless a host is given: both on the same pair of
    hosts), an MPI variable, or any setting a TCP sweep takes."""
    from beoperf.suites import pingpong

    opts = spec.mpi or MpiOptions()
    if key == "transport":
        if value not in ("tcp", "mpi"):
            raise errors.BadSpec(f"--sweep transport={value}: choose tcp or mpi", HINT)
        host = (spec.host or (opts.hosts[-1] if len(opts.hosts) == 2 else None)) \
            if value == "tcp" else None
        return dataclasses.replace(spec, transport=value, host=host)
    if key.startswith(ENV_KEY):
        name = key[len(ENV_KEY):]
        if not name.isidentifier():
            raise errors.BadSpec(f"--sweep {key}: not a variable name", HINT)
        env = tuple((k, v) for k, v in opts.env if k != name) + ((name, str(value)),)
        return dataclasses.replace(spec, transport="mpi", mpi=dataclasses.replace(opts, env=env))
    return pingpong.configure(spec, key, value)


def run_configs(spec: Spec, key: str, values: list[Any], progress: Progress | None = None,
                hold: Callable[[], contextlib.ExitStack] = contextlib.ExitStack,
                ) -> Iterator[tuple[Any, Measured, contextlib.ExitStack]]:
    """One sweep per value, as suites.pingpong.run_configs does (every value checked
    first; stops after the first that did not complete), launching each MPI run."""
    from beoperf.suites import pingpong

    if ranks.rank_of() is not None:
        raise errors.BadSpec("--sweep launches its own MPI jobs: run it outside mpirun/srun",
                             HINT)
    specs = [configure(spec, key, v) for v in values]
    for one in specs:
        validate_mpi(one) if one.transport == "mpi" else validate(one)
    for value, one in zip(values, specs, strict=True):
        stack = hold()
        if one.transport == "mpi":
            measured = run_launched(one, stack)
        else:
            measured = pingpong.run(one, progress, stack)
        yield value, measured, stack
        if measured.error is not None or measured.interrupt is not None:
            return

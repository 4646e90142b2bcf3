"""What `beoperf cluster ring | pairs | mbw` share: where the ranks run, launching one MPI
job per ranks-per-node setting, the rank side of that job, and the document the series
make together.

**Where.**  Hosts from ``--hosts`` (a list or a ClusterShell node set), ``--hostfile``,
else the Slurm allocation this runs in, else this host alone; ``--ranks-per-node 1,2``
runs one series per value (the published study compared one and two processes per
node), each an MPI job of its own with hosts x K ranks, placed by node (ranks 0..K-1 on
the first host ...).  Each rank says where it runs (host, network namespace, CPUs);
nodes are named by the host list in the order the ranks show them.

**Launching** goes through the launcher layer as `pingpong --transport mpi` does: mpirun of
Open MPI or MPICH, or srun (inside an allocation by default; ``--mpi=pmix`` for Open
MPI, ``pmi2`` for MPICH).  Each rank runs ``python -m beoperf.cli.rank cluster-TEST
PLAN`` (:func:`rank`); rank 0 measures, and sends its series' document on one marked
line before MPI_Finalize (the launching process reads it back:
:mod:`beoperf.launch.mpi_job`), with the job's deadline.
The launcher's argv and the variables it passed, and each rank's MPI environment, go into
the document.  Started by the user's own ``mpirun``/``srun`` instead, this process is a
rank: rank 0 measures the one series the job is, the others serve.

**Measuring**: the precision loop (``sweep/precision.py``) over the test's keys, each trial
one C loop per rank (``sweep/cluster_mpi.py``).  Ctrl-C or SIGTERM stops after the current
trial and keeps what was measured (status "interrupted").
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from beoperf import errors, interrupts, launch
from beoperf.launch import channel, ranks
from beoperf.launch import plan as cluster_plan
from beoperf.launch.base import LaunchSpec
from beoperf.launch.mpi_job import (
    MpiJob,
    choose_launcher,
    job_environment,
    launch_meta,
    launch_record,
    rank_environment,
)
from beoperf.model import narrow
from beoperf.model.cluster_mpi import KINDS, Loop, MpiRun, RankPlace, Series
from beoperf.model.document import Document, JsonObject, JsonValue, make_meta, utc_now
from beoperf.model.mpi_options import BINDINGS, IMPLEMENTATIONS, LAUNCHERS, MpiOptions
from beoperf.suites.mpi_pingpong import rank_session
from beoperf.sweep.precision import LoopConfig, LoopOutcome, PrecisionLoop
from beoperf.sysinfo import around

HINT = "see 'beoperf cluster ring --help'"
START_MARGIN_S = 120.0
MAX_RANKS_PER_NODE = 256
MAX_RANKS = 4096


@dataclass(frozen=True)
class Common:
    """Where and how the ranks run, and how precisely each figure is measured.

    ``hosts``/``hostfile``: the nodes (None: the Slurm allocation, else this host);
    ``ranks_per_node``: one series per value; ``mpi``: the MPI, its launcher and what it
    passes on (its ``hosts`` are ignored: ``hosts`` here say where); ``precision``: the
    95% interval of each figure's median the loop aims for, relative; ``min_trials`` per
    figure; ``trial_time``: seconds a trial should last at least; ``time_budget`` per
    series (soft: every figure gets its minimum trials); ``integrity``: verify every
    message; ``seed``: of the random rings and the loop's order."""

    hosts: str | None = None
    hostfile: str | None = None
    ranks_per_node: tuple[int, ...] = (1,)
    mpi: MpiOptions = field(default_factory=lambda: MpiOptions(bind="none"))
    precision: float = 0.05
    min_trials: int = 6
    trial_time: float = 0.05
    time_budget: float | None = 120.0
    integrity: bool = False
    seed: int | None = None
    label: str | None = None
    command_line: tuple[str, ...] = ()


@dataclass
class Outcome:
    """The document, and why the measurement stopped early (None: it did not)."""

    document: Document
    error: errors.BeoperfError | None = None
    interrupt: KeyboardInterrupt | None = None


def check_common(c: Common) -> None:
    """BadSpec for values no test can use (before anything runs)."""
    if not c.ranks_per_node or min(c.ranks_per_node) < 1 or \
            max(c.ranks_per_node) > MAX_RANKS_PER_NODE:
        raise errors.BadSpec(f"--ranks-per-node: from 1 to {MAX_RANKS_PER_NODE}", HINT)
    if not 0 < c.precision < 1:
        raise errors.BadSpec(f"--precision {c.precision:g}: between 0 and 1 (e.g. 0.05)", HINT)
    if not 1 <= c.min_trials <= 1000:
        raise errors.BadSpec(f"--min-trials {c.min_trials}: from 1 to 1000", HINT)
    if not 0 < c.trial_time <= 60:
        raise errors.BadSpec(f"--trial-time {c.trial_time:g}: above 0 s, at most 60 s", HINT)
    if c.time_budget is not None and not c.time_budget > 0:
        raise errors.BadSpec(f"--time-budget {c.time_budget:g}: above 0 s", HINT)
    opts = c.mpi
    if opts.implementation not in (None, *IMPLEMENTATIONS):
        raise errors.BadSpec(f"--mpi {opts.implementation!r}: choose "
                             f"{', '.join(IMPLEMENTATIONS)}", HINT)
    if opts.launcher not in (None, *LAUNCHERS):
        raise errors.BadSpec(f"--launcher {opts.launcher!r}: choose {', '.join(LAUNCHERS)}",
                             HINT)
    if opts.bind not in BINDINGS:
        raise errors.BadSpec(f"--bind-to {opts.bind!r}: choose {', '.join(BINDINGS)}", HINT)


@dataclass(frozen=True)
class LoopSettings:
    """The precision loop's settings, as the ranks receive them."""

    precision: float
    min_trials: int
    trial_time: float
    time_budget: float | None
    seed: int | None

    def to_dict(self) -> JsonObject:
        return {"precision": self.precision, "min_trials": self.min_trials,
                "trial_time": self.trial_time, "time_budget": self.time_budget,
                "seed": self.seed}

    @classmethod
    def from_dict(cls, d: JsonObject) -> LoopSettings:
        return cls(narrow.num(d.get("precision"), "loop.precision"),
                   narrow.integer(d.get("min_trials"), "loop.min_trials"),
                   narrow.num(d.get("trial_time"), "loop.trial_time"),
                   narrow.opt_num(d.get("time_budget"), "loop.time_budget"),
                   narrow.opt_int(d.get("seed"), "loop.seed"))


def loop_config(c: Common) -> LoopSettings:
    return LoopSettings(c.precision, c.min_trials, c.trial_time, c.time_budget, c.seed)


@dataclass(frozen=True)
class Plan:
    """What the ranks are told (as JSON on their command line): the test and its
    parameters (each test reads its own), the loop's settings, the hosts given, ranks per
    node (0: as placed), integrity, the label and the command line."""

    test: str
    params: JsonObject
    loop: LoopSettings
    nodes: list[str]
    ranks_per_node: int
    integrity: bool
    label: str | None
    command_line: list[str]

    def to_dict(self) -> JsonObject:
        return {"test": self.test, "params": self.params, "loop": self.loop.to_dict(),
                "nodes": list(self.nodes), "ranks_per_node": self.ranks_per_node,
                "integrity": self.integrity, "label": self.label,
                "command_line": list(self.command_line)}

    @classmethod
    def from_dict(cls, d: JsonObject) -> Plan:
        """The plan a rank was given (DocumentError: a value of the wrong type)."""
        return cls(narrow.text(d.get("test"), "test"), narrow.obj(d.get("params"), "params"),
                   LoopSettings.from_dict(narrow.obj(d.get("loop"), "loop")),
                   narrow.texts(d.get("nodes"), "nodes"),
                   narrow.integer(d.get("ranks_per_node"), "ranks_per_node"),
                   narrow.flag(d.get("integrity"), "integrity"),
                   narrow.opt_text(d.get("label"), "label"),
                   narrow.texts(d.get("command_line"), "command_line"))


# --------------------------------------------------------------------------- hosts


@dataclass(frozen=True)
class Where:
    """The nodes (empty: this host), where they came from, and whether srun should use
    the allocation it runs in rather than name them."""

    nodes: tuple[str, ...]
    source: str
    in_allocation: bool


def where(c: Common) -> Where:
    found = cluster_plan.resolve_hosts(c.hosts, c.hostfile)
    if found is None:
        return Where((), "this host", False)
    return Where(found.names, found.source, found.source.startswith("Slurm allocation"))


def ranks_of(w: Where, per_node: int) -> int:
    n = max(1, len(w.nodes)) * per_node
    if n < 2:
        raise errors.BadSpec(f"{n} rank: these tests need two ranks at least",
                             "give two hosts or more (--hosts), or --ranks-per-node 2")
    if n > MAX_RANKS:
        raise errors.BadSpec(f"{n} ranks: at most {MAX_RANKS}", HINT)
    return n


# --------------------------------------------------------------------------- launching


def plan_of(test: str, params: JsonObject, c: Common, w: Where, per_node: int) -> Plan:
    return Plan(test, params, loop_config(c), list(w.nodes), per_node, c.integrity, c.label,
                list(c.command_line))


def _launch_spec(plan: Plan, c: Common, w: Where, impl: str, name: str) -> LaunchSpec:
    argv = (sys.executable, "-m", "beoperf.cli.rank", f"cluster-{plan.test}",
            json.dumps(plan.to_dict(), separators=(",", ":")))
    hosts = () if (name == "srun" and w.in_allocation) else w.nodes
    if not hosts and name != "srun":  # this host: as many slots as ranks (mpirun would
        hosts = ("localhost",)        # refuse more ranks than cores)
    try:
        return LaunchSpec(argv, hosts=hosts, ranks_per_host=plan.ranks_per_node,
                          env=rank_environment(c.mpi, impl), bind=c.mpi.bind,
                          agent=c.mpi.agent, interface=c.mpi.interface,
                          extra=c.mpi.launcher_args)
    except ValueError as exc:
        raise errors.BadSpec(str(exc), HINT) from None


def _launcher(c: Common, w: Where) -> tuple[launch.Launcher, str, str]:
    """(launcher, its name, the MPI): srun by default inside an allocation."""
    opts = dataclasses.replace(c.mpi, hosts=() if w.in_allocation else w.nodes)
    return choose_launcher(opts)


def deadline_of(c: Common, repeat: int = 1) -> float | None:
    if c.mpi.deadline is not None:
        return c.mpi.deadline
    if c.time_budget is None:
        return None
    return 3 * c.time_budget * repeat + START_MARGIN_S


Progress = Callable[[str], None]


def launch_series(plan: Plan, c: Common, w: Where, deadline: float | None,
                  progress: Progress | None = None
                  ) -> tuple[list[Series], errors.BeoperfError | None, KeyboardInterrupt | None]:
    """One MPI job: its series (from rank 0's document), its error, and an interrupt;
    ``progress`` gets rank 0's lines of progress as they come."""
    launcher, name, impl = _launcher(c, w)
    try:
        made = launcher.command(_launch_spec(plan, c, w, impl, name))
    except ValueError as exc:
        raise errors.BadSpec(f"{name}: {exc}", HINT) from None
    record = launch_record(name, made, rank_environment(c.mpi, impl), "PLAN")
    job = MpiJob(list(made.argv), job_environment(made, record), deadline, progress)
    job.run()
    doc, error, warnings = job.result(name)
    if doc.kind not in KINDS:
        raise errors.Failed(f"rank 0 sent a {doc.kind} document, not a cluster MPI test's")
    series = MpiRun.from_document(doc).series
    for one in series:
        one.warnings += warnings
        one.status_reason = interrupts.relayed(one.status_reason, job.interrupt)
    return series, error, job.interrupt


# What stopped a measurement early: an error, or an interrupt (both None: nothing).
Stop = tuple[errors.BeoperfError | None, KeyboardInterrupt | None]
Body = Callable[[JsonObject, str | None, list[Series]], MpiRun]
RankMeasure = Callable[[Any, Plan, Series], Stop]


@dataclass(frozen=True)
class Test:
    """A test's name (``plan.test``), document kind, the run it makes of its series
    (``body(params, label, series)``) and rank 0's measurement, which adds the test's
    figures and status to the series it is given and says what stopped it."""

    name: str
    kind: str
    body: Body
    measure: RankMeasure


def run_series(test: Test, params: JsonObject, c: Common, repeat: int = 1,
               progress: Progress | None = None) -> Outcome | None:
    """Every series of a test (one job per ranks-per-node value) as one document of
    ``test.kind`` (``test.body(params, label, series)``); as a rank of the user's job,
    that job's one series (None on ranks other than 0)."""
    check_common(c)
    info = ranks.rank_of()
    if info is not None:
        return as_rank(plan_of(test.name, params, c, Where((), "the MPI job", False), 0),
                       info, test)
    w = where(c)
    for k in c.ranks_per_node:
        ranks_of(w, k)
    started, series = utc_now(), list[Series]()
    error: errors.BeoperfError | None = None
    interrupt: KeyboardInterrupt | None = None
    watch = around.Watch().start()
    for k in c.ranks_per_node:
        found, error, interrupt = launch_series(plan_of(test.name, params, c, w, k), c, w,
                                                deadline_of(c, repeat), progress)
        series += found
        if error is not None or interrupt is not None:
            break
    with interrupts.deferred():
        conditions, notes = watch.stop()
        if series:  # what the conditions say of the whole test, with its last series
            series[-1].warnings += notes
        meta = make_meta(list(c.command_line), utc_start=started, hosts=w.source,
                         conditions=conditions)
        document = test.body(params, c.label, series).to_document(meta)
    return Outcome(document, error, interrupt)


# --------------------------------------------------------------------------- as a rank

USAGE = ("beoperf.cli.rank cluster-TEST: run by 'beoperf cluster ring|pairs|mbw' as a rank "
         "of an MPI job")


def rank_of_test(plan: JsonObject, test: Test) -> int:
    """A rank of the job :func:`launch_series` starts (``python -m beoperf.cli.rank
    cluster-TEST PLAN``): rank 0 sends its series' document and any error
    (launch/channel.py)."""
    if plan.get("test") != test.name:
        raise errors.BadSpec(f"not a plan of the cluster's {test.name} test")

    return channel.as_rank_of_plan(plan, Plan.from_dict,
                                   lambda p, info: as_rank(p, info, test), USAGE)


def as_rank(plan: Plan, info: ranks.RankInfo, test: Test) -> Outcome | None:
    """This process is a rank: rank 0 measures (the series of this job), others serve."""
    from beoperf.engines import mpi_group

    session = rank_session()
    if session.rank != 0:
        mpi_group.serve(session)
        return None
    started, t0 = utc_now(), time.monotonic()
    leader = mpi_group.Leader(session)
    # a job the user started: rank 0 watches its host (beoperf's own launch: beoperf does)
    watch = around.Watch(me=os.getppid()).start() \
        if launch_meta(info).get("started_by") != "beoperf" else None
    try:
        if session.size < 2:
            raise errors.BadSpec(f"the MPI job has {session.size} rank: these tests need two "
                                 "at least", HINT)
        series = common_series(plan, leader.facts(), session, info)
        error, interrupt = test.measure(leader, plan, series)
    finally:
        with interrupts.deferred():
            leader.close()
    meta = make_meta(plan.command_line, utc_start=started,
                     duration_s=round(time.monotonic() - t0, 3))
    if watch is not None:
        meta["conditions"], notes = watch.stop()
        series.warnings += notes
    run = test.body(plan.params, plan.label, [series])
    return Outcome(run.to_document(meta), error, interrupt)


def node_names(plan: Plan, facts: list[JsonObject]) -> tuple[list[str], list[str]]:
    """(each rank's node, the nodes in order, with warnings in the series if the ranks'
    placement does not match the hosts given).  A node is a (host name, network
    namespace) seen by the ranks; named by the host list in order of first appearance."""
    seen: list[tuple[JsonValue, JsonValue]] = []
    for f in facts:
        ident = (f.get("host"), f.get("net_namespace"))
        if ident not in seen:
            seen.append(ident)
    given = list(plan.nodes)
    if len(given) == len(seen):
        names = given
    else:
        hosts = [str(h) for h, _ in seen]
        names = [h if hosts.count(h) == 1 else f"{h}#{hosts[:i + 1].count(h)}"
                 for i, h in enumerate(hosts)]
    by_ident = dict(zip(seen, names, strict=True))
    return [by_ident[(f.get("host"), f.get("net_namespace"))] for f in facts], names


def oversubscribed(facts: list[JsonObject]) -> list[str]:
    """A warning per host name whose ranks outnumber the CPUs they may run on (the union
    of their affinities; network namespaces of one machine share its host name and its
    CPUs): MPI ranks poll while they wait, so there each small-message time is the
    scheduler's time slice more than the library's (calls of milliseconds at np 4 on 2
    CPUs, bench/RESULTS.md CB1)."""
    by_host: dict[str, list[JsonObject]] = {}
    for f in facts:
        by_host.setdefault(str(f.get("host")), []).append(f)
    out = []
    for host, ranks_there in by_host.items():
        cpus: set[int] = set()
        for f in ranks_there:
            cpus |= {c for c in f.get("cpus") or [] if isinstance(c, int)}  # type: ignore[union-attr]
        if cpus and len(ranks_there) > len(cpus):
            out.append(f"{len(ranks_there)} ranks on {host}'s {len(cpus)} CPU(s): ranks that "
                       "poll while they wait share CPUs, so small-message times are the "
                       "scheduler's more than the MPI library's; use at most "
                       f"{len(cpus)} rank(s) there")
    return out


def common_series(plan: Plan, facts: list[JsonObject], session: Any,
                  info: ranks.RankInfo) -> Series:
    """What every series records: its ranks and where they ran, the launch, the MPI (the
    test adds its figures, loop and status)."""
    rank_nodes, nodes = node_names(plan, facts)
    counts = {n: rank_nodes.count(n) for n in nodes}
    per_node = plan.ranks_per_node or max(counts.values())
    warnings = []
    if plan.nodes and len(nodes) != len(plan.nodes):
        warnings.append(f"the ranks ran on {len(nodes)} distinct nodes, not the "
                        f"{len(plan.nodes)} hosts given: nodes are named by what the "
                        "ranks saw (host name, network namespace)")
    if len(set(counts.values())) > 1 or (plan.ranks_per_node and
                                          set(counts.values()) != {plan.ranks_per_node}):
        warnings.append(f"ranks per node as placed: {counts}")
    warnings += oversubscribed(facts)
    keep = ("rank", "host", "processor_name", "pid", "cpus", "net_namespace")
    env = facts[0].get("environment")
    return Series(
        ranks_per_node=per_node, np=session.size, nodes=nodes,
        ranks=[RankPlace.from_dict({k: f.get(k) for k in keep} | {"node": n})
               for f, n in zip(facts, rank_nodes, strict=True)],
        launch=launch_meta(info), mpi=session.facts,
        transport=narrow.opt_obj(facts[0].get("transport"), "transport"),
        environment=None if env is None else narrow.text_map(env, "environment"),
        warnings=warnings)


# --------------------------------------------------------------------------- the loop


def run_loop(keys: list[Any], measurer: Any, plan: Plan, what: str,
             min_trials: int = 1) -> LoopOutcome:
    """The precision loop over ``keys`` with the plan's settings (and ``min_trials`` at
    least); a line of progress after each pass (``what`` is measured)."""
    cfg = plan.loop

    def on_pass(n: int, points: list[Any]) -> None:
        done = sum(1 for p in points if p.converged or p.capped)
        channel.progress(f"{what}: pass {n}, {done} of {len(points)} figures within "
                 f"{cfg.precision:.0%}")

    loop = PrecisionLoop(keys, measurer, LoopConfig(
        precision=cfg.precision, trial_time=cfg.trial_time,
        min_trials=max(min_trials, cfg.min_trials), time_budget=cfg.time_budget,
        seed=cfg.seed, hard_budget=False),  # every figure gets its minimum trials
        on_pass=on_pass)
    return loop.run()


def loop_facts(out: LoopOutcome, warm_trials: int | None = None) -> Loop:
    return Loop(passes=out.passes, elapsed_s=round(out.elapsed_s, 3),
                over_budget=out.over_budget, drift=dict(out.drift), inflation=out.inflation,
                warm_trials=warm_trials)


def status_of(out: LoopOutcome, series: Series) -> Stop:
    """The series' status from how the loop ended; what stopped it (for rank 0 to
    report)."""
    exc = out.stopped
    if exc is None:
        series.status, series.status_reason = "complete", None
        return None, None
    if isinstance(exc, KeyboardInterrupt):
        series.status, series.status_reason = "interrupted", interrupts.reason(exc)
        return None, exc
    error = exc if isinstance(exc, errors.BeoperfError) else errors.Failed(
        f"{type(exc).__name__}: {exc}", "the figures measured before it were kept")
    series.status, series.status_reason = "failed", str(error)
    return error, None

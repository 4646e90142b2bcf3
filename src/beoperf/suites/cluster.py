"""`beoperf cluster hpcc`: HPC Challenge over process counts, with repeats, through mpirun
(Open MPI, MPICH) or srun, into one document per run and a scaling document.

``run(Spec(...), progress)`` plans every run (:mod:`beoperf.launch.plan`), then,
repeat after repeat, runs each process count once (so that a slow spell of a shared
machine spreads over all counts rather than landing on one), each in its own directory
``OUTPUT/runs/LABEL/`` with the ``hpccinf.txt`` written for it, where hpcc leaves its
``hpccoutf.txt`` (kept as it is).  Each run's document (kind "cluster") is written as soon
as the run ends, to ``OUTPUT/runs/LABEL.json``; the scaling document (kind "scaling") to
``OUTPUT/scaling.json`` at the end, and also when the command is interrupted (Ctrl-C,
SIGTERM: the runs already measured are kept; the running one is stopped, its process
group ended by its PID, and recorded as failed).

The launcher's argv, the variables beoperf set and the environment that shapes an MPI
run (MPI, PMI, Slurm, BLAS and OpenMP variables, PATH and LD_LIBRARY_PATH; nothing else,
so no secret of the user's environment is stored) go into each run's document.  Open MPI
refuses to run as root; as root beoperf adds ``--allow-run-as-root`` and says so in each
document's notes (OMPI_ALLOW_RUN_AS_ROOT=1 with OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 in the
environment does the same).

hpcc's rank 0 writes ``hpccoutf.txt`` in its working directory, which mpirun and srun set
to the run directory: on several nodes, OUTPUT must be on a filesystem the node of rank 0
(the first host) shares with this one, as HPCC runs usually are.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from beoperf import errors, interrupts, safeio
from beoperf.analysis import scaling
from beoperf.launch import binary, job, plan
from beoperf.launch.base import LaunchSpec
from beoperf.launch.srun import Srun, allocation
from beoperf.model import cluster, hpcc
from beoperf.model.document import Document, JsonObject, make_meta, utc_now
from beoperf.suites.cluster_refs import systems_for
from beoperf.sysinfo import around

DEFAULT_TIMEOUT_S = 3600.0
DEFAULT_FRACTION = 0.5
DEFAULT_NB = 80
OUTPUT_LIMIT = safeio.LIMITS["result"]
TAIL_BYTES = 64 * 1024
PROBE_TIMEOUT_S = 120.0
STOP_GRACE_S = 5.0
ENV_PREFIXES = ("OMPI_", "PMIX_", "PMI_", "SLURM_", "MPICH_", "MPIR_", "HYDRA_", "I_MPI_",
                "UCX_", "OMP_", "OPENBLAS_", "GOTO_", "MKL_", "BLIS_", "FI_")
ENV_NAMES = ("PATH", "LD_LIBRARY_PATH", "LD_PRELOAD")
ROOT_NOTE = ("running as root: mpirun of Open MPI was given --allow-run-as-root (Open MPI "
             "refuses root without it, or without OMPI_ALLOW_RUN_AS_ROOT=1 and "
             "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)")


@dataclass(frozen=True)
class Spec:
    """A scaling study.  ``np``: the process counts; ``repeat``: runs of each; hosts from
    ``hosts`` (a list or node set) or ``hostfile``, else the Slurm allocation, else this
    host; ``ranks_per_node``: one series per value (None: spread); the problem from ``n``
    or ``memory_fraction`` of the nodes' memory (``node_memory`` bytes per node, else
    measured), ``nb``, ``grid`` ('PxQ', one count only); the launcher (``launcher``:
    auto, openmpi, mpich, mpirun, srun; ``srun_mpi``: srun's PMI plugin) and what it
    passes on (``agent``, ``interface``, ``env``, ``launcher_args``, ``bind``);
    ``timeout``: seconds a run may take; ``references`` and ``reference_files``: systems
    to put beside the results."""

    output: str
    np: tuple[int, ...]
    repeat: int = 1
    hosts: str | None = None
    hostfile: str | None = None
    ranks_per_node: tuple[int, ...] | None = None
    n: int | None = None
    memory_fraction: float = DEFAULT_FRACTION
    node_memory: int | None = None
    nb: int = DEFAULT_NB
    grid: str | None = None
    hpcc: str = "hpcc"
    launcher: str = "auto"
    srun_mpi: str | None = None
    agent: str | None = None
    interface: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    launcher_args: tuple[str, ...] = ()
    bind: str = "none"
    timeout: float | None = DEFAULT_TIMEOUT_S
    references: tuple[str, ...] = ()
    reference_files: tuple[str, ...] = ()
    label: str | None = None
    command_line: tuple[str, ...] = ()


@dataclass(frozen=True)
class Event:
    """What the progress display is told: a run starts ("start": ``index`` of ``total``,
    ``eta_s`` for all that is left, None until a run has been timed) or ends ("done", with
    its ``status``, ``elapsed_s`` and ``failures``)."""

    what: str
    index: int
    total: int
    label: str
    np: int
    repeat: int
    eta_s: float | None = None
    status: str | None = None
    elapsed_s: float | None = None
    failures: tuple[str, ...] = ()


Progress = Callable[[Event], None]


# --------------------------------------------------------------------------- checks


def check(spec: Spec) -> None:
    """BadSpec for values that cannot make a study (before anything runs)."""
    if spec.repeat < 1 or spec.repeat > 1000:
        raise errors.BadSpec(f"--repeat {spec.repeat}: from 1 to 1000")
    if not spec.np:
        raise errors.BadSpec("--np: give at least one process count")
    if not 0 < spec.memory_fraction <= 0.95:
        raise errors.BadSpec(f"--memory-fraction {spec.memory_fraction:g}: above 0 and at "
                             "most 0.95 (the system and MPI need the rest)")
    if spec.nb < 1 or spec.nb > 10000:
        raise errors.BadSpec(f"--nb {spec.nb}: from 1 to 10000")
    if spec.n is not None and not spec.nb <= spec.n <= 10**8:
        raise errors.BadSpec(f"--n {spec.n}: from NB ({spec.nb}) to 10^8")
    if spec.grid is not None and len(spec.np) != 1:
        raise errors.BadSpec("--grid fits one process count; give one --np with it")
    if spec.timeout is not None and not spec.timeout > 0:
        raise errors.BadSpec(f"--timeout {spec.timeout}: above 0 seconds")


def _linked(spec: Spec) -> binary.Linked:
    path = binary.which(spec.hpcc)
    if path is None:
        raise errors.BadSpec(f"--hpcc {spec.hpcc}: not found or not executable",
                             "install HPCC (Debian: apt-get install hpcc) or give its path")
    return binary.inspect(path)


def _configs(spec: Spec, names: tuple[str, ...]) -> list[plan.Config]:
    per_node: tuple[int | None, ...] = spec.ranks_per_node or (None,)
    return [plan.place(np_, k, names) for k in per_node for np_ in spec.np]


# --------------------------------------------------------------------------- environment


def environment_snapshot(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The variables that shape an MPI run (see the module's docstring), nothing else."""
    env = os.environ if environ is None else environ
    return {k: v for k, v in sorted(env.items())
            if k.startswith(ENV_PREFIXES) or k in ENV_NAMES}


def _launch_spec(spec: Spec, argv: tuple[str, ...], config: plan.Config,
                 per_node: int | None = None) -> LaunchSpec:
    try:
        return LaunchSpec(argv, hosts=config.nodes,
                          ranks_per_host=per_node or config.ranks_per_node,
                          env=dict(spec.env), bind=spec.bind, agent=spec.agent,
                          interface=spec.interface, extra=spec.launcher_args)
    except ValueError as exc:
        raise errors.BadSpec(str(exc)) from None


def _notes(chosen: plan.Chosen, argv: tuple[str, ...]) -> list[str]:
    notes = [f"launcher {chosen.name}: {chosen.why}"]
    if "--allow-run-as-root" in argv:
        notes.append(ROOT_NOTE)
    return notes


# --------------------------------------------------------------------------- processes


@dataclass
class Finished:
    """How a launched command ended."""

    status: int | None  # None: stopped by beoperf (timeout or interrupt)
    elapsed_s: float
    stdout: str
    stderr: str
    why_stopped: str = ""


def execute(argv: tuple[str, ...], env: dict[str, str], cwd: str,
            timeout: float | None) -> Finished:
    """Run argv as a guarded job (launch/job.py: its whole process tree ends with beoperf,
    and on timeout or Ctrl-C/SIGTERM); KeyboardInterrupt is re-raised once it is gone."""
    done = job.run(argv, timeout, env={**os.environ, **env}, cwd=cwd, keep=TAIL_BYTES,
                   grace=STOP_GRACE_S)
    why = f"stopped after the --timeout of {timeout:g} s" if done.stopped else ""
    return Finished(None if done.stopped else done.returncode, done.elapsed_s,
                    done.stdout_text(), done.stderr_text(), why)


# --------------------------------------------------------------------------- one run


@dataclass
class Study:
    """Everything decided once for all runs."""

    spec: Spec
    root: Path
    chosen: plan.Chosen
    linked: binary.Linked
    configs: list[plan.Config]
    hosts_source: str
    systems: list = field(default_factory=list)
    runs: list[scaling.RunRef] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _binary_facts(linked: binary.Linked) -> cluster.Binary:
    return cluster.Binary(
        linked.path,
        cluster.MpiLibrary(linked.mpi, linked.mpi_library) if linked.mpi else None,
        linked.blas)


def _launch_record(study: Study, argv: tuple[str, ...], env: dict[str, str],
                   cwd: Path) -> cluster.Launch:
    alloc = allocation()
    return cluster.Launch(
        launcher=study.chosen.name, argv=list(argv), env=dict(env),
        environment=environment_snapshot(), notes=_notes(study.chosen, argv), cwd=str(cwd),
        allocation=cluster.SlurmJob(alloc.job_id, alloc.nodelist) if alloc else None)


def _summary_of(rundir: Path) -> tuple[hpcc.HpccRun | None, cluster.Output | None, str]:
    """The run hpcc left in rundir, what to store about the file, or why there is none."""
    path = rundir / "hpccoutf.txt"
    if not path.exists():
        return None, None, ("hpcc wrote no hpccoutf.txt here (it did not start, or rank 0 "
                            "ran on a node that does not share this directory)")
    try:
        data = safeio.read_bytes(path, OUTPUT_LIMIT, "HPCC output")
        runs = hpcc.parse_runs(data.decode("utf-8", errors="replace"), str(path))
    except (ValueError, OSError) as exc:
        return None, None, str(exc)
    output = cluster.Output(f"{rundir.name}/hpccoutf.txt", cluster.sha256(data),
                            run_in_file=len(runs), runs_in_file=len(runs))
    return runs[-1], output, ""


def _run_of(study: Study, config: plan.Config, repeat: int, label: str,
            launch: cluster.Launch, finished: Finished, rundir: Path) -> cluster.ClusterRun:
    assert config.input is not None
    input_ = cluster.HplInput(config.input.n, config.input.nb, config.input.p,
                              config.input.q, file=f"{rundir.name}/hpccinf.txt",
                              n_from=config.n_from)
    setting = cluster.Setting(
        ranks_per_node=config.ranks_per_node, nodes=list(config.nodes) or None,
        repeat=repeat, series=config.series, input_=input_, launch=launch,
        binary=_binary_facts(study.linked), elapsed_s=finished.elapsed_s,
        exit_status=finished.status)
    around = []
    if finished.why_stopped:
        around.append(finished.why_stopped)
    elif finished.status:
        why = job.said(finished.stderr)
        around.append(f"{launch.launcher} exited with status {finished.status}"
                      + (f": {why}" if why else ""))
    run, output, problem = _summary_of(rundir)
    if output is not None:
        output.stdout, output.stderr_tail = finished.stdout[-4096:], finished.stderr[-4096:]
    if run is None:
        return cluster.failed_run(label=label, np_=config.np, reasons=[*around, problem],
                                  output=None, setting=setting)
    typed = cluster.cluster_run(run, label=label, output=output, setting=setting,
                                extra_failures=around)
    if typed.np != config.np:  # counted where it was meant to be, and failed
        typed.status = "failed"
        typed.failures.append(
            f"hpcc reports {scaling.processes(typed.np)} (CommWorldProcs), not "
            f"{config.np}: is hpcc built for the MPI of {launch.launcher}? (a program "
            "of another MPI starts as separate single processes)")
        typed.np = config.np
    return typed


def _body(study: Study, config: plan.Config, repeat: int, label: str, launch: JsonObject,
          finished: Finished, rundir: Path) -> JsonObject:
    """The body of one run's document (``launch``: the launch record as stored)."""
    return _run_of(study, config, repeat, label, cluster.Launch.from_dict(launch), finished,
                   rundir).body()


def run_one(study: Study, config: plan.Config, repeat: int) -> scaling.RunRef:
    """One run of hpcc in its own directory; its document written beside it."""
    label = f"{config.name}-r{repeat}"
    rundir = study.root / "runs" / label
    rundir.mkdir(parents=False)
    assert config.input is not None
    safeio.write_atomic(rundir / "hpccinf.txt", config.input.text())
    launch_spec = _launch_spec(study.spec, (study.linked.path,), config)
    try:
        launched = study.chosen.launcher.command(launch_spec)
    except ValueError as exc:
        raise errors.BadSpec(str(exc)) from None
    record = _launch_record(study, launched.argv, dict(launched.env), rundir)
    study.notes = [n for n in dict.fromkeys([*study.notes, *record.notes])]
    meta = make_meta(list(study.spec.command_line))
    watch = around.Watch().start()  # this host's load and counters around the run
    try:
        finished = execute(launched.argv, dict(launched.env), str(rundir), study.spec.timeout)
    except KeyboardInterrupt as exc:
        finished = Finished(None, 0.0, "", "", f"stopped: {interrupts.reason(exc)}")
        meta["conditions"] = watch.stop()[0]
        _write(study, rundir, label, config, repeat, record, finished, meta)
        raise
    meta["conditions"] = watch.stop()[0]
    return _write(study, rundir, label, config, repeat, record, finished, meta)


def _write(study: Study, rundir: Path, label: str, config: plan.Config, repeat: int,
           record: cluster.Launch, finished: Finished, meta: JsonObject) -> scaling.RunRef:
    with interrupts.deferred():
        body = _body(study, config, repeat, label, record.to_dict(), finished, rundir)
        meta["utc_end"] = utc_now()
        Document(cluster.CLUSTER_KIND, body, meta).save(study.root / "runs" / f"{label}.json")
        ref = scaling.RunRef(body, f"runs/{label}.json")
        study.runs.append(ref)
    return ref


# --------------------------------------------------------------------------- memory


def node_memory(study: Study) -> int:
    """The smallest MemTotal of the nodes the largest configuration uses (bytes)."""
    if study.spec.node_memory is not None:
        return study.spec.node_memory
    widest = max(study.configs, key=lambda c: len(c.nodes))
    if not widest.nodes:
        return plan.local_memory()
    probe = plan.Config(len(widest.nodes), widest.series, 1, widest.nodes)
    argv = ("grep", "MemTotal", "/proc/meminfo")
    launcher = study.chosen.launcher
    if isinstance(launcher, Srun):
        launcher = Srun("none", launcher.environ)
    launched = launcher.command(_launch_spec(study.spec, argv, probe, 1))
    done = execute(launched.argv, dict(launched.env), os.getcwd(), PROBE_TIMEOUT_S)
    values = [int(v) * 1024 for v in plan._MEMTOTAL.findall(done.stdout)]
    if done.status != 0 or len(values) != len(widest.nodes):
        last = (done.stderr.strip().splitlines() or [""])[-1][:200]
        raise errors.Failed(f"could not read the nodes' memory through {study.chosen.name} "
                            f"({len(values)} of {len(widest.nodes)} answered; {last})",
                            "give --n (HPL's N) or --node-memory SIZE")
    return min(values)


# --------------------------------------------------------------------------- the study


def eta(study: Study, remaining: list[plan.Config]) -> float | None:
    """Seconds left: each remaining run as long as the mean of the runs of its count done
    so far (of all runs when its count has none yet); None before any run is timed."""
    done: dict[str, list[float]] = {}
    for ref in study.runs:
        if ref.run.elapsed_s:
            done.setdefault(f"{ref.run.series}/{ref.run.np}", []).append(ref.run.elapsed_s)
    if not done:
        return None
    every = [t for ts in done.values() for t in ts]
    overall = sum(every) / len(every)
    total = 0.0
    for config in remaining:
        same = done.get(f"{config.series}/{config.np}")
        total += sum(same) / len(same) if same else overall
    return total


def prepare(spec: Spec) -> Study:
    """Check the spec, find hpcc and the hosts, choose the launcher, size the problems."""
    check(spec)
    linked = _linked(spec)
    found = plan.resolve_hosts(spec.hosts, spec.hostfile)
    names = found.names if found else ()
    chosen = plan.choose(spec.launcher, linked, spec.srun_mpi)
    configs = _configs(spec, names)
    for config in configs:  # what the launcher cannot express fails before anything runs
        try:
            chosen.launcher.command(_launch_spec(spec, (linked.path,), config))
        except ValueError as exc:
            raise errors.BadSpec(f"{chosen.name}: {exc}") from None
    systems = systems_for(spec.references, spec.reference_files)
    study = Study(spec, Path(spec.output), chosen, linked, configs,
                  found.source if found else "this host", systems)
    memory = None if spec.n is not None else node_memory(study)
    study.configs = [plan.problem(c, n=spec.n, nb=spec.nb, grid=spec.grid,
                                  fraction=spec.memory_fraction, node_memory=memory)
                     for c in configs]
    study.root = _output_dir(spec.output)  # only once everything is known to work
    return study


def _output_dir(text: str) -> Path:
    root = Path(text)
    try:
        root.mkdir(parents=True, exist_ok=True)
        (root / "runs").mkdir()
    except FileExistsError:
        raise errors.BadSpec(f"-o {text}: already holds a study (runs/); choose another "
                             "directory", "nothing is ever overwritten") from None
    except OSError as exc:
        raise errors.OutputError(f"-o {text}: {exc.strerror or exc}") from None
    return root


def scaling_document(study: Study, started: str) -> Document:
    body = scaling.scaling_body(study.runs, study.spec.label or study.root.name,
                                study.systems)
    meta = make_meta(list(study.spec.command_line), utc_start=started, hosts=study.hosts_source,
                     launcher=study.chosen.name, hpcc=_binary_facts(study.linked).to_dict(),
                     notes=study.notes)
    return Document(cluster.SCALING_KIND, body, meta)


def run(spec: Spec, progress: Progress | None = None) -> Document:
    """The whole study (see the module's docstring); the scaling document."""
    study = prepare(spec)
    started = utc_now()
    order = [(r, c) for r in range(1, spec.repeat + 1) for c in study.configs]
    try:
        for i, (repeat, config) in enumerate(order, 1):
            if progress:
                progress(Event("start", i, len(order), f"{config.name}-r{repeat}", config.np,
                               repeat, eta_s=eta(study, [c for _, c in order[i - 1:]])))
            ref = run_one(study, config, repeat)
            if progress:
                progress(Event("done", i, len(order), ref.run.label, config.np, repeat,
                               status=ref.run.status, elapsed_s=ref.run.elapsed_s,
                               failures=tuple(ref.run.failures)))
    finally:
        with interrupts.deferred():
            doc = scaling_document(study, started)
            doc.save(study.root / "scaling.json")
    return doc

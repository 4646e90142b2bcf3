"""The cluster suite's documents: one HPCC run (kind "cluster") and a scaling study over
process counts (kind "scaling").

A *cluster* document is one run of HPC Challenge, measured by ``beoperf cluster hpcc``
or imported from an ``hpccoutf.txt``: every key of its summary section with its unit
(``metrics``: HPCC's own units, see :mod:`beoperf.model.hpcc`), whether it counts
(``status`` "ok", or "failed" with the reasons), the checks behind that verdict, how it
was run (process count, ranks per node, nodes, the input file's N, NB, P x Q, the
launcher's argv and environment, the hpcc binary with its MPI and BLAS), and where its
raw output is kept (with the file's SHA-256).

A *scaling* document gathers runs: per series (one ranks-per-node setting) and process
count, each metric's mean, sample standard deviation, minimum and maximum over the runs
that passed, the speedup and parallel efficiency against the series' smallest count,
the metrics that stopped scaling, the runs left out and why, and the reference systems
put beside it (``references``), and warnings (version 2: runs from several hosts or HPCC
versions pooled in one series).  ``beoperf.analysis.scaling`` computes it.

An *hpcc-comparison* document (``beoperf compare`` of HPCC results, or with
``--reference``) puts runs and reference systems side by side, per metric, with the ratio
of the first column (the baseline) to each of the others.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from beoperf.model import document, hpcc, narrow
from beoperf.model.document import Document, DocumentError, JsonObject, JsonValue

CLUSTER_KIND = "cluster"
CLUSTER_VERSION = 1
SCALING_KIND = "scaling"
SCALING_VERSION = 2  # 2: warnings (runs of several hosts or HPCC versions pooled)
COMPARISON_KIND = "hpcc-comparison"
COMPARISON_VERSION = 2  # 2: a verdict and interval per column (issue 25)
STATUSES = ("ok", "failed")


def _put(out: JsonObject, name: str, value: JsonValue) -> None:
    """Store an optional key only when it has a value (absent stays absent)."""
    if value is not None:
        out[name] = value


@dataclass
class HpccValue:
    """A summary key's value in HPCC's unit; a non-finite number is None, with the text
    HPCC printed in ``raw``."""

    value: int | float | str | None
    unit: str
    raw: str | None = None

    def to_dict(self) -> JsonObject:
        out: JsonObject = {"value": self.value, "unit": self.unit}
        _put(out, "raw", self.raw)
        return out

    @classmethod
    def from_dict(cls, d: JsonObject, key: str) -> HpccValue:
        stored = d.get("value")
        value = (stored if stored is None or isinstance(stored, str)
                 else narrow.num(stored, f"metrics.{key}.value"))
        return cls(value=value, unit=narrow.text(d.get("unit"), f"metrics.{key}.unit"),
                   raw=narrow.opt_text(d.get("raw"), f"metrics.{key}.raw"))

    def number(self) -> float | None:
        """The value as a number (None: absent, text, a bool or not finite)."""
        v = self.value
        return None if isinstance(v, bool) or not isinstance(v, int | float) else float(v)


def metrics_of(run: hpcc.HpccRun) -> dict[str, HpccValue]:
    """Every summary key: its value and unit; a non-finite number is null, with the text
    HPCC printed in ``raw``."""
    return {key: HpccValue(value, hpcc.info(key).unit,
                           run.raw[key] if value is None else None)
            for key, value in run.summary.items()}


@dataclass
class Checks:
    """The figures an HPCC run's verdict rests on."""

    success: int | None
    hpl_residual: float | None
    hpl_threshold: float | None
    hpl_verdicts: list[bool]

    def to_dict(self) -> JsonObject:
        return {"success": self.success, "hpl_residual": self.hpl_residual,
                "hpl_threshold": self.hpl_threshold, "hpl_verdicts": list(self.hpl_verdicts)}

    @classmethod
    def from_dict(cls, d: JsonObject) -> Checks:
        return cls(success=narrow.opt_int(d.get("success"), "checks.success"),
                   hpl_residual=narrow.opt_num(d.get("hpl_residual"), "checks.hpl_residual"),
                   hpl_threshold=narrow.opt_num(d.get("hpl_threshold"),
                                                "checks.hpl_threshold"),
                   hpl_verdicts=narrow.flags(d.get("hpl_verdicts"), "checks.hpl_verdicts"))


def checks_of(run: hpcc.HpccRun) -> Checks:
    """The figures the verdict rests on."""
    success = run.summary.get("Success")
    return Checks(success=success if isinstance(success, int) else None,
                  hpl_residual=hpcc.hpl_residual(run), hpl_threshold=run.threshold,
                  hpl_verdicts=[passed for _, passed in run.hpl_checks])


@dataclass
class MpiLibrary:
    """The MPI an hpcc binary is linked against: 'openmpi' or 'mpich', and the library."""

    implementation: str | None
    library: str | None

    def to_dict(self) -> JsonObject:
        return {"implementation": self.implementation, "library": self.library}

    @classmethod
    def from_dict(cls, d: JsonObject) -> MpiLibrary:
        return cls(narrow.opt_text(d.get("implementation"), "hpcc.mpi.implementation"),
                   narrow.opt_text(d.get("library"), "hpcc.mpi.library"))


@dataclass
class Binary:
    """The hpcc binary beoperf launched: its path, MPI and BLAS (None: not found)."""

    path: str | None
    mpi: MpiLibrary | None
    blas: dict[str, str] | None

    def to_dict(self) -> JsonObject:
        return {"binary": self.path, "mpi": self.mpi.to_dict() if self.mpi else None,
                "blas": dict(self.blas) if self.blas is not None else None}


@dataclass
class HpccFacts:
    """What HPCC says of itself (version, hostname) and, for a run beoperf launched, the
    binary's facts (an imported file has none)."""

    version: str | None
    hostname: str | None
    binary: Binary | None = None
    libraries: dict[str, str] | None = None

    def to_dict(self) -> JsonObject:
        out: JsonObject = {"version": self.version, "hostname": self.hostname}
        if self.binary is not None:
            out.update(self.binary.to_dict())
        if self.libraries is not None:
            out["libraries"] = dict(self.libraries)
        return out

    def blas_kind(self) -> str | None:
        """The BLAS the binary uses ('OpenBLAS', 'reference BLAS (netlib)'; None: unknown)."""
        blas = self.binary.blas if self.binary else None
        return blas.get("kind") if blas else None

    @classmethod
    def from_dict(cls, d: JsonObject) -> HpccFacts:
        binary = None
        if any(k in d for k in ("binary", "mpi", "blas")):
            mpi, blas = narrow.opt_obj(d.get("mpi"), "hpcc.mpi"), d.get("blas")
            binary = Binary(narrow.opt_text(d.get("binary"), "hpcc.binary"),
                            MpiLibrary.from_dict(mpi) if mpi is not None else None,
                            None if blas is None else narrow.text_map(blas, "hpcc.blas"))
        libraries = d.get("libraries")
        return cls(narrow.opt_text(d.get("version"), "hpcc.version"),
                   narrow.opt_text(d.get("hostname"), "hpcc.hostname"), binary,
                   None if libraries is None else narrow.text_map(libraries, "hpcc.libraries"))


@dataclass
class HplInput:
    """HPL's problem in the input file: N, NB, P x Q; where the file is and where N came
    from (a run beoperf launched)."""

    n: int
    nb: int
    p: int
    q: int
    file: str | None = None
    n_from: str | None = None

    def to_dict(self) -> JsonObject:
        out: JsonObject = {"n": self.n, "nb": self.nb, "p": self.p, "q": self.q}
        _put(out, "file", self.file)
        _put(out, "n_from", self.n_from)
        return out

    @classmethod
    def from_dict(cls, d: JsonObject) -> HplInput:
        n, nb, p, q = (narrow.integer(d.get(k), f"input.{k}") for k in ("n", "nb", "p", "q"))
        return cls(n, nb, p, q, file=narrow.opt_text(d.get("file"), "input.file"),
                   n_from=narrow.opt_text(d.get("n_from"), "input.n_from"))


@dataclass
class SlurmJob:
    """The Slurm allocation a run was launched in."""

    job_id: str | None
    nodelist: str | None

    def to_dict(self) -> JsonObject:
        return {"job_id": self.job_id, "nodelist": self.nodelist}


@dataclass
class Launch:
    """How a run was launched: the launcher, its argv, the variables beoperf set, the
    environment that shapes an MPI run, notes; the run directory and the Slurm job (both
    recorded together, since beoperf records them: an older record has neither)."""

    launcher: str
    argv: list[str]
    env: dict[str, str]
    environment: dict[str, str]
    notes: list[str]
    cwd: str | None = None
    allocation: SlurmJob | None = None

    def to_dict(self) -> JsonObject:
        out: JsonObject = {"launcher": self.launcher, "argv": list(self.argv),
                           "env": dict(self.env), "environment": dict(self.environment),
                           "notes": list(self.notes)}
        if self.cwd is not None:
            out["cwd"] = self.cwd
            out["allocation"] = self.allocation.to_dict() if self.allocation else None
        return out

    @classmethod
    def from_dict(cls, d: JsonObject) -> Launch:
        alloc = narrow.opt_obj(d.get("allocation"), "launch.allocation")
        return cls(
            launcher=narrow.text(d.get("launcher"), "launch.launcher"),
            argv=narrow.texts(d.get("argv"), "launch.argv"),
            env=narrow.text_map(d.get("env"), "launch.env"),
            environment=narrow.text_map(d.get("environment"), "launch.environment"),
            notes=narrow.texts(d.get("notes"), "launch.notes"),
            cwd=narrow.opt_text(d.get("cwd"), "launch.cwd"),
            allocation=None if alloc is None else SlurmJob(
                narrow.opt_text(alloc.get("job_id"), "launch.allocation.job_id"),
                narrow.opt_text(alloc.get("nodelist"), "launch.allocation.nodelist")))


@dataclass
class Output:
    """Where a run's raw output is kept (with its SHA-256), which run of the file it is,
    and what the launcher printed (a run beoperf launched)."""

    file: str
    sha256: str
    run_in_file: int | None = None
    runs_in_file: int | None = None
    stdout: str | None = None
    stderr_tail: str | None = None

    def to_dict(self) -> JsonObject:
        out: JsonObject = {"file": self.file, "sha256": self.sha256}
        for name in ("run_in_file", "runs_in_file", "stdout", "stderr_tail"):
            _put(out, name, getattr(self, name))
        return out

    @classmethod
    def from_dict(cls, d: JsonObject) -> Output:
        return cls(file=narrow.text(d.get("file"), "output.file"),
                   sha256=narrow.text(d.get("sha256"), "output.sha256"),
                   run_in_file=narrow.opt_int(d.get("run_in_file"), "output.run_in_file"),
                   runs_in_file=narrow.opt_int(d.get("runs_in_file"), "output.runs_in_file"),
                   stdout=narrow.opt_text(d.get("stdout"), "output.stdout"),
                   stderr_tail=narrow.opt_text(d.get("stderr_tail"), "output.stderr_tail"))


@dataclass
class ClusterRun:
    """A cluster document's body: one HPCC run, typed (see the module docstring)."""

    label: str
    source: str
    np: int
    ranks_per_node: int | None
    nodes: list[str] | None
    repeat: int | None
    series: str
    status: str  # ok | failed
    failures: list[str]
    checks: Checks
    hpcc: HpccFacts
    input: HplInput | None
    launch: Launch | None
    elapsed_s: float | None
    exit_status: int | None
    output: Output | None
    metrics: dict[str, HpccValue]

    def body(self) -> JsonObject:
        return {"label": self.label, "source": self.source, "np": self.np,
                "ranks_per_node": self.ranks_per_node,
                "nodes": list(self.nodes) if self.nodes is not None else None,
                "repeat": self.repeat, "series": self.series, "status": self.status,
                "failures": list(self.failures), "checks": self.checks.to_dict(),
                "hpcc": self.hpcc.to_dict(),
                "input": self.input.to_dict() if self.input else None,
                "launch": self.launch.to_dict() if self.launch else None,
                "elapsed_s": self.elapsed_s, "exit_status": self.exit_status,
                "output": self.output.to_dict() if self.output else None,
                "metrics": {k: v.to_dict() for k, v in self.metrics.items()}}

    def to_document(self, meta: JsonObject) -> Document:
        return Document(CLUSTER_KIND, self.body(), meta)

    @classmethod
    def from_document(cls, doc: Document) -> ClusterRun:
        """The typed body of a (schema-valid) cluster document."""
        if doc.kind != CLUSTER_KIND:
            raise DocumentError(f"a beoperf {doc.kind} document, not an HPCC run")
        return cls.from_body(doc.body)

    @classmethod
    def from_body(cls, b: JsonObject) -> ClusterRun:
        """The typed form of a cluster body (a value of the wrong type: DocumentError)."""
        input_, launch, output = (narrow.opt_obj(b.get(k), k)
                                  for k in ("input", "launch", "output"))
        return cls(
            label=narrow.text(b.get("label"), "label"),
            source=narrow.text(b.get("source"), "source"),
            np=narrow.integer(b.get("np"), "np"),
            ranks_per_node=narrow.opt_int(b.get("ranks_per_node"), "ranks_per_node"),
            nodes=narrow.opt_texts(b.get("nodes"), "nodes"),
            repeat=narrow.opt_int(b.get("repeat"), "repeat"),
            series=narrow.text(b.get("series"), "series"),
            status=narrow.text(b.get("status"), "status"),
            failures=narrow.texts(b.get("failures"), "failures"),
            checks=Checks.from_dict(narrow.obj(b.get("checks"), "checks")),
            hpcc=HpccFacts.from_dict(narrow.obj(b.get("hpcc"), "hpcc")),
            input=HplInput.from_dict(input_) if input_ is not None else None,
            launch=Launch.from_dict(launch) if launch is not None else None,
            elapsed_s=narrow.opt_num(b.get("elapsed_s"), "elapsed_s"),
            exit_status=narrow.opt_int(b.get("exit_status"), "exit_status"),
            output=Output.from_dict(output) if output is not None else None,
            metrics={k: HpccValue.from_dict(narrow.obj(v, f"metrics.{k}"), k)
                     for k, v in narrow.obj(b.get("metrics"), "metrics").items()})

    def number(self, key: str) -> float | None:
        """A metric as a number (None: absent, text, not finite, or a denormal HPCC never
        wrote, as documents imported before issue 28 stored it)."""
        entry = self.metrics.get(key)
        value = entry.number() if entry is not None else None
        unwritten = hpcc.is_uninitialised(value) and hpcc.info(key).role != "build"
        return None if unwritten else value


@dataclass
class HpccColumn:
    """A column of an HPCC comparison: a run (or a study's largest point) or a reference
    system; ``runs``: the runs behind its figures (0: it failed its checks; None: a
    reference system)."""

    label: str
    np: int | None
    kind: str  # run | reference
    source: str
    runs: int | None

    def to_dict(self) -> JsonObject:
        return {"label": self.label, "np": self.np, "kind": self.kind,
                "source": self.source, "runs": self.runs}

    @classmethod
    def from_dict(cls, d: JsonObject) -> HpccColumn:
        return cls(narrow.text(d.get("label"), "columns.label"),
                   narrow.opt_int(d.get("np"), "columns.np"),
                   narrow.text(d.get("kind"), "columns.kind"),
                   narrow.text(d.get("source"), "columns.source"),
                   narrow.opt_int(d.get("runs"), "columns.runs"))


def _intervals(value: JsonValue, key: str) -> list[list[float] | None]:
    return [None if item is None else narrow.nums(item, f"{key}[{i}]")
            for i, item in enumerate(narrow.values(value, key))]


@dataclass
class HpccRow:
    """One metric across the columns: values, spreads, the ratio of each to the first,
    and each column's verdict with the interval of its change (None before version 2)."""

    metric: str
    unit: str
    role: str
    values: list[float | None]
    stdevs: list[float | None]
    ratios: list[float | None]
    verdicts: list[str | None]
    intervals: list[list[float] | None]

    def to_dict(self) -> JsonObject:
        return {"metric": self.metric, "unit": self.unit, "role": self.role,
                "values": list(self.values), "stdevs": list(self.stdevs),
                "ratios": list(self.ratios), "verdicts": list(self.verdicts),
                "intervals": [None if i is None else list(i) for i in self.intervals]}

    @classmethod
    def from_dict(cls, d: JsonObject) -> HpccRow:
        verdicts = narrow.values(d.get("verdicts"), "rows.verdicts")
        values, stdevs, ratios = (narrow.opt_nums(d.get(k), f"rows.{k}")
                                  for k in ("values", "stdevs", "ratios"))
        return cls(narrow.text(d.get("metric"), "rows.metric"),
                   narrow.text(d.get("unit"), "rows.unit"),
                   narrow.text(d.get("role"), "rows.role"), values, stdevs, ratios,
                   verdicts=[narrow.opt_text(v, "rows.verdicts") for v in verdicts],
                   intervals=_intervals(d.get("intervals"), "rows.intervals"))


@dataclass
class HpccComparison:
    """An hpcc-comparison document's body."""

    columns: list[HpccColumn]
    rows: list[HpccRow]
    statement: str

    def body(self) -> JsonObject:
        return {"columns": [c.to_dict() for c in self.columns],
                "rows": [r.to_dict() for r in self.rows], "statement": self.statement}

    @classmethod
    def from_document(cls, doc: Document) -> HpccComparison:
        if doc.kind != COMPARISON_KIND:
            raise DocumentError(f"a beoperf {doc.kind} document, not an HPCC comparison")
        b = doc.body
        return cls(columns=[HpccColumn.from_dict(c) for c in narrow.objects(b.get("columns"),
                                                                            "columns")],
                   rows=[HpccRow.from_dict(r) for r in narrow.objects(b.get("rows"), "rows")],
                   statement=narrow.text(b.get("statement"), "statement"))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Setting:
    """How a run was made, beside what HPCC printed: the series and place, the input,
    the launch and the binary (all None for an imported file), time and exit status."""

    ranks_per_node: int | None = None
    nodes: list[str] | None = None
    repeat: int | None = None
    series: str | None = None
    input_: HplInput | None = None
    launch: Launch | None = None
    binary: Binary | None = None
    elapsed_s: float | None = None
    exit_status: int | None = None


def cluster_run(run: hpcc.HpccRun, *, label: str, output: Output | None,
                source: str = "beoperf", setting: Setting | None = None,
                extra_failures: list[str] | None = None) -> ClusterRun:
    """One run, typed (``extra_failures``: what went wrong around HPCC, such as a launcher
    that exited with an error)."""
    s = setting or Setting()
    reasons = [*(extra_failures or []), *hpcc.failures(run)]
    np_ = run.summary.get("CommWorldProcs")
    return ClusterRun(
        label=label, source=source, np=np_ if isinstance(np_, int) else 0,
        ranks_per_node=s.ranks_per_node, nodes=s.nodes, repeat=s.repeat,
        series=s.series or "", status="failed" if reasons else "ok", failures=reasons,
        checks=checks_of(run), hpcc=HpccFacts(run.version, run.hostname, s.binary),
        input=s.input_, launch=s.launch, elapsed_s=s.elapsed_s, exit_status=s.exit_status,
        output=output, metrics=metrics_of(run))


def cluster_body(run: hpcc.HpccRun, *, label: str, output: Output | None,
                 source: str = "beoperf", series: str | None = None,
                 repeat: int | None = None) -> JsonObject:
    """The body of one run's document (an imported file's, or a test's)."""
    return cluster_run(run, label=label, output=output, source=source,
                       setting=Setting(series=series, repeat=repeat)).body()


def failed_run(*, label: str, np_: int, reasons: list[str], output: Output | None,
               setting: Setting) -> ClusterRun:
    """A run that left no summary to read (it never started, died, timed out)."""
    s = setting
    return ClusterRun(
        label=label, source="beoperf", np=np_, ranks_per_node=s.ranks_per_node,
        nodes=s.nodes, repeat=s.repeat, series=s.series or "", status="failed",
        failures=reasons,
        checks=Checks(success=None, hpl_residual=None, hpl_threshold=None, hpl_verdicts=[]),
        hpcc=HpccFacts(None, None, s.binary), input=s.input_, launch=s.launch,
        elapsed_s=s.elapsed_s, exit_status=s.exit_status, output=output, metrics={})


# --------------------------------------------------------------------------- scaling, typed
# beoperf.analysis.scaling builds these; the renderers read their fields.  body() gives
# the stored body back, key for key and in the stored order.


@dataclass
class Summary:
    """A figure over runs (or repeats): mean, sample standard deviation (None below two),
    min, max, count."""

    mean: float
    stdev: float | None
    min: float
    max: float
    n: int

    @classmethod
    def from_dict(cls, d: JsonObject | None, key: str = "summary") -> Summary | None:
        if d is None:
            return None
        return cls(mean=narrow.num(d.get("mean"), f"{key}.mean"),
                   stdev=narrow.opt_num(d.get("stdev"), f"{key}.stdev"),
                   min=narrow.num(d.get("min"), f"{key}.min"),
                   max=narrow.num(d.get("max"), f"{key}.max"),
                   n=narrow.integer(d.get("n"), f"{key}.n"))

    def to_dict(self) -> JsonObject:
        return {"mean": self.mean, "stdev": self.stdev, "min": self.min, "max": self.max,
                "n": self.n}


def _summary(value: JsonValue, key: str) -> Summary:
    found = Summary.from_dict(narrow.obj(value, key), key)
    assert found is not None  # (an object gives a summary)
    return found


@dataclass
class ScalingPoint:
    """One series and process count: the runs that passed and failed, every key's
    statistics over the passed runs, speedup and efficiency against the series' base."""

    series: str
    np: int
    ranks_per_node: int | None
    nodes: int | None
    runs: int
    failed: int
    metrics: dict[str, Summary]
    speedup: dict[str, float | None] = field(default_factory=dict)
    efficiency: dict[str, float | None] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: JsonObject) -> ScalingPoint:
        return cls(series=narrow.text(d.get("series"), "points.series"),
                   np=narrow.integer(d.get("np"), "points.np"),
                   ranks_per_node=narrow.opt_int(d.get("ranks_per_node"),
                                                 "points.ranks_per_node"),
                   nodes=narrow.opt_int(d.get("nodes"), "points.nodes"),
                   runs=narrow.integer(d.get("runs"), "points.runs"),
                   failed=narrow.integer(d.get("failed"), "points.failed"),
                   metrics={k: _summary(v, f"points.metrics.{k}") for k, v in
                            narrow.obj(d.get("metrics"), "points.metrics").items()},
                   speedup=narrow.opt_num_map(d.get("speedup"), "points.speedup"),
                   efficiency=narrow.opt_num_map(d.get("efficiency"), "points.efficiency"))

    def to_dict(self) -> JsonObject:
        return {"series": self.series, "np": self.np, "ranks_per_node": self.ranks_per_node,
                "nodes": self.nodes, "runs": self.runs, "failed": self.failed,
                "metrics": {k: v.to_dict() for k, v in self.metrics.items()},
                "speedup": dict(self.speedup), "efficiency": dict(self.efficiency)}


@dataclass
class Stopped:
    """Where a metric stopped scaling in a series, and why."""

    metric: str
    series: str
    np: int
    from_np: int
    efficiency: float | None
    gain: float | None
    why: str

    def to_dict(self) -> JsonObject:
        return {"metric": self.metric, "series": self.series, "np": self.np,
                "from_np": self.from_np, "efficiency": self.efficiency, "gain": self.gain,
                "why": self.why}

    @classmethod
    def from_dict(cls, d: JsonObject) -> Stopped:
        k = "stopped_scaling"
        return cls(narrow.text(d.get("metric"), f"{k}.metric"),
                   narrow.text(d.get("series"), f"{k}.series"),
                   narrow.integer(d.get("np"), f"{k}.np"),
                   narrow.integer(d.get("from_np"), f"{k}.from_np"),
                   narrow.opt_num(d.get("efficiency"), f"{k}.efficiency"),
                   narrow.opt_num(d.get("gain"), f"{k}.gain"),
                   narrow.text(d.get("why"), f"{k}.why"))


@dataclass
class RunRow:
    """A run of the study: its document, label, place and verdict."""

    document: str | None
    label: str
    series: str
    np: int
    ranks_per_node: int | None
    repeat: int | None
    status: str
    failures: list[str]
    elapsed_s: float | None

    def to_dict(self) -> JsonObject:
        return {"document": self.document, "label": self.label, "series": self.series,
                "np": self.np, "ranks_per_node": self.ranks_per_node, "repeat": self.repeat,
                "status": self.status, "failures": list(self.failures),
                "elapsed_s": self.elapsed_s}

    @classmethod
    def from_dict(cls, d: JsonObject) -> RunRow:
        return cls(document=narrow.opt_text(d.get("document"), "runs.document"),
                   label=narrow.text(d.get("label"), "runs.label"),
                   series=narrow.text(d.get("series"), "runs.series"),
                   np=narrow.integer(d.get("np"), "runs.np"),
                   ranks_per_node=narrow.opt_int(d.get("ranks_per_node"),
                                                 "runs.ranks_per_node"),
                   repeat=narrow.opt_int(d.get("repeat"), "runs.repeat"),
                   status=narrow.text(d.get("status"), "runs.status"),
                   failures=narrow.texts(d.get("failures"), "runs.failures"),
                   elapsed_s=narrow.opt_num(d.get("elapsed_s"), "runs.elapsed_s"))


@dataclass
class ReferencePoint:
    """A reference system's published figures at one process count."""

    name: str
    description: str
    np: int | None
    source: str
    metrics: dict[str, float]

    def to_dict(self) -> JsonObject:
        return {"name": self.name, "description": self.description, "np": self.np,
                "source": self.source, "metrics": dict(self.metrics)}

    @classmethod
    def from_dict(cls, d: JsonObject) -> ReferencePoint:
        return cls(narrow.text(d.get("name"), "references.name"),
                   narrow.text(d.get("description"), "references.description"),
                   narrow.opt_int(d.get("np"), "references.np"),
                   narrow.text(d.get("source"), "references.source"),
                   narrow.num_map(d.get("metrics"), "references.metrics"))


@dataclass
class Rules:
    """The thresholds the stopped-scaling verdicts used, and the rule in words."""

    step_gain: float
    efficiency: float
    statement: str

    def to_dict(self) -> JsonObject:
        return {"step_gain": self.step_gain, "efficiency": self.efficiency,
                "statement": self.statement}

    @classmethod
    def from_dict(cls, d: JsonObject) -> Rules:
        return cls(narrow.num(d.get("step_gain"), "rules.step_gain"),
                   narrow.num(d.get("efficiency"), "rules.efficiency"),
                   narrow.text(d.get("statement"), "rules.statement"))


@dataclass
class ScalingStudy:
    """A scaling document's body (see the module docstring)."""

    label: str
    runs: list[RunRow]
    points: list[ScalingPoint]
    units: dict[str, str]
    roles: dict[str, str]
    stopped_scaling: list[Stopped]
    rules: Rules
    references: list[ReferencePoint]
    warnings: list[str] = field(default_factory=list)

    def body(self) -> JsonObject:
        return {"label": self.label, "runs": [r.to_dict() for r in self.runs],
                "points": [p.to_dict() for p in self.points], "units": dict(self.units),
                "roles": dict(self.roles),
                "stopped_scaling": [h.to_dict() for h in self.stopped_scaling],
                "rules": self.rules.to_dict(),
                "references": [r.to_dict() for r in self.references],
                "warnings": list(self.warnings)}

    def to_document(self, meta: JsonObject) -> Document:
        return Document(SCALING_KIND, self.body(), meta)

    @classmethod
    def from_document(cls, doc: Document) -> ScalingStudy:
        """The typed body of a (schema-valid) scaling document."""
        if doc.kind != SCALING_KIND:
            raise DocumentError(f"a beoperf {doc.kind} document, not a scaling study")
        b = doc.body
        return cls(label=narrow.text(b.get("label"), "label"),
                   runs=[RunRow.from_dict(r) for r in narrow.objects(b.get("runs"), "runs")],
                   points=[ScalingPoint.from_dict(p)
                           for p in narrow.objects(b.get("points"), "points")],
                   units=narrow.text_map(b.get("units"), "units"),
                   roles=narrow.text_map(b.get("roles"), "roles"),
                   stopped_scaling=[Stopped.from_dict(h) for h in
                                    narrow.objects(b.get("stopped_scaling"), "stopped_scaling")],
                   rules=Rules.from_dict(narrow.obj(b.get("rules"), "rules")),
                   references=[ReferencePoint.from_dict(r)
                               for r in narrow.objects(b.get("references"), "references")],
                   warnings=narrow.texts(b.get("warnings"), "warnings"))

    def series_names(self) -> list[str]:
        """The series in the order their first point is stored."""
        return list(dict.fromkeys(p.series for p in self.points))


document.register(CLUSTER_KIND, CLUSTER_VERSION)


def _scaling_v1_to_v2(doc: dict) -> dict:
    """Version 2 adds the warnings on runs pooled from several hosts or HPCC versions: a
    study made before has none recorded (its runs are not in it to check)."""
    doc["body"].setdefault("warnings", [])
    return doc


document.register(SCALING_KIND, SCALING_VERSION, upgrades={1: _scaling_v1_to_v2})


def _comparison_v1_to_v2(doc: dict) -> dict:
    """Version 2 adds each column's verdict and the interval of its change: none for a
    comparison made before (its ratios stay)."""
    for row in doc["body"].get("rows", []):
        width = len(row.get("values", []))
        row.setdefault("verdicts", [None] * width)
        row.setdefault("intervals", [None] * width)
    return doc


document.register(COMPARISON_KIND, COMPARISON_VERSION, upgrades={1: _comparison_v1_to_v2})

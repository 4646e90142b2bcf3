"""The node documents: one node's suite (kind "node"), a fleet of them ("node-fleet") and
two or more node runs side by side ("node-comparison").

A node document's body holds the conditions (CPU, caches, memory, NUMA, governor,
compiler and flags, BLAS and its threads, file systems), the parts that ran, and every
figure as one *metric*: an id unique in the run (``stream.triad.t2``,
``kernels.daxpy.n1024``, ``io.<dir>.sequential write.10M``), its part, name and
parameters, unit, the samples (one per repetition) and their count, mean, standard
deviation, min and max, and whether its check passed.  Higher is better for every metric
(rates: GB/s, MFLOP/s, GFLOP/s, GUPS, MB/s), so comparisons and fleets need no per-metric
direction.  Each part also keeps its details (``body["parts"][name]``): the array size
and validation of STREAM, the cache level of each loop length and the drops between
levels, the I/O method (O_DIRECT or fsync + POSIX_FADV_DONTNEED) and mount of each
directory.  ``status`` is "complete", "interrupted" (the figures measured before the
stop are kept) or "failed" (a check failed: the figures are kept and say which).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from beoperf import units
from beoperf.model import document, jsonvalue, narrow
from beoperf.model.document import Document, DocumentError, JsonObject, JsonValue

if TYPE_CHECKING:
    from beoperf.sysinfo.node import Cache, NumaNode

KIND = "node"
FLEET_KIND = "node-fleet"
COMPARISON_KIND = "node-comparison"
VERSION = 1
PARTS = ("stream", "kernels", "dgemm", "randomaccess", "fft", "io")


ParamValue = str | int | float  # a metric's parameter: threads, length, dir, file_size ...
Params = dict[str, ParamValue]


def metric(part: str, name: str, unit: str, samples: Iterable[float], *,
           params: Mapping[str, ParamValue] | None = None, ok: bool | None = True,
           **extra: JsonValue) -> JsonObject:
    """One figure as stored: samples and their summary (see :meth:`Metric.of`)."""
    return Metric.of(part, name, unit, samples, params=params, ok=ok, **extra).to_dict()


def metric_id(part: str, name: str, params: Mapping[str, ParamValue]) -> str:
    """``part.name`` and the parameters' values in order: ``stream.triad.t2``."""
    words = [part, name, *(f"{_short(k)}{_value(k, v)}" for k, v in params.items())]
    return ".".join(str(w) for w in words)


_SHORT = {"threads": "t", "length": "n", "dir": "", "file_size": "", "n": "N", "size": ""}


def _value(key: str, value: ParamValue) -> str:
    return units.size_tick(int(value)) if key == "file_size" else str(value)


def _short(key: str) -> str:
    return _SHORT.get(key, f"{key}=")


def body(conditions: JsonObject, parts: JsonObject, metrics: list[JsonObject],
         repeat: int, status: str = "complete", status_reason: str | None = None,
         reference: JsonObject | None = None) -> JsonObject:
    """A node body from its stored parts (each metric as :func:`metric` gives it)."""
    return NodeRun(conditions, repeat, {k: narrow.obj(v, k) for k, v in parts.items()},
                   [Metric.from_dict(m) for m in metrics], status, status_reason,
                   reference).body()


def make(body_: JsonObject, meta: JsonObject) -> Document:
    return Document(KIND, body_, meta)


# A loaded document has passed its schema, but the schema leaves the free parts open
# (conditions, parts, params): each value a typed field takes is narrowed (model/narrow.py),
# so that a crafted file meets one clear line (DocumentError), never a TypeError in a
# renderer.


# --------------------------------------------------------------------------- typed body
# Readers (the renderers, the answer) read fields of these, not dict paths.  A metric's
# part-specific figures (STREAM's best, per-core rate and times; a kernel's cache level
# and median) stay in ``extra``, in the order stored, so that body() gives back the
# stored body exactly; typed properties read them.

METRIC_FIELDS = ("id", "part", "name", "params", "unit", "repeat", "mean", "stdev", "min",
                 "max", "samples", "ok")


@dataclass
class Metric:
    """One figure of a node run: its samples and their summary (see :meth:`of`)."""

    id: str
    part: str
    name: str
    params: Params
    unit: str
    repeat: int
    mean: float
    stdev: float
    min: float
    max: float
    samples: list[float]
    ok: bool | None
    extra: JsonObject = field(default_factory=dict)  # the part's own figures

    @classmethod
    def of(cls, part: str, name: str, unit: str, samples: Iterable[float], *,
           params: Mapping[str, ParamValue] | None = None, ok: bool | None = True,
           **extra: JsonValue) -> Metric:
        """One figure: samples and their summary (mean, stdev with ddof=1, min, max)."""
        values = [float(v) for v in samples]
        if not values:
            raise ValueError(f"{part}.{name}: no samples")
        kept = dict(params or {})
        n = len(values)
        mean = sum(values) / n
        stdev = (sum((v - mean) ** 2 for v in values) / (n - 1)) ** 0.5 if n > 1 else 0.0
        return cls(metric_id(part, name, kept), part, name, kept, unit, n, mean, stdev,
                   min(values), max(values), values, ok, dict(extra))

    @classmethod
    def from_dict(cls, m: JsonObject) -> Metric:
        """A stored metric, each field narrowed (DocumentError naming a wrong one)."""
        where = f"metric {m.get('id')!r}"
        params = narrow.obj(m.get("params"), f"{where} params")
        return cls(id=narrow.text(m.get("id"), "metric id"), part=narrow.text(m.get("part"), where),
                   name=narrow.text(m.get("name"), where),
                   params={k: narrow.text_or_num(v, f"{where} params.{k}")
                           for k, v in params.items()},
                   unit=narrow.text(m.get("unit"), where),
                   repeat=narrow.integer(m.get("repeat"), where),
                   mean=narrow.num(m.get("mean"), where), stdev=narrow.num(m.get("stdev"), where),
                   min=narrow.num(m.get("min"), where), max=narrow.num(m.get("max"), where),
                   samples=narrow.nums(m.get("samples"), where),
                   ok=narrow.opt_flag(m.get("ok"), where),
                   extra={k: v for k, v in m.items() if k not in METRIC_FIELDS})

    def to_dict(self) -> JsonObject:
        return {"id": self.id, "part": self.part, "name": self.name,
                "params": dict(self.params), "unit": self.unit, "repeat": self.repeat,
                "mean": self.mean, "stdev": self.stdev, "min": self.min, "max": self.max,
                "samples": list(self.samples), "ok": self.ok, **self.extra}

    def figure(self, name: str) -> float | None:
        """A number of the metric by its stored name (mean, min, best, per_core ...)."""
        summary = {"repeat": self.repeat, "mean": self.mean, "stdev": self.stdev,
                   "min": self.min, "max": self.max}
        return summary[name] if name in summary else jsonvalue.number(self.extra, name)

    @property
    def threads(self) -> int | None:
        value = self.params.get("threads")
        return value if isinstance(value, int) else None

    @property
    def length(self) -> int:
        """A PEAK kernel's loop length."""
        return int(self.params["length"])

    @property
    def level(self) -> str:
        """A PEAK kernel's cache level ("?" when not stored)."""
        return str(self.extra.get("level", "?"))

    @property
    def median(self) -> float | None:
        return jsonvalue.number(self.extra, "median")

    def central(self) -> tuple[str, float]:
        """The figure to draw and its name: the median when stored, else the mean."""
        median = self.median
        return ("mean", self.mean) if median is None else ("median", median)


@dataclass
class IoDir:
    """A directory the I/O part measured: where it is, its mount and how the cache was
    kept cold (file size -> method; None where the size was not reached)."""

    dir: str
    realpath: str | None = None
    mount: dict[str, str | None] = field(default_factory=dict)  # fstype source mount_point options
    method: dict[str, str | None] = field(default_factory=dict)
    free_bytes: int | None = None

    @classmethod
    def from_dict(cls, e: JsonObject) -> IoDir:
        return cls(dir=narrow.text(e.get("dir"), "io dir"),
                   realpath=narrow.opt_text(e.get("realpath"), "io realpath"),
                   mount=narrow.opt_text_map(e.get("mount") or {}, "io mount"),
                   method=narrow.opt_text_map(e.get("method") or {}, "io method"),
                   free_bytes=narrow.opt_int(e.get("free_bytes"), "io free_bytes"))

    def to_dict(self) -> JsonObject:
        return {"dir": self.dir, "realpath": self.realpath, "free_bytes": self.free_bytes,
                "mount": dict(self.mount), "method": dict(self.method)}

    @property
    def fstype(self) -> str:
        return str(self.mount.get("fstype", "?"))


@dataclass
class IoPart:
    """The I/O part's details: block size, file sizes, patterns, directories."""

    block: int = 0
    file_sizes: list[int] = field(default_factory=list)
    patterns: list[str] = field(default_factory=list)
    dirs: list[IoDir] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d: JsonObject) -> IoPart:
        sizes = d.get("file_sizes") or []
        return cls(block=narrow.integer(d.get("block") or 0, "io block"),
                   file_sizes=narrow.ints(sizes, "io file_sizes"),
                   patterns=narrow.texts_or_none(d.get("patterns"), "io patterns"),
                   dirs=[IoDir.from_dict(e)
                         for e in narrow.objects_or_none(d.get("dirs"), "io dirs")])


@dataclass
class Drop:
    """A kernel's change of median MFLOP/s from one cache level to the next."""

    kernel: str
    from_level: str
    to_level: str
    change_pct: float | None
    from_mflops: float | None
    to_mflops: float | None

    @classmethod
    def from_dict(cls, d: JsonObject) -> Drop:
        return cls(kernel=narrow.text(d.get("kernel"), "drop kernel"),
                   from_level=str(d.get("from")),
                   to_level=str(d.get("to")), change_pct=jsonvalue.number(d, "change_pct"),
                   from_mflops=jsonvalue.number(d, "from_mflops"),
                   to_mflops=jsonvalue.number(d, "to_mflops"))

    @property
    def step(self) -> str:
        return f"{self.from_level} → {self.to_level}"


@dataclass
class KernelsPart:
    """The PEAK kernels' details: the drops between levels and each kernel's bytes moved
    per element (its working set per loop length)."""

    drops: list[Drop] = field(default_factory=list)
    bytes_per_element: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: JsonObject) -> KernelsPart:
        per = narrow.obj(d.get("bytes_per_element") or {}, "kernels bytes_per_element")
        drops = narrow.objects_or_none(d.get("drops"), "kernels drops")
        return cls(drops=[Drop.from_dict(x) for x in drops],
                   bytes_per_element={k: v for k, v in per.items() if isinstance(v, int | float)
                                      and not isinstance(v, bool) and v > 0})  # 16 stays 16


class LevelRate(TypedDict):
    """A PEAK kernel's median MFLOP/s at one loop length, and the cache level it ran in
    (the part's ``rows``, from which the drops between levels are found)."""

    kernel: str
    length: int
    level: str
    mflops: float


@dataclass
class NodeRun:
    """A node document's body, typed: the conditions (facts of the machine, as collected),
    the parts' details, every figure as a Metric, the status and the reference system."""

    conditions: JsonObject
    repeat: int
    parts: dict[str, JsonObject]  # part -> its details, as the part wrote them
    metrics: list[Metric]
    status: str = "complete"
    status_reason: str | None = None
    reference: JsonObject | None = None

    def body(self) -> JsonObject:
        return {"conditions": self.conditions, "repeat": self.repeat,
                "parts": {k: v for k, v in self.parts.items()},
                "metrics": [m.to_dict() for m in self.metrics], "status": self.status,
                "status_reason": self.status_reason, "reference": self.reference}

    def to_document(self, meta: JsonObject) -> Document:
        return Document(KIND, self.body(), meta)

    @classmethod
    def from_document(cls, doc: Document) -> NodeRun:
        """The typed body of a (schema-valid) node document."""
        if doc.kind != KIND:
            raise DocumentError(f"a beoperf {doc.kind} document, not a node run")
        b: JsonObject = doc.body
        parts = narrow.obj(b.get("parts"), "parts")
        reference = b.get("reference")
        run = cls(conditions=narrow.obj(b.get("conditions"), "conditions"),
                   repeat=narrow.integer(b.get("repeat"), "repeat"),
                   parts={k: narrow.obj(v, f"parts.{k}") for k, v in parts.items()},
                   metrics=[Metric.from_dict(m)
                            for m in narrow.objects_or_none(b.get("metrics"), "metrics")],
                   status=narrow.text(b.get("status"), "status"),
                   status_reason=narrow.opt_text(b.get("status_reason"), "status_reason"),
                   reference=None if reference is None else narrow.obj(reference, "reference"))
        run.io(), run.kernels()  # the details read strictly: checked now, not in a renderer
        return run

    def of(self, part: str) -> list[tuple[int, Metric]]:
        """The metrics of a part, each with its index in the body (its place)."""
        return [(i, m) for i, m in enumerate(self.metrics) if m.part == part]

    def part(self, name: str) -> JsonObject:
        """A part's details as stored ({} when the part did not run)."""
        return self.parts.get(name) or {}

    def io(self) -> IoPart:
        return IoPart.from_dict(self.part("io"))

    def kernels(self) -> KernelsPart:
        return KernelsPart.from_dict(self.part("kernels"))

    def caches(self) -> list[Cache]:
        """cpu0's data and unified caches with a size, smallest level first."""
        found = caches_of(self.conditions)
        return sorted((c for c in found if c["type"] != "Instruction" and c["size"]),
                      key=lambda c: (c["level"], c["size"] or 0))

    def facts(self) -> Conditions:
        """The conditions, read typed."""
        return Conditions.of(self.conditions)

    def detail(self, part: str) -> PartDetail:
        """A part's details, read typed (all None when the part did not run)."""
        return PartDetail.of(self.part(part))

    def ref(self) -> StoredReference | None:
        """The reference system's figures, read typed (None without --reference)."""
        return None if self.reference is None else StoredReference.of(self.reference)

    def ref_hpcc(self) -> list[RefHpcc]:
        """The reference system's HPCC figures ([] without)."""
        ref = self.ref()
        return ref.hpcc if ref else []

    def ref_kernels(self) -> list[RefKernel]:
        """The reference system's PEAK figures ([] without)."""
        ref = self.ref()
        return ref.kernels if ref else []


# --------------------------------------------------------------------------- read views
# What the renderers read of the free parts (conditions, the parts' details, the reference
# system), narrowed leniently: a fact missing or of another type reads as None (shown as
# "?"), as the stored conditions are facts that could not always be seen.


@dataclass
class Conditions:
    """A node's conditions as the renderers read them (see sysinfo.node.collect)."""

    cpu_model: str | None = None
    cpus: int | None = None
    cores_used: int | None = None
    governor: dict[str, str] = field(default_factory=dict)  # governor -> CPUs using it
    caches: list[Cache] = field(default_factory=list)
    memory: int | None = None
    memory_available: int | None = None
    numa: list[NumaNode] = field(default_factory=list)
    compiler: str | None = None  # of the C kernels
    flags: str | None = None
    openmp: int | None = None  # _OPENMP: the OpenMP version (yyyymm)
    blas_library: str | None = None
    blas_version: str | None = None
    blas_configuration: str | None = None
    blas_environment: dict[str, str] = field(default_factory=dict)
    clock_source: str | None = None
    clock_resolution_ns: int | None = None
    elapsed_s: float | None = None
    has_blas: bool = False  # whether the BLAS was described at all
    os: str | None = None  # of the host
    kernel: str | None = None

    @classmethod
    def of(cls, c: JsonObject) -> Conditions:
        build, blas, clock = (jsonvalue.section(c, k) for k in ("build", "blas", "clock"))
        return cls(cpu_model=jsonvalue.text(c, "cpu_model"), cpus=jsonvalue.integer(c, "cpus"),
                   cores_used=jsonvalue.integer(c, "cores_used"),
                   governor=jsonvalue.text_map(c, "governor"), caches=caches_of(c),
                   memory=jsonvalue.integer(c, "memory"),
                   memory_available=jsonvalue.integer(c, "memory_available"),
                   numa=[{"node": jsonvalue.integer(n, "node") or 0,
                          "cpus": jsonvalue.text(n, "cpus"),
                          "memory": jsonvalue.integer(n, "memory")}
                         for n in jsonvalue.sections(c, "numa")],
                   compiler=jsonvalue.text(build, "compiler"), flags=jsonvalue.text(build, "flags"),
                   openmp=jsonvalue.integer(build, "openmp"),
                   blas_library=jsonvalue.text(blas, "library"),
                   blas_version=jsonvalue.text(blas, "version"),
                   blas_configuration=jsonvalue.text(blas, "configuration"),
                   blas_environment=jsonvalue.text_map(blas, "environment"),
                   clock_source=jsonvalue.text(clock, "source"),
                   clock_resolution_ns=jsonvalue.integer(clock, "resolution_ns"),
                   elapsed_s=jsonvalue.number(c, "elapsed_s"), has_blas=bool(blas),
                   os=jsonvalue.text(jsonvalue.section(c, "host"), "os"),
                   kernel=jsonvalue.text(jsonvalue.section(c, "host"), "kernel"))


@dataclass
class PartRun:
    """One thread count's check of a part (STREAM, DGEMM, RandomAccess): whether it
    passed and the figure it judged by (STREAM's relative errors per array, DGEMM's
    scaled residual, RandomAccess's wrong table words) and the core type the BLAS chose."""

    place: int  # its index in the part's stored runs
    threads: int | None
    ok: bool | None
    errors: dict[str, float] = field(default_factory=dict)  # STREAM: array -> error
    residual: float | None = None  # DGEMM
    wrong: int | None = None  # RandomAccess
    corename: str | None = None  # DGEMM: OpenBLAS's core type

    @classmethod
    def of(cls, place: int, r: JsonObject) -> PartRun:
        return cls(place=place, threads=jsonvalue.integer(r, "threads"),
                   ok=jsonvalue.boolean(r, "ok"),
                   errors=jsonvalue.number_map(r, "errors"),
                   residual=jsonvalue.number(r, "residual"),
                   wrong=jsonvalue.integer(r, "errors"),
                   corename=jsonvalue.text(jsonvalue.section(r, "blas"), "corename"))


@dataclass
class PartDetail:
    """A part's details as the renderers read them: its problem size, checks and runs
    (a field the part does not have is None)."""

    ok: bool | None = None
    runs: list[PartRun] = field(default_factory=list)
    threshold: float | None = None  # DGEMM's residual, FFT's error
    # STREAM
    array_bytes: int | None = None
    size_rule: str | None = None
    stores: str | None = None
    epsilon: float | None = None
    below_4x_cache: bool = False
    warm_s: float | None = None
    # DGEMM, FFT: the size; RandomAccess: the table
    n: int | None = None
    table_words: int | None = None
    table_bytes: int | None = None
    max_error_fraction: float | None = None
    error: float | None = None  # FFT
    library: str | None = None  # FFT

    @classmethod
    def of(cls, d: JsonObject) -> PartDetail:
        runs = d.get("runs")
        return cls(ok=jsonvalue.boolean(d, "ok"),
                   runs=[PartRun.of(j, r) for j, r in enumerate(runs)
                         if isinstance(r, dict)] if isinstance(runs, list) else [],
                   threshold=jsonvalue.number(d, "threshold"),
                   array_bytes=jsonvalue.integer(d, "array_bytes"),
                   size_rule=jsonvalue.text(d, "size_rule"), stores=jsonvalue.text(d, "stores"),
                   epsilon=jsonvalue.number(d, "epsilon"),
                   below_4x_cache=jsonvalue.boolean(d, "below_4x_cache") is True,
                   warm_s=jsonvalue.number(d, "warm_s"), n=jsonvalue.integer(d, "n"),
                   table_words=jsonvalue.integer(d, "table_words"),
                   table_bytes=jsonvalue.integer(d, "table_bytes"),
                   max_error_fraction=jsonvalue.number(d, "max_error_fraction"),
                   error=jsonvalue.number(d, "error"), library=jsonvalue.text(d, "library"))


@dataclass
class RefHpcc:
    metric: str
    value: float | None
    unit: str | None


@dataclass
class RefKernel:
    kernel: str
    length: int
    mflops: float | None


@dataclass
class RefIo:
    file_size: int
    test: str
    mb_s: float | None


@dataclass
class StoredReference:
    """The reference system a run was written with (model/node_reference.py's
    Reference.to_json()), as the renderers read it; each list in its stored order, so a
    figure's index is its place in the body."""

    name: str | None = None
    system: str | None = None
    source: str | None = None
    hpcc: list[RefHpcc] = field(default_factory=list)
    kernels: list[RefKernel] = field(default_factory=list)
    io: dict[str, list[RefIo]] = field(default_factory=dict)  # local, nfs

    @classmethod
    def of(cls, r: JsonObject) -> StoredReference:
        io = jsonvalue.section(r, "io")
        return cls(name=jsonvalue.text(r, "name"), system=jsonvalue.text(r, "system"),
                   source=jsonvalue.text(r, "source"),
                   hpcc=[RefHpcc(str(e.get("metric")), jsonvalue.number(e, "value"),
                                 jsonvalue.text(e, "unit")) for e in jsonvalue.sections(r, "hpcc")],
                   kernels=[RefKernel(str(e.get("kernel")), jsonvalue.integer(e, "length") or 0,
                                      jsonvalue.number(e, "mflops"))
                            for e in jsonvalue.sections(r, "kernels")],
                   io={where: [RefIo(jsonvalue.integer(e, "file_size") or 0, str(e.get("test")),
                                     jsonvalue.number(e, "mb_s"))
                            for e in jsonvalue.sections(io, where)]
                       for where in io})


def conditions_of(facts: Mapping[str, object]) -> JsonObject:
    """The facts sysinfo gathered (sysinfo.node.collect()), as the JSON a body holds: each
    value checked to be JSON (a fact that is not is a bug, and says where)."""
    return {k: _json(v, f"conditions.{k}") for k, v in facts.items()}


def _json(value: object, key: str) -> JsonValue:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_json(v, key) for v in value]
    if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        return {k: _json(v, f"{key}.{k}") for k, v in value.items()}
    raise TypeError(f"{key}: {type(value).__name__} is not JSON")


def caches_of(conditions: JsonObject) -> list[Cache]:
    """The caches of a node's stored conditions (``[]`` when not stored), each narrowed."""
    out: list[Cache] = []
    for c in narrow.objects_or_none(conditions.get("caches"), "conditions.caches"):
        out.append({"level": narrow.integer(c.get("level"), "cache level"),
                    "type": narrow.opt_text(c.get("type"), "cache type"),
                    "size": narrow.opt_int(c.get("size"), "cache size"),
                    "shared_cpus": narrow.opt_text(c.get("shared_cpus"), "cache shared_cpus")})
    return out


def metrics_by_id(run: NodeRun) -> dict[str, Metric]:
    return {m.id: m for m in run.metrics}


def is_node(raw: JsonValue) -> bool:
    return isinstance(raw, dict) and raw.get("format") == document.FORMAT and \
        raw.get("kind") == KIND


def writer_version(raw: JsonObject) -> str | None:
    meta = raw.get("meta")
    version = meta.get("beoperf") if isinstance(meta, dict) else None
    return version if isinstance(version, str) else None


document.register(KIND, VERSION)
document.register(FLEET_KIND, VERSION)
COMPARISON_VERSION = 2
OLD_VERDICT = ("judged by an earlier beoperf with a test of the repetitions inside each run, "
               "which a machine that drifts between runs makes significant: no verdict; "
               "compare the runs again")


def _comparison_v1_to_v2(doc: dict) -> dict:
    """Version 2 (issue 25): "margin" for "min_change", the verdicts are better / worse /
    no difference shown / cannot tell with an interval per change, and repeated runs of a
    label are one column.  Version 1's verdicts (a test of repetitions) are not carried
    over: each becomes "cannot tell", and the test's statement says why."""
    body = doc["body"]
    body.pop("min_change", None)
    body["margin"] = 0.10
    body["runs"] = [1] * len(body.get("labels", []))
    body["test"] = {"name": "Mann-Whitney U over repetitions (version 1)",
                    "statement": f"Earlier comparison: {OLD_VERDICT}."}
    for row in body.get("rows", []):
        row["intervals"] = [None] * len(row.get("changes", []))
        row["verdicts"] = [v if v in (None, "missing") else "cannot tell"
                           for v in row.get("verdicts", [])]
        row.pop("p", None)
    return doc


document.register(COMPARISON_KIND, COMPARISON_VERSION, upgrades={1: _comparison_v1_to_v2})


# --------------------------------------------------------------------------- fleets, typed


@dataclass
class FleetMetric:
    """One metric across a fleet: each node's figure, the fleet's median and MAD, the
    scale of z, each node's z and the outlier nodes (lowest first)."""

    id: str
    unit: str
    values: dict[str, float]
    median: float
    mad: float
    scale: float
    z: dict[str, float]
    outliers: list[str]

    @classmethod
    def from_dict(cls, m: JsonObject) -> FleetMetric:
        where = f"fleet metric {m.get('id')!r}"
        return cls(id=narrow.text(m.get("id"), "fleet metric id"),
                   unit=narrow.text(m.get("unit"), where),
                   values=narrow.num_map(m.get("values"), f"{where} values"),
                   median=narrow.num(m.get("median"), where), mad=narrow.num(m.get("mad"), where),
                   scale=narrow.num(m.get("scale"), where),
                   z=narrow.num_map(m.get("z"), f"{where} z"),
                   outliers=narrow.texts_or_none(m.get("outliers"), f"{where} outliers"))

    def to_dict(self) -> JsonObject:
        return {"id": self.id, "unit": self.unit, "values": dict(self.values),
                "median": self.median, "mad": self.mad, "scale": self.scale,
                "z": dict(self.z), "outliers": list(self.outliers)}


@dataclass
class FleetMethod:
    """How a fleet's outliers were judged: the |z| threshold, the floor of the MAD (a
    fraction of the median) and the statement a reader is shown."""

    threshold: float
    mad_floor: float
    statement: str

    @classmethod
    def from_dict(cls, d: JsonObject) -> FleetMethod:
        return cls(threshold=narrow.num(d.get("threshold"), "method threshold"),
                   mad_floor=narrow.num(d.get("mad_floor"), "method mad_floor"),
                   statement=narrow.text(d.get("statement"), "method statement"))

    def to_dict(self) -> JsonObject:
        return {"threshold": self.threshold, "mad_floor": self.mad_floor,
                "statement": self.statement}


@dataclass
class NodeFleet:
    """A node-fleet document's body: who was asked and answered, why others did not,
    each metric across the nodes, the outlier nodes and each node's conditions."""

    nodes: str
    answered: str
    no_answer: dict[str, str]  # reason -> nodes
    other_version: dict[str, str]  # version -> nodes
    method: FleetMethod
    metrics: list[FleetMetric]
    outliers: dict[str, list[str]]  # node -> the metrics it is an outlier in
    conditions: dict[str, JsonObject]  # node -> cpu_model cores_used memory ...

    def body(self) -> JsonObject:
        return {"nodes": self.nodes, "answered": self.answered,
                "no_answer": dict(self.no_answer), "other_version": dict(self.other_version),
                "method": self.method.to_dict(), "metrics": [m.to_dict() for m in self.metrics],
                "outliers": {k: list(v) for k, v in self.outliers.items()},
                "conditions": {k: v for k, v in self.conditions.items()}}

    def to_document(self, meta: JsonObject) -> Document:
        return Document(FLEET_KIND, self.body(), meta)

    @classmethod
    def from_document(cls, doc: Document) -> NodeFleet:
        if doc.kind != FLEET_KIND:
            raise DocumentError(f"a beoperf {doc.kind} document, not a node fleet")
        b: JsonObject = doc.body
        conditions = narrow.obj(b.get("conditions"), "conditions")
        return cls(nodes=narrow.text(b.get("nodes"), "nodes"),
                   answered=narrow.text(b.get("answered"), "answered"),
                   no_answer=narrow.text_map(b.get("no_answer"), "no_answer"),
                   other_version=narrow.text_map(b.get("other_version"), "other_version"),
                   method=FleetMethod.from_dict(narrow.obj(b.get("method"), "method")),
                   metrics=[FleetMetric.from_dict(m)
                            for m in narrow.objects_or_none(b.get("metrics"), "metrics")],
                   outliers={k: narrow.texts_or_none(v, f"outliers.{k}")
                             for k, v in narrow.obj(b.get("outliers"), "outliers").items()},
                   conditions={k: narrow.obj(v, f"conditions.{k}") for k, v in conditions.items()})


@dataclass
class ComparisonRow:
    """One metric of node runs compared: each configuration's mean, its change against
    the baseline in %, the interval of the change and the verdict (None for the
    baseline's own column; "missing" where a configuration lacks the metric)."""

    id: str
    unit: str
    means: list[float | None] = field(default_factory=list)
    changes: list[float | None] = field(default_factory=list)
    intervals: list[list[float] | None] = field(default_factory=list)
    verdicts: list[str | None] = field(default_factory=list)

    @classmethod
    def from_dict(cls, r: JsonObject) -> ComparisonRow:
        where = f"row {r.get('id')!r}"
        return cls(id=narrow.text(r.get("id"), "row id"), unit=narrow.text(r.get("unit"), where),
                   means=narrow.opt_nums(r.get("means"), where),
                   changes=narrow.opt_nums(r.get("changes"), where),
                   intervals=[None if v is None else narrow.nums(v, where)
                              for v in narrow.values(r.get("intervals"), where)],
                   verdicts=[narrow.opt_text(v, where)
                             for v in narrow.values(r.get("verdicts"), where)])

    def to_dict(self) -> JsonObject:
        return {"id": self.id, "unit": self.unit, "means": list(self.means),
                "changes": list(self.changes),
                "intervals": [None if i is None else list(i) for i in self.intervals],
                "verdicts": list(self.verdicts)}


TestValue = str | float  # a comparison test's description: name, alpha, margin, statement ...


@dataclass
class NodeComparison:
    """A node-comparison document's body (version 2)."""

    baseline: str
    labels: list[str]
    runs: list[int]  # runs per label
    margin: float
    test: dict[str, TestValue]  # name, statement ...
    rows: list[ComparisonRow]

    def body(self) -> JsonObject:
        return {"baseline": self.baseline, "labels": list(self.labels), "runs": list(self.runs),
                "margin": self.margin, "test": dict(self.test),
                "rows": [r.to_dict() for r in self.rows]}

    def to_document(self, meta: JsonObject) -> Document:
        return Document(COMPARISON_KIND, self.body(), meta)

    @classmethod
    def from_document(cls, doc: Document) -> NodeComparison:
        if doc.kind != COMPARISON_KIND:
            raise DocumentError(f"a beoperf {doc.kind} document, not node runs compared")
        b: JsonObject = doc.body
        test = narrow.obj(b.get("test"), "test")
        return cls(baseline=narrow.text(b.get("baseline"), "baseline"),
                   labels=narrow.texts_or_none(b.get("labels"), "labels"),
                   runs=narrow.ints(b.get("runs"), "runs"),
                   margin=narrow.num(b.get("margin"), "margin"),
                   test={k: narrow.text_or_num(v, f"test.{k}") for k, v in test.items()},
                   rows=[ComparisonRow.from_dict(r)
                         for r in narrow.objects_or_none(b.get("rows"), "rows")])

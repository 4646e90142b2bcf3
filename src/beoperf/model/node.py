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
from typing import Any

from beoperf import units
from beoperf.model import document
from beoperf.model.document import Document, DocumentError

KIND = "node"
FLEET_KIND = "node-fleet"
COMPARISON_KIND = "node-comparison"
VERSION = 1
PARTS = ("stream", "kernels", "dgemm", "randomaccess", "fft", "io")


def metric(part: str, name: str, unit: str, samples: Iterable[float], *,
           params: Mapping[str, Any] | None = None, ok: bool | None = True,
           **extra: Any) -> dict[str, Any]:
    """One figure: samples and their summary (mean, stdev with ddof=1, min, max)."""
    values = [float(v) for v in samples]
    if not values:
        raise ValueError(f"{part}.{name}: no samples")
    params = dict(params or {})
    n = len(values)
    mean = sum(values) / n
    stdev = (sum((v - mean) ** 2 for v in values) / (n - 1)) ** 0.5 if n > 1 else 0.0
    return {"id": metric_id(part, name, params), "part": part, "name": name,
            "params": params, "unit": unit, "repeat": n, "mean": mean, "stdev": stdev,
            "min": min(values), "max": max(values), "samples": values, "ok": ok, **extra}


def metric_id(part: str, name: str, params: Mapping[str, Any]) -> str:
    """``part.name`` and the parameters' values in order: ``stream.triad.t2``."""
    words = [part, name, *(f"{_short(k)}{_value(k, v)}" for k, v in params.items())]
    return ".".join(str(w) for w in words)


_SHORT = {"threads": "t", "length": "n", "dir": "", "file_size": "", "n": "N", "size": ""}


def _value(key: str, value: Any) -> str:
    return units.size_tick(value) if key == "file_size" else str(value)


def _short(key: str) -> str:
    return _SHORT.get(key, f"{key}=")


def body(conditions: dict[str, Any], parts: dict[str, Any], metrics: list[dict[str, Any]],
         repeat: int, status: str = "complete", status_reason: str | None = None,
         reference: dict[str, Any] | None = None) -> dict[str, Any]:
    return NodeRun(conditions, repeat, parts, [Metric.from_dict(m) for m in metrics],
                   status, status_reason, reference).body()


def make(body_: dict[str, Any], meta: dict[str, Any]) -> Document:
    return Document(KIND, body_, meta)


# --------------------------------------------------------------------------- typed body
# Readers (the renderers, the answer) read fields of these, not dict paths.  A metric's
# part-specific figures (STREAM's best, per-core rate and times; a kernel's cache level
# and median) stay in ``extra``, in the order stored, so that body() gives back the
# stored body exactly; typed properties read them.

METRIC_FIELDS = ("id", "part", "name", "params", "unit", "repeat", "mean", "stdev", "min",
                 "max", "samples", "ok")


def _float(value: Any) -> float | None:
    """A stored number as stored (an int stays an int: reports show the stored value);
    None for anything else."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass
class Metric:
    """One figure of a node run: its samples and their summary (see :func:`metric`)."""

    id: str
    part: str
    name: str
    params: dict[str, Any]
    unit: str
    repeat: int
    mean: float
    stdev: float
    min: float
    max: float
    samples: list[float]
    ok: bool | None
    extra: dict[str, Any] = field(default_factory=dict)  # the part's own figures

    @classmethod
    def from_dict(cls, m: Mapping[str, Any]) -> Metric:
        return cls(**{k: m[k] for k in METRIC_FIELDS},
                   extra={k: v for k, v in m.items() if k not in METRIC_FIELDS})

    def to_dict(self) -> dict[str, Any]:
        return {**{k: getattr(self, k) for k in METRIC_FIELDS}, **self.extra}

    def figure(self, name: str) -> float | None:
        """A number of the metric by its stored name (mean, min, best, per_core ...)."""
        return _float(getattr(self, name) if name in METRIC_FIELDS else self.extra.get(name))

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
        return _float(self.extra.get("median"))

    def central(self) -> tuple[str, float]:
        """The figure to draw and its name: the median when stored, else the mean."""
        median = self.median
        return ("mean", self.mean) if median is None else ("median", median)


@dataclass
class IoDir:
    """A directory the I/O part measured: where it is, its mount and how the cache was
    kept cold (per pattern)."""

    dir: str
    realpath: str | None = None
    mount: dict[str, Any] = field(default_factory=dict)  # fstype source mount_point options
    method: dict[str, Any] = field(default_factory=dict)
    free_bytes: int | None = None

    @classmethod
    def from_dict(cls, e: Mapping[str, Any]) -> IoDir:
        return cls(dir=e["dir"], realpath=e.get("realpath"), mount=dict(e.get("mount") or {}),
                   method=dict(e.get("method") or {}), free_bytes=e.get("free_bytes"))

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
    def from_dict(cls, d: Mapping[str, Any]) -> IoPart:
        return cls(block=d.get("block") or 0, file_sizes=list(d.get("file_sizes") or []),
                   patterns=list(d.get("patterns") or []),
                   dirs=[IoDir.from_dict(e) for e in d.get("dirs") or []])


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
    def from_dict(cls, d: Mapping[str, Any]) -> Drop:
        return cls(kernel=d["kernel"], from_level=str(d["from"]), to_level=str(d["to"]),
                   change_pct=_float(d.get("change_pct")),
                   from_mflops=_float(d.get("from_mflops")), to_mflops=_float(d.get("to_mflops")))

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
    def from_dict(cls, d: Mapping[str, Any]) -> KernelsPart:
        per = d.get("bytes_per_element") or {}
        return cls(drops=[Drop.from_dict(x) for x in d.get("drops") or []],
                   bytes_per_element={k: v for k, v in per.items()
                                      if (_float(v) or 0) > 0})  # as stored (16, not 16.0)


@dataclass
class NodeRun:
    """A node document's body, typed: the conditions (facts of the machine, as collected),
    the parts' details, every figure as a Metric, the status and the reference system."""

    conditions: dict[str, Any]
    repeat: int
    parts: dict[str, Any]
    metrics: list[Metric]
    status: str = "complete"
    status_reason: str | None = None
    reference: dict[str, Any] | None = None

    def body(self) -> dict[str, Any]:
        return {"conditions": self.conditions, "repeat": self.repeat, "parts": self.parts,
                "metrics": [m.to_dict() for m in self.metrics], "status": self.status,
                "status_reason": self.status_reason, "reference": self.reference}

    def to_document(self, meta: dict[str, Any]) -> Document:
        return Document(KIND, self.body(), meta)

    @classmethod
    def from_document(cls, doc: Document) -> NodeRun:
        """The typed body of a (schema-valid) node document."""
        if doc.kind != KIND:
            raise DocumentError(f"a beoperf {doc.kind} document, not a node run")
        b = doc.body
        return cls(conditions=b["conditions"], repeat=b["repeat"], parts=b["parts"],
                   metrics=[Metric.from_dict(m) for m in b["metrics"]], status=b["status"],
                   status_reason=b.get("status_reason"), reference=b.get("reference"))

    def of(self, part: str) -> list[tuple[int, Metric]]:
        """The metrics of a part, each with its index in the body (its place)."""
        return [(i, m) for i, m in enumerate(self.metrics) if m.part == part]

    def part(self, name: str) -> dict[str, Any]:
        """A part's details as stored ({} when the part did not run)."""
        return self.parts.get(name) or {}

    def io(self) -> IoPart:
        return IoPart.from_dict(self.part("io"))

    def kernels(self) -> KernelsPart:
        return KernelsPart.from_dict(self.part("kernels"))

    def caches(self) -> list[dict[str, Any]]:
        """cpu0's data and unified caches with a size, smallest level first."""
        return sorted((c for c in self.conditions.get("caches", [])
                       if c.get("type") != "Instruction" and c.get("size")),
                      key=lambda c: (c["level"], c["size"]))

    def reference_entries(self, what: str) -> list[dict[str, Any]]:
        """The reference system's entries of one kind ("hpcc", "kernels"; [] without)."""
        return list((self.reference or {}).get(what) or [])


def metrics_by_id(doc_body: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["id"]: m for m in doc_body["metrics"]}


def is_node(raw: Any) -> bool:
    return isinstance(raw, dict) and raw.get("format") == document.FORMAT and \
        raw.get("kind") == KIND


def writer_version(raw: Mapping[str, Any]) -> str | None:
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


@dataclass
class NodeFleet:
    """A node-fleet document's body: who was asked and answered, why others did not,
    each metric across the nodes, the outlier nodes and each node's conditions."""

    nodes: str
    answered: str
    no_answer: dict[str, str]  # reason -> nodes
    other_version: dict[str, str]  # version -> nodes
    method: dict[str, Any]  # threshold, mad_floor, statement
    metrics: list[FleetMetric]
    outliers: dict[str, list[str]]  # node -> the metrics it is an outlier in
    conditions: dict[str, dict[str, Any]]  # node -> cpu_model cores_used memory ...

    def body(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "answered": self.answered, "no_answer": self.no_answer,
                "other_version": self.other_version, "method": self.method,
                "metrics": [vars(m).copy() for m in self.metrics],
                "outliers": self.outliers, "conditions": self.conditions}

    @classmethod
    def from_document(cls, doc: Document) -> NodeFleet:
        if doc.kind != FLEET_KIND:
            raise DocumentError(f"a beoperf {doc.kind} document, not a node fleet")
        b = doc.body
        return cls(nodes=b["nodes"], answered=b["answered"], no_answer=b["no_answer"],
                   other_version=b["other_version"], method=b["method"],
                   metrics=[FleetMetric(**{k: m[k] for k in FLEET_METRIC_FIELDS})
                            for m in b["metrics"]],
                   outliers=b["outliers"], conditions=b["conditions"])


FLEET_METRIC_FIELDS = ("id", "unit", "values", "median", "mad", "scale", "z", "outliers")


@dataclass
class ComparisonRow:
    """One metric of node runs compared: each configuration's mean, its change against
    the baseline in %, the interval of the change and the verdict (None for the
    baseline's own column; "missing" where a configuration lacks the metric)."""

    id: str
    unit: str
    means: list[float | None]
    changes: list[float | None]
    intervals: list[list[float] | None]
    verdicts: list[str | None]


@dataclass
class NodeComparison:
    """A node-comparison document's body (version 2)."""

    baseline: str
    labels: list[str]
    runs: list[int]  # runs per label
    margin: float
    test: dict[str, Any]  # name, statement ...
    rows: list[ComparisonRow]

    def body(self) -> dict[str, Any]:
        return {"baseline": self.baseline, "labels": self.labels, "runs": self.runs,
                "margin": self.margin, "test": self.test,
                "rows": [vars(r).copy() for r in self.rows]}

    @classmethod
    def from_document(cls, doc: Document) -> NodeComparison:
        if doc.kind != COMPARISON_KIND:
            raise DocumentError(f"a beoperf {doc.kind} document, not node runs compared")
        b = doc.body
        return cls(baseline=b["baseline"], labels=b["labels"], runs=b["runs"],
                   margin=b["margin"], test=b["test"],
                   rows=[ComparisonRow(**r) for r in b["rows"]])

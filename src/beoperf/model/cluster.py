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
put beside it (``references``).  ``beoperf.analysis.scaling`` computes it.

An *hpcc-comparison* document (``beoperf compare`` of HPCC results, or with
``--reference``) puts runs and reference systems side by side, per metric, with the ratio
of the first column (the baseline) to each of the others.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from beoperf.model import document, hpcc
from beoperf.model.document import Document, DocumentError

CLUSTER_KIND = "cluster"
CLUSTER_VERSION = 1
SCALING_KIND = "scaling"
SCALING_VERSION = 1
COMPARISON_KIND = "hpcc-comparison"
COMPARISON_VERSION = 2  # 2: a verdict and interval per column (issue 25)
STATUSES = ("ok", "failed")


def metrics_of(run: hpcc.HpccRun) -> dict[str, dict[str, Any]]:
    """Every summary key: its value and unit; a non-finite number is null, with the text
    HPCC printed in ``raw``."""
    out: dict[str, dict[str, Any]] = {}
    for key, value in run.summary.items():
        entry: dict[str, Any] = {"value": value, "unit": hpcc.info(key).unit}
        if value is None:
            entry["raw"] = run.raw[key]
        out[key] = entry
    return out


def checks_of(run: hpcc.HpccRun) -> dict[str, Any]:
    """The figures the verdict rests on."""
    success = run.summary.get("Success")
    return {"success": success if isinstance(success, int) else None,
            "hpl_residual": hpcc.hpl_residual(run), "hpl_threshold": run.threshold,
            "hpl_verdicts": [passed for _, passed in run.hpl_checks]}


@dataclass
class HpccValue:
    """A summary key's value in HPCC's unit; a non-finite number is None, with the text
    HPCC printed in ``raw``."""

    value: Any  # int, float, or None
    unit: str
    raw: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"value": self.value, "unit": self.unit}
        if self.raw is not None:
            out["raw"] = self.raw
        return out

    def number(self) -> float | None:
        """The value as a number (None: absent, text, a bool or not finite)."""
        v = self.value
        return None if isinstance(v, bool) or not isinstance(v, int | float) else float(v)


@dataclass
class Checks:
    """The figures an HPCC run's verdict rests on."""

    success: int | None
    hpl_residual: float | None
    hpl_threshold: float | None
    hpl_verdicts: list[bool]


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
    hpcc: dict[str, Any]  # version hostname, and the binary's path, MPI, BLAS, libraries
    input: dict[str, Any] | None  # HPL's n nb p q (the input file, where n came from)
    launch: dict[str, Any] | None  # launcher argv env environment notes ...
    elapsed_s: float | None
    exit_status: int | None
    output: dict[str, Any] | None  # the raw output's file and sha256 ...
    metrics: dict[str, HpccValue]

    def body(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in CLUSTER_FIELDS}
        out["checks"] = dict(vars(self.checks))
        out["metrics"] = {k: v.to_dict() for k, v in self.metrics.items()}
        return out

    def to_document(self, meta: dict[str, Any]) -> Document:
        return Document(CLUSTER_KIND, self.body(), meta)

    @classmethod
    def from_document(cls, doc: Document) -> ClusterRun:
        """The typed body of a (schema-valid) cluster document."""
        if doc.kind != CLUSTER_KIND:
            raise DocumentError(f"a beoperf {doc.kind} document, not an HPCC run")
        b = doc.body
        fields_ = {name: b[name] for name in CLUSTER_FIELDS}
        fields_["checks"] = Checks(**b["checks"])
        fields_["metrics"] = {k: HpccValue(**v) for k, v in b["metrics"].items()}
        return cls(**fields_)


CLUSTER_FIELDS = ("label", "source", "np", "ranks_per_node", "nodes", "repeat", "series",
                  "status", "failures", "checks", "hpcc", "input", "launch", "elapsed_s",
                  "exit_status", "output", "metrics")


@dataclass
class HpccColumn:
    """A column of an HPCC comparison: a run (or a study's largest point) or a reference
    system; ``runs``: the runs behind its figures (0: it failed its checks)."""

    label: str
    np: int | None
    kind: str  # run | reference
    source: str
    runs: int


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


@dataclass
class HpccComparison:
    """An hpcc-comparison document's body."""

    columns: list[HpccColumn]
    rows: list[HpccRow]
    statement: str

    def body(self) -> dict[str, Any]:
        return {"columns": [dict(vars(c)) for c in self.columns],
                "rows": [dict(vars(r)) for r in self.rows], "statement": self.statement}

    @classmethod
    def from_document(cls, doc: Document) -> HpccComparison:
        if doc.kind != COMPARISON_KIND:
            raise DocumentError(f"a beoperf {doc.kind} document, not an HPCC comparison")
        b = doc.body
        return cls(columns=[HpccColumn(**c) for c in b["columns"]],
                   rows=[HpccRow(**r) for r in b["rows"]], statement=b["statement"])


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def cluster_body(run: hpcc.HpccRun, *, label: str, output: dict[str, Any] | None,
                 source: str = "beoperf", ranks_per_node: int | None = None,
                 nodes: list[str] | None = None, repeat: int | None = None,
                 series: str | None = None, input_: dict[str, int] | None = None,
                 launch: dict[str, Any] | None = None, binary: dict[str, Any] | None = None,
                 elapsed_s: float | None = None, exit_status: int | None = None,
                 extra_failures: list[str] | None = None) -> dict[str, Any]:
    """The body of one run's document (``extra_failures``: what went wrong around HPCC,
    such as a launcher that exited with an error)."""
    reasons = [*(extra_failures or []), *hpcc.failures(run)]
    np_ = run.summary.get("CommWorldProcs")
    return ClusterRun(
        label=label, source=source, np=np_ if isinstance(np_, int) else 0,
        ranks_per_node=ranks_per_node, nodes=nodes, repeat=repeat, series=series or "",
        status="failed" if reasons else "ok", failures=reasons,
        checks=Checks(**checks_of(run)),
        hpcc={"version": run.version, "hostname": run.hostname, **(binary or {})},
        input=input_, launch=launch, elapsed_s=elapsed_s, exit_status=exit_status,
        output=output, metrics={k: HpccValue(**v) for k, v in metrics_of(run).items()},
    ).body()


def failed_body(*, label: str, np_: int, reasons: list[str], output: dict[str, Any] | None,
                ranks_per_node: int | None = None, nodes: list[str] | None = None,
                repeat: int | None = None, series: str | None = None,
                input_: dict[str, int] | None = None, launch: dict[str, Any] | None = None,
                binary: dict[str, Any] | None = None, elapsed_s: float | None = None,
                exit_status: int | None = None) -> dict[str, Any]:
    """The body of a run that left no summary to read (it never started, died, timed out)."""
    return ClusterRun(
        label=label, source="beoperf", np=np_, ranks_per_node=ranks_per_node, nodes=nodes,
        repeat=repeat, series=series or "", status="failed", failures=reasons,
        checks=Checks(success=None, hpl_residual=None, hpl_threshold=None, hpl_verdicts=[]),
        hpcc={"version": None, "hostname": None, **(binary or {})}, input=input_,
        launch=launch, elapsed_s=elapsed_s, exit_status=exit_status, output=output,
        metrics={}).body()


def number(body: dict[str, Any], key: str) -> float | None:
    """A metric of a cluster body as a number (None: absent, text or not finite)."""
    entry = body.get("metrics", {}).get(key)
    value = entry.get("value") if isinstance(entry, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


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
    def from_dict(cls, d: dict[str, Any] | None) -> Summary | None:
        if d is None:
            return None
        return cls(mean=d["mean"], stdev=d["stdev"], min=d["min"], max=d["max"], n=d["n"])

    def to_dict(self) -> dict[str, Any]:
        return {"mean": self.mean, "stdev": self.stdev, "min": self.min, "max": self.max,
                "n": self.n}


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
    def from_dict(cls, d: dict[str, Any]) -> ScalingPoint:
        return cls(series=d["series"], np=d["np"], ranks_per_node=d["ranks_per_node"],
                   nodes=d["nodes"], runs=d["runs"], failed=d["failed"],
                   metrics={k: Summary(**v) for k, v in d["metrics"].items()},
                   speedup=d["speedup"], efficiency=d["efficiency"])

    def to_dict(self) -> dict[str, Any]:
        return {"series": self.series, "np": self.np, "ranks_per_node": self.ranks_per_node,
                "nodes": self.nodes, "runs": self.runs, "failed": self.failed,
                "metrics": {k: v.to_dict() for k, v in self.metrics.items()},
                "speedup": self.speedup, "efficiency": self.efficiency}


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

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


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

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class ReferencePoint:
    """A reference system's published figures at one process count."""

    name: str
    description: str
    np: int | None
    source: str
    metrics: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class ScalingStudy:
    """A scaling document's body (see the module docstring)."""

    label: str
    runs: list[RunRow]
    points: list[ScalingPoint]
    units: dict[str, str]
    roles: dict[str, str]
    stopped_scaling: list[Stopped]
    rules: dict[str, Any]  # step_gain, efficiency, statement
    references: list[ReferencePoint]

    def body(self) -> dict[str, Any]:
        return {"label": self.label, "runs": [r.to_dict() for r in self.runs],
                "points": [p.to_dict() for p in self.points], "units": self.units,
                "roles": self.roles,
                "stopped_scaling": [h.to_dict() for h in self.stopped_scaling],
                "rules": self.rules, "references": [r.to_dict() for r in self.references]}

    def to_document(self, meta: dict[str, Any]) -> Document:
        return Document(SCALING_KIND, self.body(), meta)

    @classmethod
    def from_document(cls, doc: Document) -> ScalingStudy:
        """The typed body of a (schema-valid) scaling document."""
        if doc.kind != SCALING_KIND:
            raise DocumentError(f"a beoperf {doc.kind} document, not a scaling study")
        b = doc.body
        return cls(label=b["label"], runs=[RunRow(**r) for r in b["runs"]],
                   points=[ScalingPoint.from_dict(p) for p in b["points"]],
                   units=b["units"], roles=b["roles"],
                   stopped_scaling=[Stopped(**h) for h in b["stopped_scaling"]],
                   rules=b["rules"], references=[ReferencePoint(**r) for r in b["references"]])

    def series_names(self) -> list[str]:
        """The series in the order their first point is stored."""
        return list(dict.fromkeys(p.series for p in self.points))


document.register(CLUSTER_KIND, CLUSTER_VERSION)
document.register(SCALING_KIND, SCALING_VERSION)
def _comparison_v1_to_v2(doc: dict) -> dict:
    """Version 2 adds each column's verdict and the interval of its change: none for a
    comparison made before (its ratios stay)."""
    for row in doc["body"].get("rows", []):
        width = len(row.get("values", []))
        row.setdefault("verdicts", [None] * width)
        row.setdefault("intervals", [None] * width)
    return doc


document.register(COMPARISON_KIND, COMPARISON_VERSION, upgrades={1: _comparison_v1_to_v2})

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
from typing import Any

from beoperf import units
from beoperf.model import document
from beoperf.model.document import Document

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
    return {"conditions": conditions, "repeat": repeat, "parts": parts, "metrics": metrics,
            "status": status, "status_reason": status_reason, "reference": reference}


def make(body_: dict[str, Any], meta: dict[str, Any]) -> Document:
    return Document(KIND, body_, meta)


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

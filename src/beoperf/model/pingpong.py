"""The ping-pong document (kind "pingpong"): a sweep over message sizes, typed.

A run carries everything a later reader needs to compare it honestly with
another: the parameters, both ends' metadata and, per message size, the
sample count, the spread and the precision reached.  The envelope's meta holds
how it was made (beoperf version, command line, UTC start and end, duration,
peer, clock); the body holds the rest, plus the summary and analysis the
analysis layer derived when it was written (readers recompute them).

Version 1 files (``"format": "beoperf.pingpong"``, before the envelope) are
read through :func:`_from_legacy_v1`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from beoperf.model import document
from beoperf.model.document import Document, DocumentError

KIND = "pingpong"
VERSION = 3  # 1: "format": "beoperf.pingpong", no envelope; 2: the envelope; 3: "sweep"
LEGACY_FORMAT = "beoperf.pingpong"

ResultFormatError = DocumentError  # a file that is not a ping-pong result


@dataclass
class SizeResult:
    """Statistics of one message size; times are one-way, in microseconds.

    In pingpong mode a sample is half a round trip; in stream mode the time per
    message of one trial; in bidir mode one simultaneous exchange.
    The 95% CI is that of the median over trial medians (trials, not single
    round trips, are the independent unit); `reps` counts every timed
    repetition. `best_trial_mean` is NetPIPE's own statistic: the mean time of the fastest
    trial (NetPIPE keeps the best of its trials, each an average of many
    repetitions); beoperf's own figures use the median of all samples.
    """

    size: int
    samples: int
    trials: int
    reps: int
    time_us: dict[str, float | None]  # min median mean p90 p99 max stddev mad best_trial_mean
    ci95_halfwidth_us: float | None
    ci95_relative: float | None
    converged: bool
    # from_median, from_min, from_best_trial; from_mean for imports (SI bit/s)
    throughput_bps: dict[str, float | None]
    corrupt: int = 0
    trial_medians_us: list[float] | None = None  # one per trial: the independent observations
    ci95_us: list[float] | None = None  # [low, high]: where a repeat run's median falls
    ci95_median_us: list[float] | None = None  # [low, high]: this run's median's interval
    # [low, high]: ci95_us before the spread between earlier runs was added (only then)
    ci95_within_run_us: list[float] | None = None
    # the pass of each trial (0: calibration), in the order of trial_medians_us: which
    # trials shared the machine's state of one moment
    trial_passes: list[int] | None = None

    def central_time_us(self) -> float:
        """The figure to read: the median, or for imports what the source has."""
        for key in ("median", "best_trial_mean", "mean"):
            if self.time_us.get(key) is not None:
                return float(self.time_us[key])
        raise ResultFormatError(f"size {self.size}: no time statistic")

    def central_bps(self) -> float:
        for key in ("from_median", "from_best_trial", "from_mean"):
            if self.throughput_bps.get(key) is not None:
                return float(self.throughput_bps[key])
        raise ResultFormatError(f"size {self.size}: no throughput statistic")


@dataclass
class RunResult:
    """One sweep: parameters, metadata of both ends, and per-size results."""

    parameters: dict[str, Any]
    local: dict[str, Any]
    remote: dict[str, Any]
    meta: dict[str, Any]  # the document's meta: how and when it was measured
    sizes: list[SizeResult] = field(default_factory=list)
    status: str = "complete"  # complete | interrupted | failed
    status_reason: str | None = None
    warnings: list[str] = field(default_factory=list)
    source: dict[str, Any] | None = None  # None: measured by beoperf; else what was imported
    sweep: dict[str, Any] | None = None  # how the sweep ran: passes, budget, drift ...

    def body(self) -> dict[str, Any]:
        """The document body (without the derived summary and analysis)."""
        out = asdict(self)
        del out["meta"]
        return out

    def to_document(self, derived: dict[str, Any] | None = None) -> Document:
        """The document; ``derived`` (summary, analysis) is added to the body as it is."""
        return Document(KIND, {**self.body(), **(derived or {})}, dict(self.meta))

    def label(self) -> str:
        """A short name for tables and legends, from the metadata."""
        if self.source:
            return Path(str(self.source.get("path", "import"))).stem
        p = self.parameters
        peer = str(self.meta.get("peer", "?")).split(" port ")[0]
        extras = [f"{k}={p[k]}" for k in ("sndbuf", "rcvbuf") if p.get(k)]
        extras += [k for k in ("nocache", "integrity") if p.get(k)]
        mtu = (self.local.get("interface") or {}).get("mtu")
        mtu_text = f" mtu{mtu}" if mtu else ""
        return f"{p.get('mode', '?')} {peer}{mtu_text}" + "".join(f" {e}" for e in extras)

    @classmethod
    def from_document(cls, doc: Document, source: str = "document") -> RunResult:
        """The typed run of a (schema-valid) ping-pong document."""
        if doc.kind != KIND:
            raise DocumentError(f"{source}: a beoperf {doc.kind} document, not a ping-pong "
                                "result")
        b = doc.body
        return cls(parameters=b["parameters"], local=b["local"], remote=b["remote"],
                   meta=doc.meta, sizes=[SizeResult(**s) for s in b["sizes"]],
                   status=b["status"], status_reason=b.get("status_reason"),
                   warnings=list(b.get("warnings", [])), source=b.get("source"),
                   sweep=b.get("sweep"))


def from_json(doc: Any, source: str = "document") -> RunResult:
    """A parsed JSON document (any version) as a run; DocumentError otherwise."""
    return RunResult.from_document(document.from_json(doc, source), source)


def load_json(path: str | Path) -> RunResult:
    """Read a result file (bounded, regular files only); DocumentError names the file and
    the problem."""
    return RunResult.from_document(document.load(path, what="a result file"), str(path))


def _v2_to_v3(doc: dict) -> dict:
    """Version 3 adds the optional "sweep" (how the sweep ran); nothing else changes."""
    return doc


BODY_KEYS = ("parameters", "local", "remote", "sizes", "status", "status_reason", "warnings",
             "source", "summary", "analysis")  # of version 1


def _from_legacy_v1(doc: dict) -> dict:
    """A version 1 file ("format": "beoperf.pingpong", everything at the top) as an
    envelope of version 2; the meta gains the host name from the local end's facts."""
    if doc.get("schema_version") != 1:
        raise DocumentError(f"beoperf.pingpong schema version {doc.get('schema_version')!r} "
                            "is not one this beoperf reads")
    meta = doc.get("meta")
    if not isinstance(meta, dict):
        raise ValueError("'meta' is not an object")
    host = (doc.get("local") or {}).get("host") if isinstance(doc.get("local"), dict) else None
    if isinstance(host, dict) and isinstance(host.get("hostname"), str):
        meta.setdefault("host", host["hostname"])
    body = {k: doc[k] for k in BODY_KEYS if k in doc}
    return {"format": document.FORMAT, "kind": KIND, "schema_version": 2, "meta": meta,
            "body": body}


document.register(KIND, VERSION, upgrades={2: _v2_to_v3},
                  legacy={LEGACY_FORMAT: _from_legacy_v1})

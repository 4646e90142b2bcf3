"""The versioned result document of a ping-pong run, and its JSON form.

A run carries everything a later reader needs to compare it honestly with
another: the parameters, both ends' metadata and, per message size, the
sample count, the spread and the precision reached.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

FORMAT = "beoperf.pingpong"
SCHEMA_VERSION = 1


class ResultFormatError(ValueError):
    """A file is not a beoperf result, or of a version this beoperf cannot read."""


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
    meta: dict[str, Any]
    sizes: list[SizeResult] = field(default_factory=list)
    status: str = "complete"  # complete | interrupted | failed
    status_reason: str | None = None
    warnings: list[str] = field(default_factory=list)
    source: dict[str, Any] | None = None  # None: measured by beoperf; else what was imported

    def to_dict(self) -> dict[str, Any]:
        from beoperf.analysis.curve import analyze_run

        doc = {"format": FORMAT, "schema_version": SCHEMA_VERSION}
        doc.update(asdict(self))
        doc["summary"] = summary(self)
        try:  # the analysis must never cost the measured data
            analysis = analyze_run(self)
            doc["analysis"] = analysis.to_dict() if analysis else None
        except Exception as exc:  # noqa: BLE001
            doc["analysis"] = {"error": f"{type(exc).__name__}: {exc}"}
        return doc

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
    def from_dict(cls, doc: Any, source: str = "document") -> RunResult:
        _check_header(doc, source)
        try:
            _check_types(doc)
            sizes = [SizeResult(**s) for s in doc["sizes"]]
            return cls(parameters=doc["parameters"], local=doc["local"], remote=doc["remote"],
                       meta=doc["meta"], sizes=sizes, status=doc["status"],
                       status_reason=doc.get("status_reason"),
                       warnings=list(doc.get("warnings", [])), source=doc.get("source"))
        except (KeyError, TypeError, ValueError) as exc:
            raise ResultFormatError(f"{source}: malformed beoperf result ({exc})") from None


def _number_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool))


def _check_types(doc: dict[str, Any]) -> None:
    """The shapes the code relies on; ValueError names the first field that is off."""
    for key in ("parameters", "local", "remote", "meta"):
        if not isinstance(doc[key], dict):
            raise ValueError(f"{key!r} is not an object")
    if not isinstance(doc["sizes"], list):
        raise ValueError("'sizes' is not a list")
    for i, s in enumerate(doc["sizes"]):
        ok = (isinstance(s, dict) and isinstance(s.get("size"), int) and s["size"] >= 1
              and all(isinstance(s.get(k), dict) and all(map(_number_or_none, s[k].values()))
                      for k in ("time_us", "throughput_bps"))
              and all(_number_or_none(s.get(k)) for k in ("ci95_halfwidth_us", "ci95_relative"))
              and (s.get("trial_medians_us") is None
                   or (isinstance(s["trial_medians_us"], list)
                       and all(map(_number_or_none, s["trial_medians_us"])))))
        if not ok:
            raise ValueError(f"sizes[{i}] is not a size result (sizes, times and rates are "
                             "numbers)")


def _check_header(doc: Any, source: str) -> None:
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ResultFormatError(f"{source}: not a beoperf ping-pong result")
    version = doc.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ResultFormatError(
            f"{source}: result schema version {version!r} is not supported "
            f"(this beoperf reads version {SCHEMA_VERSION}); upgrade beoperf")


def summary(run: RunResult) -> dict[str, Any]:
    """Latency at the smallest size and peak throughput with where it was reached."""
    if not run.sizes:
        return {"sizes_measured": 0}
    first = run.sizes[0]
    peak = max(run.sizes, key=lambda s: s.central_bps())
    return {
        "sizes_measured": len(run.sizes),
        "sizes_not_converged": sum(1 for s in run.sizes if not s.converged),
        "latency_size": first.size,
        "latency_median_us": first.central_time_us(),
        "latency_p99_us": first.time_us.get("p99"),
        "peak_throughput_bps": peak.central_bps(),
        "peak_size": peak.size,
        "corrupt_messages": sum(s.corrupt for s in run.sizes),
    }


def save_json(run: RunResult, path: Path) -> None:
    """Write atomically, so an interrupted write never leaves half a result."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(run.to_dict(), indent=1) + "\n")
    tmp.replace(path)


def load_json(path: Path) -> RunResult:
    """Read a result file; ResultFormatError names the file and the problem."""
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ResultFormatError(f"{path}: cannot read ({exc.strerror})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ResultFormatError(f"{path}: not JSON ({exc})") from None
    except RecursionError:
        raise ResultFormatError(f"{path}: JSON nested too deeply to be a result") from None
    return RunResult.from_dict(doc, str(path))

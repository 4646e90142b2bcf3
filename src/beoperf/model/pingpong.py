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
from typing import Any, TypeGuard, cast

from beoperf.model import document, jsonvalue
from beoperf.model.document import Document, DocumentError, JsonObject

KIND = "pingpong"
# 1: "format": "beoperf.pingpong", no envelope; 2: the envelope; 3: "sweep"; 4: intervals
# of positive quantities (both bounds > 0), "interval_note", ci95_within_run_us always;
# 5: a size may be 0 (an empty message: a time, no throughput); 6: "tail" per size (p50 to
# p99.99 from a log histogram of the samples, which it keeps), and --streams and --reverse
# (a size's streams_bps, the parameters streams and reverse); 7: "under_load" (the
# same sizes measured again while a bulk TCP load ran, and the load's throughput), and
# "udp" per size (--udp: goodput, loss, reordering, duplicates and jitter at a paced
# rate; the parameter udp_rate)
VERSION = 7
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
    # [low, high]: this run's own part of ci95_us (the repeat interval from the run's own
    # trials), ci95_us before the spread between runs was added; every size measured
    # since version 4 has it (earlier files: only where that spread was added, and
    # elsewhere ci95_us is the within-run interval)
    ci95_within_run_us: list[float] | None = None
    # the pass of each trial (0: calibration), in the order of trial_medians_us: which
    # trials shared the machine's state of one moment
    trial_passes: list[int] | None = None
    # why the size has no interval though it has trials (e.g. one an earlier beoperf
    # wrote with a bound <= 0, dropped when the file was read)
    interval_note: str | None = None
    # the deep tail (beoperf.analysis.tails): {"samples", "percentiles_us": {"p50" ...
    # "p99.99": us or None below the rule}, "histogram": {"ratio", "unit", "buckets":
    # [[index, count], ...]}, "rule"}; None in stream mode and in files before version 6
    tail: JsonObject | None = None
    # --streams N (stream mode, version 6): each stream's goodput (bit/s), the median over
    # the size's trials of its bytes over its own loop time; throughput_bps is their sum
    # over the common window (the first stream's start to the last one's end)
    streams_bps: list[float] | None = None
    # --udp (stream mode, version 7): one trial of datagrams at the rate (engines.udp):
    # {"rate_bps", "duration_s", "sent", "sent_bps", "received", "lost", "loss",
    # "duplicates", "reordered", "jitter_us", "goodput_bps", "receiver_drops": of the lost,
    # those the receiving socket dropped (None: not known)}; throughput_bps is the goodput
    udp: JsonObject | None = None

    def central_time_us(self) -> float:
        """The figure to read: the median, or for imports what the source has."""
        for key in ("median", "best_trial_mean", "mean"):
            value = self.time_us.get(key)
            if value is not None:
                return float(value)
        raise ResultFormatError(f"size {self.size}: no time statistic")

    def central_bps(self) -> float:
        for key in ("from_median", "from_best_trial", "from_mean"):
            value = self.throughput_bps.get(key)
            if value is not None:
                return float(value)
        raise ResultFormatError(f"size {self.size}: no throughput statistic")


@dataclass
class RunResult:
    """One sweep: parameters, metadata of both ends, and per-size results."""

    parameters: JsonObject
    local: JsonObject
    remote: JsonObject
    meta: JsonObject  # the document's meta: how and when it was measured
    sizes: list[SizeResult] = field(default_factory=list)
    status: str = "complete"  # complete | interrupted | failed
    status_reason: str | None = None
    warnings: list[str] = field(default_factory=list)
    source: JsonObject | None = None  # None: measured by beoperf; else what was imported
    sweep: JsonObject | None = None  # how the sweep ran: passes, budget, drift ...
    # --under-load (version 7): {"load": {streams, write_bytes, bytes, window_s,
    # throughput_bps, capped, ...}, "sizes": [size results, as "sizes"], "status",
    # "status_reason", "sweep": how the loaded sweep ran}: the same sizes measured while
    # the load ran ("sizes" holds them without it, measured first in the same session);
    # None otherwise
    under_load: JsonObject | None = None

    def loaded_sizes(self) -> list[SizeResult]:
        """The sizes measured under load (none without --under-load)."""
        sizes = (self.under_load or {}).get("sizes")
        return [SizeResult(**cast(dict[str, Any], s)) for s in sizes if isinstance(s, dict)] \
            if isinstance(sizes, list) else []

    def body(self) -> JsonObject:
        """The document body (without the derived summary and analysis)."""
        out: JsonObject = asdict(self)
        del out["meta"]
        if out.get("under_load") is None:  # left out without --under-load, as before it
            out.pop("under_load", None)
        sizes = out["sizes"]
        for size in sizes if isinstance(sizes, list) else []:  # one stream: left out, as
            if isinstance(size, dict) and size.get("streams_bps") is None:  # before version 6
                size.pop("streams_bps", None)
            if isinstance(size, dict) and size.get("udp") is None:  # TCP: as before version 7
                size.pop("udp", None)
        return out

    def to_document(self, derived: JsonObject | None = None) -> Document:
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
        extras += [f"streams={p['streams']}"] if (p.get("streams") or 1) != 1 else []
        extras += ["reverse"] if p.get("reverse") else []
        rate = p.get("udp_rate")
        extras += [f"udp@{rate / 1e6:g}Mbit/s"] if isinstance(rate, int | float) else []
        mtu = jsonvalue.section(self.local, "interface").get("mtu")
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
                   sweep=b.get("sweep"), under_load=b.get("under_load"))


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


INTERVALS = ("ci95_us", "ci95_median_us", "ci95_within_run_us")  # [low, high] of a time
DROPPED = "reached zero or below"  # in the interval_note of an interval the upgrade dropped


def _v3_to_v4(doc: dict) -> dict:
    """Version 4: every interval of a time has both bounds above 0.  An earlier beoperf
    widened intervals on a linear scale, which could cross zero (an MPICH --sync run:
    [-0.097, 5644] us); such an interval is dropped ("no interval", with the reason in
    the size's ``interval_note``), its half-widths with it when it was ``ci95_us``.  A
    size whose ``ci95_us`` holds no spread between runs (no ``ci95_within_run_us``) gets
    it as its within-run interval too, as version 4 writes every size."""
    for size in doc["body"]["sizes"]:
        dropped = [name for name in INTERVALS if _crosses_zero(size.get(name))]
        for name in dropped:
            low, high = size[name]
            size[name] = None
            note = (f"{name} [{low:.4g}, {high:.4g}] us, written by an earlier beoperf, "
                    f"{DROPPED} (widened on a linear scale); no interval kept")
            size["interval_note"] = (f"{size['interval_note']}; {note}"
                                     if size.get("interval_note") else note)
        if "ci95_us" in dropped or _halfwidth_crosses_zero(size):
            size["ci95_halfwidth_us"] = size["ci95_relative"] = None
        if size.get("ci95_within_run_us") is None and size.get("ci95_us") is not None \
                and "ci95_within_run_us" not in dropped:
            size["ci95_within_run_us"] = list(size["ci95_us"])
    return doc


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _halfwidth_crosses_zero(size: dict) -> bool:
    """A size stored with a half-width only (no bounds; files before ci95_us), which
    reaches zero or below from its median: noted, as a dropped interval is."""
    median, half = (size.get("time_us") or {}).get("median"), size.get("ci95_halfwidth_us")
    if size.get("ci95_us") is not None or not (_number(median) and _number(half)):
        return False
    if median - half > 0:
        return False
    note = (f"half-width {half:.4g} us around the median {median:.4g} us, written by an "
            f"earlier beoperf, {DROPPED}; no interval kept")
    size["interval_note"] = (f"{size['interval_note']}; {note}" if size.get("interval_note")
                             else note)
    return True


def _crosses_zero(interval: Any) -> bool:
    """A [low, high] pair of numbers whose low (or high) bound is zero or below."""
    return (isinstance(interval, list) and len(interval) == 2
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in interval)
            and min(interval) <= 0)


def _v4_to_v5(doc: dict) -> dict:
    """Version 5 admits size 0, an empty message (NetPIPE's, IMB's and OSU's first row):
    a version 4 file has none, and nothing else changes."""
    return doc


def _v5_to_v6(doc: dict) -> dict:
    """Version 6 adds the optional "tail" of each size (deep percentiles and their
    histogram; a version 5 file's sizes kept p90 and p99 only) and what --streams and
    --reverse record (a size's per-stream goodputs, streams_bps, and the parameters streams
    and reverse; a version 5 file measured one stream forward); nothing else changes."""
    return doc


def _v6_to_v7(doc: dict) -> dict:
    """Version 7 adds the optional "under_load" (a ping-pong measured again while a bulk
    load ran), the optional "udp" of each size and the parameter udp_rate (--udp); a
    version 6 file ran without them, and nothing else changes."""
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


document.register(KIND, VERSION, upgrades={2: _v2_to_v3, 3: _v3_to_v4, 4: _v4_to_v5,
                                         5: _v5_to_v6, 6: _v6_to_v7},
                  legacy={LEGACY_FORMAT: _from_legacy_v1})

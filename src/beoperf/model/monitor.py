"""The monitor's documents: a link report (kind "monitor-report") and a monitor session
(kind "monitor-session").

A *monitor report* is about one probed host over one transport, over a time range of a
monitor database: availability, one-way latency and bandwidth by day and ISO week,
outages, stretches not monitored, congestion and level shifts, the binned series the
plots are drawn from, and the method (the rules in words, with this report's
parameters).  Units in its body: times are UTC seconds since the epoch (``*_utc``),
durations seconds (``*_s``), latencies milliseconds of one-way time (``*_ms``: half the
RTT of the small probes), bandwidth bit/s (``*_bps``), fractions in percent (``*_pct``);
missing values are null.  Version 1 files (``"format": "beoperf.monitor-report"``,
before the envelope) are read through :func:`_report_from_legacy_v1`.

A *monitor session* is what one ``beoperf monitor HOST`` did: the target, the schedule
and what it costs on the link, the budget, and (once it stopped) why it stopped and
what it sent.  The probes themselves are rows of the SQLite store, not of the document.

The vocabulary both share (probe outcomes, the report's default parameters, the names
of the report's figures) is here, so that every layer above reads it from one place.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from beoperf.model import document, jsonread
from beoperf.model.document import Document, DocumentError, JsonObject

REPORT_KIND = "monitor-report"
REPORT_VERSION = 3  # 1: "format": "beoperf.monitor-report", no envelope; 2: the envelope;
# 3: the bandwidth's status (figure, lower bound, above the link) and the link speed
LEGACY_REPORT_FORMAT = "beoperf.monitor-report"
SESSION_KIND = "monitor-session"
SESSION_VERSION = 1

# What became of a probe (the store's outcome column); 0 is the one success.
OUTCOMES = ("ok", "timeout", "unreachable", "refused", "error")
TRANSPORTS = ("icmp", "udp", "tcp")

# The report's default parameters (each recorded in its method.parameters).
OUTAGE_CYCLES = 2  # an outage is this many cycles or more with no answer
PERSIST_WINDOWS = 36  # a stable state lasting this many windows is a baseline
# The probing host's own noise (µs of RTT): RTT changes and IQRs within it are not events
# (analysis/monitor_events.py says why 100).
NOISE_FLOOR_US = 100.0

# The figures a report may list in "plots" (drawn by report/monitor_plots.py).
PLOTS = ("latency.png", "bandwidth.png", "hour_of_day.png", "latency_cdf.png")

REPORT_BODY_KEYS = ("source", "range", "method", "summary", "best_day", "worst_day", "days",
                    "weeks", "outages", "not_monitored", "congestion", "level_shifts",
                    "series", "plots", "warnings")


LAST_UTC = 253402300799.0  # 9999-12-31T23:59:59Z, the last second a date can show


def iso_z(t_utc: float) -> str:
    """'2026-11-02T20:00:00Z' for epoch seconds (the envelope's meta times)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t_utc))


def _report_from_legacy_v1(doc: dict) -> dict:
    """A version 1 report ("format": "beoperf.monitor-report", everything at the top) as
    an envelope of version 2: generated_utc and beoperf_version go to the meta."""
    if doc.get("schema_version") != 1:
        raise DocumentError(f"{LEGACY_REPORT_FORMAT} schema version "
                            f"{doc.get('schema_version')!r} is not one this beoperf reads")
    generated = doc["generated_utc"]
    if not isinstance(generated, int | float) or isinstance(generated, bool) \
            or not 0 <= generated <= LAST_UTC:
        raise ValueError("'generated_utc' is not a time from 1970 to 9999")
    when = iso_z(float(generated))
    meta = {"beoperf": doc["beoperf_version"], "command_line": [], "utc_start": when,
            "utc_end": when}
    return {"format": document.FORMAT, "kind": REPORT_KIND, "schema_version": 2,
            "meta": meta, "body": {k: doc[k] for k in REPORT_BODY_KEYS}}


def _report_v2_to_v3(doc: dict) -> dict:
    """Version 3 only adds optional fields (a bandwidth's status, the link speed): a
    version 2 report is a valid version 3 one."""
    return doc


# --------------------------------------------------------------------------- the session


@dataclass
class ScheduledStep:
    """``count`` probes of ``size`` payload bytes, ``spacing_s`` apart, in each cycle."""

    size: int
    count: int
    spacing_s: float


@dataclass
class SessionBudget:
    """The budget the schedule must fit: as given ("0.2% of 10 Mbit/s") and in B/s."""

    text: str
    bytes_per_s: float


@dataclass
class SessionTotals:
    """What a session did: cycles, probes sent and answered, bytes, and what it skipped
    because it was late."""

    cycles: int
    probes: int
    answered: int
    bytes: int
    skipped_cycles: int
    skipped_probes: int


@dataclass
class MonitorSession:
    """A monitor-session document's body, typed: the target, the schedule and what a cycle
    costs on the link, the budget and, once it stopped, why and what it sent (status
    "planned" for --dry-run: no run, no totals)."""

    host: str
    address: str
    transport: str
    port: int
    db: str | None
    run_id: int | None
    period_s: float
    schedule: list[ScheduledStep]
    timeout_s: float
    path_mtu: int
    path_mtu_unknown: str | None  # why the path MTU is assumed (None: it is known)
    bytes_per_cycle: int  # with headers
    link_bps: float | None
    budget: SessionBudget | None
    status: str = "planned"  # planned | stopped | failed
    stop_reason: str | None = None
    totals: SessionTotals | None = None

    def body(self) -> JsonObject:
        return asdict(self)

    def to_document(self, meta: JsonObject) -> Document:
        return Document(SESSION_KIND, self.body(), meta)

    @classmethod
    def from_document(cls, doc: Document) -> MonitorSession:
        """The typed body of a monitor-session document (DocumentError: another kind, or
        a value of the wrong type)."""
        if doc.kind != SESSION_KIND:
            raise DocumentError(f"a beoperf {doc.kind} document, not a monitor session")
        b: JsonObject = doc.body
        t, integer, num = jsonread.text, jsonread.integer, jsonread.number
        budget, totals = jsonread.opt_obj(b, "budget"), jsonread.opt_obj(b, "totals")
        return cls(
            t(b, "host"), t(b, "address"), t(b, "transport"), integer(b, "port"),
            jsonread.opt_text(b, "db"), jsonread.opt_integer(b, "run_id"), num(b, "period_s"),
            [ScheduledStep(integer(s, "size"), integer(s, "count"), num(s, "spacing_s"))
             for s in jsonread.objects(b, "schedule")],
            num(b, "timeout_s"), integer(b, "path_mtu"), jsonread.opt_text(b, "path_mtu_unknown"),
            integer(b, "bytes_per_cycle"), jsonread.opt_number(b, "link_bps"),
            None if budget is None else SessionBudget(t(budget, "text"),
                                                      num(budget, "bytes_per_s")),
            t(b, "status"), jsonread.opt_text(b, "stop_reason"),
            None if totals is None else SessionTotals(*(integer(totals, k) for k in (
                "cycles", "probes", "answered", "bytes", "skipped_cycles", "skipped_probes"))))


document.register(REPORT_KIND, REPORT_VERSION, upgrades={2: _report_v2_to_v3},
                  legacy={LEGACY_REPORT_FORMAT: _report_from_legacy_v1})
document.register(SESSION_KIND, SESSION_VERSION)

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
of the report's figures) is here, so that every layer above reads it from one place, and
both bodies typed (:class:`MonitorReport`, :class:`MonitorSession`): the analysis builds
them, the renderers read their fields.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

from beoperf.model import document, narrow
from beoperf.model.document import Document, DocumentError, JsonObject

REPORT_KIND = "monitor-report"
REPORT_VERSION = 4  # 1: "format": "beoperf.monitor-report", no envelope; 2: the envelope;
# 3: the bandwidth's status (figure, lower bound, above the link) and the link speed;
# 4: the time zone of days, weeks and hours (before it: UTC), the weekday x hour profile,
# the spike counts
LEGACY_REPORT_FORMAT = "beoperf.monitor-report"
SESSION_KIND = "monitor-session"
SESSION_VERSION = 1

# What became of a probe (the store's outcome column); 0 is the one success.
OUTCOMES = ("ok", "timeout", "unreachable", "refused", "error")
TRANSPORTS = ("icmp", "udp", "tcp")

# The report's default parameters (each recorded in its method.parameters).
OUTAGE_CYCLES = 2  # an outage is this many cycles or more with no answer
# Spikes: answered small probes whose RTT exceeds each of these (ms), the thresholds the
# campus-link studies count (issue 28): on a LAN or campus path (RTT well under 1 ms)
# 10 ms is a stall an interactive user notices, 50 ms one that breaks a call or a class.
SPIKE_RTT_MS = (10.0, 50.0)
MAX_SPIKE_THRESHOLDS = 8
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


def _report_v3_to_v4(doc: dict) -> dict:
    """Version 4 only adds optional fields (the time zone, absent: UTC, as every report
    before it used; the weekday x hour profile; the spike counts): a version 3 report is
    a valid version 4 one."""
    return doc


# --------------------------------------------------------------------------- the report


def _num(o: JsonObject, key: str) -> float | None:
    return narrow.opt_num_at(o, key)


@dataclass
class Latency:
    """One-way latency of a period's small probes, ms: how many, median, mean, p95."""

    count: int
    median: float | None
    mean: float | None
    p95: float | None

    @classmethod
    def from_dict(cls, o: JsonObject) -> Latency:
        return cls(narrow.integer_at(o, "count"), _num(o, "median"), _num(o, "mean"),
                   _num(o, "p95"))


BANDWIDTH_DETAIL = ("cycles", "above_link", "unresolved", "resolvable_bps", "link_bps")


@dataclass
class Bandwidth:
    """A period's bandwidth, bit/s: the median of the cycles' estimates (a figure only
    when ``status`` is "figure"), how many, and (since version 3) the status with the
    counts behind it; a report before that has no status: its median is the figure."""

    count: int
    median: float | None
    status: str | None = None  # figure | lower_bound | above_link | none; None: version 2
    cycles: int | None = None  # cycles with an answered pair
    above_link: int | None = None  # of which above the link speed
    unresolved: int | None = None  # of which within the small probes' noise
    resolvable_bps: float | None = None
    link_bps: float | None = None

    @property
    def shown_status(self) -> str:
        """The status ("figure" for a report that has none)."""
        return self.status or "figure"

    def to_dict(self) -> JsonObject:
        if self.status is None:
            return {"count": self.count, "median": self.median}
        return asdict(self)

    @classmethod
    def from_dict(cls, o: JsonObject) -> Bandwidth:
        opt_int = narrow.opt_int_at
        return cls(narrow.integer_at(o, "count"), _num(o, "median"),
                   narrow.opt_text_at(o, "status"), opt_int(o, "cycles"),
                   opt_int(o, "above_link"), opt_int(o, "unresolved"),
                   _num(o, "resolvable_bps"), _num(o, "link_bps"))


@dataclass
class Spikes:
    """How many answered small probes of a period had an RTT above ``above_ms`` (the RTT,
    as ping shows it: not the one-way estimate), and their share of the answered small
    probes (%)."""

    above_ms: float
    count: int
    pct: float | None

    @classmethod
    def from_dict(cls, o: JsonObject) -> Spikes:
        return cls(narrow.num_at(o, "above_ms"), narrow.integer_at(o, "count"),
                   _num(o, "pct"))


@dataclass
class Period:
    """A day, an ISO week or the whole range: how long it was monitored, probes sent and
    answered, outage time and uptime, one-way latency and bandwidth, and (since version
    4) the spikes above each threshold (None: a report before it)."""

    period: str
    start_utc: float
    end_utc: float
    monitored_s: float
    coverage_pct: float | None
    probes: int
    answered: int
    answered_pct: float | None
    outage_s: float | None
    uptime_pct: float | None
    one_way_ms: Latency
    bandwidth_bps: Bandwidth
    spikes: list[Spikes] | None = None

    def to_dict(self) -> JsonObject:
        out: JsonObject = {k: getattr(self, k) for k in PERIOD_FIELDS}
        out["one_way_ms"] = asdict(self.one_way_ms)
        out["bandwidth_bps"] = self.bandwidth_bps.to_dict()
        if self.spikes is not None:
            out["spikes"] = [asdict(x) for x in self.spikes]
        return out

    @classmethod
    def from_dict(cls, o: JsonObject) -> Period:
        num, integer = narrow.num_at, narrow.integer_at
        return cls(narrow.text_at(o, "period"), num(o, "start_utc"), num(o, "end_utc"),
                   num(o, "monitored_s"), _num(o, "coverage_pct"), integer(o, "probes"),
                   integer(o, "answered"), _num(o, "answered_pct"), _num(o, "outage_s"),
                   _num(o, "uptime_pct"),
                   Latency.from_dict(narrow.obj(o.get("one_way_ms"), "one_way_ms")),
                   Bandwidth.from_dict(narrow.obj(o.get("bandwidth_bps"), "bandwidth_bps")),
                   None if o.get("spikes") is None else
                   [Spikes.from_dict(x) for x in narrow.objects_or_empty(o, "spikes")])


PERIOD_FIELDS = ("period", "start_utc", "end_utc", "monitored_s", "coverage_pct", "probes",
                 "answered", "answered_pct", "outage_s", "uptime_pct")


@dataclass
class Summary(Period):
    """The whole range as one period, with how many events it holds."""

    outages: int = 0
    congestion_events: int = 0
    level_shifts: int = 0

    def to_dict(self) -> JsonObject:
        return {**super().to_dict(), "outages": self.outages,
                "congestion_events": self.congestion_events, "level_shifts": self.level_shifts}

    @classmethod
    def from_dict(cls, o: JsonObject) -> Summary:
        found = Period.from_dict(o)
        return cls(**vars(found), outages=narrow.integer_at(o, "outages"),
                   congestion_events=narrow.integer_at(o, "congestion_events"),
                   level_shifts=narrow.integer_at(o, "level_shifts"))


@dataclass
class RankedDay:
    """The best or worst day: answered %, uptime %, median one-way latency (ms)."""

    period: str
    answered_pct: float | None
    uptime_pct: float | None
    one_way_median_ms: float | None

    @classmethod
    def from_dict(cls, o: JsonObject) -> RankedDay:
        return cls(narrow.text_at(o, "period"), _num(o, "answered_pct"), _num(o, "uptime_pct"),
                   _num(o, "one_way_median_ms"))


@dataclass
class Interval:
    """A stretch of time (UTC seconds) and how long it lasted."""

    start_utc: float
    end_utc: float
    duration_s: float

    @classmethod
    def from_dict(cls, o: JsonObject) -> Interval:
        num = narrow.num_at
        return cls(num(o, "start_utc"), num(o, "end_utc"), num(o, "duration_s"))


@dataclass
class Outage(Interval):
    """Cycles in a row with no answer: how many, the most common failure, whether it is
    still open and what ended it, and the failures by kind."""

    cycles: int = 0
    kind: str = ""
    open: bool = False
    ended_by: str = "answer"  # answer | end of data | gap
    open_start: bool = False
    outcomes: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, o: JsonObject) -> Outage:
        flag = narrow.flag_at
        return cls(**vars(Interval.from_dict(o)), cycles=narrow.integer_at(o, "cycles"),
                   kind=narrow.text_at(o, "kind"), open=flag(o, "open"),
                   ended_by=narrow.text_at(o, "ended_by"), open_start=flag(o, "open_start"),
                   outcomes=narrow.int_map_or_empty(o, "outcomes"))


@dataclass
class CongestionLatency:
    """A congestion event's own one-way latency, ms."""

    median: float | None
    p95: float | None
    iqr: float | None


@dataclass
class Baseline:
    """The baseline a congestion event is judged against: level, IQR (ms) and loss."""

    one_way_ms: float | None
    iqr_ms: float | None
    loss_pct: float | None


@dataclass
class Congestion(Interval):
    """A stretch above the baseline's level, dispersion or loss, with its severity."""

    open: bool = False
    one_way_ms: CongestionLatency = field(
        default_factory=lambda: CongestionLatency(None, None, None))
    loss_pct: float | None = None
    baseline: Baseline = field(default_factory=lambda: Baseline(None, None, None))
    ratio: float | None = None
    added_ms: float | None = None
    dispersion_ratio: float | None = None

    @classmethod
    def from_dict(cls, o: JsonObject) -> Congestion:
        lat = narrow.obj(o.get("one_way_ms"), "one_way_ms")
        base = narrow.obj(o.get("baseline"), "baseline")
        return cls(**vars(Interval.from_dict(o)), open=narrow.flag_at(o, "open"),
                   one_way_ms=CongestionLatency(_num(lat, "median"), _num(lat, "p95"),
                                                _num(lat, "iqr")),
                   loss_pct=_num(o, "loss_pct"),
                   baseline=Baseline(_num(base, "one_way_ms"), _num(base, "iqr_ms"),
                                     _num(base, "loss_pct")),
                   ratio=_num(o, "ratio"), added_ms=_num(o, "added_ms"),
                   dispersion_ratio=_num(o, "dispersion_ratio"))


@dataclass
class LevelShift:
    """A change from one stable baseline level to another (a path change), ms."""

    at_utc: float
    from_ms: float | None
    to_ms: float | None
    change_ms: float | None
    ratio: float | None
    iqr_before_ms: float | None
    iqr_after_ms: float | None

    @classmethod
    def from_dict(cls, o: JsonObject) -> LevelShift:
        return cls(narrow.num_at(o, "at_utc"), *(_num(o, k) for k in (
            "from_ms", "to_ms", "change_ms", "ratio", "iqr_before_ms", "iqr_after_ms")))


Values = list[float | None]  # one per bin; None: nothing in it


@dataclass
class Spread:
    """Per time bin: min, median, p95 and max."""

    min: Values
    median: Values
    p95: Values
    max: Values

    @classmethod
    def from_dict(cls, o: JsonObject) -> Spread:
        return cls(*(narrow.opt_nums_or_empty(o, k) for k in ("min", "median", "p95", "max")))


@dataclass
class Timeline:
    """Binned series over time: each bin's start (UTC s), latency (ms) and bandwidth
    (bit/s) spreads, loss of every probe and of the large ones (%)."""

    bin_s: float
    start_utc: Values
    one_way_ms: Spread
    loss_pct: Values
    bandwidth_bps: Spread
    large_loss_pct: Values

    def bin_starts(self) -> list[float] | None:
        """Each bin's start, or None when one is missing (the schema allows it; a report
        beoperf writes has every one)."""
        found = [t for t in self.start_utc if t is not None]
        return found if len(found) == len(self.start_utc) else None

    @classmethod
    def from_dict(cls, o: JsonObject) -> Timeline:
        spread = Spread.from_dict
        return cls(narrow.num_at(o, "bin_s"), narrow.opt_nums_or_empty(o, "start_utc"),
                   spread(narrow.obj(o.get("one_way_ms"), "one_way_ms")),
                   narrow.opt_nums_or_empty(o, "loss_pct"),
                   spread(narrow.obj(o.get("bandwidth_bps"), "bandwidth_bps")),
                   narrow.opt_nums_or_empty(o, "large_loss_pct"))


@dataclass
class Quartiles:
    """Per hour of the day: one-way latency p25, median, p75 and p95 (ms)."""

    p25: Values
    median: Values
    p75: Values
    p95: Values


@dataclass
class HourOfDay:
    """Latency and loss by hour of the day (the report's time zone: UTC before version 4),
    with the probes in each hour."""

    hour: list[int]
    one_way_ms: Quartiles
    count: list[int]
    loss_pct: Values

    @classmethod
    def from_dict(cls, o: JsonObject) -> HourOfDay:
        lat = narrow.obj(o.get("one_way_ms"), "one_way_ms")
        return cls(narrow.ints_or_empty(o, "hour"),
                   Quartiles(*(narrow.opt_nums_or_empty(lat, k)
                               for k in ("p25", "median", "p75", "p95"))),
                   narrow.ints_or_empty(o, "count"), narrow.opt_nums_or_empty(o, "loss_pct"))


@dataclass
class WeekdayHours:
    """One weekday of the weekday x hour profile, per local hour 0-23: probes scheduled,
    the share answered (%), and the median one-way latency of the small probes (ms) with
    how many it is the median of."""

    weekday: str  # Mon .. Sun
    probes: list[int]
    answered_pct: Values
    one_way_median_ms: Values
    count: list[int]

    @classmethod
    def from_dict(cls, o: JsonObject) -> WeekdayHours:
        return cls(narrow.text_at(o, "weekday"), narrow.ints_or_empty(o, "probes"),
                   narrow.opt_nums_or_empty(o, "answered_pct"),
                   narrow.opt_nums_or_empty(o, "one_way_median_ms"),
                   narrow.ints_or_empty(o, "count"))


@dataclass
class Cdf:
    """The distribution of one-way latency: values (ms) at evenly spaced fractions."""

    one_way_ms: Values
    fraction: Values

    def points(self) -> tuple[list[float], list[float]]:
        """(values, fractions) of the points with both (a report beoperf writes: all)."""
        pairs = [(x, f) for x, f in zip(self.one_way_ms, self.fraction, strict=False)
                 if x is not None and f is not None]
        return [x for x, _ in pairs], [f for _, f in pairs]


@dataclass
class Series:
    """What the plots are drawn from."""

    timeline: Timeline
    hour_of_day: HourOfDay
    cdf: Cdf

    @classmethod
    def from_dict(cls, o: JsonObject) -> Series:
        cdf = narrow.obj(o.get("cdf"), "cdf")
        return cls(Timeline.from_dict(narrow.obj(o.get("timeline"), "timeline")),
                   HourOfDay.from_dict(narrow.obj(o.get("hour_of_day"), "hour_of_day")),
                   Cdf(narrow.opt_nums_or_empty(cdf, "one_way_ms"),
                       narrow.opt_nums_or_empty(cdf, "fraction")))


@dataclass
class Run:
    """A monitor run the probes belong to: its target, period, when it ran, why it
    stopped, its schedule (as the store keeps it) and link speed (None: not given)."""

    id: int
    host: str
    address: str | None
    transport: str
    period_s: float
    started_utc: float
    ended_utc: float | None
    stop_reason: str | None
    schedule: list[JsonObject] | None
    link_bps: float | None = None
    has_link: bool = True  # False: a report before version 3, which has no link_bps

    def to_dict(self) -> JsonObject:
        out: JsonObject = {k: getattr(self, k) for k in RUN_FIELDS}
        out["schedule"] = None if self.schedule is None else list(self.schedule)
        if self.has_link:
            out["link_bps"] = self.link_bps
        return out

    @classmethod
    def from_dict(cls, o: JsonObject) -> Run:
        t, num = narrow.text_at, narrow.num_at
        schedule = None if o.get("schedule") is None else narrow.objects_or_empty(o, "schedule")
        return cls(narrow.integer_at(o, "id"), t(o, "host"), narrow.opt_text_at(o, "address"),
                   t(o, "transport"), num(o, "period_s"), num(o, "started_utc"),
                   _num(o, "ended_utc"), narrow.opt_text_at(o, "stop_reason"), schedule,
                   _num(o, "link_bps"), "link_bps" in o)


RUN_FIELDS = ("id", "host", "address", "transport", "period_s", "started_utc", "ended_utc",
              "stop_reason")


@dataclass
class Source:
    """The database, the probed host, the transport and the runs of the report."""

    db: str
    host: str
    transport: str
    runs: list[Run]

    def to_dict(self) -> JsonObject:
        return {"db": self.db, "host": self.host, "transport": self.transport,
                "runs": [r.to_dict() for r in self.runs]}

    @classmethod
    def from_dict(cls, o: JsonObject) -> Source:
        t = narrow.text_at
        return cls(t(o, "db"), t(o, "host"), t(o, "transport"),
                   [Run.from_dict(r) for r in narrow.objects_or_empty(o, "runs")])


@dataclass
class Range:
    """The range asked for and the one found (UTC s), and how much of it was monitored."""

    requested_from_utc: float | None
    requested_to_utc: float | None
    from_utc: float
    to_utc: float
    monitored_s: float
    not_monitored_s: float

    @classmethod
    def from_dict(cls, o: JsonObject) -> Range:
        num = narrow.num_at
        return cls(_num(o, "requested_from_utc"), _num(o, "requested_to_utc"),
                   num(o, "from_utc"), num(o, "to_utc"), num(o, "monitored_s"),
                   num(o, "not_monitored_s"))


@dataclass
class Parameters:
    """The report's parameters; ``link_bps`` only when the report was given one;
    ``timezone`` (IANA name) since version 4 (None: a report before it, in UTC)."""

    outage_cycles: int
    window_cycles: int
    persist_windows: int
    gap_periods: float
    noise_floor_us: float
    link_bps: float | None = None
    timezone: str | None = None
    spike_rtt_ms: list[float] | None = None  # the spike thresholds (None: before v4)

    @property
    def zone_name(self) -> str:
        """The time zone of the report's days, weeks and hours ("UTC" before version 4)."""
        return self.timezone or "UTC"

    def to_dict(self) -> JsonObject:
        out = asdict(self)
        for key in ("link_bps", "timezone", "spike_rtt_ms"):
            if out[key] is None:
                del out[key]
        return out

    @classmethod
    def from_dict(cls, o: JsonObject) -> Parameters:
        integer, num = narrow.integer_at, narrow.num_at
        return cls(integer(o, "outage_cycles"), integer(o, "window_cycles"),
                   integer(o, "persist_windows"), num(o, "gap_periods"),
                   num(o, "noise_floor_us"), _num(o, "link_bps"),
                   narrow.opt_text_at(o, "timezone"),
                   None if o.get("spike_rtt_ms") is None else
                   narrow.nums_or_empty(o, "spike_rtt_ms"))


@dataclass
class Method:
    """The rules behind the numbers in words (name -> text, in order) and the
    parameters."""

    rules: dict[str, str]
    parameters: Parameters

    def to_dict(self) -> JsonObject:
        return {**self.rules, "parameters": self.parameters.to_dict()}

    @classmethod
    def from_dict(cls, o: JsonObject) -> Method:
        return cls({k: narrow.text_at(o, k) for k in o if k != "parameters"},
                   Parameters.from_dict(narrow.obj(o.get("parameters"), "parameters")))


@dataclass
class MonitorReport:
    """A monitor-report document's body, typed (see the module docstring)."""

    source: Source
    range: Range
    method: Method
    summary: Summary
    best_day: RankedDay | None
    worst_day: RankedDay | None
    days: list[Period]
    weeks: list[Period]
    outages: list[Outage]
    not_monitored: list[Interval]
    congestion: list[Congestion]
    level_shifts: list[LevelShift]
    series: Series
    plots: list[str]
    warnings: list[str]
    # since version 4: availability and latency by local weekday and hour (None: before)
    week_profile: list[WeekdayHours] | None = None

    def body(self) -> JsonObject:
        out = self._body()
        if self.week_profile is not None:
            out["week_profile"] = [asdict(w) for w in self.week_profile]
        return out

    def _body(self) -> JsonObject:
        return {"source": self.source.to_dict(), "range": asdict(self.range),
                "method": self.method.to_dict(), "summary": self.summary.to_dict(),
                "best_day": None if self.best_day is None else asdict(self.best_day),
                "worst_day": None if self.worst_day is None else asdict(self.worst_day),
                "days": [d.to_dict() for d in self.days],
                "weeks": [w.to_dict() for w in self.weeks],
                "outages": [asdict(o) for o in self.outages],
                "not_monitored": [asdict(g) for g in self.not_monitored],
                "congestion": [asdict(c) for c in self.congestion],
                "level_shifts": [asdict(s) for s in self.level_shifts],
                "series": asdict(self.series), "plots": list(self.plots),
                "warnings": list(self.warnings)}

    def to_document(self, meta: JsonObject) -> Document:
        return Document(REPORT_KIND, self.body(), meta)

    @classmethod
    def from_body(cls, b: JsonObject) -> MonitorReport:
        """The typed body of the JSON body ``b``, every value narrowed (DocumentError)."""
        part = narrow.obj
        best, worst = narrow.opt_obj_at(b, "best_day"), narrow.opt_obj_at(b, "worst_day")
        return cls(
            Source.from_dict(part(b.get("source"), "source")),
            Range.from_dict(part(b.get("range"), "range")),
            Method.from_dict(part(b.get("method"), "method")),
            Summary.from_dict(part(b.get("summary"), "summary")),
            None if best is None else RankedDay.from_dict(best),
            None if worst is None else RankedDay.from_dict(worst),
            [Period.from_dict(d) for d in narrow.objects_or_empty(b, "days")],
            [Period.from_dict(w) for w in narrow.objects_or_empty(b, "weeks")],
            [Outage.from_dict(o) for o in narrow.objects_or_empty(b, "outages")],
            [Interval.from_dict(g) for g in narrow.objects_or_empty(b, "not_monitored")],
            [Congestion.from_dict(c) for c in narrow.objects_or_empty(b, "congestion")],
            [LevelShift.from_dict(s) for s in narrow.objects_or_empty(b, "level_shifts")],
            Series.from_dict(part(b.get("series"), "series")), narrow.texts_or_empty(b, "plots"),
            narrow.texts_or_empty(b, "warnings"),
            None if b.get("week_profile") is None else
            [WeekdayHours.from_dict(w) for w in narrow.objects_or_empty(b, "week_profile")])

    @classmethod
    def of(cls, found: MonitorReport | JsonObject) -> MonitorReport:
        """``found`` typed: as it is, or read from a body."""
        return found if isinstance(found, MonitorReport) else cls.from_body(found)

    @classmethod
    def from_document(cls, doc: Document) -> MonitorReport:
        """The typed body of a monitor-report document (DocumentError: another kind, or
        a value of the wrong type)."""
        if doc.kind != REPORT_KIND:
            raise DocumentError(f"a beoperf {doc.kind} document, not a monitor report")
        return cls.from_body(doc.body)


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
        t, integer, num = narrow.text_at, narrow.integer_at, narrow.num_at
        budget, totals = narrow.opt_obj_at(b, "budget"), narrow.opt_obj_at(b, "totals")
        return cls(
            t(b, "host"), t(b, "address"), t(b, "transport"), integer(b, "port"),
            narrow.opt_text_at(b, "db"), narrow.opt_int_at(b, "run_id"), num(b, "period_s"),
            [ScheduledStep(integer(s, "size"), integer(s, "count"), num(s, "spacing_s"))
             for s in narrow.objects_or_empty(b, "schedule")],
            num(b, "timeout_s"), integer(b, "path_mtu"), narrow.opt_text_at(b, "path_mtu_unknown"),
            integer(b, "bytes_per_cycle"), narrow.opt_num_at(b, "link_bps"),
            None if budget is None else SessionBudget(t(budget, "text"),
                                                      num(budget, "bytes_per_s")),
            t(b, "status"), narrow.opt_text_at(b, "stop_reason"),
            None if totals is None else SessionTotals(*(integer(totals, k) for k in (
                "cycles", "probes", "answered", "bytes", "skipped_cycles", "skipped_probes"))))


document.register(REPORT_KIND, REPORT_VERSION,
                  upgrades={2: _report_v2_to_v3, 3: _report_v3_to_v4},
                  legacy={LEGACY_REPORT_FORMAT: _report_from_legacy_v1})
document.register(SESSION_KIND, SESSION_VERSION)

"""The document of `beoperf study` (kind "study"): one experiment, hosts x factors x
measurements in a design, with every block measured, the effects, the verdicts and how
each host ended.

The body, top to bottom:

* what was studied: ``name`` (a preset or ``file:PATH``), ``design`` (one-at-a-time,
  greedy, factorial), whether anything was ``applied`` and the ``status`` (planned,
  complete, partial, interrupted, failed) with its reason;
* where: the ``hosts`` (role, how reached, the data address and interface, the Slurm
  state, the dead-man agent, the snapshot, and each host's ``end``: restored, kept,
  unreachable ... with the command that restores it), the measured ``pairs``;
* what: the ``factors`` with their levels (a level the path cannot carry is ``skipped``
  with its reason), the ``measurements`` and their figures, the ``configurations``
  (Default, each level, the combination of what helped, or every combination);
* how: the ``schedule`` (seed, warm-up, repeats, margin, the order of blocks) and the
  ``blocks`` as measured, with the ``curves`` of a curve measurement per configuration;
* what it says: the ``effects`` (each an ``analysis.effect.Effect`` as data), the
  ``combined`` effect, a factorial design's ``main_effects`` (one per level, its
  ``config`` naming the level as "mtu=9000"), the ``impact`` table, the ``drift`` of the
  Default blocks, the ``verdicts`` (one line per level), what was ``kept``, the
  ``method`` and ``warnings``.

Every value a reader takes is narrowed (``model.narrow``): a crafted file meets a
DocumentError naming its key, never a TypeError in a renderer.  This layer is pure data.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from beoperf.model import document, narrow
from beoperf.model.document import Document, DocumentError, JsonObject

KIND = "study"
VERSION = 1

DESIGNS = ("one-at-a-time", "greedy", "factorial")
STATUSES = ("planned", "complete", "partial", "interrupted", "failed")
ROLES = ("default", "level", "combined", "factorial")
LEVEL_STATUSES = ("measured", "skipped", "failed", "not-reached")
END_STATES = ("restored", "restored-by-agent", "kept", "unreachable", "not-changed",
              "restore-failed")
DEFAULT_ID = "c0"  # the configuration id of Default, by convention of analysis.study
DEFAULT_LABEL = "Default"


def _t(o: JsonObject, key: str, where: str) -> str:
    return narrow.text(o.get(key), f"{where}.{key}")


def _ot(o: JsonObject, key: str, where: str) -> str | None:
    return narrow.opt_text(o.get(key), f"{where}.{key}")


def _n(o: JsonObject, key: str, where: str) -> float:
    return narrow.num(o.get(key), f"{where}.{key}")


def _on(o: JsonObject, key: str, where: str) -> float | None:
    return narrow.opt_num(o.get(key), f"{where}.{key}")


def _i(o: JsonObject, key: str, where: str) -> int:
    return narrow.integer(o.get(key), f"{where}.{key}")


def _f(o: JsonObject, key: str, where: str) -> bool:
    return narrow.flag(o.get(key), f"{where}.{key}")


def _oo(o: JsonObject, key: str, where: str) -> JsonObject | None:
    return narrow.opt_obj(o.get(key), f"{where}.{key}")


def _objs(o: JsonObject, key: str, where: str) -> list[tuple[JsonObject, str]]:
    """The objects of the list at ``key`` (missing: none), each with its name for errors."""
    name = f"{where}.{key}" if where else key
    return [(item, f"{name}[{i}]") for i, item in
            enumerate(narrow.objects(o.get(key, []), name))]


# --------------------------------------------------------------------------- hosts


@dataclass
class HostEnd:
    """How a host ended: restored (by the controller), restored-by-agent (its lease
    lapsed), kept (the levels that helped, with how to undo them), unreachable (with the
    state it was last seen in), not-changed, restore-failed; the command that restores it
    and the agent's reply (a HostResult as data)."""

    state: str
    detail: str | None = None
    restore_command: str | None = None
    result: JsonObject | None = None

    @classmethod
    def from_dict(cls, o: JsonObject, where: str) -> HostEnd:
        return cls(_t(o, "state", where), _ot(o, "detail", where),
                   _ot(o, "restore_command", where), _oo(o, "result", where))


@dataclass
class Host:
    """A host of the study: its name, role (controller, peer, member), how it was reached
    (local, ssh, template), the address measured and the interface carrying it, the Slurm
    state, its agent and snapshot, the settings digest and how it ended."""

    name: str
    role: str
    reach: str
    data_address: str | None = None
    interface: str | None = None
    slurm: JsonObject | None = None
    agent: JsonObject | None = None
    snapshot: JsonObject = field(default_factory=dict)
    settings_digest: str | None = None
    end: HostEnd | None = None

    @classmethod
    def from_dict(cls, o: JsonObject, where: str) -> Host:
        end = _oo(o, "end", where)
        return cls(_t(o, "name", where), _t(o, "role", where), _t(o, "reach", where),
                   _ot(o, "data_address", where), _ot(o, "interface", where),
                   _oo(o, "slurm", where), _oo(o, "agent", where),
                   _oo(o, "snapshot", where) or {}, _ot(o, "settings_digest", where),
                   None if end is None else HostEnd.from_dict(end, f"{where}.end"))


# --------------------------------------------------------------------------- factors


@dataclass
class FactorLevel:
    """One level of a factor: its label and value (None: the host's own, Default),
    whether it is the Default, its status (measured, skipped, failed, not-reached) and
    why, the path facts of an MTU level and what each host granted (buffer sizes)."""

    label: str
    value: str | None
    default: bool = False
    status: str = "measured"
    why: str | None = None
    path: JsonObject | None = None
    granted: JsonObject | None = None

    @classmethod
    def from_dict(cls, o: JsonObject, where: str) -> FactorLevel:
        return cls(_t(o, "label", where), _ot(o, "value", where), _f(o, "default", where),
                   _t(o, "status", where), _ot(o, "why", where), _oo(o, "path", where),
                   _oo(o, "granted", where))


@dataclass
class FactorLevels:
    """A factor of the study: its name, scope (host: changed on the hosts; run: how a
    measurement is made), the hosts it changes and its levels."""

    name: str
    scope: str
    hosts: list[str] = field(default_factory=list)
    levels: list[FactorLevel] = field(default_factory=list)

    @classmethod
    def from_dict(cls, o: JsonObject, where: str) -> FactorLevels:
        return cls(_t(o, "name", where), _t(o, "scope", where),
                   narrow.texts(o.get("hosts", []), f"{where}.hosts"),
                   [FactorLevel.from_dict(x, w) for x, w in _objs(o, "levels", where)])

    def level(self, label: str) -> FactorLevel | None:
        return next((lv for lv in self.levels if lv.label == label), None)


# --------------------------------------------------------------------------- measurements


@dataclass
class Figure:
    """A figure a measurement gives: its key ("latency_us@16", "goodput_bps@1M"), unit
    and direction."""

    key: str
    unit: str
    higher_is_better: bool

    @classmethod
    def from_dict(cls, o: JsonObject, where: str) -> Figure:
        return cls(_t(o, "key", where), _t(o, "unit", where),
                   _f(o, "higher_is_better", where))


@dataclass
class MeasurementSpec:
    """A measurement of the study: its name (pingpong, ring, hpl, hpcc, node, command),
    its parameters and the figures it gives."""

    name: str
    params: JsonObject = field(default_factory=dict)
    figures: list[Figure] = field(default_factory=list)

    @classmethod
    def from_dict(cls, o: JsonObject, where: str) -> MeasurementSpec:
        return cls(_t(o, "name", where), _oo(o, "params", where) or {},
                   [Figure.from_dict(x, w) for x, w in _objs(o, "figures", where)])


@dataclass
class Configuration:
    """A state measured: its id ("c0" is Default), label ("MTU 9000"), the level of each
    factor it sets (factor -> level label; Default sets none) and its role (default,
    level, combined, factorial)."""

    id: str
    label: str
    levels: dict[str, str] = field(default_factory=dict)
    role: str = "level"

    @classmethod
    def from_dict(cls, o: JsonObject, where: str) -> Configuration:
        return cls(_t(o, "id", where), _t(o, "label", where),
                   narrow.text_map(o.get("levels", {}), f"{where}.levels"),
                   _t(o, "role", where))


@dataclass
class Schedule:
    """How the blocks were ordered: the seed, warm-up blocks (dropped), repeats per
    configuration, the time budget, the agents' lease, the margin of "no difference",
    the order of configuration ids, warm-up included (the rounds --precision added at
    the end), and --precision with its --max-repeats (None: the planned repeats only)."""

    seed: int
    warmup: int
    repeats: int
    time_budget_s: float | None = None
    lease_s: float | None = None
    margin: float = 0.1
    order: list[str] = field(default_factory=list)
    precision: float | None = None
    max_repeats: int | None = None

    @classmethod
    def from_dict(cls, o: JsonObject, where: str = "schedule") -> Schedule:
        return cls(_i(o, "seed", where), _i(o, "warmup", where), _i(o, "repeats", where),
                   _on(o, "time_budget_s", where), _on(o, "lease_s", where),
                   _n(o, "margin", where), narrow.texts(o.get("order", []), f"{where}.order"),
                   _on(o, "precision", where), narrow.opt_int_at(o, "max_repeats"))


@dataclass
class Block:
    """One block as measured: its index in the order, configuration, whether it was a
    warm-up, when it started, how long it measured and how long applying its levels took,
    its figures (over the pairs: their geometric mean), each pair's figures
    ("client>server" -> key -> value), its status (ok, failed, skipped) and error."""

    index: int
    config: str
    warmup: bool = False
    utc_start: str | None = None
    duration_s: float = 0.0
    apply_s: float = 0.0
    figures: dict[str, float] = field(default_factory=dict)
    pairs: dict[str, dict[str, float]] = field(default_factory=dict)
    status: str = "ok"
    error: str | None = None

    @classmethod
    def from_dict(cls, o: JsonObject, where: str) -> Block:
        pairs = narrow.obj(o.get("pairs", {}), f"{where}.pairs")
        return cls(_i(o, "index", where), _t(o, "config", where), _f(o, "warmup", where),
                   _ot(o, "utc_start", where), _n(o, "duration_s", where),
                   _n(o, "apply_s", where),
                   narrow.num_map(o.get("figures", {}), f"{where}.figures"),
                   {k: narrow.num_map(v, f"{where}.pairs.{k}") for k, v in pairs.items()},
                   _t(o, "status", where), _ot(o, "error", where))


@dataclass
class Curve:
    """A curve measured at one configuration: (size in bytes, value) points in ``unit``."""

    config: str
    measurement: str
    unit: str
    points: list[tuple[float, float]] = field(default_factory=list)

    @classmethod
    def from_dict(cls, o: JsonObject, where: str) -> Curve:
        name = f"{where}.points"
        points = []
        for i, p in enumerate(narrow.values(o.get("points", []), name)):
            pair = narrow.nums(p, f"{name}[{i}]")
            if len(pair) != 2:
                raise DocumentError(f"{name}[{i}]: expected [size, value], found "
                                    f"{len(pair)} numbers")
            points.append((pair[0], pair[1]))
        return cls(_t(o, "config", where), _t(o, "measurement", where), _t(o, "unit", where),
                   points)

    def body(self) -> JsonObject:
        return {"config": self.config, "measurement": self.measurement, "unit": self.unit,
                "points": [[x, y] for x, y in self.points]}


# --------------------------------------------------------------------------- conclusions


@dataclass
class EffectEntry:
    """A configuration's effect on one figure against the state its blocks were sandwiched
    by ("Default"; in greedy "Default + kept ..."), over ``blocks`` triples; ``pair`` names
    the pair ("client>server") when the effect is one pair's, None for the headline; the
    effect as ``analysis.effect.Effect.to_dict`` stores it."""

    config: str
    figure: str
    against: str
    blocks: int
    effect: JsonObject
    pair: str | None = None

    @classmethod
    def from_dict(cls, o: JsonObject, where: str) -> EffectEntry:
        return cls(_t(o, "config", where), _t(o, "figure", where), _t(o, "against", where),
                   _i(o, "blocks", where), narrow.obj(o.get("effect"), f"{where}.effect"),
                   _ot(o, "pair", where))


@dataclass
class Combined:
    """The combination of every level that helped, measured as one more configuration
    against Default (its own family)."""

    config: str
    levels: dict[str, str] = field(default_factory=dict)
    effects: list[EffectEntry] = field(default_factory=list)

    @classmethod
    def from_dict(cls, o: JsonObject, where: str = "combined") -> Combined:
        return cls(_t(o, "config", where),
                   narrow.text_map(o.get("levels", {}), f"{where}.levels"),
                   [EffectEntry.from_dict(x, w) for x, w in _objs(o, "effects", where)])


@dataclass
class ImpactRow:
    """A row of the tuning papers' table: the configuration's label, the mean and standard
    deviation (ddof=1) of its blocks, their count, and the impact against Default in %
    (positive: an improvement; None for Default)."""

    configuration: str
    mean: float | None
    sd: float | None
    n: int
    impact_pct: float | None = None

    @classmethod
    def from_dict(cls, o: JsonObject, where: str) -> ImpactRow:
        return cls(_t(o, "configuration", where), _on(o, "mean", where), _on(o, "sd", where),
                   _i(o, "n", where), _on(o, "impact_pct", where))


@dataclass
class Impact:
    """The impact table of one figure (its unit and direction say how impact is signed:
    (Default - mean)/Default for a time, (mean - Default)/Default for a rate)."""

    figure: str
    unit: str
    higher_is_better: bool
    rows: list[ImpactRow] = field(default_factory=list)

    @classmethod
    def from_dict(cls, o: JsonObject, where: str) -> Impact:
        return cls(_t(o, "figure", where), _t(o, "unit", where),
                   _f(o, "higher_is_better", where),
                   [ImpactRow.from_dict(x, w) for x, w in _objs(o, "rows", where)])


@dataclass
class Drift:
    """How the Default blocks moved over the study: the least-squares slope of log(figure)
    on the block index (% per block, and over the study's blocks), the spread about that
    line (% sd) and how many Default blocks it was fitted to."""

    figure: str
    default_blocks: int
    slope_pct_per_block: float | None
    spread_pct: float | None
    over_study_pct: float | None

    @classmethod
    def from_dict(cls, o: JsonObject, where: str) -> Drift:
        return cls(_t(o, "figure", where), _i(o, "default_blocks", where),
                   _on(o, "slope_pct_per_block", where), _on(o, "spread_pct", where),
                   _on(o, "over_study_pct", where))


@dataclass
class Kept:
    """A level left applied at the end (``--keep best``)."""

    factor: str
    level: str

    @classmethod
    def from_dict(cls, o: JsonObject, where: str) -> Kept:
        return cls(_t(o, "factor", where), _t(o, "level", where))


@dataclass
class Method:
    """How the verdicts were reached, in words and figures: the statement, alpha, the
    family (figures judged at once) and its correction, the margin and the warm-up."""

    statement: str
    alpha: float = 0.05
    family: int = 1
    correction: str | None = None
    margin: float = 0.1
    warmup: int = 2

    @classmethod
    def from_dict(cls, o: JsonObject, where: str = "method") -> Method:
        return cls(_t(o, "statement", where), _n(o, "alpha", where), _i(o, "family", where),
                   _ot(o, "correction", where), _n(o, "margin", where),
                   _i(o, "warmup", where))


# --------------------------------------------------------------------------- the study


@dataclass
class Study:
    """A study document's body (see the module docstring)."""

    name: str
    design: str
    applied: bool
    status: str
    schedule: Schedule
    method: Method
    status_reason: str | None = None
    hosts: list[Host] = field(default_factory=list)
    pairs: list[tuple[str, str]] = field(default_factory=list)
    factors: list[FactorLevels] = field(default_factory=list)
    measurements: list[MeasurementSpec] = field(default_factory=list)
    configurations: list[Configuration] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)
    curves: list[Curve] = field(default_factory=list)
    effects: list[EffectEntry] = field(default_factory=list)
    combined: Combined | None = None
    main_effects: list[EffectEntry] = field(default_factory=list)
    impact: list[Impact] = field(default_factory=list)
    drift: list[Drift] = field(default_factory=list)
    verdicts: list[str] = field(default_factory=list)
    kept: list[Kept] = field(default_factory=list)
    persist_files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    # ------------------------------------------------------------------ look-ups

    def figures(self) -> list[Figure]:
        """Every figure of every measurement, in order (the headline figures)."""
        return [f for m in self.measurements for f in m.figures]

    def figure(self, key: str) -> Figure | None:
        return next((f for f in self.figures() if f.key == key), None)

    def configuration(self, cid: str) -> Configuration | None:
        return next((c for c in self.configurations if c.id == cid), None)

    def default_id(self) -> str:
        """The id of the Default configuration (role "default"; "c0" when none is)."""
        return next((c.id for c in self.configurations if c.role == "default"), DEFAULT_ID)

    def label_of(self, cid: str) -> str:
        found = self.configuration(cid)
        return found.label if found is not None else cid

    def factor(self, name: str) -> FactorLevels | None:
        return next((f for f in self.factors if f.name == name), None)

    # ------------------------------------------------------------------ the document

    def body(self) -> JsonObject:
        out = asdict(self)
        out["pairs"] = [[c, s] for c, s in self.pairs]
        out["curves"] = [c.body() for c in self.curves]
        for key in ("precision", "max_repeats"):  # written only with --precision
            if out["schedule"][key] is None:
                del out["schedule"][key]
        order = ("name", "design", "applied", "status", "status_reason", "hosts", "pairs",
                 "factors", "measurements", "configurations", "schedule", "blocks", "curves",
                 "effects", "combined", "main_effects", "impact", "drift", "verdicts", "kept",
                 "persist_files", "method", "warnings")
        return {k: out[k] for k in order}

    def to_document(self, meta: JsonObject) -> Document:
        return Document(KIND, self.body(), meta)

    @classmethod
    def from_body(cls, b: JsonObject) -> Study:
        """A body as data, read typed (every value narrowed)."""
        combined = _oo(b, "combined", "")
        return cls(
            narrow.text_at(b, "name"), narrow.text_at(b, "design"),
            narrow.flag_at(b, "applied"), narrow.text_at(b, "status"),
            Schedule.from_dict(narrow.obj(b.get("schedule"), "schedule")),
            Method.from_dict(narrow.obj(b.get("method"), "method")),
            narrow.opt_text_at(b, "status_reason"),
            [Host.from_dict(x, w) for x, w in _objs(b, "hosts", "")],
            _pairs(b),
            [FactorLevels.from_dict(x, w) for x, w in _objs(b, "factors", "")],
            [MeasurementSpec.from_dict(x, w) for x, w in _objs(b, "measurements", "")],
            [Configuration.from_dict(x, w) for x, w in _objs(b, "configurations", "")],
            [Block.from_dict(x, w) for x, w in _objs(b, "blocks", "")],
            [Curve.from_dict(x, w) for x, w in _objs(b, "curves", "")],
            [EffectEntry.from_dict(x, w) for x, w in _objs(b, "effects", "")],
            None if combined is None else Combined.from_dict(combined),
            [EffectEntry.from_dict(x, w) for x, w in _objs(b, "main_effects", "")],
            [Impact.from_dict(x, w) for x, w in _objs(b, "impact", "")],
            [Drift.from_dict(x, w) for x, w in _objs(b, "drift", "")],
            narrow.texts_or_empty(b, "verdicts"),
            [Kept.from_dict(x, w) for x, w in _objs(b, "kept", "")],
            narrow.texts_or_empty(b, "persist_files"), narrow.texts_or_empty(b, "warnings"))

    @classmethod
    def from_document(cls, doc: Document) -> Study:
        if doc.kind != KIND:
            raise DocumentError(f"a beoperf {doc.kind} document, not a {KIND} document")
        return cls.from_body(narrow.obj(doc.body))


def _pairs(b: JsonObject) -> list[tuple[str, str]]:
    out = []
    for i, p in enumerate(narrow.values(b.get("pairs", []), "pairs")):
        pair = narrow.texts(p, f"pairs[{i}]")
        if len(pair) != 2:
            raise DocumentError(f"pairs[{i}]: expected [client, server], found "
                                f"{len(pair)} names")
        out.append((pair[0], pair[1]))
    return out


def study(body: JsonObject, meta: JsonObject) -> Document:
    """A study document of its body as data (read back typed: checked as it is made)."""
    return Study.from_body(body).to_document(meta)


document.register(KIND, VERSION)

"""The documents of `beoperf tune`: the plan, the rollback snapshot and the measured
procedure (kinds "tune-plan", "rollback" and "procedure").

* tune-plan: the changes (key, check, interface, current and target value, how each is
  applied, read back and restored) in apply order, and the findings left as advice only.
* rollback: what ``--apply`` and ``--procedure`` save before they change anything, and
  ``--rollback`` restores: the host and network namespace it belongs to and, per change,
  key, check, interface, previous and target value and the restore action.  A rollback
  file is input that makes root write kernel settings: loading it here checks its shape
  only; ``beoperf.audit.tune`` then checks every key and value against the allow-list
  before anything is written.
* procedure: the measured tuning study (one row per configuration, with every repeat's
  figure, the test and the verdict).

Earlier files (before the envelope) are read through a converter each: "beoperf.tune-plan"
and "beoperf.rollback" version 2, "beoperf.tune-procedure" version 1.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from beoperf.model import document, narrow
from beoperf.model.document import Document, DocumentError, JsonObject, JsonValue

PLAN, ROLLBACK, PROCEDURE = "tune-plan", "rollback", "procedure"
PLAN_VERSION = ROLLBACK_VERSION = 3  # 2: "format": "beoperf.tune-plan"/"beoperf.rollback"
PROCEDURE_VERSION = 3  # 1: "format": "beoperf.tune-procedure"; 3: interleaved blocks
PLAN_LEGACY, ROLLBACK_LEGACY = "beoperf.tune-plan", "beoperf.rollback"
PROCEDURE_LEGACY = "beoperf.tune-procedure"

PLAN_KEYS = ("profile", "interface", "changes", "advice")
ROLLBACK_KEYS = ("host", "netns", "profile", "interface", "changes")
PROCEDURE_KEYS = ("profile", "interface", "peer", "port", "size", "repeats", "keep_all", "test",
                  "rows", "kept", "rollback_file")


def _kind(doc: Document, kind: str) -> JsonObject:
    """The body of ``doc``, which must be of ``kind``."""
    if doc.kind != kind:
        raise DocumentError(f"a beoperf {doc.kind} document, not a {kind} document")
    return narrow.obj(doc.body)


def action_text(action: JsonObject) -> str:
    """How a value is set or restored, in words: the command, or what is written where."""
    if "argv" in action:
        return " ".join(narrow.texts_or_empty(action, "argv"))
    return f"write {narrow.text_at(action, 'value')!r} to {narrow.text_at(action, 'write')}"


# --------------------------------------------------------------------------- tune-plan


@dataclass
class PlannedChange:
    """One change of a plan: the key, the check that owns it, its interface, the value now
    and the target, and how it is applied, read back and restored (actions as data:
    {"write": path, "value": v} or {"argv": [...]}; {"file": path} or {"argv", "field"})."""

    key: str
    check: str
    interface: str | None
    current: str
    target: str
    apply: JsonObject
    read: JsonObject
    restore: JsonObject

    @classmethod
    def from_dict(cls, o: JsonObject) -> PlannedChange:
        t, action = narrow.text_at, narrow.obj
        return cls(t(o, "key"), t(o, "check"), narrow.opt_text_at(o, "interface"),
                   t(o, "current"), t(o, "target"), action(o.get("apply"), "apply"),
                   action(o.get("read"), "read"), action(o.get("restore"), "restore"))


@dataclass
class PlannedAdvice:
    """A finding the plan leaves to a person: its value, verdict, why, and the command
    that would do it (None: none)."""

    key: str
    check: str
    value: JsonValue
    status: str
    reason: str
    command: str | None = None

    @classmethod
    def from_dict(cls, o: JsonObject) -> PlannedAdvice:
        t = narrow.text_at
        return cls(t(o, "key"), t(o, "check"), o.get("value"), t(o, "status"), t(o, "reason"),
                   narrow.opt_text_at(o, "command"))


@dataclass
class TunePlan:
    """A tune-plan document's body: the changes in apply order and the advice only."""

    profile: str
    interface: str | None
    changes: list[PlannedChange] = field(default_factory=list)
    advice: list[PlannedAdvice] = field(default_factory=list)

    def body(self) -> JsonObject:
        return asdict(self)

    def to_document(self, meta: JsonObject) -> Document:
        return Document(PLAN, self.body(), meta)

    @classmethod
    def from_document(cls, doc: Document) -> TunePlan:
        b = _kind(doc, PLAN)
        return cls(narrow.text_at(b, "profile"), narrow.opt_text_at(b, "interface"),
                   [PlannedChange.from_dict(c) for c in narrow.objects_or_empty(b, "changes")],
                   [PlannedAdvice.from_dict(a) for a in narrow.objects_or_empty(b, "advice")])


# --------------------------------------------------------------------------- rollback


@dataclass
class SavedChange:
    """One entry of a rollback snapshot: the key, its check and interface, the value before
    (what a restore writes), the value it was set to, and the restore action."""

    key: str
    check: str
    interface: str | None
    previous: str
    target: str
    restore: JsonObject

    @classmethod
    def from_dict(cls, o: JsonObject) -> SavedChange:
        t = narrow.text_at
        return cls(t(o, "key"), t(o, "check"), narrow.opt_text_at(o, "interface"),
                   t(o, "previous"), t(o, "target"), narrow.obj(o.get("restore"), "restore"))


@dataclass
class Rollback:
    """A rollback document's body: where it was written (host, network namespace inode)
    and the changes it restores.  Reading it typed checks types only; the restore checks
    every entry against the allow-list (beoperf.audit.tune)."""

    host: str
    netns: int | None
    profile: str
    interface: str | None
    changes: list[SavedChange] = field(default_factory=list)

    def body(self) -> JsonObject:
        return asdict(self)

    def to_document(self, meta: JsonObject) -> Document:
        return Document(ROLLBACK, self.body(), meta)

    @classmethod
    def from_document(cls, doc: Document) -> Rollback:
        b = _kind(doc, ROLLBACK)
        return cls(narrow.text_at(b, "host"), narrow.opt_int_at(b, "netns"),
                   narrow.text_at(b, "profile"), narrow.opt_text_at(b, "interface"),
                   [SavedChange.from_dict(c) for c in narrow.objects_or_empty(b, "changes")])


# --------------------------------------------------------------------------- procedure


@dataclass
class ProcedureRow:
    """One configuration of the measured procedure: its blocks' figures (us), their mean
    and variance, the impact against Default, the change it makes, the verdict and the
    decision, and the blocks of the state it was judged against with the effect (as
    beoperf.analysis.effect.Effect stores it; None before version 3)."""

    label: str
    repeats_us: list[float]
    mean_us: float = 0.0
    variance_us2: float = 0.0
    impact_pct: float | None = None  # (default mean - mean) / default mean, in %
    key: str | None = None
    previous: str | None = None
    target: str | None = None
    verdict: str = "baseline"  # baseline | kept | reverted | combined
    p: float | None = None
    change_pct: float | None = None  # against its neighbouring blocks, in %; + = slower
    decision: str | None = None
    same_as: str | None = None  # "Default": this configuration is Default's, not re-measured
    against: str | None = None  # the state of the neighbouring blocks
    against_us: list[float] | None = None  # those blocks, one more than repeats_us
    effect: JsonObject | None = None  # beoperf.analysis.effect.Effect as data

    @property
    def shown_label(self) -> str:
        """'Combined (= Default)' for a configuration that is another's."""
        return f"{self.label} (= {self.same_as})" if self.same_as else self.label

    @classmethod
    def from_dict(cls, o: JsonObject) -> ProcedureRow:
        t, num = narrow.opt_text_at, narrow.opt_num_at
        against = o.get("against_us")
        return cls(narrow.text_at(o, "label"), narrow.nums_or_empty(o, "repeats_us"),
                   narrow.num_at(o, "mean_us"), narrow.num_at(o, "variance_us2"),
                   num(o, "impact_pct"), t(o, "key"), t(o, "previous"), t(o, "target"),
                   narrow.text_at(o, "verdict"), num(o, "p"), num(o, "change_pct"),
                   t(o, "decision"), t(o, "same_as"), t(o, "against"),
                   None if against is None else narrow.nums_or_empty(o, "against_us"),
                   narrow.opt_obj_at(o, "effect"))


@dataclass
class Procedure:
    """A procedure document's body: the plan's profile and interface, the peer and how it
    was measured, the method (``test``: its keys differ between versions), the rows
    (Default, each change, Combined; none when there was nothing to change), the keys
    kept and the rollback file."""

    profile: str
    interface: str | None
    peer: str
    port: int
    size: int
    repeats: int
    keep_all: bool
    test: JsonObject
    rows: list[ProcedureRow]
    kept: list[str]
    rollback_file: str | None

    def body(self) -> JsonObject:
        return asdict(self)

    def to_document(self, meta: JsonObject) -> Document:
        return Document(PROCEDURE, self.body(), meta)

    @property
    def statement(self) -> str | None:
        """The method's line (None: a version 1 file, whose test is only data)."""
        found = self.test.get("statement")
        return found if isinstance(found, str) else None

    @classmethod
    def from_document(cls, doc: Document) -> Procedure:
        b = _kind(doc, PROCEDURE)
        integer = narrow.integer_at
        return cls(narrow.text_at(b, "profile"), narrow.opt_text_at(b, "interface"),
                   narrow.text_at(b, "peer"), integer(b, "port"), integer(b, "size"),
                   integer(b, "repeats"), narrow.flag_at(b, "keep_all"),
                   narrow.obj(b.get("test"), "test"),
                   [ProcedureRow.from_dict(r) for r in narrow.objects_or_empty(b, "rows")],
                   narrow.texts_or_empty(b, "kept"), narrow.opt_text_at(b, "rollback_file"))


def procedure(body: JsonObject, meta: JsonObject) -> Document:
    """A procedure document of its body as data (read back typed: checked as it is
    made)."""
    return Procedure.from_document(Document(PROCEDURE, body, meta)).to_document(meta)


def _legacy(doc: dict, fmt: str, version: int) -> None:
    """DocumentError unless ``doc`` is version ``version`` of the old format ``fmt``."""
    if doc.get("schema_version") != version:
        raise DocumentError(f"{fmt} schema version {doc.get('schema_version')!r} is not one "
                            f"this beoperf reads (it reads {version})")


def _envelope(kind: str, version: int, meta: dict, doc: dict, keys: tuple[str, ...]) -> dict:
    return {"format": document.FORMAT, "kind": kind, "schema_version": version, "meta": meta,
            "body": {k: doc[k] for k in keys if k in doc}}


def _host_meta(doc: dict) -> dict:
    return {"host": doc["host"]} if isinstance(doc.get("host"), str) else {}


def _plan_from_v2(doc: dict) -> dict:
    """A "beoperf.tune-plan" version 2 file as an envelope of version 3."""
    _legacy(doc, PLAN_LEGACY, 2)
    return _envelope(PLAN, PLAN_VERSION, _host_meta(doc), doc, PLAN_KEYS)


def _rollback_from_v2(doc: dict) -> dict:
    """A "beoperf.rollback" version 2 file as an envelope of version 3: host and network
    namespace stay in the body (what a restore is checked against); the time it was
    written becomes the meta's start and end."""
    _legacy(doc, ROLLBACK_LEGACY, 2)
    meta = _host_meta(doc)
    if isinstance(doc.get("created"), str):
        meta["utc_start"] = meta["utc_end"] = doc["created"]
    return _envelope(ROLLBACK, ROLLBACK_VERSION, meta, doc, ROLLBACK_KEYS)


def _procedure_from_v1(doc: dict) -> dict:
    """A "beoperf.tune-procedure" version 1 file as an envelope of version 2."""
    _legacy(doc, PROCEDURE_LEGACY, 1)
    return _envelope(PROCEDURE, 2, _host_meta(doc), doc, PROCEDURE_KEYS)


def _procedure_v2_to_v3(doc: dict) -> dict:
    """Version 3 (issue 25) measures each change in blocks between blocks of the state it
    is judged against: rows gain those blocks and the effect; a version 2 row (each
    configuration measured once, in a row) has neither, and its test stays as it was."""
    for row in doc["body"].get("rows", []):
        row.setdefault("against", None)
        row.setdefault("against_us", None)
        row.setdefault("effect", None)
    return doc


document.register(PLAN, PLAN_VERSION, legacy={PLAN_LEGACY: _plan_from_v2})
document.register(ROLLBACK, ROLLBACK_VERSION, legacy={ROLLBACK_LEGACY: _rollback_from_v2})
document.register(PROCEDURE, PROCEDURE_VERSION, upgrades={2: _procedure_v2_to_v3},
                  legacy={PROCEDURE_LEGACY: _procedure_from_v1})

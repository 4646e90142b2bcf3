"""One host's snapshot for a study (kind "study-rollback"): what the dead-man agent restores
when its lease lapses, and what ``beoperf study restore FILE`` restores by hand.

The body: the study's id, the host and network namespace it was written on, the interface
and the lease, and per factor its apply order and its snapshot (``saved``, a factor's own
JSON), plus the files of the study directory the snapshots refer to (saved firewall
rulesets) with their sha256.  Loading checks the shape only; every saved value is then
checked by its factor (``Factor.check_saved``, beoperf.factors) before anything is written
as root.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from beoperf.model import document, narrow
from beoperf.model.document import Document, DocumentError, JsonObject

STUDY_ROLLBACK = "study-rollback"
VERSION = 1
FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")  # a name in the study directory
SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass
class SavedFactor:
    """One factor's snapshot: its name, its apply order (restore reverses it) and what
    its ``snapshot`` returned."""

    factor: str
    order: int
    saved: JsonObject

    @classmethod
    def from_dict(cls, o: JsonObject) -> SavedFactor:
        return cls(narrow.text_at(o, "factor"), narrow.integer_at(o, "order"),
                   narrow.obj(o.get("saved"), "saved"))


@dataclass
class SavedFile:
    """A file of the study directory a snapshot refers to: its bare name and sha256."""

    name: str
    sha256: str

    @classmethod
    def from_dict(cls, o: JsonObject) -> SavedFile:
        name, digest = narrow.text_at(o, "name"), narrow.text_at(o, "sha256")
        if not FILE_NAME.fullmatch(name) or name in (".", ".."):
            raise DocumentError(f"files: {name[:80]!r} is not a file name in the study "
                                "directory")
        if not SHA256.fullmatch(digest):
            raise DocumentError(f"files: {name!r}: sha256 is not 64 hexadecimal digits")
        return cls(name, digest)


@dataclass
class StudyRollback:
    """A study-rollback document's body (see the module's docstring)."""

    study_id: str
    host: str
    netns: int | None
    interface: str | None
    lease_s: float
    entries: list[SavedFactor] = field(default_factory=list)
    files: list[SavedFile] = field(default_factory=list)

    def body(self) -> JsonObject:
        return asdict(self)

    def to_document(self, meta: JsonObject) -> Document:
        return Document(STUDY_ROLLBACK, self.body(), meta)

    def restore_order(self) -> list[SavedFactor]:
        """The entries in the order a restore goes: the reverse of the apply order."""
        return sorted(self.entries, key=lambda e: e.order, reverse=True)

    @classmethod
    def from_document(cls, doc: Document) -> StudyRollback:
        if doc.kind != STUDY_ROLLBACK:
            raise DocumentError(f"a beoperf {doc.kind} document, not a {STUDY_ROLLBACK} one")
        b = narrow.obj(doc.body)
        return cls(narrow.text_at(b, "study_id"), narrow.text_at(b, "host"),
                   narrow.opt_int_at(b, "netns"), narrow.opt_text_at(b, "interface"),
                   narrow.num_at(b, "lease_s"),
                   [SavedFactor.from_dict(e) for e in narrow.objects_or_empty(b, "entries")],
                   [SavedFile.from_dict(f) for f in narrow.objects_or_empty(b, "files")])


document.register(STUDY_ROLLBACK, VERSION)

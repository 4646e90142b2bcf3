"""The audit document (kind "audit"): one node's settings judged against a profile.

The body holds the profile's name, the interface looked at, the node's facts (kernel,
OS, CPU ...), one finding per fact (check, key, value, verdict, reason, and for a failed
one the command that changes it, how to persist it and the value that fixes it) and,
when the RTT to a peer was measured, the socket-buffer advice from the bandwidth-delay
product.  The envelope's meta says which beoperf wrote it: a fleet audit compares it
with its own version before it uses a node's answer.

Version 1 files (``"format": "beoperf.audit"``, before the envelope; written with and,
before issue 9, without the ``"beoperf"`` version key) are read through
:func:`_from_legacy_v1`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from beoperf.model import document
from beoperf.model.document import Document, DocumentError

KIND = "audit"
VERSION = 2  # 1: "format": "beoperf.audit", no envelope
LEGACY_FORMAT = "beoperf.audit"
STATUSES = ("pass", "warn", "fail", "unknown")
BODY_KEYS = ("profile", "interface", "host", "findings", "buffer_advice")


def as_text(value: Any) -> str:
    """A fact or rule value as the text ethtool/sysctl take: bools on/off, lists joined."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list | tuple):
        return " ".join(as_text(v) for v in value)
    return str(value)


def make(profile: str, interface: str | None, host: dict[str, Any],
         findings: list[dict[str, Any]], buffer_advice: dict[str, Any] | None,
         meta: dict[str, Any]) -> Document:
    """An audit document from its parts (findings and advice already as dicts)."""
    return Document(KIND, {"profile": profile, "interface": interface, "host": host,
                           "findings": findings, "buffer_advice": buffer_advice}, meta)


def writer_version(raw: Any) -> str | None:
    """The beoperf version that wrote a parsed audit document of any version (None when it
    does not say: version 1 files before issue 9, or not an audit document at all)."""
    if not isinstance(raw, dict):
        return None
    if raw.get("format") == document.FORMAT:
        meta = raw.get("meta")
        version = meta.get("beoperf") if isinstance(meta, dict) else None
    else:
        version = raw.get("beoperf")
    return version if isinstance(version, str) else None


def is_audit(raw: Any) -> bool:
    """Whether a parsed JSON value claims to be an audit document (of any version)."""
    if not isinstance(raw, dict):
        return False
    return raw.get("format") == LEGACY_FORMAT or (raw.get("format") == document.FORMAT
                                                  and raw.get("kind") == KIND)


def _from_legacy_v1(doc: dict) -> dict:
    """A version 1 file (everything at the top, the version under "beoperf" if at all) as
    an envelope of version 2; the meta gains the host name from the node's facts."""
    if doc.get("schema_version") != 1:
        raise DocumentError(f"{LEGACY_FORMAT} schema version {doc.get('schema_version')!r} "
                            "is not one this beoperf reads")
    meta: dict[str, Any] = {}
    host = doc.get("host")
    if isinstance(host, dict) and isinstance(host.get("hostname"), str):
        meta["host"] = host["hostname"]
    if "beoperf" in doc:
        meta["beoperf"] = doc["beoperf"]
    body = {k: doc[k] for k in BODY_KEYS if k in doc}
    body.setdefault("buffer_advice", None)
    return {"format": document.FORMAT, "kind": KIND, "schema_version": VERSION, "meta": meta,
            "body": body}


document.register(KIND, VERSION, legacy={LEGACY_FORMAT: _from_legacy_v1})


# --------------------------------------------------------------------------- typed body
# The renderers read these.  A finding's optional texts (command, persist, target) stay in
# ``texts`` as stored (absent, null or a text), so that body() gives the stored body back.

FINDING_TEXTS = ("command", "persist", "target")


@dataclass
class Finding:
    """One fact judged against the profile: check, key, value, verdict and reason; for a
    failing one, the command that changes it, how to persist it and the value that fixes
    it."""

    check: str
    key: str
    value: Any
    status: str  # pass | warn | fail | unknown
    reason: str
    texts: dict[str, str | None] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, f: dict[str, Any]) -> Finding:
        return cls(check=f["check"], key=f["key"], value=f["value"], status=f["status"],
                   reason=f["reason"], texts={k: f[k] for k in FINDING_TEXTS if k in f})

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "key": self.key, "value": self.value,
                "status": self.status, "reason": self.reason, **self.texts}

    @property
    def command(self) -> str | None:
        return self.texts.get("command")

    @property
    def persist(self) -> str | None:
        return self.texts.get("persist")

    @property
    def target(self) -> str | None:
        return self.texts.get("target")


@dataclass
class BufferAdvice:
    """Socket buffers from the bandwidth-delay product: the RTT measured, the buffer
    recommended, whether each current limit is enough, the arithmetic and the commands."""

    rate_bps: float
    rtt_us: float
    rtt_samples: int
    bdp_bytes: int
    recommended_bytes: int
    current: dict[str, Any]
    sufficient: dict[str, bool | None]
    arithmetic: list[str]
    commands: list[str]


@dataclass
class AuditRun:
    """An audit document's body, typed."""

    profile: str
    interface: str | None
    host: dict[str, Any]  # the node's facts: hostname, kernel, os, cpu_model ...
    findings: list[Finding]
    buffer_advice: BufferAdvice | None = None

    def body(self) -> dict[str, Any]:
        return {"profile": self.profile, "interface": self.interface, "host": self.host,
                "findings": [f.to_dict() for f in self.findings],
                "buffer_advice": None if self.buffer_advice is None
                else dict(vars(self.buffer_advice))}

    def to_document(self, meta: dict[str, Any]) -> Document:
        return Document(KIND, self.body(), meta)

    @classmethod
    def from_document(cls, doc: Document) -> AuditRun:
        """The typed body of a (schema-valid) audit document."""
        if doc.kind != KIND:
            raise DocumentError(f"a beoperf {doc.kind} document, not an audit")
        b = doc.body
        advice = b.get("buffer_advice")
        return cls(profile=b["profile"], interface=b["interface"], host=b["host"],
                   findings=[Finding.from_dict(f) for f in b["findings"]],
                   buffer_advice=BufferAdvice(**advice) if advice else None)

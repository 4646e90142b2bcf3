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

from beoperf.model import document, narrow
from beoperf.model.document import Document, DocumentError, JsonObject, JsonValue

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


def make(profile: str, interface: str | None, host: JsonObject, findings: list[JsonObject],
         buffer_advice: JsonObject | None, meta: JsonObject) -> Document:
    """An audit document from its parts as stored (each finding and the advice checked)."""
    return AuditRun(profile, interface, host, [Finding.from_dict(f) for f in findings],
                    None if buffer_advice is None else BufferAdvice.from_dict(buffer_advice)
                    ).to_document(meta)


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
    meta: JsonObject = {}
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
# Each value is narrowed as it is read: a crafted file meets one DocumentError line.

FINDING_TEXTS = ("command", "persist", "target")


@dataclass
class Finding:
    """One fact judged against the profile: check, key, value, verdict and reason; for a
    failing one, the command that changes it, how to persist it and the value that fixes
    it."""

    check: str
    key: str
    value: JsonValue  # as the fact was read: a number, a text, on/off, a list ...
    status: str  # pass | warn | fail | unknown
    reason: str
    texts: dict[str, str | None] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, f: JsonObject) -> Finding:
        where = f"finding {f.get('key')!r}"
        return cls(check=narrow.text(f.get("check"), f"{where} check"),
                   key=narrow.text(f.get("key"), "finding key"), value=f.get("value"),
                   status=narrow.text(f.get("status"), f"{where} status"),
                   reason=narrow.text(f.get("reason"), f"{where} reason"),
                   texts={k: narrow.opt_text(f[k], f"{where} {k}")
                          for k in FINDING_TEXTS if k in f})

    def to_dict(self) -> JsonObject:
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
    current: dict[str, str | None]  # sysctl -> its value (None: unreadable)
    sufficient: dict[str, bool | None]
    arithmetic: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)

    def to_dict(self) -> JsonObject:
        return {"rate_bps": self.rate_bps, "rtt_us": self.rtt_us,
                "rtt_samples": self.rtt_samples, "bdp_bytes": self.bdp_bytes,
                "recommended_bytes": self.recommended_bytes, "current": dict(self.current),
                "sufficient": dict(self.sufficient), "arithmetic": list(self.arithmetic),
                "commands": list(self.commands)}

    @classmethod
    def from_dict(cls, a: JsonObject) -> BufferAdvice:
        current = narrow.obj(a.get("current"), "buffer_advice current")
        sufficient = narrow.obj(a.get("sufficient"), "buffer_advice sufficient")
        return cls(rate_bps=narrow.num(a.get("rate_bps"), "buffer_advice rate_bps"),
                   rtt_us=narrow.num(a.get("rtt_us"), "buffer_advice rtt_us"),
                   rtt_samples=narrow.integer(a.get("rtt_samples"), "buffer_advice rtt_samples"),
                   bdp_bytes=narrow.integer(a.get("bdp_bytes"), "buffer_advice bdp_bytes"),
                   recommended_bytes=narrow.integer(a.get("recommended_bytes"),
                                          "buffer_advice recommended_bytes"),
                   current={k: narrow.opt_text(v, f"buffer_advice current {k}")
                            for k, v in current.items()},
                   sufficient={k: narrow.opt_flag(v, f"buffer_advice sufficient {k}")
                               for k, v in sufficient.items()},
                   arithmetic=narrow.texts(a.get("arithmetic"), "buffer_advice arithmetic"),
                   commands=narrow.texts(a.get("commands"), "buffer_advice commands"))


@dataclass
class AuditRun:
    """An audit document's body, typed."""

    profile: str
    interface: str | None
    host: JsonObject  # the node's facts: hostname, kernel, os, cpu_model ...
    findings: list[Finding]
    buffer_advice: BufferAdvice | None = None

    def body(self) -> JsonObject:
        return {"profile": self.profile, "interface": self.interface, "host": self.host,
                "findings": [f.to_dict() for f in self.findings],
                "buffer_advice": None if self.buffer_advice is None
                else self.buffer_advice.to_dict()}

    def to_document(self, meta: JsonObject) -> Document:
        return Document(KIND, self.body(), meta)

    @property
    def hostname(self) -> str | None:
        name = self.host.get("hostname")
        return name if isinstance(name, str) else None

    @classmethod
    def from_document(cls, doc: Document) -> AuditRun:
        """The typed body of a (schema-valid) audit document."""
        if doc.kind != KIND:
            raise DocumentError(f"a beoperf {doc.kind} document, not an audit")
        b: JsonObject = doc.body
        advice = b.get("buffer_advice")
        return cls(profile=narrow.text(b.get("profile"), "profile"),
                   interface=narrow.opt_text(b.get("interface"), "interface"),
                   host=narrow.obj(b.get("host") or {}, "host"),
                   findings=[Finding.from_dict(narrow.obj(f, "findings"))
                             for f in narrow.values(b.get("findings"), "findings")],
                   buffer_advice=BufferAdvice.from_dict(narrow.obj(advice, "buffer_advice"))
                   if advice else None)

"""The one document envelope every stored result uses, and the loader that reads any of them.

    {"format": "beoperf", "kind": "pingpong", "schema_version": 2,
     "meta": {"host": "node01", "beoperf": "0.1.0", "command_line": [...],
              "utc_start": "...", "utc_end": "...", ...},
     "body": {...}}

Each kind registers itself (:func:`register`) with its current version, a JSON Schema
(``model/schemas/<kind>.json``, shipped in the package), an upgrade from every earlier
version and, for files written before the envelope existed, a converter from their old
``"format"`` string ("beoperf.pingpong", "beoperf.rollback", ...).  :func:`from_json`
reads any of them: it finds the kind, upgrades step by step to the current version and
validates against the schema, so a reader never meets an old shape.  As pyperf keeps
reading its old files, every file an earlier beoperf wrote still loads
(tests/fixtures/documents/ keeps one of each).

This layer is pure data: it imports nothing of beoperf but safeio.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, TypeAlias

from beoperf import __version__, safeio

FORMAT = "beoperf"

# The JSON a document holds, as mypy sees it.  A typed model's body() returns a JsonObject
# (mypy checks that every value is JSON); a reader of a JsonObject narrows each value it
# takes (isinstance) instead of trusting it, so a crafted file meets a check, not a crash.
JsonValue: TypeAlias = (None | bool | int | float | str | list["JsonValue"]
                        | dict[str, "JsonValue"])
JsonObject: TypeAlias = dict[str, JsonValue]

Upgrade = Callable[[dict], dict]


class DocumentError(ValueError):
    """A file or object that is not a beoperf document of a kind and version this beoperf
    reads; the message names the source and what is wrong (one line)."""


@dataclass(frozen=True)
class Kind:
    """A registered document kind: its current version, its upgrades and legacy formats."""

    name: str
    version: int
    upgrades: dict[int, Upgrade] = field(default_factory=dict)  # v -> makes v + 1
    legacy: dict[str, Upgrade] = field(default_factory=dict)  # old "format" -> envelope


KINDS: dict[str, Kind] = {}
_LEGACY: dict[str, str] = {}  # old "format" string -> kind


def register(name: str, version: int, *, upgrades: dict[int, Upgrade] | None = None,
             legacy: dict[str, Upgrade] | None = None) -> Kind:
    """Make a kind known to the loader (each kind's module calls this once)."""
    kind = Kind(name, version, dict(upgrades or {}), dict(legacy or {}))
    missing = [v for v in range(1, version) if v not in kind.upgrades]
    if missing and not kind.legacy:
        raise ValueError(f"kind {name}: no upgrade from version(s) {missing}")
    KINDS[name] = kind
    for old in kind.legacy:
        _LEGACY[old] = name
    return kind


@dataclass
class Document:
    """One result: what it is (kind, version), how it was made (meta), and what it says."""

    kind: str
    body: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)
    schema_version: int = 0  # 0: the kind's current version

    def __post_init__(self) -> None:
        if not self.schema_version:
            self.schema_version = KINDS[self.kind].version

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "kind": self.kind, "schema_version": self.schema_version,
                "meta": self.meta, "body": self.body}

    def dumps(self) -> str:
        """The JSON text (NaN and infinities refused, as the loader refuses them)."""
        return safeio.dump_json(self.to_json())

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write atomically, never through a link (safeio.write_atomic)."""
        safeio.write_atomic(path, self.dumps())


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def make_meta(command_line: list[str] | None = None, *, utc_start: str | None = None,
              utc_end: str | None = None, **extra: Any) -> dict[str, Any]:
    """The envelope's meta: host, beoperf version, command line, UTC start and end."""
    now = utc_now()
    return {"host": platform.node(), "beoperf": __version__,
            "command_line": list(command_line or []), "utc_start": utc_start or now,
            "utc_end": utc_end or now, **extra}


# --------------------------------------------------------------------------- reading


def _kind_of(doc: dict, source: str) -> tuple[Kind, dict]:
    """The registered kind of a parsed document, and the document as an envelope."""
    fmt = doc.get("format")
    if fmt == FORMAT:
        name = doc.get("kind")
        if not isinstance(name, str) or name not in KINDS:
            raise DocumentError(f"{source}: beoperf document of unknown kind {name!r} "
                                f"(this beoperf reads {', '.join(sorted(KINDS))})")
        return KINDS[name], doc
    if isinstance(fmt, str) and fmt in _LEGACY:  # (a string: never an unhashable value)
        kind = KINDS[_LEGACY[fmt]]
        try:
            return kind, kind.legacy[fmt](copy.deepcopy(doc))
        except DocumentError as exc:
            raise DocumentError(f"{source}: {exc}") from None
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise DocumentError(f"{source}: malformed {fmt} file ({type(exc).__name__}: "
                                f"{exc})") from None
    found = f"format {fmt!r}" if "format" in doc else "no \"format\" field"
    raise DocumentError(f"{source}: JSON, but not a beoperf document ({found})")


def _upgraded(kind: Kind, doc: dict, source: str) -> dict:
    version = doc.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise DocumentError(f"{source}: bad schema_version {version!r}")
    if version > kind.version:
        raise DocumentError(f"{source}: {kind.name} schema version {version} is newer than "
                            f"this beoperf reads ({kind.version}); upgrade beoperf")
    if version < kind.version:
        doc = copy.deepcopy(doc)  # the caller's object stays as it was
    while version < kind.version:
        step = kind.upgrades.get(version)
        if step is None:
            raise DocumentError(f"{source}: {kind.name} schema version {version} cannot be "
                                "read by this beoperf")
        try:
            doc = step(doc)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise DocumentError(f"{source}: malformed {kind.name} version {version} "
                                f"({type(exc).__name__}: {exc})") from None
        version += 1
        doc["schema_version"] = version
    return doc


def from_json(doc: Any, source: str = "document") -> Document:
    """A parsed JSON object as a current, schema-valid Document; DocumentError otherwise."""
    if not isinstance(doc, dict):
        raise DocumentError(f"{source}: JSON, but not a beoperf document (not an object)")
    kind, envelope = _kind_of(doc, source)
    envelope = _upgraded(kind, envelope, source)
    validate(kind.name, envelope, source)
    return Document(kind.name, envelope["body"], envelope["meta"], envelope["schema_version"])


def load(path: str | os.PathLike[str], limit: int | None = None,
         what: str = "a beoperf document") -> Document:
    """Read, bound, parse, upgrade and validate a document file; DocumentError otherwise."""
    try:
        doc = safeio.load_json(path, limit or safeio.LIMITS["result"], what)
    except safeio.FileInputError as exc:
        raise DocumentError(str(exc)) from None
    return from_json(doc, os.fspath(path))


# --------------------------------------------------------------------------- schemas


@functools.cache
def schema(kind: str) -> dict:
    """The JSON Schema of a kind's current version (model/schemas/<kind>.json)."""
    text = resources.files("beoperf.model").joinpath("schemas", f"{kind}.json").read_text(
        encoding="utf-8")
    return json.loads(text)


@functools.cache
def _validator(kind: str) -> Any:
    import jsonschema

    cls = jsonschema.validators.validator_for(schema(kind))
    return cls(schema(kind))


def validate(kind: str, doc: dict, source: str = "document") -> None:
    """DocumentError naming the first place where ``doc`` breaks the kind's schema."""
    error = next(iter(_validator(kind).iter_errors(doc)), None)
    if error is None:
        return
    where = _printable("/".join(str(p) for p in error.absolute_path)[:200]) or "(top)"
    message = _printable(error.message if len(error.message) <= 200
                         else error.message[:197] + "...")
    raise DocumentError(f"{source}: not a valid {kind} document at {where}: {message}")


def _printable(text: str) -> str:
    """Text from a file, safe for a terminal: control characters shown as '?'."""
    return "".join(c if c.isprintable() else "?" for c in text)

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

from typing import Any

from beoperf.model import document
from beoperf.model.document import Document, DocumentError

PLAN, ROLLBACK, PROCEDURE = "tune-plan", "rollback", "procedure"
PLAN_VERSION = ROLLBACK_VERSION = 3  # 2: "format": "beoperf.tune-plan"/"beoperf.rollback"
PROCEDURE_VERSION = 3  # 1: "format": "beoperf.tune-procedure"; 3: interleaved blocks
PLAN_LEGACY, ROLLBACK_LEGACY = "beoperf.tune-plan", "beoperf.rollback"
PROCEDURE_LEGACY = "beoperf.tune-procedure"

PLAN_KEYS = ("profile", "interface", "changes", "advice")
ROLLBACK_KEYS = ("host", "netns", "profile", "interface", "changes")
PROCEDURE_KEYS = ("profile", "interface", "peer", "port", "size", "repeats", "keep_all", "test",
                  "rows", "kept", "rollback_file")


def plan(profile: str, interface: str | None, changes: list[dict], advice: list[dict],
         meta: dict[str, Any]) -> Document:
    return Document(PLAN, {"profile": profile, "interface": interface, "changes": changes,
                           "advice": advice}, meta)


def rollback(host: str, netns: int | None, profile: str, interface: str | None,
             changes: list[dict], meta: dict[str, Any]) -> Document:
    """A rollback snapshot; ``changes`` are entries {key, check, interface, previous,
    target, restore}."""
    return Document(ROLLBACK, {"host": host, "netns": netns, "profile": profile,
                               "interface": interface, "changes": changes}, meta)


def procedure(body: dict[str, Any], meta: dict[str, Any]) -> Document:
    return Document(PROCEDURE, body, meta)


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

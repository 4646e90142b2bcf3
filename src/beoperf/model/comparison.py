"""The comparison document (kind "comparison"): runs side by side against a baseline.

The body holds the baseline's label, the smallest change called significant, the test
as data, and one row per run (the figures, the changes, the two verdicts and the
throughput collapses; see beoperf.analysis.compare).  Version 1 is the first in the
envelope; `beoperf compare --format json` wrote {"format": "beoperf.compare", ...} before,
read through :func:`_from_legacy`.
"""

from __future__ import annotations

from beoperf.model import document

KIND = "comparison"
VERSION = 1
LEGACY_FORMAT = "beoperf.compare"


def _from_legacy(doc: dict) -> dict:
    test = doc.get("test") or {}
    body = {"baseline": doc["baseline"], "min_change": test.get("min_change_pct", 2.0) / 100,
            "test": test, "rows": doc["rows"]}
    return {"format": document.FORMAT, "kind": KIND, "schema_version": VERSION, "meta": {},
            "body": body}


document.register(KIND, VERSION, legacy={LEGACY_FORMAT: _from_legacy})

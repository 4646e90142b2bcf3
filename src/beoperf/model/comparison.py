"""The comparison document (kind "comparison"): configurations side by side against a
baseline.

The body holds the baseline's label, the margin within which a change counts as none, the
method as data, and one row per configuration (its figures, the verdicts on latency, peak
and every common size with their intervals, and the throughput collapses; see
beoperf.analysis.compare and beoperf.analysis.effect).

Version 2 (issue 25) judges each run as one replicate with intervals of the ratio;
version 1 tested the trials inside each run (Mann-Whitney U), which called two runs of the
same setup "significant" whenever the machine drifted between them: its verdicts are not
carried over (:func:`_v1_to_v2` keeps the changes and says why there is no verdict).
`beoperf compare --format json` wrote {"format": "beoperf.compare", ...} before the
envelope, read through :func:`_from_legacy`.  The typed body is
beoperf.analysis.compare.Comparison (its rows hold the analysis' effects).
"""

from __future__ import annotations

from beoperf.model import document
from beoperf.model.document import JsonObject

KIND = "comparison"
# 2: runs as replicates (issue 25); 3: a row's efficiency (link_bps, peak_of_link,
# peak_of_goodput, efficiency_unknown), optional
VERSION = 3
LEGACY_FORMAT = "beoperf.compare"
OLD_TEST = "an earlier beoperf's verdict, dropped: compare the runs again"
WHY = ("it tested the trials inside each run (Mann-Whitney U), which a machine that drifts "
       "between runs makes significant for two runs of the same setup")


def _from_legacy(doc: dict) -> dict:
    test = doc.get("test") or {}
    body = {"baseline": doc["baseline"], "min_change": test.get("min_change_pct", 2.0) / 100,
            "test": test, "rows": doc["rows"]}
    return {"format": document.FORMAT, "kind": KIND, "schema_version": 1, "meta": {},
            "body": body}


def _old_test(test: dict | None, rate: bool) -> JsonObject | None:
    if test is None:
        return None
    change = test.get("change_pct")
    ratio = None if change is None else 1.0 + float(change) / 100.0
    return {"verdict": "cannot tell", "ratio": ratio if ratio and ratio > 0 else None,
            "low": None, "high": None, "p": None, "confidence": None, "family": 1,
            "higher_is_better": rate, "margin": 0.10, "runs": 1, "baseline_runs": 1,
            "within_pct": None, "between_pct": None, "spread_source": None, "df": None,
            "reason": OLD_TEST}


def _v1_to_v2(doc: dict) -> dict:
    """Rows gain the run count, the sizes compared and their verdicts (none), and the
    tests become effects without a verdict (OLD_TEST)."""
    body = doc["body"]
    rows = []
    for r in body.get("rows", []):
        r = dict(r)
        lat, peak = r.get("latency_test") or {}, r.get("peak_test") or {}
        r.update(runs=1, mode=None, differs=[],
                 peak_test_size=peak.get("size", r.get("peak_size")),
                 peak_baseline_size=peak.get("baseline_size"),
                 latency_size=lat.get("size", r.get("latency_size")), sizes_compared=0,
                 size_verdicts=None, size_effects=[],
                 latency_test=_old_test(r.get("latency_test"), False),
                 peak_test=_old_test(r.get("peak_test"), True))
        rows.append(r)
    body.pop("min_change", None)  # anything else stays, for the schema to judge
    body.update(margin=0.10, rows=rows, test={
        "name": "Mann-Whitney U over trials (version 1)",
        "statement": f"Made by an earlier beoperf whose verdicts are dropped: {WHY}; "
                     "compare the runs again."})
    return doc


def _v2_to_v3(doc: dict) -> dict:
    """Version 3 adds a row's optional efficiency (the peak against the link); a version 2
    row has none, which reads as not known."""
    return doc


document.register(KIND, VERSION, upgrades={1: _v1_to_v2, 2: _v2_to_v3},
                  legacy={LEGACY_FORMAT: _from_legacy})

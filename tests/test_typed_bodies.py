"""Typed bodies of the comparison, tuning, monitor and prediction documents: each reads
every field of a stored body and gives the same body back, and a value of the wrong type
is one DocumentError, not a TypeError in a renderer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from beoperf import model
from beoperf.model.document import Document, DocumentError

FIXTURES = Path(__file__).parent / "fixtures" / "documents"


def test_a_comparison_read_typed_gives_back_the_stored_body():
    from beoperf.analysis.compare import Comparison

    stored = model.load(FIXTURES / "comparison-v1-before-issue25.json")
    typed = Comparison.from_document(stored)
    assert typed.body() == stored.body
    assert json.dumps(typed.body(), sort_keys=True) == json.dumps(stored.body, sort_keys=True)
    assert [r.label for r in typed.rows] == [r["label"] for r in stored.body["rows"]]
    assert typed.statement == stored.body["test"]["statement"]


def test_a_comparison_with_a_value_of_the_wrong_type_is_one_document_error():
    from beoperf.analysis.compare import Comparison

    stored = model.load(FIXTURES / "comparison-v1-before-issue25.json")
    body = json.loads(json.dumps(stored.body))
    body["rows"][0]["peak_size"] = "big"
    with pytest.raises(DocumentError, match="'peak_size' is not an integer"):
        Comparison.from_document(Document("comparison", body, {}))
    body["rows"][0]["peak_size"] = 1
    body["rows"][-1]["latency_test"] = {"verdict": 1}
    with pytest.raises(DocumentError, match="'verdict' is not a string"):
        Comparison.from_document(Document("comparison", body, {}))
    with pytest.raises(DocumentError, match="not a comparison"):
        Comparison.from_document(Document("pingpong", {}, {}))

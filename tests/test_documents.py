"""The document envelope: every kind loads from every earlier version, and what beoperf
writes validates against its schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from beoperf import model
from beoperf.model import document
from beoperf.model.document import Document, DocumentError

FIXTURES = Path(__file__).parent / "fixtures" / "documents"


def fixture_kind(path: Path) -> str:
    """The kind a fixture file holds, from its name (KIND-vN-...)."""
    return path.name.split("-v")[0]


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.json")), ids=lambda p: p.name)
def test_every_earlier_file_loads_as_a_current_document(path):
    kind = fixture_kind(path)
    doc = model.load(path)
    assert doc.kind == kind and doc.schema_version == model.KINDS[kind].version
    document.validate(kind, doc.to_json(), str(path))
    assert model.from_json(json.loads(doc.dumps())).to_json() == doc.to_json()


def test_every_kind_has_a_schema_and_fixtures_exist():
    for kind in model.KINDS:
        assert document.schema(kind)["properties"]["kind"]["const"] == kind
    kinds = {fixture_kind(p) for p in FIXTURES.glob("*.json")}
    assert kinds <= set(model.KINDS), "a fixture of a kind no module registers"
    assert kinds >= {"pingpong", "audit", "fleet-audit", "tune-plan", "rollback", "procedure",
                     "monitor-report"}, "every kind written before the envelope has a fixture"


def test_a_newer_version_is_refused_with_the_advice_to_upgrade(tmp_path):
    doc = json.loads((FIXTURES / "pingpong-v1-after-issue9.json").read_text())
    new = model.load(FIXTURES / "pingpong-v1-after-issue9.json").to_json()
    new["schema_version"] = 99
    path = tmp_path / "new.json"
    path.write_text(json.dumps(new))
    with pytest.raises(DocumentError, match="newer than this beoperf reads.*upgrade beoperf"):
        model.load(path)
    assert doc["format"] == "beoperf.pingpong"


def test_make_meta_and_round_trip():
    meta = model.make_meta(["beoperf", "x"], utc_start="2026-01-01T00:00:00Z", extra=1)
    assert {"host", "beoperf", "command_line", "utc_start", "utc_end"} <= set(meta)
    assert meta["extra"] == 1
    doc = Document("comparison", {"baseline": "a", "margin": 0.1, "test": {}, "rows": []},
                   meta)
    assert model.from_json(json.loads(doc.dumps())).body == doc.body


def test_upgrades_run_step_by_step():
    """A kind at version 3 reads version 1 through both upgrades, in order."""
    seen = []

    def step(n):
        def upgrade(d):
            seen.append(n)
            d["body"][f"v{n + 1}"] = True
            return d
        return upgrade

    document.register("test-kind", 3, upgrades={1: step(1), 2: step(2)})
    try:
        old = {"format": "beoperf", "kind": "test-kind", "schema_version": 1, "meta": {},
               "body": {}}
        kind, envelope = document._kind_of(old, "x")
        up = document._upgraded(kind, envelope, "x")
        assert seen == [1, 2] and up["schema_version"] == 3
        assert up["body"] == {"v2": True, "v3": True}
    finally:
        del document.KINDS["test-kind"]


@pytest.mark.parametrize("kind", [[], {}, 3, None, "nope"])
def test_a_kind_that_is_not_a_known_name_is_one_error(kind):
    with pytest.raises(DocumentError, match="unknown kind"):
        model.from_json({"format": "beoperf", "kind": kind, "schema_version": 1})


def test_schema_errors_never_carry_control_characters():
    doc = {"format": "beoperf", "kind": "comparison", "schema_version": 1, "meta": {},
           "body": {"baseline": "a", "min_change": 0.02, "test": {}, "rows": [],
                    "\x1b[2Jevil\n": 1}}
    with pytest.raises(DocumentError) as err:
        model.from_json(doc, "x.json")
    assert "\x1b" not in str(err.value) and "\n" not in str(err.value)

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


NEGATIVE = FIXTURES / "pingpong-v3-negative-bounds-issue25.json"


def test_a_negative_bound_written_before_version_4_loads_as_no_interval_with_the_reason():
    """The crafted version 3 MPICH --sync run (tests/fixtures/README.md): 13 sizes whose
    linear widening crossed zero, among them the two intervals of issue 25
    ([-0.097, 5644] and [-295, 10365] us).  Upgraded, each has no interval and says why;
    the other sizes keep theirs, with their within-run part; none of it, nor the text
    summary, shows a bound at or below zero."""
    old = json.loads(NEGATIVE.read_text())
    assert old["schema_version"] == 3
    crossed = [s["size"] for s in old["body"]["sizes"] if s["ci95_us"][0] <= 0]
    assert len(crossed) == 13
    doc = model.load(NEGATIVE)
    sizes = {s["size"]: s for s in doc.body["sizes"]}
    for size in crossed:
        s = sizes[size]
        assert s["ci95_us"] is None and s["ci95_halfwidth_us"] is None
        assert s["ci95_relative"] is None and s.get("ci95_within_run_us") is None
        assert "written by an earlier beoperf, reached zero or below" in s["interval_note"]
        assert s["ci95_median_us"][0] > 0  # the order statistics were fine: kept
    assert "[-0.097, 5644] us" in sizes[512]["interval_note"]
    assert "[-295, 1.036e+04] us" in sizes[32768]["interval_note"]
    kept = [s for s in doc.body["sizes"] if s["size"] not in crossed]
    assert kept and all(s["ci95_us"][0] > 0 and s.get("interval_note") is None for s in kept)
    assert all(s["ci95_within_run_us"] == s["ci95_us"] for s in kept)
    from beoperf.report import render

    text = render(doc, "text")
    assert "no interval (ci95_us [-0.097, 5644] us" in text  # the latency: 512 B
    html = render(doc, "html")
    assert "-295" not in html and html.count("none: the file&#x27;s bound was &lt;= 0") == 13


def test_no_schema_admits_a_bound_at_or_below_zero():
    """Every interval of a time or a rate the schemas describe has both bounds above 0, so
    a document with one cannot validate (tests/helpers.checked validates what every test
    writes)."""
    doc = model.load(NEGATIVE).to_json()
    size = next(s for s in doc["body"]["sizes"] if s["ci95_us"] is not None)
    for name in ("ci95_us", "ci95_median_us", "ci95_within_run_us"):
        bad = json.loads(json.dumps(doc))
        target = next(s for s in bad["body"]["sizes"] if s["size"] == size["size"])
        target[name] = [0.0, 5.0]
        with pytest.raises(DocumentError, match=f"{name}/0"):
            document.validate("pingpong", bad)


@pytest.mark.parametrize("name", ["cluster-ring-v1-issue14.json", "cluster-pairs-v1-issue14.json",
                                  "cluster-mbw-v1-issue14.json"])
def test_a_cluster_interval_at_or_below_zero_written_by_version_1_is_dropped_with_the_reason(
        name):
    """The cluster's MPI tests store order-statistic intervals (positive as trials are);
    version 2's schema says so, and a version 1 file with a bound at or below zero (made
    here by hand from the real fixture) loads with that interval dropped and noted."""
    old = json.loads((FIXTURES / name).read_text())
    spoilt = []

    def spoil(node):
        if isinstance(node, dict):
            if isinstance(node.get("ci_s"), list) and not spoilt:
                node["ci_s"][0] = -1e-6
                spoilt.append(node)
            if node.get("ci_low") is not None and not spoilt:
                node["ci_low"] = 0.0
                spoilt.append(node)
            for value in node.values():
                spoil(value)
        elif isinstance(node, list):
            for item in node:
                spoil(item)

    spoil(old["body"])
    assert len(spoilt) == 1
    doc = model.from_json(old, name)
    assert doc.schema_version == 2
    text = json.dumps(doc.body)
    assert text.count("reached zero or below") == 1
    intact = model.load(FIXTURES / name)
    assert "reached zero or below" not in json.dumps(intact.body)
    bad = intact.to_json()
    spoilt.clear()
    spoil(bad["body"])
    with pytest.raises(DocumentError, match="exclusiveMinimum|less than or equal to"):
        document.validate(doc.kind, bad)


def test_a_node_body_read_typed_gives_back_the_stored_body():
    """NodeRun reads every field of a node document (the fixture and one written now) and
    body() gives the stored body back unchanged: renderers read fields, nothing is lost."""
    from beoperf.model.node import NodeRun, body, metric

    stored = model.load(FIXTURES / "node-v1-issue13.json")
    run = NodeRun.from_document(stored)
    assert run.body() == stored.body
    assert [m.id for m in run.metrics] == [m["id"] for m in stored.body["metrics"]]
    fresh = body({"cpus": 2}, {"kernels": {"drops": []}},
                 [metric("kernels", "daxpy", "MFLOP/s", [1.0, 3.0], params={"length": 1024},
                         level="L1", median=2.0)], repeat=2)
    typed = NodeRun.from_document(Document("node", fresh, document.make_meta(["beoperf"])))
    m = typed.metrics[0]
    assert (m.id, m.length, m.level, m.central()) == ("kernels.daxpy.n1024", 1024, "L1",
                                                      ("median", 2.0))
    assert typed.body() == fresh and list(fresh["metrics"][0]) == list(m.to_dict())
    with pytest.raises(DocumentError, match="not a node run"):
        NodeRun.from_document(stored.__class__("node-fleet", {}, {}))


def test_mypy_refuses_a_wrong_field_name_on_a_typed_body(tmp_path):
    """The type check CI runs (pyproject.toml's [tool.mypy]) catches a misspelt field of a
    document body, and passes the right one."""
    import os
    import subprocess
    import sys

    pytest.importorskip("mypy")
    root = Path(__file__).resolve().parent.parent
    probe = tmp_path / "probe.py"
    probe.write_text("from beoperf.model.node import NodeRun\n\n\n"
                     "def right(run: NodeRun) -> float:\n    return run.metrics[0].mean\n\n\n"
                     "def wrong(run: NodeRun) -> float:\n    return run.metrics[0].meen\n")
    res = subprocess.run([sys.executable, "-m", "mypy", "--config-file",
                          str(root / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache"),
                          str(probe)], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "MYPYPATH": str(root / "src")}, cwd=tmp_path)
    errors = [line for line in res.stdout.splitlines() if ": error:" in line]
    assert res.returncode == 1 and len(errors) == 1, res.stdout
    assert 'probe.py:9: error: "Metric" has no attribute "meen"' in errors[0]


@pytest.mark.parametrize("name", ["cluster-ring-v1-issue14.json", "cluster-pairs-v1-issue14.json",
                                  "cluster-mbw-v1-issue14.json",
                                  "cluster-p2p-v1-issue29.json",
                                  "cluster-coll-v2-issue29.json"])
def test_a_cluster_mpi_body_read_typed_gives_back_the_stored_body(name):
    """MpiRun reads every series of a ring, pairs or N-pairs document and body() gives the
    stored body back unchanged."""
    from beoperf.model.cluster_mpi import MpiRun

    stored = model.load(FIXTURES / name)
    run = MpiRun.from_document(stored)
    assert run.body() == stored.body and run.series
    assert [s.name() for s in run.series] == [
        f"{s['ranks_per_node']} rank{'s' if s['ranks_per_node'] != 1 else ''} per node "
        f"({s['np']} ranks)" for s in stored.body["series"]]


def test_a_scaling_body_read_typed_gives_back_the_stored_body():
    """ScalingStudy reads every point, run, stopped metric and reference of a scaling
    document and body() gives the stored body back, key for key in the stored order."""
    from beoperf.model.cluster import ScalingStudy

    stored = model.load(FIXTURES / "scaling-v1-issue14.json")
    study = ScalingStudy.from_document(stored)
    assert study.body() == stored.body and list(study.body()) == list(stored.body)
    assert json.dumps(study.body()) == json.dumps(stored.body)
    assert study.series_names() == list(dict.fromkeys(p["series"]
                                                      for p in stored.body["points"]))


@pytest.mark.parametrize("name, kind", [("node-fleet-v1-issue13.json", "NodeFleet"),
                                        ("node-comparison-v1-issue13.json", "NodeComparison")])
def test_a_node_fleet_or_comparison_read_typed_gives_back_the_stored_body(name, kind):
    from beoperf.model import node

    stored = model.load(FIXTURES / name)
    typed = getattr(node, kind).from_document(stored)
    assert typed.body() == stored.body
    with pytest.raises(DocumentError, match="not"):
        getattr(node, kind).from_document(Document("node", {}, {}))


def test_an_audit_body_read_typed_gives_back_the_stored_body():
    """AuditRun keeps a finding's optional texts as stored (absent stays absent), so
    body() is the stored body, for both audit fixtures."""
    from beoperf.model.audit import AuditRun

    for name in ("audit-v1-before-issue9.json", "audit-v1-after-issue9.json"):
        stored = model.load(FIXTURES / name)
        run = AuditRun.from_document(stored)
        assert run.body() == stored.body
        assert [f.command for f in run.findings] == [f.get("command")
                                                      for f in stored.body["findings"]]


def test_an_hpcc_run_and_comparison_read_typed_give_back_the_stored_bodies():
    from beoperf.model.cluster import ClusterRun, HpccComparison

    run_doc = model.load(FIXTURES / "cluster-v1-issue14.json")
    run = ClusterRun.from_document(run_doc)
    assert json.dumps(run.body()) == json.dumps(run_doc.body)
    assert {k: v.number() for k, v in run.metrics.items()} == {
        k: (float(v["value"]) if isinstance(v["value"], int | float)
            and not isinstance(v["value"], bool) else None)
        for k, v in run_doc.body["metrics"].items()}
    comp_doc = model.load(FIXTURES / "hpcc-comparison-v1-issue14.json")
    assert HpccComparison.from_document(comp_doc).body() == comp_doc.body


def test_a_fleet_audit_body_read_typed_gives_back_the_stored_body():
    """FleetAudit reads the fleet-audit fixture (consistent keys flat, inconsistent ones
    with their groups) and body() is the stored body, key for key in the stored order."""
    from beoperf.model.fleet import FleetAudit, FleetKey, NodeGroup

    stored = model.load(FIXTURES / "fleet-audit-v1-after-issue9.json")
    fleet = FleetAudit.from_document(stored)
    assert fleet.body() == stored.body and fleet.consistent
    assert json.dumps(fleet.body()) == json.dumps(stored.body)
    assert fleet.counts() == (2, 2)
    odd = FleetKey("interface", "mtu", "interface.mtu",
                   [NodeGroup(9000, "n1", "warn"), NodeGroup(1500, "n2", "pass")])
    fleet.inconsistent.append(odd)
    again = FleetAudit.from_document(fleet.to_document({}))
    assert again.inconsistent == [odd] and again.inconsistent[0].statuses() == {"warn", "pass"}
    with pytest.raises(DocumentError, match="not a fleet audit"):
        FleetAudit.from_document(Document("node", {}, {}))


@pytest.mark.parametrize("spoil, where", [
    (lambda b: b["metrics"][0].update(params={"threads": [1]}), "params.threads"),
    (lambda b: b["metrics"][0].update(samples=["1"]), "metric 'stream.copy.t1'"),
    (lambda b: b["parts"]["io"]["dirs"][0].update(mount={"fstype": 4}), "io mount.fstype"),
    (lambda b: b.update(reference={"hpcc": 3}), None),
])
def test_a_crafted_node_body_meets_one_clear_error(spoil, where):
    """A node body the schema lets through (its free parts) but whose values are of the
    wrong type is refused by NodeRun with a DocumentError naming the field, never a
    TypeError in a renderer; a reference of the wrong shape reads as none."""
    from beoperf.model.node import NodeRun

    stored = model.load(FIXTURES / "node-v1-issue13.json")
    spoil(stored.body)
    if where is None:
        assert NodeRun.from_document(stored).ref_hpcc() == []
        return
    with pytest.raises(DocumentError, match=where.replace(".", r"\.")):
        NodeRun.from_document(stored)


def test_a_replay_body_read_typed_gives_back_the_stored_body():
    """Replay reads every class, the totals, the profile and both ends' facts of a replay
    document, and body() gives the stored body back, key for key in the stored order; a
    profile that is not one (the schema leaves its inside free) is a DocumentError."""
    from beoperf.model.replay import Replay

    stored = model.load(FIXTURES / "replay-v1-issue26.json")
    replay = Replay.from_document(stored)
    assert json.dumps(replay.body()) == json.dumps(stored.body)
    assert replay.to_document().to_json() == stored.to_json()
    assert [c.median_s for c in replay.classes] == [c["median_s"]
                                                    for c in stored.body["classes"]]
    assert replay.total_s.median == stored.body["total_s"]["median"]
    assert [e.size for e in replay.profile.entries] == [c.size for c in replay.classes]
    spoilt = stored.to_json()
    spoilt["body"]["profile"] = {"source": "x"}
    with pytest.raises(DocumentError, match="profile is not one"):
        Replay.from_document(model.from_json(spoilt))
    with pytest.raises(DocumentError, match="not a replay"):
        Replay.from_document(Document("node", {}, {}))

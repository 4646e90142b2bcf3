"""The study document (issue 27): the fixture loads, validates and renders in every
format; its typed body round-trips; a crafted value meets a DocumentError naming its
key; the answer comes first, in order."""

from __future__ import annotations

import copy
import csv
import io
import json
from pathlib import Path

import pytest

from beoperf import model, report
from beoperf.model import document
from beoperf.model.document import Document, DocumentError
from beoperf.model.study import Study
from beoperf.report.answer import Level, lines_of

FIXTURE = Path(__file__).parent / "fixtures" / "documents" / "study-v1-issue27.json"


@pytest.fixture
def doc() -> Document:
    return model.load(FIXTURE)


def test_every_format_renders(doc):
    assert set(report.formats("study")) == {"json", "text", "markdown", "csv"}
    for fmt in ("text", "markdown", "csv", "json", "html", "title"):
        assert report.render(doc, fmt).strip(), fmt
    assert json.loads(report.render(doc, "json"))["kind"] == "study"


def test_the_typed_body_round_trips(doc):
    study = Study.from_document(doc)
    assert study.body() == doc.body
    again = study.to_document(doc.meta)
    document.validate("study", json.loads(again.dumps()))
    assert list(again.body) == list(doc.body)  # the keys in the contract's order


def test_the_fixtures_conclusions_are_what_the_analysis_says(doc):
    from beoperf.analysis import study as analysis

    again = analysis.analyse(Study.from_document(doc)).body()
    assert again == doc.body


@pytest.mark.parametrize(("where", "value", "key"), [
    (("hosts", 1, "end", "state"), 5, "hosts[1].end.state"),
    (("blocks", 3, "figures", "latency_us@16"), "fast", "blocks[3].figures.latency_us@16"),
    (("effects", 0, "effect"), [], "effects[0].effect"),
    (("schedule", "repeats"), "six", "schedule.repeats"),
    (("factors", 0, "levels", 2, "default"), "no", "factors[0].levels[2].default"),
    (("curves", 0, "points", 1), [1, 2, 3], "curves[0].points[1]"),
    (("pairs", 0), ["node01"], "pairs[0]"),
])
def test_a_crafted_value_is_refused_naming_its_key(doc, where, value, key):
    body = copy.deepcopy(doc.body)
    node = body
    for part in where[:-1]:
        node = node[part]
    node[where[-1]] = value
    with pytest.raises(DocumentError) as caught:
        Study.from_body(body)
    assert str(caught.value).startswith(f"{key}: expected"), caught.value


def test_a_crafted_file_fails_the_schema_naming_where(doc, tmp_path):
    crafted = copy.deepcopy(doc.to_json())
    crafted["body"]["design"] = "rm -rf"
    path = tmp_path / "s.json"
    path.write_text(json.dumps(crafted))
    with pytest.raises(DocumentError, match="not a valid study document at body/design"):
        model.load(path)
    crafted = copy.deepcopy(doc.to_json())
    crafted["body"]["blocks"][4]["figures"]["latency_us@16"] = -1
    path.write_text(json.dumps(crafted))
    with pytest.raises(DocumentError, match="at body/blocks/4/figures"):
        model.load(path)


def test_the_answer_comes_first_in_order(doc):
    lines = lines_of(doc)
    assert [ln.level for ln in lines] == sorted(ln.level for ln in lines)
    assert lines[0].level == Level.WARN and "MTU 9000 skipped" in lines[0].text
    assert lines[-1].level == Level.OK and "all restored" in lines[-1].text
    text = report.render(doc, "text").splitlines()
    assert text[0].startswith("WARN") and "MTU 9000 skipped" in text[0]
    verdicts = text.index("Verdicts:")
    assert text[verdicts + 1].strip().startswith("MTU 3000: ")
    assert any(t.startswith("Method: ") and "±2%" in t for t in text)


def test_a_host_left_changed_is_a_fail_with_its_restore_command(doc):
    body = copy.deepcopy(doc.body)
    end = body["hosts"][1]["end"]
    end.update(state="unreachable", detail="last seen at MTU 3000")
    lines = lines_of(Document("study", body, doc.meta))
    assert lines[0].level == Level.FAIL and "node02 unreachable" in lines[0].text
    assert lines[0].todo == end["restore_command"]
    assert not any(ln.level == Level.OK and "restored" in ln.text for ln in lines)


def test_a_plan_only_study_says_nothing_was_changed(doc):
    body = copy.deepcopy(doc.body)
    body.update(applied=False, status="planned", blocks=[], effects=[], warnings=[])
    for h in body["hosts"]:
        h["end"] = None
    lines = lines_of(Document("study", body, doc.meta))
    assert any(ln.level == Level.NOTE and "nothing changed" in ln.text
               and "--apply" in ln.todo for ln in lines)


def test_csv_has_a_row_per_configuration_and_figure_then_the_blocks(doc):
    study = Study.from_document(doc)
    text = report.render(doc, "csv")
    effects, blocks = text.split("\n\n")
    rows = list(csv.DictReader(io.StringIO(effects)))
    assert len(rows) == len(study.configurations) * len(study.figures())
    better = [r for r in rows if r["verdict"] == "better"]
    assert {r["configuration"] for r in better} >= {"firewall flush"}
    for r in better:
        assert float(r["low"]) > 1 or float(r["high"]) < 1
    block_rows = list(csv.DictReader(io.StringIO(blocks)))
    assert len(block_rows) == len(study.blocks)
    assert [r["status"] for r in block_rows].count("failed") == 1


def test_markdown_holds_the_impact_tables(doc):
    text = report.render(doc, "markdown")
    assert text.count("| Configuration | mean (deviation) | blocks | Impact |") == 2
    assert "- **WARN** MTU 9000 skipped" in text


def test_the_html_draws_a_line_per_configuration_with_a_curve(doc):
    html = report.render(doc, "html")
    study = Study.from_document(doc)
    assert html.count('data-plot="study-curve"') == 1
    assert html.count('data-plot="study-blocks"') == len(study.figures())
    for c in study.curves:
        assert f"{study.label_of(c.config)}</li>" in html.replace("&#x27;", "'")


def test_text_from_the_document_reaches_the_html_escaped(doc):
    body = copy.deepcopy(doc.body)
    attack = "<script>alert(1)</script>"
    body["measurements"][0]["name"] = attack
    body["measurements"][0]["figures"][0]["key"] = attack
    body["configurations"][1]["label"] = attack
    body["hosts"][0]["end"]["detail"] = attack
    body["verdicts"].append(attack)
    for c in body["curves"]:
        c["measurement"] = attack
    crafted = Document("study", body, doc.meta)
    document.validate("study", crafted.to_json())
    for fmt in ("html", "title"):
        assert "<script>" not in report.render(crafted, fmt)


def test_a_plan_without_blocks_renders_in_every_format():
    from beoperf.analysis import study as analysis
    from beoperf.model.study import Figure, MeasurementSpec, Method, Schedule
    from study_sim import mtu_factor

    factors = [mtu_factor(("1500", "9000"))]
    configs = analysis.configurations(factors)
    plan = Study("mtu", "one-at-a-time", False, "planned",
                 Schedule(7, 2, 6, None, 60.0, 0.1,
                          analysis.schedule([c.id for c in configs], 6, 7)),
                 Method("(to come)"), factors=factors, configurations=configs,
                 measurements=[MeasurementSpec("pingpong", {}, [
                     Figure("latency_us@16", "us", False)])])
    doc = analysis.analyse(plan).to_document(model.make_meta())
    document.validate("study", json.loads(doc.dumps()))
    for fmt in ("text", "markdown", "csv", "json", "html", "title"):
        assert report.render(doc, fmt).strip(), fmt
    assert plan.verdicts == ["MTU 9000: planned, 6 blocks against Default"]
    assert plan.effects == [] and plan.impact == [] and plan.drift == []
    assert plan.method.family == 1
    text = report.render(doc, "text")
    assert text.startswith("NOTE      plan only: 2 configuration(s)"), text


def test_a_factorial_study_shows_its_main_effects_in_every_format():
    from beoperf.model.study import FactorLevel, FactorLevels
    from study_sim import mtu_factor, simulate

    firewall = FactorLevels("firewall", "host", ["h1"],
                            [FactorLevel("default", None, default=True),
                             FactorLevel("flush", "flush")])
    found = simulate({"firewall flush": 0.2, "MTU 9000, firewall flush": 0.2}, noise=0.02,
                     seed=3, design="factorial", factors=[mtu_factor(), firewall])
    doc = found.to_document(model.make_meta())
    document.validate("study", json.loads(doc.dumps()))
    assert "firewall flush (main effect): goodput@1M better" in report.render(doc, "text")
    assert "Main effects:" in found.method.statement
    rows = list(csv.DictReader(io.StringIO(report.render(doc, "csv").split("\n\n")[0])))
    assert {r["config"] for r in rows} >= {"mtu=9000", "firewall=flush"}
    assert 'data-key="body.main_effects.1.effect.ratio"' in report.render(doc, "html")


def test_a_study_with_precision_says_it_and_validates(doc):
    body = copy.deepcopy(doc.body)
    assert "precision" not in body["schedule"]  # written only with --precision
    body["schedule"].update(precision=0.005, max_repeats=18)
    precise = Document("study", body, doc.meta)
    document.validate("study", precise.to_json())
    assert "±0.5%, up to 18 blocks of a configuration" in report.render(precise, "html")
    assert Study.from_document(precise).body()["schedule"]["max_repeats"] == 18
    effects = body["effects"]
    effects[0]["effect"].update(verdict="cannot tell")
    todo = [ln.todo for ln in lines_of(precise) if ln.level == Level.IMPRECISE]
    assert todo and "--max-repeats (now 18)" in todo[0]

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
    with pytest.raises(DocumentError, match="peak_size: expected an integer"):
        Comparison.from_document(Document("comparison", body, {}))
    body["rows"][0]["peak_size"] = 1
    body["rows"][-1]["latency_test"] = {"verdict": 1}
    with pytest.raises(DocumentError, match="verdict: expected a string"):
        Comparison.from_document(Document("comparison", body, {}))
    with pytest.raises(DocumentError, match="not a comparison"):
        Comparison.from_document(Document("pingpong", {}, {}))


@pytest.mark.parametrize("name, typed", [
    ("tune-plan-v2-before-issue9.json", "TunePlan"), ("tune-plan-v2-after-issue9.json", "TunePlan"),
    ("rollback-v2-after-issue9.json", "Rollback"), ("procedure-v1-after-issue9.json", "Procedure")])
def test_a_tuning_document_read_typed_gives_back_the_stored_body(name, typed):
    from beoperf.model import tune

    stored = model.load(FIXTURES / name)
    found = getattr(tune, typed).from_document(stored)
    assert found.body() == stored.body
    assert list(found.body()) == list(stored.body)
    with pytest.raises(DocumentError, match=f"not a {stored.kind} document"):
        getattr(tune, typed).from_document(Document("comparison", {}, {}))


def test_a_rollback_entry_of_the_wrong_type_is_one_document_error_and_refused_before_root():
    from beoperf.audit import tune
    from beoperf.audit.tune import TuneError
    from beoperf.model.tune import Rollback

    stored = model.load(FIXTURES / "rollback-v2-after-issue9.json")
    body = json.loads(json.dumps(stored.body))
    body["netns"] = "4026531833"
    doc = Document("rollback", body, {})
    with pytest.raises(DocumentError, match="netns: expected an integer"):
        Rollback.from_document(doc)
    with pytest.raises(TuneError, match="netns: expected an integer"):
        tune.wrong_place(doc)


def test_a_procedure_row_reads_its_blocks_and_effect_as_fields():
    from beoperf.model.tune import Procedure

    stored = model.load(FIXTURES / "procedure-v1-after-issue9.json")
    found = Procedure.from_document(stored)
    assert [r.label for r in found.rows] == [r["label"] for r in stored.body["rows"]]
    assert found.rows[1].repeats_us == stored.body["rows"][1]["repeats_us"]
    assert found.statement is None and all(r.effect is None for r in found.rows)
    body = json.loads(json.dumps(stored.body))
    body["rows"][1]["repeats_us"][2] = "32.5"
    with pytest.raises(DocumentError, match=r"repeats_us\[\d+\]: expected a number"):
        Procedure.from_document(Document("procedure", body, {}))


def _prediction():
    from beoperf.analysis import predict
    from beoperf.model.profile import Entry, Profile

    profile = Profile("app.csv", "csv", [Entry(64, 1000), Entry(65536, 50, "stream")])
    models = [predict.from_spec("alpha=50us,bw=100Mbit/s"),
              predict.from_spec("alpha=5us,bw=10Gbit/s,name=fast")]
    nets = predict.with_amdahl([predict.predict_one(profile, m) for m in models], 2.0)
    return predict.Prediction(profile, predict.STATISTIC, 2.0, nets, {"model": "given"}, [])


def test_a_prediction_read_typed_gives_back_the_stored_body():
    from beoperf.analysis.predict import Prediction
    from beoperf.model import document

    doc = _prediction().to_document(document.make_meta(["beoperf", "predict"]))
    document.validate("prediction", doc.to_json())
    stored = model.from_json(json.loads(doc.dumps()))
    found = Prediction.from_document(stored)
    assert found.body() == stored.body and list(found.body()) == list(stored.body)
    fast = found.networks[1]
    assert fast.model.name == "fast" and fast.whole is not None
    assert fast.ratio == pytest.approx(fast.total_s / found.networks[0].total_s)
    assert [c.size for c in fast.dominant_classes] == [
        stored.body["networks"][1]["classes"][i]["size"]
        for i in stored.body["networks"][1]["dominant"]]


def test_a_prediction_without_a_compute_time_stores_no_whole_run():
    from beoperf.analysis import predict
    from beoperf.analysis.predict import Prediction
    from beoperf.model import document

    found = _prediction()
    found.compute_s = None
    found.networks = predict.with_amdahl(
        [predict.predict_one(found.profile, n.model) for n in found.networks], None)
    body = found.body()
    assert all("whole_s" not in n and "speedup" not in n for n in body["networks"])
    doc = found.to_document(document.make_meta())
    document.validate("prediction", doc.to_json())
    assert Prediction.from_document(doc).networks[0].whole is None


def test_a_prediction_with_a_value_of_the_wrong_type_is_one_document_error():
    from beoperf.analysis.predict import Prediction

    body = json.loads(json.dumps(_prediction().body()))
    body["networks"][0]["model"]["measured"] = [1, "x"]
    with pytest.raises(DocumentError, match=r"measured\[\d+\]: expected an integer"):
        Prediction.from_document(Document("prediction", body, {}))
    body["networks"][0]["model"]["measured"] = None
    body["profile"]["entries"][0]["count"] = 1.5
    with pytest.raises(DocumentError, match="count: expected an integer"):
        Prediction.from_document(Document("prediction", body, {}))


def test_a_monitor_session_read_typed_gives_back_the_stored_body():
    from beoperf.model import document
    from beoperf.model.monitor import (
        MonitorSession,
        ScheduledStep,
        SessionBudget,
        SessionTotals,
    )

    planned = MonitorSession("node02", "10.0.0.2", "udp", 5201, "m.db", None, 9.0,
                             [ScheduledStep(8, 3, 1.0), ScheduledStep(1400, 2, 0.5)], 1.0,
                             1500, None, 20396, 10e6, SessionBudget("0.2% of 10 Mbit/s", 2500.0))
    stopped = MonitorSession(**{**vars(planned), "run_id": 3, "status": "stopped",
                                "stop_reason": "stopped by signal",
                                "totals": SessionTotals(4, 20, 19, 81584, 0, 0)})
    for found in (planned, stopped):
        doc = found.to_document(document.make_meta(["beoperf", "monitor"]))
        document.validate("monitor-session", doc.to_json())
        stored = model.from_json(json.loads(doc.dumps()))
        assert MonitorSession.from_document(stored) == found
        assert MonitorSession.from_document(stored).body() == stored.body
    body = json.loads(json.dumps(stopped.body()))
    body["totals"]["probes"] = "20"
    with pytest.raises(DocumentError, match="probes: expected an integer"):
        MonitorSession.from_document(Document("monitor-session", body, {}))


def test_a_monitor_report_read_typed_gives_back_the_stored_body():
    from beoperf.model.monitor import MonitorReport

    stored = model.load(FIXTURES / "monitor-report-v1-after-issue9.json")
    found = MonitorReport.from_document(stored)
    assert json.dumps(found.body()) == json.dumps(stored.body)  # keys, order and values
    assert found.summary.probes == stored.body["summary"]["probes"]
    assert found.summary.bandwidth_bps.status is None  # a version 1 file: no status
    assert found.source.runs[0].has_link is False
    assert found.series.timeline.start_utc == stored.body["series"]["timeline"]["start_utc"]
    assert MonitorReport.of(stored.body) == found


def test_a_monitor_report_with_a_value_of_the_wrong_type_is_one_document_error():
    from beoperf.model.monitor import MonitorReport

    stored = model.load(FIXTURES / "monitor-report-v1-after-issue9.json")
    body = json.loads(json.dumps(stored.body))
    body["series"]["timeline"]["start_utc"][0] = "00:00"
    with pytest.raises(DocumentError, match=r"start_utc\[\d+\]: expected a number"):
        MonitorReport.from_body(body)
    body = json.loads(json.dumps(stored.body))
    body["summary"]["one_way_ms"] = [1.0]
    with pytest.raises(DocumentError, match="one_way_ms: expected an object"):
        MonitorReport.from_document(Document("monitor-report", body, {}))


def test_a_monitor_report_with_a_bin_without_its_start_renders_and_says_why():
    """The schema lets a time bin's start be null: the page draws no time chart and says
    why, where it raised a TypeError."""
    from beoperf import report
    from beoperf.report.html import monitor as html_monitor

    stored = model.load(FIXTURES / "monitor-report-v1-after-issue9.json")
    body = json.loads(json.dumps(stored.body))
    body["series"]["timeline"]["start_utc"][0] = None
    doc = Document("monitor-report", body, stored.meta)
    model.document.validate("monitor-report", doc.to_json())
    assert html_monitor.NO_BINS in report.render(doc, "html")
    assert report.render(doc, "markdown").startswith("# Link report: ")


def test_an_integer_the_schema_admits_reads_as_one():
    """JSON Schema's "integer" admits 5.0: a typed body reads it as 5, and refuses 5.5,
    a bool or text with the field's name."""
    from beoperf.model import narrow

    assert narrow.integer_at({"n": 5.0}, "n") == 5
    assert narrow.ints_or_empty({"n": [1, 2.0]}, "n") == [1, 2]
    for bad in (5.5, True, "5", None):
        with pytest.raises(DocumentError, match="n: expected an integer"):
            narrow.integer_at({"n": bad}, "n")

"""The answer first (beoperf.report.answer): each kind says what is wrong and what to do in
a few lines ordered by severity; stored warnings, whatever beoperf wrote them, are levelled
and repeated ones folded; documents of every version read alike; a plot never says what
its data contradict."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from beoperf import model, report
from beoperf.report import answer
from beoperf.report.answer import Level, Line, from_strings, level_of, lines_of, ordered

FIXTURES = Path(__file__).parent / "fixtures"
DOCUMENTS = sorted((FIXTURES / "documents").glob("*.json")) + sorted(
    (FIXTURES / "mpi").glob("*.json"))
# the lead's kinds (comparison verdicts, tune documents): the default answer for now
def test_every_kind_has_an_answer():
    for kind in model.KINDS:
        report.formats(kind)  # imports its renderers
    assert set(model.KINDS) <= set(answer.ANSWERS)


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.name)
def test_every_fixture_gets_an_ordered_answer_that_never_fails(path):
    doc = model.load(path)
    lines = lines_of(doc)
    assert [line.level for line in lines] == sorted(line.level for line in lines)
    assert not any("could not be worked out" in line.text for line in lines), lines
    assert all(line.text.strip() and "\n" not in line.text for line in lines)


def test_ordered_puts_failures_first_and_keeps_the_order_within_a_level():
    given = [Line(Level.NOTE, "n"), Line(Level.WARN, "w1"), Line(Level.FAIL, "f"),
             Line(Level.IMPRECISE, "i"), Line(Level.WARN, "w2"), Line(Level.WARN, "w1")]
    assert [line.text for line in ordered(given)] == ["f", "w1", "w2", "i", "n"]


@pytest.mark.parametrize("text, level", [
    ("3 of 7 sizes did not reach ±2%: widest ±23% at 48 KiB", Level.IMPRECISE),
    ("5 size(s) did not reach the requested precision within the time cap: 4, 16", Level.IMPRECISE),
    ("no earlier run of this setup in /var/lib/beoperf/history: each interval ...", Level.NOTE),
    ("history not used: PermissionError: denied", Level.NOTE),
    ("did not answer: n3 (timed out)", Level.FAIL),
    ("size 1024 B: OSU validation failed", Level.FAIL),
    ("SO_BUSY_POLL=50 refused: Operation not permitted", Level.WARN),
])
def test_stored_warnings_are_levelled_by_what_they_say(text, level):
    assert level_of(text)[0] == level


def test_warnings_of_one_shape_are_one_line_with_a_count():
    texts = [f"size {n} B: IMB reported 'bad value {n}'; skipped" for n in (8, 16, 32, 64)]
    texts.append("2 IMB tables in the file; imported the first")
    lines = from_strings(texts)
    assert [line.text for line in lines] == [
        "size 8 B: IMB reported 'bad value 8'; skipped (and 3 more like it)",
        "2 IMB tables in the file; imported the first"]
    assert [line.level for line in lines] == [Level.WARN, Level.NOTE]
    assert len(from_strings(texts[:2])) == 2  # two are still shown as they are


def test_an_old_ping_pong_warning_is_recomputed_from_the_sizes_as_one_line():
    """A run written before issue 25 stored its precision warning in other words: the
    answer says it once, in today's words, from the sizes themselves."""
    doc = model.load(FIXTURES / "documents" / "pingpong-v1-after-issue9.json")
    sizes = doc.body["sizes"]
    late = [s for s in sizes if not s["converged"]]
    lines = [line for line in lines_of(doc) if line.level == Level.IMPRECISE]
    assert len(lines) == 1
    assert lines[0].text.startswith(f"{len(late)} of {len(sizes)} sizes did not reach ±2%: "
                                    "widest ±")
    assert lines[0].topic == answer.PRECISION
    assert not any("requested precision" in line.text for line in lines_of(doc))


def test_a_kind_without_an_answer_gets_its_warnings_renderer_or_its_stored_warnings():
    doc = model.load(FIXTURES / "documents" / "procedure-v1-after-issue9.json")
    lines = answer.default(doc)
    assert all(isinstance(line, Line) for line in lines)
    body = {"status": "failed", "status_reason": "peer lost", "warnings": ["w"]}
    generic = answer.status_lines(body) + from_strings(body["warnings"])
    assert [(line.level, line.text) for line in generic] == [
        (Level.FAIL, "the run is failed: peer lost"), (Level.WARN, "w")]


def test_markdown_and_text_blocks_carry_the_level_and_what_to_do():
    lines = [Line(Level.FAIL, "it broke", "mend it"), Line(Level.OK, "the rest is fine")]
    assert answer.text_block(lines, "  ") == ["  FAIL      it broke",
                                              "            to do: mend it",
                                              "  OK        the rest is fine"]
    assert answer.markdown_block(lines) == ["- **FAIL** it broke *To do:* mend it",
                                            "- **OK** the rest is fine", ""]


# --------------------------------------------------------------------------- the plots


def monitor_without_bandwidth(tmp_path: Path) -> model.Document:
    """A monitor report whose probes were answered but gave no bandwidth estimate."""
    from tests.test_report import monitor_report

    path = tmp_path / "monitor.json"
    monitor_report(path)
    raw = json.loads(path.read_text())
    b = raw["body"]
    bw = b["series"]["timeline"]["bandwidth_bps"]
    for key in bw:
        bw[key] = [None] * len(bw[key])
    b["summary"]["bandwidth_bps"].update(status="none", count=0, median=None, cycles=0)
    return model.from_json(raw)


def test_a_bandwidth_plot_with_no_estimate_says_why_not_no_answered_probes(tmp_path):
    """Regression: "no answered probes" on the bandwidth plot of a report whose probes
    were answered (84 of 84 in the issue); the plot says what the counts say."""
    from beoperf.report.html import monitor as html_monitor
    from beoperf.report.monitor import no_bandwidth

    doc = monitor_without_bandwidth(tmp_path)
    s = doc.body["summary"]
    assert s["answered"] > 0
    why = no_bandwidth(doc.body)
    assert why == (f"no bandwidth estimate in this range: {s['answered']:,} of "
                   f"{s['probes']:,} probes were answered, but no cycle had an answered small "
                   "probe and a slower large one")
    markup = html_monitor.plots(doc.body, "m")
    figure = re.search(r'<figure[^>]*data-plot="bandwidth".*?</figure>', markup, re.S)[0]
    assert why in figure and "no answered probes" not in markup
    from beoperf.report.monitor_plots import bandwidth_figure

    fig = bandwidth_figure(doc.body)
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert why in texts

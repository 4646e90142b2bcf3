"""The node suite's HTML view without a browser: failed validations reach the study's
warnings and mark their rows, a network file system is named as one beside a local disk,
and mount facts from the document reach the page escaped.  (The browser test in
test_report.py checks every shown node figure against its document.)"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

from beoperf import model
from beoperf.report.answer import problems
from beoperf.report.html import page as html_page

FIXTURE = Path(__file__).parent / "fixtures" / "documents" / "node-v1-issue13.json"


def fixture() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text())


def render(doc: dict[str, Any], tmp_path: Path) -> tuple[str, list[str]]:
    path = tmp_path / "node.json"
    path.write_text(json.dumps(doc))
    markup, _, lines = html_page.section(html_page.Entry(str(path), model.load(path)), 1,
                                         "s1")
    return markup, [line.text for line in problems(lines)]


def rows_of(markup: str, caption_start: str) -> list[str]:
    """The <tr> elements of the table whose caption starts so."""
    table = re.search(r"<caption>" + re.escape(caption_start) + r".*?</table>", markup, re.S)
    assert table, caption_start
    return re.findall(r"<tr[^>]*>.*?</tr>", table[0], re.S)


def test_the_fixture_has_no_warning(tmp_path):
    markup, warnings = render(fixture(), tmp_path)
    assert warnings == [] and "view failed" not in markup
    assert re.search(r'data-level="ok"><span class="mark ok">OK</span><span class="vtext">'
                     r"\d+ figures measured; the \d+ checks of their results passed", markup)
    assert "<pre" not in markup  # every part is a table, none the text report's block


def test_failed_validations_are_warnings_and_their_rows_marked(tmp_path):
    doc = fixture()
    parts, metrics = doc["body"]["parts"], doc["body"]["metrics"]
    parts["stream"]["runs"][1].update(ok=False, errors={"a": 0.5, "b": 0.0, "c": 0.0})
    parts["stream"]["ok"] = False
    parts["stream"]["below_4x_cache"] = True
    for m in metrics:
        if m["part"] == "stream" and m["params"]["threads"] == 2:
            m["ok"] = False
    parts["dgemm"]["runs"][0].update(ok=False, residual=40.0)
    parts["fft"].update(ok=False, error=99.0)
    markup, warnings = render(doc, tmp_path)
    text = "\n".join(warnings)
    assert "STREAM validation failed at 2 threads (average relative errors a 0.5" in text
    assert "DGEMM check failed at 1 thread: scaled residual 40.0 over 16.0" in text
    assert "FFT check failed: error 99.0 over 16.0" in text
    assert "stream.copy.t2" in text and "cache bandwidth, not memory bandwidth" in text
    stream = rows_of(markup, "STREAM")[1:]  # after the header row
    assert [('class="bad"' in r) for r in stream] == [False] * 4 + [True] * 4
    assert all(">failed<" in r for r in stream[4:]) and all(">ok<" in r for r in stream[:4])
    dgemm = rows_of(markup, "DGEMM")[1:]
    assert 'class="bad"' not in dgemm[0]  # the metric itself was not marked failed
    assert 'data-key="body.parts.dgemm.runs.0.residual"' in dgemm[0]


def test_a_network_file_system_beside_a_local_disk(tmp_path):
    doc = fixture()
    io = doc["body"]["parts"]["io"]
    remote = copy.deepcopy(io["dirs"][0])
    remote.update(dir="/mnt/r", realpath="/mnt/r", mount={
        "mount_point": "/mnt/r", "fstype": "fuse.sshfs", "source": "n2:/scratch",
        "options": "rw,nosuid,<img src=x onerror=alert(1)>"})
    io["dirs"].append(remote)
    metrics = doc["body"]["metrics"]
    added = [dict(copy.deepcopy(m), id=m["id"] + "@r", params=dict(m["params"], dir="/mnt/r"),
                  mean=m["mean"] / 10) for m in metrics if m["part"] == "io"]
    metrics += added
    markup, warnings = render(doc, tmp_path)
    assert warnings == []
    head = rows_of(markup, "I/O")[0]
    assert "/tmp/readme (ext4, local) min" in head and "/mnt/r (fuse.sshfs, network) min" in head
    assert "fuse.sshfs, network, n2:/scratch on /mnt/r" in markup
    assert "<img" not in markup and "&lt;img src=x" in markup
    first = len(metrics) - len(added)
    keys = set(re.findall(r'data-key="(body\.metrics\.\d+\.mean)"', markup))
    assert {f"body.metrics.{first + k}.mean" for k in range(len(added))} <= keys


def test_a_length_whose_kernels_sit_in_different_caches_says_so(tmp_path):
    """At 4096 elements div's arrays (8 B an element) fit the 48 KiB L1, daxpy's (16 B)
    do not: the level column names both."""
    markup, _ = render(fixture(), tmp_path)
    rows = rows_of(markup, "PEAK kernels, MFLOP/s")
    by_length = {re.search(r"<td>([\d,]+)</td>", r)[1]: r for r in rows[1:]}
    assert "<td>L1: div; L2: daxpy, dot, poly</td>" in by_length["4,096"]
    assert "<td>L1</td>" in by_length["1,024"]
    assert "<td>L3: div; memory: daxpy, dot, poly</td>" in by_length["4,194,304"]


def test_the_text_report_names_both_levels_too(tmp_path):
    from beoperf import report

    path = tmp_path / "node.json"
    path.write_text(json.dumps(fixture()))
    out = report.render(model.load(path), "text")
    line = next(x for x in out.splitlines() if x.startswith("4,096 "))
    assert "L1: div; L2: daxpy, dot, poly" in line

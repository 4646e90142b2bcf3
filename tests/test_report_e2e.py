"""Issue 15's "done when", end to end: the real commands write into ONE folder — a TCP
ping-pong on loopback, an MPI ping-pong between two local ranks, the node suite (STREAM
and the PEAK kernels, small), HPC Challenge through mpirun (one process, a small N) —
then `beoperf report` makes one file of it, and a real headless Chromium shows a section
per document, asks for nothing but the file, logs no error, and every number it shows
that is marked with where it is stored equals the stored value.  The first screen and
the node section are kept as test artifacts beside test_report.py's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.test_report import ARTIFACTS, check_figure, stored_documents, value_at

from mpi_helpers import beoperf, require_mpi, run_bounded

pytestmark = pytest.mark.tools("mpirun.openmpi", "hpcc", "chromium")

STEP_S = 240  # each command's time limit (they take 2-15 s here)


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> tuple[Path, Path]:
    require_mpi("openmpi")
    root = tmp_path_factory.mktemp("e2e")
    out = root / "study"
    out.mkdir()
    commands = [
        beoperf("pingpong", "--sizes", "1,1K,64K", "--time-budget", "2",
                "-o", str(out / "tcp-loopback")),
        beoperf("pingpong", "--transport", "mpi", "--mpi", "openmpi", "--sizes", "1,1K,64K",
                "--time-budget", "2", "-o", str(out / "mpi-shm")),
        beoperf("node", "stream", "kernels", "--repeat", "2", "--array-size", "4M",
                "--threads", "1", "--lengths", "1K,64K", "--kernel-budget", "1",
                "--no-progress", "-o", str(out / "node.json")),
        beoperf("cluster", "hpcc", "--np", "1", "--n", "300", "--quiet",
                "-o", str(out / "hpcc")),
    ]
    for argv in commands:
        done = run_bounded(argv, STEP_S, cwd=str(root))
        assert done.returncode == 0, (argv, done.stderr[-2000:])
    page = root / "report.html"
    done = run_bounded(beoperf("report", str(out), "-o", str(page)), STEP_S)
    assert done.returncode == 0, done.stderr[-2000:]
    return out, page


def test_the_folder_holds_every_commands_documents(study):
    out, _ = study
    kinds = sorted(d.kind for d in stored_documents(out).values())
    # two ping-pong runs, the node suite, the HPCC run and its scaling document
    assert kinds == ["cluster", "node", "pingpong", "pingpong", "scaling"]
    transports = sorted(d.body["parameters"]["transport"] for d in
                        stored_documents(out).values() if d.kind == "pingpong")
    assert transports == ["mpi", "tcp"]


@pytest.fixture(scope="module")
def loaded(study):
    from tests.browser import Browser

    _, page = study
    with Browser() as browser:
        yield browser.open(page), page


def test_chromium_shows_every_study_with_the_stored_numbers(study, loaded):
    out, _ = study
    tab, page = loaded
    assert tab.console_errors == [] and tab.failed == []
    assert tab.requests == [page.resolve().as_uri()]
    docs = {source: doc.to_json() for source, doc in stored_documents(out).items()}
    sections = tab.evaluate("[...document.querySelectorAll('section.study')]"
                            ".map(s => s.dataset.source)")
    assert sorted(sections) == sorted(docs)
    # each kind's own view drew its document (none fell back to the generic form)
    assert "view failed" not in tab.evaluate("document.body.innerText")
    titles = tab.evaluate("[...document.querySelectorAll('section.study h2')]"
                          ".map(h => h.innerText)")
    assert any("over mpi: rank 0 on" in t for t in titles), titles
    figures = tab.evaluate(
        "[...document.querySelectorAll('[data-key]')].map(e => [e.closest('section')"
        ".dataset.source, e.dataset.key, e.dataset.value, e.tagName === 'circle' || "
        "e.tagName === 'rect' ? null : e.textContent, e.dataset.unit || null])")
    per_source: dict[str, int] = {}
    for source, key, value, text, unit in figures:
        if text is None:
            assert float(value) == value_at(docs[source], key), (source, key)
        else:
            check_figure(docs[source], key, value, text, unit)
        per_source[source] = per_source.get(source, 0) + 1
    # every study shows numbers a reader can check against its document
    assert set(per_source) == set(docs), set(docs) - set(per_source)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = tab.screenshot()
    assert shot.startswith(b"\x89PNG")
    (ARTIFACTS / "e2e-first-screen.png").write_bytes(shot)
    node = tab.screenshot(tab.element_clip('section[data-kind="node"]'))
    assert node.startswith(b"\x89PNG") and len(node) > 5000
    (ARTIFACTS / "e2e-node-section.png").write_bytes(node)

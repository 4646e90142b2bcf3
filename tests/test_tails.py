"""Deep tails (issue 29 item 5): the log histogram and the percentiles read from it
(beoperf.analysis.tails), kept per size in the ping-pong document (version 6), shown in
the text summary and the HTML report, and every sample written by --raw-samples."""

from __future__ import annotations

import json

import numpy as np
import pytest

from beoperf import model
from beoperf.analysis import tails
from beoperf.model.pingpong import load_json
from beoperf.report.pingpong import text
from helpers import cli
from test_documents import FIXTURES

V5 = FIXTURES / "pingpong-v5-before-issue29.json"


def lognormal_ns(n: int, seed: int = 1) -> np.ndarray:
    """Heavy-tailed times around 20 us, as a loopback ping-pong's look."""
    return np.random.default_rng(seed).lognormal(np.log(20_000.0), 0.4, n)


def nearest_rank(values: np.ndarray, p: float) -> float:
    return float(np.percentile(values, p * 100, method="inverted_cdf"))


def test_the_rule_asks_ten_samples_beyond_a_percentile():
    assert [tails.min_samples(p) for _n, p in tails.PERCENTILES] == \
        [20, 100, 1000, 10_000, 100_000]


def test_histogram_percentiles_are_within_a_bucket_of_the_samples():
    """Each percentile read from the histogram is within one bucket (1%) of numpy's
    nearest-rank percentile of the same samples; trials merged give the whole."""
    values = lognormal_ns(120_000)
    whole = tails.LogHistogram.of([values])
    parts = tails.LogHistogram.of(np.array_split(values, 7))
    assert whole.total == parts.total == len(values)
    assert np.array_equal(whole.counts, parts.counts)
    for _name, p in tails.PERCENTILES:
        got, want = whole.percentile_ns(p), nearest_rank(values, p)
        assert got is not None and abs(got / want - 1) <= tails.RATIO - 1, (p, got, want)
    assert len(whole.sparse()) < tails.MAX_BUCKETS  # stored: the non-empty buckets only


def test_the_histogram_is_bounded_whatever_the_values():
    h = tails.LogHistogram.of([np.array([0.0, 0.3, 1.0, 1e15, 5e13])])
    assert h.total == 5 and len(h.counts) == tails.MAX_BUCKETS
    assert h.sparse()[0] == [0, 3] and h.sparse()[-1] == [tails.MAX_BUCKETS - 1, 2]
    assert tails.LogHistogram.empty().percentile_ns(0.5) is None


def test_a_percentile_without_enough_samples_is_na():
    tail = tails.tail_of([lognormal_ns(500)])
    got = tail["percentiles_us"]
    assert got["p50"] is not None and got["p90"] is not None
    assert got["p99"] is None and got["p99.9"] is None and got["p99.99"] is None
    assert tails.percentile_text(tail, "p99.9") == "n/a (500 samples)"
    assert tails.histogram_of(tail).total == tail["samples"] == 500


def crafted(tmp_path, name: str = "tails.json"):
    """The version 5 fixture read (upgraded), each size given the tail of 20,000 crafted
    samples (p99.99 n/a: fewer than 100,000)."""
    doc = model.load(V5).to_json()
    for i, size in enumerate(doc["body"]["sizes"]):
        size["tail"] = tails.tail_of([lognormal_ns(20_000, seed=i) * (1 + i)])
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_a_version_5_document_loads_without_tails_and_renders():
    run = load_json(V5)
    assert run.sizes and all(s.tail is None for s in run.sizes)
    assert "tail" not in text(run)


def test_a_crafted_document_renders_its_tails(tmp_path):
    path = crafted(tmp_path)
    run = load_json(path)
    out = text(run)
    assert "p99.9 " in out and "p99.99 n/a (20,000 samples)" in out
    (tmp_path / "dir").mkdir()
    path.rename(tmp_path / "dir" / "tails.json")
    res = cli("report", str(tmp_path / "dir"), "-o", str(tmp_path / "r.html"))
    assert res.status == 0, res.stderr
    html = (tmp_path / "r.html").read_text()
    assert 'data-plot="tails"' in html and 'data-plot="histogram"' in html
    assert "n/a (20,000 samples)" in html and "NaN" not in html


@pytest.mark.parametrize(("extra", "said"), [
    (["--mode", "stream"], "stream mode times whole trials"),
    (["--transport", "mpi"], "TCP only"),
    (["--raw-samples-dir-missing"], "not a file in an existing directory"),
])
def test_raw_samples_refused_before_any_run(tmp_path, extra, said):
    target = str(tmp_path / "raw.csv")
    if extra == ["--raw-samples-dir-missing"]:
        extra, target = [], str(tmp_path / "no" / "raw.csv")
    res = cli("pingpong", "--sizes", "1", "--raw-samples", target, *extra)
    assert res.status != 0 and said in res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) <= 2


def test_raw_csv_stops_at_its_cap_and_never_writes_through_a_link(tmp_path, capsys):
    from types import SimpleNamespace

    from beoperf.cli import raw_samples as cli_raw
    from beoperf.report.raw_samples import raw_csv
    samples = {64: [np.array([1000.0, 2000.5]), np.array([3000.0])], 1: [np.array([500.0])]}
    data, written, total = raw_csv(samples, cap=3)
    lines = data.decode().splitlines()
    assert (written, total) == (3, 4) and lines[0] == "size,trial,iteration,seconds"
    assert lines[1:] == ["1,0,0,5e-07", "64,0,0,1e-06", "64,0,1,2.0005e-06"]
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / "raw.csv").symlink_to(victim)
    assert cli_raw.write(str(tmp_path / "raw.csv"), SimpleNamespace(samples=samples)) is None
    assert victim.read_text() == "keep" and not (tmp_path / "raw.csv").is_symlink()
    assert len((tmp_path / "raw.csv").read_text().splitlines()) == 5
    assert "WARN" not in capsys.readouterr().err


def test_a_cut_raw_file_says_how_many_samples_it_left_out(tmp_path, capsys, monkeypatch):
    from types import SimpleNamespace

    from beoperf.cli import raw_samples as cli_raw
    from beoperf.report import raw_samples
    monkeypatch.setattr(raw_samples, "CAP", 2)
    samples = {8: [np.array([1000.0, 2000.0, 3000.0])]}
    assert cli_raw.write(str(tmp_path / "raw.csv"), SimpleNamespace(samples=samples)) is None
    assert len((tmp_path / "raw.csv").read_text().splitlines()) == 3
    err = capsys.readouterr().err
    assert "2 of 3 samples written (the cap is 2 rows" in err and len(err.splitlines()) == 1

"""Deep tails on loopback (issue 29 item 5): a ping-pong with more than 10,000 samples
at one size gives p99.9, its --raw-samples file agrees with the document; a short run
says "n/a (n samples)".  In the serial phase (tests/conftest.py): the sample counts
rest on how many round trips the CPU allows in a few seconds."""

from __future__ import annotations

import csv
import json

import numpy as np

from beoperf.analysis import tails
from beoperf.model.pingpong import load_json
from beoperf.report.pingpong import text
from helpers import cli
from test_tails import nearest_rank


def test_loopback_tails_match_the_raw_samples(tmp_path):
    """A loopback ping-pong at one small size with more than 10,000 samples: the
    percentiles ascend, the histogram counts every sample, --raw-samples has one row per
    sample and its own nearest-rank percentiles agree with the document's within a
    bucket; the text summary shows the tail, "n/a (n samples)" where the rule says."""
    raw = tmp_path / "raw.csv"
    res = cli("pingpong", "--sizes", "64", "--time-budget", "4", "--precision", "0.001",
              "--history", "off", "-o", str(tmp_path / "run"), "--raw-samples", str(raw))
    assert res.status == 0, res.stderr
    doc = json.loads((tmp_path / "run.json").read_text())
    assert doc["schema_version"] >= 6  # tails since version 6
    size = doc["body"]["sizes"][0]
    tail, n = size["tail"], size["samples"]
    assert n >= 2 * tails.min_samples(0.999), f"only {n} samples in 4 s of 64 B round trips"
    assert tail["samples"] == n == sum(c for _i, c in tail["histogram"]["buckets"])
    got = tail["percentiles_us"]
    assert got["p50"] <= got["p90"] <= got["p99"] <= got["p99.9"]
    # the cross-check: the histogram's p50 and p90 against the size's own (all samples,
    # numpy's interpolated percentiles), within two buckets
    assert abs(got["p50"] / size["time_us"]["sample_median"] - 1) <= 2 * (tails.RATIO - 1)
    assert abs(got["p90"] / size["time_us"]["p90"] - 1) <= 2 * (tails.RATIO - 1)
    with raw.open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == n and {r["size"] for r in rows} == {"64"}
    assert len({r["trial"] for r in rows}) == size["trials"]
    seconds = np.array([float(r["seconds"]) for r in rows])
    for name, p in tails.PERCENTILES:
        if n >= tails.min_samples(p):
            want = nearest_rank(seconds * 1e6, p)
            assert abs(got[name] / want - 1) <= 1.5 * (tails.RATIO - 1), (name, got, want)
        else:
            assert got[name] is None
    for name in ("p99", "p99.9", "p99.99"):  # the summary's tail line
        assert f"{name} {tails.percentile_text(tail, name)}" in res.stdout, res.stdout


def test_a_short_run_says_na_with_its_sample_count(tmp_path):
    """1 MiB round trips for about a second on loopback: far fewer than 10,000 samples,
    so p99.9 and p99.99 are "n/a (n samples)" in the document and the summary."""
    res = cli("pingpong", "--sizes", "1M", "--time-budget", "1", "--history", "off",
              "-o", str(tmp_path / "short"))
    assert res.status == 0, res.stderr
    run = load_json(tmp_path / "short.json")
    size = run.sizes[0]
    assert size.tail is not None and size.tail["samples"] == size.samples
    assert size.samples < tails.min_samples(0.999)
    assert size.tail["percentiles_us"]["p99.9"] is None
    assert f"p99.9 n/a ({size.samples:,} samples)" in text(run)

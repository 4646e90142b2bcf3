"""The result document (JSON) and NetPIPE's np.out format."""

from __future__ import annotations

import copy
import csv
import io
import json
from pathlib import Path

import pytest

from beoperf.analysis.pingpong import summary
from beoperf.model.netpipe import NETPIPE_MBPS, netpipe_lines, read_netpipe
from beoperf.model.pingpong import (
    KIND,
    VERSION,
    ResultFormatError,
    RunResult,
    SizeResult,
    from_json,
    load_json,
)
from beoperf.report.pingpong import netpipe
from helpers import run_json, save_run


def size_result(size: int, median_us: float, *, min_us: float | None = None,
                converged: bool = True, corrupt: int = 0) -> SizeResult:
    min_us = median_us * 0.9 if min_us is None else min_us
    bits = size * 8.0
    return SizeResult(
        size=size, samples=42, trials=3, reps=14,
        time_us={"min": min_us, "median": median_us, "mean": median_us * 1.01,
                 "p90": median_us * 1.1, "p99": median_us * 1.3, "max": median_us * 2.0,
                 "stddev": median_us * 0.05, "mad": median_us * 0.02},
        ci95_halfwidth_us=median_us * 0.01, ci95_relative=0.01, converged=converged,
        throughput_bps={"from_median": bits / (median_us * 1e-6),
                        "from_min": bits / (min_us * 1e-6)},
        corrupt=corrupt)


def make_run(mode: str = "pingpong") -> RunResult:
    return RunResult(
        parameters={"mode": mode, "sizes": [1, 1024, 65536, 1048576], "precision": 0.02},
        local={"host": "alpha", "kernel": "6.1", "cpus": [0, 1]},
        remote={"host": "beta", "socket": {"sndbuf": 212992}},
        meta={"started": "2024-01-01T00:00:00Z", "beoperf": "0.1", "nested": {"a": [1, None]}},
        sizes=[
            size_result(1, 10.0),
            size_result(1024, 20.0, converged=False),
            size_result(65536, 200.0, corrupt=2),  # peak: 2621 Mbit/s from the median
            size_result(1048576, 5000.0, min_us=1000.0),  # highest from_min, not the peak
        ],
        status="interrupted", status_reason="interrupted by the user",
        warnings=["SO_BUSY_POLL=50 refused: Operation not permitted"],
    )


# --- JSON document -------------------------------------------------------------------------

def test_document_envelope_and_summary():
    doc = run_json(make_run())
    assert (doc["format"], doc["kind"]) == ("beoperf", KIND) and KIND == "pingpong"
    assert doc["schema_version"] == VERSION == 7
    assert doc["meta"]["beoperf"] == "0.1"  # the run's own meta is the envelope's
    body = doc["body"]
    assert body["status"] == "interrupted"
    assert [s["size"] for s in body["sizes"]] == [1, 1024, 65536, 1048576]
    assert body["summary"] == summary(make_run())
    json.dumps(doc)  # serialisable as is


def test_json_round_trip(tmp_path: Path):
    run = make_run()
    path = tmp_path / "run.json"
    save_run(run, path)
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]
    loaded = load_json(path)
    assert loaded == run
    assert run_json(loaded) == run_json(run)
    assert json.loads(path.read_text()) == run_json(run)
    assert all(isinstance(s, SizeResult) for s in loaded.sizes)


def test_json_round_trip_minimal(tmp_path: Path):
    run = RunResult(parameters={}, local={}, remote={}, meta={})
    path = tmp_path / "empty.json"
    save_run(run, path)
    loaded = load_json(path)
    assert loaded == run
    assert loaded.status == "complete" and loaded.status_reason is None
    assert run_json(loaded)["body"]["summary"] == {"sizes_measured": 0}


def test_save_json_overwrites(tmp_path: Path):
    path = tmp_path / "run.json"
    path.write_text("old junk")
    save_run(make_run(), path)
    assert load_json(path) == make_run()


def test_from_json_defaults_optional_fields():
    doc = run_json(make_run())
    del doc["body"]["status_reason"], doc["body"]["warnings"], doc["body"]["summary"]
    run = from_json(doc)
    assert run.status_reason is None and run.warnings == []
    assert run.sizes == make_run().sizes


def test_summary_picks_peak_and_latency():
    s = summary(make_run())
    assert s["sizes_measured"] == 4
    assert s["sizes_not_converged"] == 1
    assert s["latency_size"] == 1
    assert s["latency_median_us"] == 10.0
    assert s["latency_p99_us"] == pytest.approx(13.0)
    assert s["peak_size"] == 65536
    assert s["peak_throughput_bps"] == pytest.approx(65536 * 8 / 200e-6)
    assert s["corrupt_messages"] == 2


def test_summary_of_nothing():
    assert summary(RunResult({}, {}, {}, {})) == {"sizes_measured": 0}


# --- the summary, the stored analysis and compare show one latency (issue 9, 6.2) ----------

def first_size_outlier_run() -> RunResult:
    """The trial's case: the first size ran 3.36 us, the small sizes around 23.42 us."""
    run = make_run()
    run.status, run.status_reason, run.warnings = "complete", None, []
    run.parameters["sizes"] = 7
    run.meta.update(peer="10.0.0.2 port 5202", duration_s=1.0)
    run.sizes = [size_result(1, 3.36), size_result(2, 23.0), size_result(4, 23.42),
                 size_result(8, 24.0), size_result(16, 25.0), size_result(65536, 200.0),
                 size_result(1048576, 5000.0)]
    return run


def summary_text(run: RunResult) -> str:
    from beoperf.report.pingpong import text

    return text(run)


def test_summary_latency_is_the_analysis_figure_with_its_own_ci(tmp_path: Path):
    run = first_size_outlier_run()
    doc = run_json(run)["body"]
    analysis = doc["analysis"]
    assert (analysis["latency_size"], analysis["latency_us"]) == (4, 23.42)
    assert analysis["latency_ci95_halfwidth_us"] == pytest.approx(0.2342)  # size 4's CI
    s = doc["summary"]
    assert (s["latency_size"], s["latency_median_us"]) == (4, analysis["latency_us"])
    assert s["latency_p99_us"] == analysis["latency_p99_us"] == pytest.approx(23.42 * 1.3)
    assert s["latency_ci95_halfwidth_us"] == analysis["latency_ci95_halfwidth_us"]
    text = summary_text(run)
    assert "latency    23.42 us median [23.19, 23.65] us for this run only; between runs " \
           "not known: this result records none\n" \
           "             (one-way at 4 B, 3 trials, 42 samples; 30.45 us p99; " in text
    assert s["latency_ci95_us"] == s["latency_ci95_within_run_us"] == \
        pytest.approx([23.42 - 0.2342, 23.42 + 0.2342])  # stored as a half-width only
    assert "3.36" not in text
    path = tmp_path / "run.json"
    save_run(run, path)
    from helpers import cli

    table = cli("compare", str(path), "--format", "csv")
    assert table.status == 0, table.stderr
    row = next(csv.DictReader(io.StringIO(table.stdout)))
    assert float(row["latency_us"]) == 23.42


def test_summary_warns_of_a_throughput_collapse():
    run = first_size_outlier_run()
    run.sizes[-1] = size_result(1048576, 400000.0)  # 21 Mbit/s after 2621 Mbit/s at 64K
    doc = run_json(run)["body"]
    (collapse,) = doc["analysis"]["collapses"]
    assert (collapse["first_size"], collapse["last_size"]) == (1048576, 1048576)
    assert doc["summary"]["throughput_collapses"] == 1
    assert doc["summary"]["peak_size"] == 65536
    text = summary_text(run)
    assert "  WARN      throughput collapse at 1048576 B: down to 1/125 of the 2621 Mbit/s " \
           "reached at 65536 B; latency, peak, saturation, n1/2 and the fits use the sizes " \
           "outside the collapse" in text
    assert summary(make_run())["throughput_collapses"] == 0


def test_summary_says_what_is_wrong_first_in_severity_order():
    """Corrupted messages (FAIL) before the stop and the refused option (WARN), before
    the size short of its precision (IMPRECISE), all before the figures."""
    lines = summary_text(make_run()).splitlines()
    labels = [line.split()[0] for line in lines[1:] if line.startswith("  ") and
              not line.startswith("   ")]
    assert labels[:4] == ["FAIL", "WARN", "WARN", "IMPRECISE"], lines
    assert labels[4] == "latency"
    assert lines[1] == "  FAIL      2 corrupted message(s) at size 64 KiB"
    assert "  WARN      the sweep is interrupted: interrupted by the user (4 sizes kept)" \
        in lines
    assert "  WARN      SO_BUSY_POLL=50 refused: Operation not permitted" in lines
    assert any(line.startswith("  IMPRECISE 1 of 4 sizes did not reach ±2%: widest ±")
               for line in lines)


# --- load_json errors ----------------------------------------------------------------------

def _write(tmp_path: Path, text: str, name: str = "result.json") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _assert_format_error(path: Path, match: str | None = None) -> ResultFormatError:
    with pytest.raises(ResultFormatError) as info:
        load_json(path)
    assert str(path) in str(info.value), "the message names the file"
    if match:
        assert match in str(info.value)
    return info.value


def test_result_format_error_is_value_error():
    assert issubclass(ResultFormatError, ValueError)


def test_load_not_json(tmp_path: Path):
    _assert_format_error(_write(tmp_path, "this is not json\n"), "invalid JSON")


def test_load_truncated(tmp_path: Path):
    text = json.dumps(run_json(make_run()), indent=1)
    _assert_format_error(_write(tmp_path, text[: len(text) // 2]), "truncated JSON")


def test_load_empty_file(tmp_path: Path):
    _assert_format_error(_write(tmp_path, ""), "not JSON")


def test_load_binary_file(tmp_path: Path):
    path = tmp_path / "result.json"
    path.write_bytes(b"\xff\xfe\x00garbage\x80\x81")
    _assert_format_error(path)


def test_load_missing_file(tmp_path: Path):
    _assert_format_error(tmp_path / "nope.json", "cannot read")


def test_load_directory(tmp_path: Path):
    _assert_format_error(tmp_path, "is a directory")


@pytest.mark.parametrize("doc", [
    [1, 2, 3],
    "beoperf.pingpong",
    42,
    None,
    {"format": "netpipe", "schema_version": 1},
    {"schema_version": 1, "sizes": []},
    {"iperf3": {"start": {}}, "end": {}},
])
def test_load_other_format(tmp_path: Path, doc):
    _assert_format_error(_write(tmp_path, json.dumps(doc)), "not a beoperf document")


def test_load_another_kind(tmp_path: Path):
    doc = {"format": "beoperf", "kind": "nonsense", "schema_version": 1, "meta": {}, "body": {}}
    _assert_format_error(_write(tmp_path, json.dumps(doc)), "unknown kind 'nonsense'")


@pytest.mark.parametrize("version, why", [(0, "bad schema_version 0"),
                                          (99, "schema version 99 is newer"),
                                          ("2", "bad schema_version '2'"),
                                          (None, "bad schema_version None")])
def test_load_wrong_schema_version(tmp_path: Path, version, why):
    doc = run_json(make_run())
    doc["schema_version"] = version
    _assert_format_error(_write(tmp_path, json.dumps(doc)), why)


def test_load_missing_schema_version(tmp_path: Path):
    doc = run_json(make_run())
    del doc["schema_version"]
    _assert_format_error(_write(tmp_path, json.dumps(doc)), "bad schema_version")


@pytest.mark.parametrize("key", ["parameters", "local", "remote", "sizes", "status"])
def test_load_missing_body_key(tmp_path: Path, key):
    doc = run_json(make_run())
    del doc["body"][key]
    err = _assert_format_error(_write(tmp_path, json.dumps(doc)), "not a valid pingpong")
    assert key in str(err)


def test_load_missing_meta(tmp_path: Path):
    doc = run_json(make_run())
    del doc["meta"]
    _assert_format_error(_write(tmp_path, json.dumps(doc)), "'meta' is a required property")


@pytest.mark.parametrize("mutate", [
    lambda d: d["sizes"][0].pop("time_us"),
    lambda d: d["sizes"][1].pop("size"),
    lambda d: d["sizes"][0].update(unexpected=1),
    lambda d: d.update(sizes=[1, 2]),
    lambda d: d.update(sizes=7),
    lambda d: d.update(sizes=None),
    lambda d: d.update(warnings=None),
], ids=["no-time_us", "no-size", "extra-key", "sizes-ints", "sizes-int", "sizes-null",
        "warnings-null"])
def test_load_malformed_sizes(tmp_path: Path, mutate):
    doc = copy.deepcopy(run_json(make_run()))
    mutate(doc["body"])
    _assert_format_error(_write(tmp_path, json.dumps(doc)), "not a valid pingpong document")


def test_load_deeply_nested_json(tmp_path: Path):
    """Valid-looking but pathological JSON must still give a ResultFormatError."""
    _assert_format_error(_write(tmp_path, "[" * 100_000 + "]" * 100_000))


def test_from_json_names_the_source():
    with pytest.raises(ResultFormatError, match="^somewhere: "):
        from_json({"format": "x"}, "somewhere")


# --- NetPIPE np.out ------------------------------------------------------------------------

def _run_with(mode: str, sizes: list[SizeResult]) -> RunResult:
    return RunResult(parameters={"mode": mode}, local={}, remote={}, meta={}, sizes=sizes)


def test_netpipe_mbps_unit():
    assert NETPIPE_MBPS == 2**20


def test_netpipe_line_one_byte_in_10us():
    lines = netpipe_lines(_run_with("pingpong", [size_result(1, 10.0)]))
    assert lines == ["       1 0.762939   0.00001000"]
    assert lines[0] == "%8d %f %12.8f" % (1, 8 / 10e-6 / 2**20, 10e-6)  # noqa: UP031 - C format


def test_netpipe_lines_exact_format():
    sizes = [size_result(1, 10.0), size_result(1024, 20.0), size_result(123456789, 1e6)]
    lines = netpipe_lines(_run_with("pingpong", sizes))
    expected = []
    for s in sizes:
        seconds = s.time_us["median"] / 1e6
        line = "%8d %f %12.8f" % (s.size, s.size * 8 / seconds / 2**20, seconds)  # noqa: UP031
        expected.append(line)
    assert lines == expected
    assert lines[1] == "    1024 390.625000   0.00002000"
    assert lines[2].startswith("123456789 ")
    assert lines[2].endswith(" 1.00000000")
    for line in lines:
        size, mbps, seconds = line.split()
        assert len(seconds.split(".")[1]) == 8
        assert len(mbps.split(".")[1]) == 6


def test_netpipe_third_column_is_seconds_of_the_median_without_trial_means():
    s = size_result(4096, 123.456, min_us=50.0)
    (line,) = netpipe_lines(_run_with("pingpong", [s]))
    assert float(line.split()[2]) == pytest.approx(123.456e-6, abs=1e-8)


def test_netpipe_uses_netpipes_own_statistic_the_best_trial_mean():
    s = size_result(4096, 123.456, min_us=50.0)
    s.time_us["best_trial_mean"] = 120.0
    (line,) = netpipe_lines(_run_with("pingpong", [s]))
    assert float(line.split()[2]) == pytest.approx(120e-6, abs=1e-8)
    assert float(line.split()[1]) == pytest.approx(4096 * 8 / 120e-6 / 2**20, rel=1e-6)


def test_netpipe_bidir_counts_both_directions():
    s = size_result(1, 10.0)
    (uni,) = netpipe_lines(_run_with("pingpong", [s]))
    (bi,) = netpipe_lines(_run_with("bidir", [s]))
    assert float(bi.split()[1]) == pytest.approx(2 * float(uni.split()[1]), abs=1e-6)
    assert bi == "       2 1.525879   0.00001000"  # NetPIPE 3.7 writes bits/8 = 2 x size
    assert bi.split()[2] == uni.split()[2]  # the time column is unchanged


def test_netpipe_stream_like_pingpong():
    s = size_result(1024, 20.0)
    assert netpipe_lines(_run_with("stream", [s])) == netpipe_lines(_run_with("pingpong", [s]))


def test_netpipe_write_read_round_trip(tmp_path: Path):
    run = make_run()
    path = tmp_path / "np.out"
    path.write_text(netpipe(run))
    assert not (tmp_path / "np.out.tmp").exists()
    text = path.read_text()
    assert text.endswith("\n") and text.count("\n") == len(run.sizes)
    rows = read_netpipe(path)
    assert [r[0] for r in rows] == [s.size for s in run.sizes]
    for (size, mbps, seconds), s in zip(rows, run.sizes, strict=True):
        assert isinstance(size, int)
        assert seconds == pytest.approx(s.time_us["median"] * 1e-6, abs=1e-8)
        assert mbps == pytest.approx(size * 8 / (s.time_us["median"] * 1e-6) / 2**20, abs=1e-6)


def test_read_netpipe_real_nptcp_output(tmp_path: Path):
    # as NPtcp 3.7 writes it, blank lines tolerated
    path = _write(tmp_path, "       1 0.084589   0.00009019\n\n"
                            "       2 0.169643   0.00008995\n", "np.out")
    assert read_netpipe(path) == [(1, 0.084589, 0.00009019), (2, 0.169643, 0.00008995)]


@pytest.mark.parametrize("text", [
    "garbage\n",
    "1 2\n",
    "       1 0.762939   0.00001000\nnot a line at all\n",
    "1.5 2 3\n",
    "x 0.1 0.2\n",
    "",
    "\n\n  \n",
])
def test_read_netpipe_rejects_garbage(tmp_path: Path, text):
    path = _write(tmp_path, text, "np.out")
    with pytest.raises(ResultFormatError) as info:
        read_netpipe(path)
    assert str(path) in str(info.value)


def test_read_netpipe_names_the_bad_line(tmp_path: Path):
    path = _write(tmp_path, "1 0.1 0.2\n2 0.2 0.3\noops\n", "np.out")
    with pytest.raises(ResultFormatError, match=r"np\.out:3: "):
        read_netpipe(path)


def test_read_netpipe_rejects_binary_garbage(tmp_path: Path):
    path = tmp_path / "np.out"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00\x00")
    with pytest.raises(ResultFormatError):
        read_netpipe(path)


@pytest.mark.parametrize("mutate", [
    lambda d: d["sizes"][0].update(time_us=None),
    lambda d: d["sizes"][0]["time_us"].update(median=[1]),
    lambda d: d["sizes"][0].update(size="1"),
    lambda d: d.update(parameters=None),
    lambda d: d.update(local=[]),
])
def test_load_wrong_types_is_a_format_error(tmp_path: Path, mutate):
    doc = run_json(make_run())
    mutate(doc["body"])
    path = _write(tmp_path, json.dumps(doc))
    _assert_format_error(path, "not a valid pingpong document")


def test_summary_without_an_analysis_gives_counts_only():
    """A size without any time statistic makes the analysis fail: the summary keeps the
    counts and invents no figure, and the printed summary has no latency line."""
    run = first_size_outlier_run()
    run.sizes[2].time_us = {}
    s = summary(run)
    assert s == {"sizes_measured": 7, "sizes_not_converged": 0, "corrupt_messages": 0}
    assert "error" in run_json(run)["body"]["analysis"]
    text = summary_text(run)
    assert "latency" not in text and text.startswith("beoperf pingpong: 10.0.0.2 port 5202")


def test_summary_model_line_without_thresholds_has_no_stray_unit():
    run = make_run()
    run.sizes = [size_result(n, 10.0 + n / 1000.0) for n in (1, 2, 4, 8, 1024, 65536)]
    run.meta.update(peer="beta port 5202", duration_s=1.0)
    model = next(line for line in summary_text(run).splitlines() if "model" in line)
    assert model.endswith("protocol thresholds at: none"), model


def test_stream_mode_names_its_figure_time_per_message_never_latency(tmp_path: Path):
    """A stream sends messages back to back: its small-message figure is a time per
    message, and the text summary, the HTML section and the graphs say so; ping-pong
    keeps its latency."""
    import re

    from beoperf.report import plots
    from beoperf.report.html import pingpong as html_pingpong

    def visible(markup: str) -> str:
        return re.sub(r"<[^>]+>", " ", markup)

    stream, pingpong = make_run("stream"), make_run("pingpong")
    for run in (stream, pingpong):
        run.sizes[2].corrupt = 0
        run.sizes[-1] = size_result(1048576, 400000.0)  # a collapse: its note names it too
    text = summary_text(stream)
    assert "throughput collapse at 1048576 B" in text
    assert "latency" not in text.lower() and "one-way" not in text
    assert "  time/msg   10.00 us median" in text
    assert "(time per message at 1 B, " in text
    section = visible(html_pingpong.html(stream.to_document(), anchor="s"))
    assert "latency" not in section.lower() and "one-way" not in section
    assert "time per message (median)" in section
    for name in ("signature", "saturation"):
        ax = plots.FIGURES[name]([stream], ["s"]).axes[0]
        words = " ".join([ax.get_title(), ax.get_xlabel(), ax.get_ylabel()])
        assert "time per message" in words and "latency" not in words, words
        assert "one-way" not in words
    assert "latency" in summary_text(pingpong) and "one-way" in summary_text(pingpong)
    assert "latency (one-way, median)" in visible(html_pingpong.html(pingpong.to_document(),
                                                                     anchor="s"))

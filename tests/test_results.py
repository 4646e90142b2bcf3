"""The result document (JSON) and NetPIPE's np.out format."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from beoperf.results.model import (
    FORMAT,
    SCHEMA_VERSION,
    ResultFormatError,
    RunResult,
    SizeResult,
    load_json,
    save_json,
    summary,
)
from beoperf.results.netpipe import NETPIPE_MBPS, netpipe_lines, read_netpipe, write_netpipe


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

def test_to_dict_header_and_summary():
    doc = make_run().to_dict()
    assert doc["format"] == FORMAT == "beoperf.pingpong"
    assert doc["schema_version"] == SCHEMA_VERSION == 1
    assert doc["status"] == "interrupted"
    assert [s["size"] for s in doc["sizes"]] == [1, 1024, 65536, 1048576]
    assert doc["summary"] == summary(make_run())
    json.dumps(doc)  # serialisable as is


def test_json_round_trip(tmp_path: Path):
    run = make_run()
    path = tmp_path / "run.json"
    save_json(run, path)
    assert not (tmp_path / "run.json.tmp").exists()
    loaded = load_json(path)
    assert loaded == run
    assert loaded.to_dict() == run.to_dict()
    assert json.loads(path.read_text()) == run.to_dict()
    assert all(isinstance(s, SizeResult) for s in loaded.sizes)


def test_json_round_trip_minimal(tmp_path: Path):
    run = RunResult(parameters={}, local={}, remote={}, meta={})
    path = tmp_path / "empty.json"
    save_json(run, path)
    loaded = load_json(path)
    assert loaded == run
    assert loaded.status == "complete" and loaded.status_reason is None
    assert loaded.to_dict()["summary"] == {"sizes_measured": 0}


def test_save_json_overwrites(tmp_path: Path):
    path = tmp_path / "run.json"
    path.write_text("old junk")
    save_json(make_run(), path)
    assert load_json(path) == make_run()


def test_from_dict_defaults_optional_fields():
    doc = make_run().to_dict()
    del doc["status_reason"], doc["warnings"], doc["summary"]
    run = RunResult.from_dict(doc)
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
    _assert_format_error(_write(tmp_path, "this is not json\n"), "not JSON")


def test_load_truncated(tmp_path: Path):
    text = json.dumps(make_run().to_dict(), indent=1)
    _assert_format_error(_write(tmp_path, text[: len(text) // 2]), "not JSON")


def test_load_empty_file(tmp_path: Path):
    _assert_format_error(_write(tmp_path, ""), "not JSON")


def test_load_binary_file(tmp_path: Path):
    path = tmp_path / "result.json"
    path.write_bytes(b"\xff\xfe\x00garbage\x80\x81")
    _assert_format_error(path)


def test_load_missing_file(tmp_path: Path):
    _assert_format_error(tmp_path / "nope.json", "cannot read")


def test_load_directory(tmp_path: Path):
    _assert_format_error(tmp_path, "cannot read")


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
    _assert_format_error(_write(tmp_path, json.dumps(doc)), "not a beoperf ping-pong result")


@pytest.mark.parametrize("version", [0, 2, 99, "1", None])
def test_load_wrong_schema_version(tmp_path: Path, version):
    doc = make_run().to_dict()
    doc["schema_version"] = version
    err = _assert_format_error(_write(tmp_path, json.dumps(doc)), "schema version")
    assert repr(version) in str(err)


def test_load_missing_schema_version(tmp_path: Path):
    doc = make_run().to_dict()
    del doc["schema_version"]
    _assert_format_error(_write(tmp_path, json.dumps(doc)), "schema version")


@pytest.mark.parametrize("key", ["parameters", "local", "remote", "meta", "sizes", "status"])
def test_load_missing_top_level_key(tmp_path: Path, key):
    doc = make_run().to_dict()
    del doc[key]
    err = _assert_format_error(_write(tmp_path, json.dumps(doc)), "malformed")
    assert key in str(err)


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
    doc = copy.deepcopy(make_run().to_dict())
    mutate(doc)
    _assert_format_error(_write(tmp_path, json.dumps(doc)), "malformed")


def test_load_deeply_nested_json(tmp_path: Path):
    """Valid-looking but pathological JSON must still give a ResultFormatError."""
    _assert_format_error(_write(tmp_path, "[" * 100_000 + "]" * 100_000))


def test_from_dict_names_the_source():
    with pytest.raises(ResultFormatError, match="^somewhere: "):
        RunResult.from_dict({"format": "x"}, "somewhere")


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
    write_netpipe(run, path)
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
    doc = make_run().to_dict()
    mutate(doc)
    path = _write(tmp_path, json.dumps(doc))
    _assert_format_error(path, "malformed")

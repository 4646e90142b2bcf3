"""Importers: NetPIPE 3/5, IMB PingPong, osu_latency and osu_bw into the RunResult model."""

from __future__ import annotations

import json
import re
import shutil
import statistics
from pathlib import Path

import pytest

from beoperf.analysis.curve import analyze_run
from beoperf.model.importers import BPS_KEYS, LACKABLE, NOT_A_RESULT, TIME_KEYS, load_any
from beoperf.model.pingpong import LEGACY_FORMAT, ResultFormatError, RunResult
from helpers import run_json

FIXTURES = Path(__file__).parent / "fixtures"
NETPIPE_MBPS = 2.0**20
ALL_LACKING = sorted(LACKABLE)


def fixture(name: str) -> Path:
    return FIXTURES / name


def table_rows(path: Path, start: str, width: int) -> list[list[float]]:
    """Numeric rows of `width` columns after the first line containing `start`."""
    lines = path.read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if start in line)
    rows = []
    for line in lines[first + 1:]:
        tokens = line.split()
        if len(tokens) != width or tokens[0].startswith("#"):
            break
        rows.append([float(t) for t in tokens])
    return rows


# ---------------------------------------------------------------------------
# the real NPtcp run against NetPIPE's own screen output

SCREEN = re.compile(r"^\s*\d+:\s+(\d+) bytes\s+(\d+) times -->\s+([\d.]+) Mbps in\s+([\d.]+) usec")


def nptcp_screen() -> list[tuple[int, int, float, float]]:
    """(bytes, repeats, Mbps, usec) as NPtcp printed them."""
    found = []
    for line in fixture("nptcp-loopback.stdout").read_text().splitlines():
        m = SCREEN.match(line)
        if m:
            found.append((int(m[1]), int(m[2]), float(m[3]), float(m[4])))
    return found


def test_nptcp_latency_and_peak_equal_netpipes_own_figures():
    run = load_any(fixture("nptcp-loopback.out"))
    screen = nptcp_screen()
    assert len(screen) == len(run.sizes) == 106
    assert [s.size for s in run.sizes] == [b for b, *_ in screen]

    first = run.sizes[0]  # latency: NetPIPE's time at its smallest size (1 B)
    assert first.size == screen[0][0] == 1
    assert round(first.central_time_us(), 2) == screen[0][3]

    size, _, mbps, usec = max(screen, key=lambda row: row[2])  # peak as NetPIPE printed it
    peak = max(run.sizes, key=lambda s: s.central_bps())
    assert peak.size == size
    assert abs(peak.central_bps() / NETPIPE_MBPS - mbps) <= 0.005 + 1e-9
    # NetPIPE's "Mbps" is 2^20 bit/s: bytes and time reproduce its figure only that way
    assert 8 * size / (usec * 1e-6) / NETPIPE_MBPS == pytest.approx(mbps, rel=2e-3)
    assert abs(8 * size / (usec * 1e-6) / 1e6 / mbps - 1.0) > 0.04

    for s, (_, _, mbps, usec) in zip(run.sizes, screen, strict=True):
        assert abs(s.time_us["best_trial_mean"] - usec) <= 0.005 + 1e-9
        assert abs(s.throughput_bps["from_best_trial"] / NETPIPE_MBPS - mbps) <= 0.005 + 1e-9

    analysis = analyze_run(run)
    assert analysis.peak_size == size
    assert analysis.peak_bps == peak.central_bps()
    assert 0 < analysis.latency_us < 1000


def test_netpipe3_units_converted_exactly():
    path = fixture("nptcp-loopback.out")
    run = load_any(path)
    rows = [line.split() for line in path.read_text().splitlines()]
    for s, (size, mbps, seconds) in zip(run.sizes, rows, strict=True):
        assert s.size == int(size)
        assert s.time_us["best_trial_mean"] == float(seconds) * 1e6
        assert s.throughput_bps["from_best_trial"] == float(mbps) * 2**20
        assert s.central_time_us() == s.time_us["best_trial_mean"]
    assert run.source["format"] == "netpipe3"
    assert run.source["lacks"] == ALL_LACKING
    assert "2^20" in run.source["units"]
    assert "fastest trial" in run.source["statistic"]
    assert run.parameters == {"mode": "pingpong", "transport": "tcp", "sizes": 106}
    assert run.warnings == []


def test_netpipe_screen_output_is_refused_with_a_hint():
    path = fixture("nptcp-loopback.stdout")
    with pytest.raises(ResultFormatError, match="screen output.*-o") as err:
        load_any(path)
    assert str(path) in str(err.value)


# ---------------------------------------------------------------------------
# NetPIPE 5, IMB, OSU: every format imported with its units


def test_netpipe5():
    path = fixture("netpipe5-mpi.out")
    run = load_any(path)
    rows = [[float(t) for t in line.split()] for line in path.read_text().splitlines()]
    assert [s.size for s in run.sizes] == [int(r[0]) for r in rows]
    for s, (size, avg_gbps, _, _, usec) in zip(run.sizes, rows, strict=True):
        assert s.time_us["mean"] == usec
        assert s.throughput_bps["from_mean"] == 8 * size / (usec * 1e-6)
        assert s.throughput_bps["from_mean"] / 1e9 == pytest.approx(avg_gbps, abs=0.0005, rel=0.01)
    assert run.source["format"] == "netpipe5"
    assert run.source["lacks"] == ALL_LACKING
    assert "mean over the trials" in run.source["statistic"]
    assert run.parameters["mode"] == "pingpong" and "pairs" not in run.parameters


def test_imb_2021_several_benchmarks_in_one_file():
    path = fixture("imb-2021-pingpong.txt")
    run = load_any(path)
    rows = table_rows(path, "#bytes", 4)  # the first table, PingPong's
    assert rows[0][0] == 0  # the 0-byte row is dropped (beoperf sizes start at 1 B)
    assert run.meta["zero_byte_time_us"] == rows[0][2]
    assert [s.size for s in run.sizes] == [int(r[0]) for r in rows[1:]] == [2**k for k in range(23)]
    for s, (size, reps, t, mbytes) in zip(run.sizes, rows[1:], strict=True):
        assert s.time_us["mean"] == t and s.reps == reps and s.trials == 1
        assert s.throughput_bps["from_mean"] == 8 * size / (t * 1e-6)
        assert s.throughput_bps["from_mean"] / 8 / 1e6 == pytest.approx(mbytes, rel=0.01, abs=0.01)
    assert run.sizes[-1].time_us["mean"] == 357.74  # PingPong's, not PingPing's or Sendrecv's
    assert run.source["format"] == "imb-pingpong"
    assert run.source["lacks"] == sorted(set(LACKABLE) - {"trials"})
    assert "10^6 bytes/s" in run.source["units"]
    assert run.meta["version"] == "2021.7"
    assert run.parameters == {"mode": "pingpong", "transport": "mpi", "sizes": 23,
                              "processes": 2}
    assert "the file also holds PingPing, Sendrecv; imported PingPong" in run.warnings


def test_imb_3_windows_line_endings_and_2_20_megabytes():
    path = fixture("imb-3.2-pingpong-windows.txt")
    assert b"\r\n" in path.read_bytes()
    run = load_any(path)
    rows = table_rows(path, "#bytes", 4)[1:]
    assert len(run.sizes) == len(rows) == 23
    for s, (_, _, t, mbytes) in zip(run.sizes, rows, strict=True):
        assert s.time_us["mean"] == t
        # IMB 3.x's Mbytes/sec is 2^20 bytes/s; beoperf's bit/s stay SI (from t[usec])
        assert s.throughput_bps["from_mean"] / 8 / 2**20 == pytest.approx(mbytes, rel=0.01,
                                                                           abs=0.01)
    assert "2^20 bytes/s" in run.source["units"]
    assert run.meta["version"] == "V3.2.3"


def test_osu_latency_plain():
    path = fixture("osu_latency-5.6.3.txt")
    run = load_any(path)
    rows = table_rows(path, "# Size", 2)
    assert rows[0][0] == 0 and run.meta["zero_byte_time_us"] == rows[0][1]
    for s, (size, latency) in zip(run.sizes, rows[1:], strict=True):
        assert s.size == size and s.time_us["mean"] == latency
        assert s.throughput_bps["from_mean"] == 8 * size / (latency * 1e-6)
        assert s.time_us["median"] is None and s.throughput_bps["from_median"] is None
    assert run.source["format"] == "osu-latency"
    assert run.source["lacks"] == sorted(set(LACKABLE) - {"trials"})
    assert run.source["statistic"].startswith("OSU: average")
    assert run.parameters == {"mode": "pingpong", "transport": "mpi", "sizes": 23}
    assert run.meta["version"] == "v5.6.3"


def test_osu_latency_tail_percentiles_and_trailing_lines():
    path = fixture("osu_latency-7.4-tail.txt")
    run = load_any(path)
    rows = table_rows(path, "# Size", 5)
    assert len(rows) == len(run.sizes) == 23
    for s, (size, mean, p50, p90, p99) in zip(run.sizes, rows, strict=True):
        assert s.time_us["mean"] == mean
        assert (s.time_us["median"], s.time_us["p90"], s.time_us["p99"]) == (p50, p90, p99)
        assert s.central_time_us() == p50  # a true median: of per-iteration half round trips
        assert s.central_bps() == 8 * size / (p50 * 1e-6)
        assert s.throughput_bps["from_mean"] == 8 * size / (mean * 1e-6)
    assert run.source["lacks"] == ["ci", "mad", "max", "min", "samples", "stddev",
                                   "trial_medians"]
    assert run.source["statistic"].startswith("OSU: median (P50)")
    assert run.warnings == [] and "zero_byte_time_us" not in run.meta
    analysis = analyze_run(run)
    assert analysis.latency_us == pytest.approx(1.03, abs=0.05)
    assert analysis.latency_p99_us is not None


def test_osu_7_2_datatype_line_after_the_header():
    """OSU 7.1-7.3 print '# Datatype: MPI_CHAR.' after '# Size' (a real 7.2 run, issue 28)."""
    path = fixture("osu_latency-7.2-datatype.txt")
    run = load_any(path)
    rows = table_rows(path, "# Datatype", 2)
    assert len(rows) == len(run.sizes) == 23
    for s, (size, latency) in zip(run.sizes, rows, strict=True):
        assert s.size == size and s.time_us["mean"] == latency
    assert run.meta["version"] == "v7.2" and run.warnings == []


def test_osu_bw_7_2_datatype_line_after_the_header():
    """A real ReFrame run of osu_bw 7.2 at one size (-m 1048576:1048576)."""
    run = load_any(fixture("osu_bw-7.2-reframe-one-size.txt"))
    size, = run.sizes
    assert size.size == 1048576 and size.throughput_bps["from_mean"] == 11090.27 * 8e6
    assert run.source["format"] == "osu-bw" and run.meta["version"] == "v7.2"


def test_osu_table_followed_by_a_job_log_is_read_to_the_tables_end():
    """A real flux job's output: the OSU 5.8 table, then its jobspec and event log."""
    path = fixture("osu_latency-5.8-flux-joblog.txt")
    run = load_any(path)
    rows = table_rows(path, "# Size", 2)
    assert run.meta["zero_byte_time_us"] == rows[0][1]
    assert [(s.size, s.time_us["mean"]) for s in run.sizes] == [tuple(r) for r in rows[1:]]
    last = len(rows) + 2  # the title and the header come first
    total = len(path.read_text().splitlines())
    assert run.warnings == [f"the OSU table ends at line {last}; the {total - last} line(s) "
                            "after it are other output, not read"]


def test_osu_bw_is_a_stream_with_si_megabytes():
    path = fixture("osu_bw-7.4.txt")
    run = load_any(path)
    rows = table_rows(path, "# Size", 2)
    for s, (size, mbs) in zip(run.sizes, rows, strict=True):
        assert s.size == size
        assert s.throughput_bps["from_mean"] == pytest.approx(mbs * 8e6, rel=1e-12)
        assert s.time_us["mean"] == size / mbs  # us per message: bytes / (10^6 bytes/s)
    assert run.parameters == {"mode": "stream", "transport": "mpi", "sizes": 23}
    assert run.source["format"] == "osu-bw"
    assert "10^6" in run.source["units"]


ALL_FIXTURES = ["nptcp-loopback.out", "netpipe5-mpi.out", "imb-2021-pingpong.txt",
                "imb-3.2-pingpong-windows.txt", "osu_latency-5.6.3.txt",
                "osu_latency-7.4-tail.txt", "osu_bw-7.4.txt", "osu_latency-7.2-datatype.txt",
                "osu_latency-5.8-flux-joblog.txt"]


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_every_import_has_the_common_shape(name):
    path = fixture(name)
    run = load_any(path)
    assert set(run.parameters) >= {"mode", "transport", "sizes"}
    assert run.parameters["sizes"] == len(run.sizes) > 0
    assert run.local == {} and run.remote == {} and run.status == "complete"
    assert run.meta["imported_from"] == str(path)
    assert set(run.source) == {"format", "path", "statistic", "lacks", "units"}
    assert run.source["path"] == str(path)
    assert run.source["lacks"] == sorted(run.source["lacks"])
    assert set(run.source["lacks"]) <= set(LACKABLE)
    assert run.label() == path.stem
    for s in run.sizes:
        assert tuple(s.time_us) == TIME_KEYS and tuple(s.throughput_bps) == BPS_KEYS
        assert s.converged and s.ci95_halfwidth_us is None and s.ci95_relative is None
        assert s.trial_medians_us is None and s.corrupt == 0
        assert s.central_time_us() > 0


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_analyze_run_on_every_import(name):
    run = load_any(fixture(name))
    analysis = analyze_run(run)
    peak = max(run.sizes, key=lambda s: s.central_bps())
    assert analysis.peak_bps == peak.central_bps() and analysis.peak_size == peak.size
    small = [s.central_time_us() for s in run.sizes if s.size <= 16]
    assert analysis.latency_us == pytest.approx(statistics.median(small), rel=1e-12)
    fit = analysis.hockney or analysis.rejected  # the fit, given as a model or not
    assert fit is not None and fit.bandwidth_bps > 0
    # a model only where it is physical (issue 25): NPtcp's noisy loopback, R^2 0.803, not
    assert (analysis.hockney is None) == (fit.r2 < 0.9 or fit.alpha_us <= 0)
    assert (analysis.model_problem is None) == (analysis.hockney is not None)


@pytest.mark.parametrize("name", ["nptcp-loopback.out", "osu_latency-7.4-tail.txt"])
def test_saved_import_reloads_as_beoperf_json_whatever_its_name(tmp_path, name):
    run = load_any(fixture(name))
    saved = tmp_path / "looks-like-netpipe.out"  # detected by content, not by name
    saved.write_text(json.dumps(run_json(run)))
    again = load_any(saved)
    assert again.source == run.source and again.sizes == run.sizes


def test_detection_is_by_content_not_extension(tmp_path):
    disguised = tmp_path / "latency.json"
    shutil.copy(fixture("osu_latency-5.6.3.txt"), disguised)
    assert load_any(disguised).source["format"] == "osu-latency"


# ---------------------------------------------------------------------------
# odd but valid files


def test_utf16_and_bom(tmp_path):
    text = fixture("osu_latency-5.6.3.txt").read_text()
    utf16 = tmp_path / "osu-powershell.txt"  # PowerShell's '>' writes UTF-16 with a BOM
    utf16.write_bytes(text.encode("utf-16"))
    bom = tmp_path / "osu-bom.txt"
    bom.write_bytes(text.encode("utf-8-sig"))
    expected = load_any(fixture("osu_latency-5.6.3.txt")).sizes
    assert load_any(utf16).sizes == expected == load_any(bom).sizes


def test_imb_failed_sizes_are_skipped_with_a_warning(tmp_path):
    text = fixture("imb-2021-pingpong.txt").read_text()
    last = re.search(r"^ +4194304 +10 +[\d.]+ +[\d.]+$", text, re.M)
    path = tmp_path / "imb-timeout.txt"
    path.write_text(text[:last.start()] + "      4194304 time-out.; Time limit (secs_per_sample "
                    "* msg_sizes_list_len) is over; use \"-time X\" or SECS_PER_SAMPLE=X "
                    "(IMB_settings.h) to increase time limit." + text[last.end():])
    run = load_any(path)
    assert run.sizes[-1].size == 2097152
    assert [w for w in run.warnings if "time-out" in w] == [
        "size 4194304 B: IMB reported time-out; skipped"]


def test_imb_multi_mode_table_uses_t_avg(tmp_path):
    path = tmp_path / "imb-multi0.txt"  # IMB-MPI1 -multi 0 PingPong on 2 ranks: one group
    head = "       #bytes #repetitions  t_min[usec]  t_max[usec]  t_avg[usec]   Mbytes/sec\n"
    row = "{:13d}{:13d}{:13.2f}{:13.2f}{:13.2f}{:13.2f}\n"
    path.write_text("# Benchmarking PingPong\n# #processes = 2\n" + head
                    + row.format(1, 1000, 1.50, 1.70, 1.60, 0.59)
                    + row.format(1024, 1000, 2.00, 2.40, 2.20, 426.67))
    run = load_any(path)
    assert [s.time_us["mean"] for s in run.sizes] == [1.60, 2.20]
    assert "t_avg" in run.source["statistic"]
    assert "10^6 bytes/s" in run.source["units"]  # checked against t_max, as IMB computes it


def test_imb_multi_pingpong_of_several_pairs_is_not_a_pingpong(tmp_path):
    path = tmp_path / "imb-multi.txt"
    path.write_text("# Benchmarking Multi-PingPong\n# ( 2 groups of 2 processes each running "
                    "simultaneous )\n")
    with pytest.raises(ResultFormatError, match="Multi-PingPong .-multi: several groups of "
                                                "processes at once. is not read; beoperf reads"):
        load_any(path)


def test_osu_validation_and_tail_bandwidth(tmp_path):
    path = tmp_path / "osu_bw-validate.txt"
    path.write_text("# OSU MPI Bandwidth Test v7.4\n"
                    "# Size      Bandwidth (MB/s)          Validation   P50 Tail BW(MB/s)"
                    "   P90 Tail BW(MB/s)   P99 Tail BW(MB/s)\n"
                    "1                       4.00                Pass                4.20"
                    "                4.50                4.90\n"
                    "1024                 4000.00                Fail             4100.00"
                    "             4300.00             4500.00\n")
    run = load_any(path)
    one, kib = run.sizes
    assert one.time_us["mean"] == 0.25 and one.time_us["median"] == 1 / 4.2
    assert kib.central_bps() == pytest.approx(4100 * 8e6)  # from the median (P50) bandwidth
    assert one.time_us["p90"] is None  # a bandwidth's P90 is the time's 10th percentile
    assert run.warnings == ["size 1024 B: OSU validation failed"]
    assert "P90/P99 Tail BW" in run.source["units"]


def test_netpipe5_aggregate_pairs_and_workload_column(tmp_path):
    path = tmp_path / "np.aggregate"
    # two pairs: the Gbps columns are the pairs' sum; with --workload a column is appended
    path.write_text("        1     0.012     0.011     0.012    1.35   12.34 GB/sec\n"
                    "  1048576   160.000   150.000   165.000  104.86   11.02 GB/sec\n")
    run = load_any(path)
    assert run.parameters["pairs"] == 2
    assert run.sizes[1].throughput_bps["from_mean"] == pytest.approx(2 * 8 * 1048576 / 104.86e-6)


# ---------------------------------------------------------------------------
# files that are not results: one clear line naming the file

VALID = {"format": LEGACY_FORMAT, "schema_version": 1, "parameters": {}, "local": {}, "remote": {},
         "meta": {}, "sizes": [], "status": "complete"}
IMB_HEAD = ("# Benchmarking PingPong\n# #processes = 2\n"
            "       #bytes #repetitions      t[usec]   Mbytes/sec\n")
NP3 = "       1 0.705389   0.00001082\n       2 1.365240   0.00001118\n"

BAD: dict[str, tuple[bytes | str, str]] = {
    "empty": ("", "empty file"),
    "blank": ("\n  \n\t\n", "empty file"),
    "binary": (bytes(range(256)) * 4, "binary data"),
    "gzip": (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03np.out", "binary data"),
    "latin1": ("caf\xe9 1 2 3\n".encode("latin-1"), "binary data"),
    "truncated-json": (json.dumps(VALID)[:60], "truncated JSON"),
    "truncated-json-string": ('{"format": "beoperf.pin', "truncated JSON"),
    "invalid-json": ('{"format": "beoperf.pingpong",, }', "invalid JSON"),
    "json-version": (json.dumps({**VALID, "schema_version": 99}), "schema version 99 is not"),
    "json-other": (json.dumps({"format": "iperf3", "intervals": []}),
                   "not a beoperf document \\(format 'iperf3'\\)"),
    "json-list": ("[1, 2, 3]", "not a beoperf document"),
    "json-malformed": (json.dumps({**VALID, "sizes": [{"size": 1}]}),
                       "not a valid pingpong document at body/sizes/0"),
    "text": ("hello\nworld\n", re.escape(NOT_A_RESULT)),
    "csv": ("size,latency\n1,2.5\n", re.escape(NOT_A_RESULT)),
    "np-non-numeric": (NP3 + "       3 abc   0.00001097\n", ":3: 'abc' is not a number"),
    "np-nan": (NP3 + "       3 nan   0.00001097\n", ":3: 'nan' is not a finite number"),
    "np-truncated": (NP3 + "       3 2.08", ":3: 2 columns where line 1 has 3 \\(truncated"),
    "np-not-ascending": (NP3 + NP3, "not ascending \\(1 B after 2 B"),
    "np-integrity": ("       1 1000\n       2 1000\n", "integrity-check"),
    "np5-integrity": ("        1 bytes   1000 times        0 failures\n", "integrity-check"),
    "np-neither": ("1 2 3 4\n2 4 6 8\n", "neither NetPIPE 3"),
    "imb-no-rows": (IMB_HEAD, "without any data rows \\(truncated\\?\\)"),
    "imb-no-table": ("# Benchmarking PingPong\n# #processes = 2\n", "without its '#bytes"),
    "imb-non-numeric": (IMB_HEAD + "            1         1000         x.62         0.61\n",
                        ":4: 'x.62' is not a number"),
    "imb-truncated": (IMB_HEAD + "            1         1000         1.62         0.61\n"
                      "            2         10", ":5: 2 columns in an IMB table of 4"),
    "imb-other-benchmarks": ("# Benchmarking Allreduce\n# Benchmarking Bcast\n",
                             "without a PingPong, PingPing, Sendrecv or Exchange benchmark "
                             "\\(found: Allreduce, Bcast\\)"),
    "osu-multi-lat": ("# OSU MPI Multi Latency Test v7.4\n# Size  Latency (us)\n1 2.0\n",
                      "'OSU MPI Multi Latency Test' is not supported"),
    "osu-collective": ("# OSU MPI Allreduce Latency Test v7.0\n", "is not supported"),
    "osu-no-header": ("# OSU MPI Latency Test v7.4\n", "without its '# Size"),
    "osu-non-numeric": ("# OSU MPI Latency Test v7.4\n# Size  Latency (us)\n1  0.5\n2  fast\n",
                        ":4: 'fast' is not a number"),
    "osu-mixed": ("# OSU MPI Latency Test v7.4\n# Size  Latency (us)\n1  0.5\n"
                  "[node01:1234] warning: something\n2  0.6\n",
                  ":4: 3 columns in an OSU table of 2"),
    "osu-unknown-column": ("# OSU MPI Latency Test v7.4\n# Size  Latency (us)  Jitter (us)\n",
                           "unknown OSU column 'Jitter \\(us\\)'"),
    "osu-empty": ("# OSU MPI Latency Test v7.4\n# Size  Latency (us)\n", "without any data rows"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_not_a_result_gives_one_line_naming_the_file(tmp_path, case):
    content, pattern = BAD[case]
    path = tmp_path / f"{case}.out"
    if isinstance(content, str):
        path.write_text(content)
    else:
        path.write_bytes(content)
    with pytest.raises(ResultFormatError, match=pattern) as err:
        load_any(path)
    message = str(err.value)
    assert message.startswith(str(path)) and "\n" not in message


def test_unreadable_paths(tmp_path):
    for path, why in ((tmp_path / "missing.out", "cannot read"), (tmp_path, "is a directory")):
        with pytest.raises(ResultFormatError, match=why) as err:
            load_any(path)
        assert str(path) in str(err.value)


def test_load_any_returns_run_results():
    assert isinstance(load_any(str(fixture("nptcp-loopback.out"))), RunResult)

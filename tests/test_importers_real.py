"""Real output files other people made with OSU, IMB and HPCC (issue 28): each imports
exactly the figures its own text prints.  The expected figures are read here by the
simplest reading of the text (a table's rows, the summary's key=value lines), independent
of the importers; the sources of the files are in tests/fixtures/others/README.md."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from beoperf.model import hpcc
from beoperf.model.importers import load_any
from beoperf.model.pingpong import ResultFormatError
from helpers import cli

OTHERS = Path(__file__).parent / "fixtures" / "others"
OSU = sorted((OTHERS / "osu").glob("*.txt"))
IMB_REFUSED = OTHERS / "imb" / "imb-2019u6-multi-pingpong-only-pkb.txt"  # IMB -multi 0
IMB = [p for p in sorted((OTHERS / "imb").glob("*.txt")) if p != IMB_REFUSED]
HPCC = sorted((OTHERS / "hpcc").glob("*.txt"))

# the warnings each file must give (none unless named)
IMB_WARNINGS = {
    "imb-2018-multi-and-sendrecv-akrr.txt": [
        "the file also holds Exchange; imported Sendrecv",
        "Multi-PingPong, Multi-PingPing (-multi: several groups of processes at once) not read"],
    "imb-2019u2-pingpong-akrr-docs-block.txt": [
        "the file also holds PingPing, Sendrecv, Exchange; imported PingPong"],
    "imb-2019u6-show-tail-pkb.txt": [
        "2 bracketed line(s) of latency percentiles under the rows (PerfKitBenchmarker's "
        "patched IMB, -show_tail) not read"]}
# IMB's Mbytes/sec: 2^20 bytes/s up to IMB 4.x, 10^6 since IMB 2018 (IMB_output.c's MEGA)
IMB_MEGA = {"4.0 Update 1": 2**20}


def close(a: float | None, b: float) -> bool:
    return a is not None and math.isclose(a, b, rel_tol=1e-12)


# --------------------------------------------------------------------------- what the text says


def osu_rows(text: str) -> list[tuple[int, float]]:
    """(size, first figure) of each row of the first OSU table: the lines after its
    '# Size' line that start with a size and a number, up to the first other line."""
    lines = text.splitlines()
    title = next(i for i, line in enumerate(lines) if line.lstrip().startswith("# OSU"))
    header = next(i for i in range(title, len(lines)) if lines[i].lstrip().startswith("# Size"))
    rows: list[tuple[int, float]] = []
    for line in lines[header + 1:]:
        tokens = line.split()
        if len(tokens) >= 2 and tokens[0].isdigit():
            rows.append((int(tokens[0]), float(tokens[1])))
        elif rows or (tokens and not tokens[0].startswith("#")):
            break
    return rows


def imb_rows(text: str, benchmark: str) -> list[dict[str, float]]:
    """The rows of the first '# Benchmarking BENCHMARK' table, {column name: value}."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines)
                 if line.split()[:3] == ["#", "Benchmarking", benchmark])
    header = next(i for i in range(start, len(lines)) if "#bytes" in lines[i].split())
    names = lines[header].split()
    rows: list[dict[str, float]] = []
    for line in lines[header + 1:]:
        tokens = line.split()
        if not tokens or tokens[0].startswith("#"):
            if rows:
                break
            continue
        if tokens[0].startswith("["):  # a patched IMB's percentiles under a row
            continue
        rows.append(dict(zip(names, map(float, tokens), strict=True)))
    return rows


def hpcc_summaries(text: str) -> list[dict[str, str]]:
    """Each summary section's key=value pairs as printed."""
    runs: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    for line in text.splitlines():
        if line.strip() == "Begin of Summary section.":
            current = {}
        elif line.strip() == "End of Summary section.":
            assert current is not None
            runs.append(current)
            current = None
        elif current is not None:
            key, _, value = line.strip().partition("=")
            current[key] = value.strip()
    return runs


# --------------------------------------------------------------------------- the imports


def test_enough_real_files_of_other_people():
    # the tally: at least 5 HPCC, 5 OSU across 5.x-7.x, 3 IMB (besides the three
    # OSU files in tests/fixtures/ itself)
    versions = {load_any(p).meta["version"][1] for p in OSU}
    assert len(HPCC) >= 5 and len(OSU) >= 5 and len(IMB) >= 3
    assert versions == {"5", "6", "7"}


@pytest.mark.parametrize("path", OSU, ids=lambda p: p.name)
def test_osu_file_imports_every_row_exactly(path):
    run = load_any(path)
    fmt, pairs = run.source["format"], run.parameters.get("pairs", 1)
    rows = osu_rows(path.read_text())
    assert [s.size for s in run.sizes] == [size for size, _ in rows if size > 0]
    for s, (size, figure) in zip(run.sizes, [r for r in rows if r[0] > 0], strict=True):
        if fmt == "osu-latency":  # Latency (us): the mean one-way time
            assert s.time_us["mean"] == figure
            assert close(s.throughput_bps["from_mean"], 8 * size / (figure * 1e-6))
        else:  # MB/s with MB = 10^6 bytes
            carried = size * (2 if fmt == "osu-bibw" else pairs)
            assert close(s.throughput_bps["from_mean"], figure * 8e6)
            assert close(s.time_us["mean"], carried / figure)
    zero = [figure for size, figure in rows if size == 0]
    if zero and fmt == "osu-latency":
        assert run.meta["zero_byte_time_us"] == zero[0]
    if fmt != "osu-latency":
        assert "MB = 10^6 bytes" in run.source["units"]
    assert run.warnings == []


@pytest.mark.parametrize("path", IMB, ids=lambda p: p.name)
def test_imb_file_imports_every_row_exactly(path):
    run = load_any(path)
    name, version = run.meta["benchmark"], run.meta["version"]
    rows = imb_rows(path.read_text(), name)
    # PingPong: t[usec], one message (t_avg when IMB -multi 0 prints t_min/t_max/t_avg for
    # its one group); Sendrecv: t_max, one message each way (IMB's Mbytes/sec counts both)
    time_key, carried = {"PingPong": ("t[usec]", 1), "Sendrecv": ("t_max[usec]", 2)}[name]
    time_key = time_key if time_key in rows[0] else "t_avg[usec]"
    data = [r for r in rows if r["#bytes"] > 0]
    assert [s.size for s in run.sizes] == [int(r["#bytes"]) for r in data]
    for s, row in zip(run.sizes, data, strict=True):
        assert s.time_us["mean"] == row[time_key]
        assert close(s.throughput_bps["from_mean"],
                     carried * 8 * row["#bytes"] / (row[time_key] * 1e-6))
        assert s.reps == row["#repetitions"]
    # the megabyte of the file's Mbytes/sec column, as its largest row shows it, is the one
    # the importer names
    big, mega = data[-1], IMB_MEGA.get(version, 10**6)
    t = big.get("t_max[usec]", big[time_key])  # IMB's Mbytes/sec is of the slowest process
    assert math.isclose(big["Mbytes/sec"], carried * big["#bytes"] / t * 1e6 / mega,
                        rel_tol=0.01)
    assert ("2^20 bytes/s" if mega == 2**20 else "10^6 bytes/s") in run.source["units"]
    assert run.warnings == IMB_WARNINGS.get(path.name, [])


def test_imb_multi_of_several_groups_is_refused_in_one_line():
    with pytest.raises(ResultFormatError) as caught:
        load_any(IMB_REFUSED)
    message = str(caught.value)
    assert "\n" not in message and "Multi-PingPong (-multi: several groups" in message
    assert "beoperf reads IMB PingPong, PingPing, Sendrecv and Exchange" in message
    res = cli("compare", str(IMB[0]), str(IMB_REFUSED))
    assert res.status != 0 and "Traceback" not in res.stderr
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1


def _sentinel(printed: str) -> bool:
    """What HPCC prints for a figure it did not measure: -1 (and HPL_Tflops' -0.001),
    a denormal never written, or a NaN/infinity."""
    value = float(printed)
    return not math.isfinite(value) or value < 0 or 0 < abs(value) < 1e-300


@pytest.mark.parametrize("path", HPCC, ids=lambda p: p.name)
def test_hpcc_file_imports_every_summary_value_exactly(path):
    text = path.read_text()
    runs, printed = hpcc.parse_runs(text, str(path)), hpcc_summaries(text)
    assert len(runs) == len(printed)
    for run, summary in zip(runs, printed, strict=True):
        # 148 keys in 1.4.2 and 1.5.0; sources after the 1.5.0 release add FFT_API
        assert list(run.raw) == list(summary) and len(summary) in (148, 149)
        assert run.version in ("1.4.2", "1.5.0")
        for key, value in summary.items():
            assert run.raw[key] == value
            got = run.summary[key]
            if got is None:  # not run: its test is named, or the figure is a sentinel
                assert hpcc.benchmark_of(key) in run.not_run or _sentinel(value), key
            elif isinstance(got, str):
                assert got == value
            else:
                assert float(got) == float(value), key
        if not run.not_run:
            assert hpcc.failures(run) == [], hpcc.failures(run)


def test_hpcc_runs_whose_hpl_did_not_run_or_gave_nan_fail_in_a_real_file():
    # twenty runs appended to one file: HPL_N=-1 (HPL not run) in five, HPL_RnormI=-nan
    # with Success=0 in two; the others pass
    path = OTHERS / "hpcc" / "hpcc-1.5.0-buaa-20-runs-hpl-not-run-and-nan.txt"
    text = path.read_text()
    runs, printed = hpcc.parse_runs(text), hpcc_summaries(text)
    assert len(runs) == 20
    for run, summary in zip(runs, printed, strict=True):
        reasons = hpcc.failures(run)
        if summary["HPL_N"] == "-1":
            assert "HPL" in run.not_run and run.summary["HPL_Tflops"] is None
            assert any(r.startswith("HPL did not run") for r in reasons), reasons
        elif summary["HPL_RnormI"] == "-nan":
            assert summary["Success"] == "0" and run.summary["HPL_RnormI"] is None
            assert any(r.startswith("HPL failed") for r in reasons), reasons
        else:
            assert reasons == [] and "HPL" not in run.not_run
    assert sum(not hpcc.failures(r) for r in runs) == 13


def test_hpcc_tests_not_run_in_a_real_file_are_not_run():
    # a real file whose six runs ran only HPL and PTRANS (every other size -1)
    path = OTHERS / "hpcc" / "hpcc-1.4.2-utsacloud-six-runs-hpl-ptrans-only.txt"
    for run in hpcc.parse_runs(path.read_text()):
        assert "HPL" not in run.not_run and "PTRANS" not in run.not_run
        assert {"DGEMM", "STREAM", "FFT", "MPIFFT", "RandomAccess"} <= set(run.not_run)
        assert run.summary["StarDGEMM_Gflops"] is None and run.summary["HPL_Tflops"]


# --------------------------------------------------------------------------- the commands


@pytest.mark.parametrize("kind", ["osu", "imb"])
def test_compare_reads_every_real_file(kind):
    files = [str(p) for p in (OSU if kind == "osu" else IMB)]
    res = cli("compare", *files)
    assert res.status == 0, res.stderr
    assert "Traceback" not in res.stderr
    warnings = [line for line in res.stderr.splitlines() if line.startswith("warning:")]
    expected = [f"warning: {OTHERS / 'imb' / name}: {w}" for name, ws in IMB_WARNINGS.items()
                for w in ws] if kind == "imb" else []
    assert sorted(warnings) == sorted(expected)


def test_cluster_import_reads_every_real_hpcc_file(tmp_path):
    res = cli("cluster", "import", *map(str, HPCC), "-o", str(tmp_path / "out"))
    assert res.status == 0, res.stderr
    assert "Traceback" not in res.stderr
    documents = [p for p in (tmp_path / "out").glob("*.json") if p.stem != "scaling"]
    assert len(documents) == sum(len(hpcc_summaries(p.read_text())) for p in HPCC)


@pytest.mark.parametrize("path", OSU + IMB, ids=lambda p: p.name)
def test_predict_takes_a_real_ping_pong_or_stream_as_profile_and_refuses_the_rest(path):
    network = OTHERS / "osu" / "osu_latency-5.6.2-reframe-ucx.txt"
    res = cli("predict", "--profile", str(path), "--network", str(network))
    assert "Traceback" not in res.stderr
    if load_any(path).source["format"] in ("osu-latency", "osu-bw", "imb-pingpong"):
        assert res.status == 0, res.stderr
        assert f"profile {path}" in res.stdout
    else:  # osu_bibw, osu_mbw_mr, IMB Sendrecv: a benchmark whose loops are not a profile
        assert res.status != 0 and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert "not a profile" in res.stderr

"""Crafted input a hostile tester tries (issue 28, item 9): every reader linear in its
input, node sets bounded before they are expanded, and figures that would overflow or
vanish answered with one line, never a traceback.

Timings are ratios measured in one run (a crafted file against a normal one of the same
size), never absolute speeds; a reader that is too slow is stopped by SIGALRM (Python's
regex engine checks signals), so a regression fails here instead of hanging the suite.
"""

from __future__ import annotations

import json
import math
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from ClusterShell.NodeSet import NodeSet

from beoperf import errors, safeio
from beoperf.launch import hosts
from beoperf.launch.remote import _one_host
from beoperf.model import nodeset
from beoperf.model.document import DocumentError
from beoperf.model.fleet import answer_counts
from beoperf.model.importers import load_any
from beoperf.model.nodeset import MAX_NODES
from beoperf.model.pingpong import ResultFormatError
from beoperf.model.profile import ProfileError, read_profile
from beoperf.suites.cluster_import import read_runs
from helpers import cli

FIXTURES = Path(__file__).parent / "fixtures"
LIMIT = 256 * 1024  # the result-file limit in these tests (64 MiB in use): files fill it
SLOWER = 10  # a crafted file may read this many times slower than a normal one, no more


class _TooSlow(Exception):
    pass


def _stop(signum, frame):
    raise _TooSlow


def _seconds(read: Callable[[Path], object], path: Path, within: float = 60.0) -> float:
    """Seconds read(path) takes (its one-line refusal is an answer too); inf if it is
    still reading after WITHIN seconds."""
    previous = signal.signal(signal.SIGALRM, _stop)
    signal.setitimer(signal.ITIMER_REAL, within)
    start = time.perf_counter()
    try:
        read(path)
    except (ResultFormatError, errors.InputError, ProfileError):
        pass
    except _TooSlow:
        return math.inf
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return time.perf_counter() - start


def _within(bound: float, read: Callable[[Path], object], path: Path) -> float:
    """Seconds read(path) takes, tried again once if over BOUND (another process may have
    had the CPU); inf if it is still reading after max(BOUND, 1 s)."""
    first = _seconds(read, path, within=max(bound, 1.0))
    if first <= bound or math.isinf(first):
        return first
    return min(first, _seconds(read, path, within=max(bound, 1.0)))


def _fill(path: Path, lines: list[str]) -> Path:
    """LINES written to PATH, the last one padded so that the file is LIMIT bytes."""
    text = "\n".join(lines)
    text = text + " " * (LIMIT - 1 - len(text)) + "\n"
    assert len(text) == LIMIT
    path.write_text(text)
    return path


def _netpipe3(path: Path) -> Path:
    """A normal NetPIPE 3 np.out of LIMIT bytes."""
    lines, size, total = [], 1, 0
    while total < LIMIT - 64:
        seconds = 1e-5 + size * 1e-9
        lines.append(f"{size:8d} {size * 8.0 / seconds / 2**20:f} {seconds:12.8f}")
        total += len(lines[-1]) + 1
        size += 1
    return _fill(path, lines)


def _normal_and_crafted(normal: Path, crafted: Path, read) -> tuple[float, float]:
    base = min(_seconds(read, normal) for _ in range(2))
    return base, _within(SLOWER * base, read, crafted)


@pytest.fixture
def small_limit(monkeypatch):
    monkeypatch.setitem(safeio.LIMITS, "result", LIMIT)


@pytest.mark.parametrize("line", [
    "1" + " " * LIMIT + "x",  # a whitespace run between two tokens
    "1 1" + " " * LIMIT,  # a whitespace run at the end of a line
], ids=["inner-run", "trailing-run"])
def test_netpipe_reader_is_linear_on_one_long_line(tmp_path, small_limit, line):
    normal = _netpipe3(tmp_path / "np.out")
    crafted = tmp_path / "crafted.out"
    crafted.write_text(line[:LIMIT - 1] + "\n")
    assert crafted.stat().st_size == LIMIT and len(load_any(normal).sizes) > 1000
    base, hostile = _normal_and_crafted(normal, crafted, load_any)
    assert hostile <= SLOWER * base, (hostile, base)
    result = cli("plot", str(crafted), "-o", str(tmp_path / "plots"))
    assert result.status != 0 and len(result.error_lines) == 1
    assert len(result.stderr) < 300  # the crafted token is not printed whole


def _hpccoutf(path: Path, extra: str) -> Path:
    """A real HPCC output file with EXTRA, cut to fill it to LIMIT bytes, inserted where
    the reader looks (after the run's header, before its summary)."""
    real = (FIXTURES / "hpcc" / "hpcc-1.5.0-np2.txt").read_text()
    head, begin, tail = real.partition("Begin of Summary section.")
    path.write_text(head + extra[:LIMIT - len(real) - 1] + "\n" + begin + tail)
    assert path.stat().st_size == LIMIT
    return path


def test_hpcc_reader_is_linear_on_one_long_line(tmp_path, small_limit):
    real = (FIXTURES / "hpcc" / "hpcc-1.5.0-np2.txt").read_text()
    ordinary = "\n".join(line for line in real.splitlines()[:40] if line.strip()) + "\n"
    normal = _hpccoutf(tmp_path / "hpccoutf.txt", ordinary * (LIMIT // len(ordinary)))
    dots = "||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)= 1" + "." * LIMIT
    crafted = _hpccoutf(tmp_path / "crafted-hpccoutf.txt", dots)
    assert len(read_runs(str(normal))[0]) == 1
    base, hostile = _normal_and_crafted(normal, crafted, lambda p: read_runs(str(p)))
    assert hostile <= SLOWER * base, (hostile, base)


def test_mpip_reader_is_linear_on_one_long_line(tmp_path, monkeypatch):
    from test_predict import mpip_report

    monkeypatch.setattr("beoperf.model.profile.LIMIT", LIMIT)
    report = mpip_report()
    row = next(line for line in report.splitlines() if line.startswith("Isend"))
    normal = tmp_path / "normal.mpiP"
    normal.write_text(report + (row + "\n") * ((LIMIT - len(report)) // (len(row) + 1)))
    heading = "@--- " + " " * (LIMIT - len(report) - 14) + "x"  # a run of spaces, then text
    crafted = tmp_path / "crafted.mpiP"
    crafted.write_text("@ mpiP\n" + heading + "\n" + report)
    assert crafted.stat().st_size == LIMIT and normal.stat().st_size > LIMIT - len(row) - 1
    assert len(read_profile(str(normal)).entries) == 2
    base, hostile = _normal_and_crafted(normal, crafted, lambda p: read_profile(str(p)))
    assert hostile <= SLOWER * base, (hostile, base)


def test_hpl_check_lines_still_read():
    from beoperf.model.hpcc import _HPL_CHECK
    text = ("||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)=        0.0042 ...... PASSED\n"
            "||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)= 1.5e+03......FAILED\n"
            "||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)= nan ...... FAILED\n")
    assert _HPL_CHECK.findall(text) == [("0.0042", "PASSED"), ("1.5e+03", "FAILED"),
                                        ("nan", "FAILED")]


# --------------------------------------------------------------------------- node sets


def _no_expanding(monkeypatch):
    """ClusterShell's NodeSet made to fail wherever beoperf builds one from a user's set."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"a node set was expanded: {args!r:.60}")
    monkeypatch.setattr(hosts, "NodeSet", refuse)
    monkeypatch.setattr("ClusterShell.NodeSet.NodeSet", refuse)


@pytest.mark.parametrize("argv", [
    ("cluster", "hpcc", "--np", "2", "--hosts", "n[1-100000000]"),
    ("cluster", "hpcc", "--np", "2", "--hosts", "rack[1-300]-n[1-300]"),
    ("cluster", "hpcc", "--np", "2", "--hosts", "a,n[1-65536]"),
    ("audit", "-w", "n[1-100000000]"),
    ("node", "-w", "n[0-99999999]"),
    ("study", "mtu", "--levels", "1500,9000", "-w", "n[1-100000000]"),
], ids=["range", "product", "one-over", "audit-fleet", "node-fleet", "study"])
def test_a_node_set_over_the_limit_is_refused_before_it_is_expanded(tmp_path, monkeypatch,
                                                                    argv):
    _no_expanding(monkeypatch)
    out = ("-o", str(tmp_path / "out")) if argv[0] == "cluster" else ()
    result = cli(*argv, *out)
    assert result.status == 2, result.stderr
    assert len(result.error_lines) == 1 and f"limit of {MAX_NODES} hosts" in result.stderr


def test_node_sets_are_counted_as_clustershell_expands_them():
    for text in ("a,b", "n[1-3]", "n[01-10/2]", "r[1-4]-n[01-16],x", "n[1-10]!n[2-3]"):
        assert nodeset.count(text) >= len(NodeSet(text))
    assert nodeset.count("r[1-4]-n[01-16],x") == 65
    assert len(hosts.expand(f"n[1-{MAX_NODES}]")) == MAX_NODES  # the limit itself is fine
    with pytest.raises(nodeset.NodeSetSizeError, match="not a range"):
        nodeset.count("n[9-1]")


def test_a_document_naming_a_huge_node_set_is_an_input_error(monkeypatch):
    _no_expanding(monkeypatch)
    with pytest.raises(DocumentError, match=f"limit of {MAX_NODES}"):
        answer_counts({"answered": "n[1-100000000]", "nodes": "n[1-100000000]"})
    with pytest.raises(ValueError, match="not one host"):
        _one_host("n[1-100000000]")


def _hostfile(path: Path, count: int) -> Path:
    path.write_text("".join(f"node{i:06d} slots=2\n" for i in range(count)))
    return path


def test_a_hostfile_at_the_limit_reads_in_linear_time(tmp_path):
    small = _hostfile(tmp_path / "small", MAX_NODES // 8)
    full = _hostfile(tmp_path / "full", MAX_NODES)
    # 8x the lines in at most 32x the time (a quadratic reader takes 64x); the fastest of
    # three reads of each, as a CI run's busy phase once read the full file 34x slower
    base = min(_seconds(hosts.read_hostfile, small) for _ in range(3))
    assert min(_within(4 * 8 * base, hosts.read_hostfile, full) for _ in range(2)) <= 4 * 8 * base
    assert len(hosts.read_hostfile(full).names) == MAX_NODES
    result = cli("cluster", "hpcc", "--np", "2", "-o", str(tmp_path / "out"), "--hostfile",
                 str(_hostfile(tmp_path / "over", MAX_NODES + 1)))
    assert result.status == 2 and len(result.error_lines) == 1
    assert f"line {MAX_NODES + 1}: over the limit of {MAX_NODES} hosts" in result.stderr


# --------------------------------------------------------------------------- figures out of range

HPCC = FIXTURES / "hpcc"


def _summary_edited(source: Path, target: Path, **values: str) -> Path:
    """SOURCE (an HPCC output file) with summary keys set to VALUES, written to TARGET."""
    lines = source.read_text().splitlines()
    for i, line in enumerate(lines):
        key = line.partition("=")[0]
        if key in values:
            lines[i] = f"{key}={values[key]}"
    target.write_text("\n".join(lines) + "\n")
    return target


def _one_line(result, status: int, message: str) -> None:
    assert result.status == status, result.stderr
    assert len(result.error_lines) == 1 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_hpcc_with_no_processes_is_one_line(tmp_path):
    bad = _summary_edited(HPCC / "hpcc-1.5.0-np2.txt", tmp_path / "zero.txt", CommWorldProcs="0")
    result = cli("cluster", "import", str(bad), "-o", str(tmp_path / "out"))
    _one_line(result, 1, "zero.txt: run 1: CommWorldProcs=0 is not a process count")


def test_a_scaling_whose_ratios_overflow_is_still_written(tmp_path):
    small = _summary_edited(HPCC / "hpcc-1.5.0-np1.txt", tmp_path / "small.txt",
                            HPL_Tflops="1e-300")
    big = _summary_edited(HPCC / "hpcc-1.5.0-np2.txt", tmp_path / "big.txt",
                          HPL_Tflops="1e308")
    result = cli("cluster", "import", str(small), str(big), "-o", str(tmp_path / "out"),
                 "--format", "json")
    assert result.status == 0, result.stderr
    doc = json.loads((tmp_path / "out" / "scaling.json").read_text())
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"small.json", "big.json",
                                                              "scaling.json"}
    at_two = doc["body"]["points"][1]
    assert at_two["np"] == 2 and at_two["metrics"]["HPL_Tflops"]["mean"] == 1e308
    assert at_two["speedup"]["HPL_Tflops"] is None  # 1e308 / 1e-300: no figure, no inf
    assert at_two["efficiency"]["HPL_Tflops"] is None
    assert at_two["efficiency"]["StarDGEMM_Gflops"] > 0  # the others are still there


def test_an_mpip_mean_that_overflows_is_one_line(tmp_path):
    from test_predict import mpip_report

    report = mpip_report().replace("*    4000 2.621e+05 2.621e+05", "*    4000 2.621e+05     1e999")
    assert "1e999" in report
    (tmp_path / "app.mpiP").write_text(report)
    result = cli("predict", "--profile", str(tmp_path / "app.mpiP"), "--model",
                 "alpha=20us,bw=1Gbit/s")
    _one_line(result, 1, "Isend site 3: a message size that is not a finite number")


def test_a_reference_csv_with_a_bare_carriage_return(tmp_path):
    ours = tmp_path / "ours.csv"
    ours.write_bytes(b"metric,unit,np2\nHPL,TFLOP/s,0.5\rPTRANS,GB/s,1\n")  # CR: a line end
    result = cli("cluster", "import", str(HPCC / "hpcc-1.5.0-np2.txt"), "--reference-file",
                 str(ours))
    assert result.status == 0, result.stderr
    rows = [line.split()[0] for line in result.stdout.splitlines() if line.strip()]
    assert "HPL" in rows and "PTRANS" in rows
    huge = tmp_path / "huge.csv"
    huge.write_text('metric,unit,np2\nHPL,TFLOP/s,"' + "1" * 200_000 + '"\n')
    result = cli("cluster", "import", str(HPCC / "hpcc-1.5.0-np2.txt"), "--reference-file",
                 str(huge))
    _one_line(result, 1, "huge.csv: line 2: not CSV")


@pytest.mark.parametrize("fixture, row, value, message", [
    ("osu_latency-5.6.3.txt", "1 ", "1e-320", "1 B: throughput (bit/s), from_mean, comes to inf"),
    ("osu_bw-7.4.txt", "1 ", "1e-320", "1 B: time (us), mean, comes to inf"),
])
def test_an_osu_figure_out_of_range_is_one_line(tmp_path, fixture, row, value, message):
    lines = (FIXTURES / fixture).read_text().splitlines()
    edited = [f"{row}{value}" if line.startswith(row) else line for line in lines]
    bad = tmp_path / "bad.txt"
    bad.write_text("\n".join(edited) + "\n")
    good = str(FIXTURES / fixture)
    for argv in (("plot", str(bad), "-o", str(tmp_path / "plots")), ("compare", good, str(bad)),
                 ("predict", "--profile", good, "--network", str(bad))):
        _one_line(cli(*argv), 1, f"bad.txt: {message}")


# --------------------------------------------------------------------------- options and documents


@pytest.mark.parametrize("argv", [("pingpong", ""), ("pingpong", "  "),
                                  ("replay", "PROFILE", "")])
def test_an_empty_host_is_refused_not_read_as_loopback(tmp_path, argv):
    profile = tmp_path / "app.csv"
    profile.write_text("size,count\n64,10\n")
    result = cli(*(str(profile) if a == "PROFILE" else a for a in argv))
    _one_line(result, 2, "HOST is empty")


def test_cluster_show_escapes_control_characters(tmp_path):
    assert cli("cluster", "import", str(HPCC / "hpcc-1.5.0-np2.txt"), "-o",
               str(tmp_path / "out")).status == 0
    path = tmp_path / "out" / "scaling.json"
    doc = json.loads(path.read_text())
    doc["body"]["label"] = "lab\x1b[2J\x1b]0;owned\x07"
    path.write_text(json.dumps(doc))
    for fmt in ("text", "markdown", "csv"):
        result = cli("cluster", "show", str(path), "--format", fmt)
        assert result.status == 0, result.stderr
        assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "lab\\x1b[2J\\x1b]0;owned\\x07" in cli("cluster", "show", str(path)).stdout


def test_a_replay_of_a_count_of_10_15_is_timed_on_a_bounded_part(tmp_path, monkeypatch):
    from beoperf.model.profile import Entry
    from beoperf.sweep import replay

    huge = Entry(64, 10**15, "pingpong", 1)
    assert replay.plan(huge)[1] <= replay.MAX_TIMED_MESSAGES
    assert replay.plan(Entry(64, 1000, "stream", 1)) == (1000, 1000)  # small: all of it
    assert replay.plan(Entry(1 << 30, 100, "stream", 1))[1] == 8  # 8 GiB of 1 GiB messages
    monkeypatch.setattr(replay, "MAX_TIMED_MESSAGES", 1000)  # a loopback replay in a test
    profile = tmp_path / "app.csv"
    profile.write_text("size,count\n64,1000000000000000\n1K,10\n")
    result = cli("replay", str(profile), "--repeats", "1")
    assert result.status == 0, result.stderr
    assert "1 class(es) timed on part of their count" in result.stdout
    assert "64 B x 1,000,000,000,000,000" in result.stdout
    rows = {line.split()[0]: line.split()[-1] for line in result.stdout.splitlines()
            if line.strip()[:1].isdigit()}
    assert rows["64"] == "1,000" and rows["1024"] == "10"  # messages timed

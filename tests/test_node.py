"""The node suite: the C kernels and their checks, the statistics of every figure, the
cache levels and drops, outliers, comparing node documents, I/O files (hostile
directories, removal on Ctrl-C and SIGTERM, free space) and the CLI.  Sizes are small:
each test runs in well under a few seconds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from beoperf import _node, errors, model
from beoperf.analysis import node as analysis
from beoperf.model import node as node_doc
from beoperf.model.document import from_json
from beoperf.suites import node as suite
from beoperf.suites import node_io, node_stream
from beoperf.sweep import node_kernels
from helpers import checked, cli, scratch_open

FIXTURES = Path(__file__).parent / "fixtures"

SMALL = ["--repeat", "3", "--array-size", "1M", "--threads", "1", "--lengths", "1K,8K",
         "--kernel-budget", "0.1", "--dgemm-n", "64", "--table-size", "1M",
         "--fft-size", "1K", "--block", "4K", "--file-size", "64K", "--no-progress"]


# ------------------------------------------------------------------ C kernels


def replay(ntimes: int) -> tuple[float, float, float]:
    a, b, c = 2.0, 2.0, 0.0
    for _ in range(ntimes):
        c = a
        b = 3.0 * c
        c = a + b
        a = b + 3.0 * c
    return a, b, c


@pytest.mark.parametrize("nontemporal", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
def test_stream_validates_against_the_scalar_replay(threads, nontemporal):
    # 10,003 elements: a partial line
    times, errs, expected, warmed = _node.stream(10_003, threads, 4, 2, nontemporal)
    assert len(times) == 4 and all(len(row) == 4 and min(row) > 0 for row in times)
    assert errs == (0.0, 0.0, 0.0)
    assert expected == replay(4) and warmed == 0


def test_stream_warms_up_untimed_and_validates_the_timed_iterations_alone():
    began = time.monotonic()
    times, errs, expected, warmed = _node.stream(10_003, 2, 3, 1, True, 0.2)
    assert time.monotonic() - began >= 0.2
    # every warm-up iteration and the array reset after it take longer than the timed tests
    assert warmed >= 2 and sum(map(sum, times)) * 1e-9 < 0.2
    assert errs == (0.0, 0.0, 0.0) and expected == replay(3)  # values as if not warmed
    with pytest.raises(ValueError, match="warm_s"):
        _node.stream(10_003, 1, 3, 1, False, -1.0)


def test_stream_counts_bytes_as_stream_does():
    metrics = []
    detail: dict = {}
    node_stream.run(20_000, [1], 2, {"llc_total": None, "memory_available": None},
                    lambda _t: None, metrics, detail)
    run = detail["runs"][0]
    assert [m["name"] for m in metrics] == ["copy", "scale", "add", "triad"]
    for m in metrics:
        per = node_stream.BYTES_PER_ELEMENT[m["name"]]
        # best rate = bytes of one pass / the shortest time of one pass
        assert m["best"] == pytest.approx(per * 20_000 / m["min_time_s"] / 1e9, rel=1e-9)
        assert m["min_time_s"] * run["inner_passes"] >= node_stream.MIN_TIMING_S * 0.999
        assert m["repeat"] == 2 and m["unit"] == "GB/s" and m["ok"] is True
    assert detail["below_4x_cache"] is False and detail["ok"] is True
    assert detail["warm_s"] == node_stream.WARM_S and run["warm_iterations"] >= 1


def test_stream_refuses_arrays_that_do_not_fit():
    with pytest.raises(errors.BadSpec, match="three arrays.*available"):
        node_stream.check_fits(1 << 30, 2 << 30)
    node_stream.check_fits(1 << 20, 2 << 30)


def test_stream_default_size_is_four_times_the_cache():
    n, why = node_stream.default_elements(32 << 20)
    assert n * 8 >= 4 * (32 << 20) and "4 x" in why


def test_gups_starts_is_the_sequence():
    x, seq = 1, [1]
    for _ in range(300):
        x = ((x << 1) ^ (7 if x & (1 << 63) else 0)) & (2**64 - 1)
        seq.append(x)
    assert [_node.gups_starts(n) for n in range(301)] == seq


def test_gups_unverified_counts_nothing():
    assert _node.gups(10, 2, False)[2] == 0


def test_gups_single_thread_has_no_errors():
    updates, ns, wrong = _node.gups(12, 1, True)
    assert updates == 4 << 12 and ns > 0 and wrong == 0


@pytest.mark.parametrize("kernel", node_kernels.KERNELS)
def test_kernel_results_are_checked(kernel):
    m = node_kernels.KernelMeasurer(kernel)
    per = m.run(1000, 7)
    assert per > 0 and m.failed is None
    m.check(1000)


@pytest.mark.parametrize("kernel", node_kernels.KERNELS)
@pytest.mark.parametrize("narrow", [False, True])
def test_both_vector_widths_compute_the_same_checked_result(kernel, narrow):
    m = node_kernels.KernelMeasurer(kernel)
    m.run(1003, 5, narrow)  # a length with a tail past the last full vector
    assert m.failed is None


def test_the_calibration_keeps_the_faster_width_and_the_trials_use_it(monkeypatch):
    """Times per build scripted: the narrow build twice as fast at 4K, the wide one at 1K;
    widths compared only in L1 and L2."""
    calls = []

    def peak(kernel, a, b, reps, s, narrow):
        calls.append((len(a), narrow))
        fast = narrow == (len(a) == 4096)
        return (reps * len(a) * (1 if fast else 2), float(reps * np.dot(a, b)))

    monkeypatch.setattr(node_kernels._node, "peak", peak)
    monkeypatch.setattr(node_kernels, "WIDTHS", 2)
    caches = [{"level": 1, "type": "Data", "size": 48 << 10},
              {"level": 2, "type": "Unified", "size": 64 << 10},
              {"level": 3, "type": "Unified", "size": 32 << 20}]
    m = node_kernels.KernelMeasurer("dot", caches=caches)
    assert m.calibrate(4096, None) == pytest.approx(4096)  # 64 KiB: in L2
    assert m.calibrate(1024, None) == pytest.approx(1024)
    assert m.narrow == {4096: True, 1024: False}
    assert node_kernels.KernelMeasurer("dot", caches=caches[:1]).calibrate(4096, None) \
        == pytest.approx(2 * 4096), "past L2 (here past L1, the last cache) the wide build"
    calls.clear()
    m.trial(4096, 3), m.trial(1024, 3)
    assert calls == [(4096, True), (1024, False)] and m.failed is None


@pytest.mark.parametrize("kernel", node_kernels.KERNELS)
def test_lengths_past_l2_get_an_untimed_runup_that_cannot_stand_in_for_the_trial(
        kernel, monkeypatch):
    """Past L2 each trial starts with a run-up of the same loop; the check still needs the
    timed run itself (a run-up that worked and a timed run that did nothing fails)."""
    caches = [{"level": 1, "type": "Data", "size": 32 << 10},
              {"level": 2, "type": "Unified", "size": 64 << 10},
              {"level": 3, "type": "Unified", "size": 8 << 20}]
    real, calls = _node.peak, []

    def peak(kernel_, a, b, reps, s, narrow, skip=None):
        calls.append((len(a), reps))
        return (1000, 0.0) if reps == skip else real(kernel_, a, b, reps, s, narrow)

    monkeypatch.setattr(node_kernels._node, "peak", peak)
    m = node_kernels.KernelMeasurer(kernel, caches=caches)
    m.calibrate(1024, None)  # 16 KiB at most: L1
    m.calibrate(32768, None)  # 256-512 KiB: L3
    assert 1024 not in m.runup and m.runup[32768] >= 1
    calls.clear()
    m.trial(1024, 3), m.trial(32768, 3)
    assert calls == [(1024, 3), (32768, m.runup[32768]), (32768, 3)] and m.failed is None
    m.check(32768)
    monkeypatch.setattr(node_kernels._node, "peak",
                        lambda *args: peak(*args, skip=2))
    m.trial(32768, 2)
    with pytest.raises(errors.IntegrityError, match=kernel):
        m.check(32768)


def test_one_lengths_arrays_are_one_aligned_block():
    a, b = node_kernels.KernelMeasurer("dot")._arrays(4096)
    assert a.ctypes.data % node_kernels.ALIGNMENT == 0 == b.ctypes.data % 64
    assert b.ctypes.data - a.ctypes.data == 8 * (4096 + node_kernels.GAP)


@pytest.mark.parametrize("kernel", node_kernels.KERNELS)
def test_a_removed_kernel_fails_its_check(kernel, monkeypatch):
    """A loop that did nothing (as if the compiler had removed it) is caught."""
    monkeypatch.setattr(node_kernels._node, "peak", lambda *a, **k: (1000, 0.0))
    m = node_kernels.KernelMeasurer(kernel)
    m.run(1000, 7)
    with pytest.raises(errors.IntegrityError, match=kernel):
        m.check(1000)


def test_daxpy_moves_a_by_reps_times_s_b():
    a, b = np.ones(64), np.arange(64, dtype=float)
    _node.peak("daxpy", a, b, 1000, 0.5)
    assert np.allclose(a, 1 + 500 * b)


def test_poly_is_horner_of_degree_five():
    a, b = np.linspace(-1, 1, 101), np.zeros(101)
    _node.peak("poly", a, b, 1)
    assert np.allclose(b, np.polyval(node_kernels.COEF[::-1], a), rtol=1e-13)


# ------------------------------------------------------------------ derived figures


def test_metric_summary():
    m = node_doc.metric("stream", "triad", "GB/s", [1, 2, 3, 4], params={"threads": 2})
    assert (m["mean"], m["min"], m["max"], m["repeat"]) == (2.5, 1, 4, 4)
    assert m["stdev"] == pytest.approx(np.std([1, 2, 3, 4], ddof=1))
    assert m["id"] == "stream.triad.t2"


CACHES = [{"level": 1, "type": "Data", "size": 32768}, {"level": 1, "type": "Instruction",
          "size": 32768}, {"level": 2, "type": "Unified", "size": 1 << 20},
          {"level": 3, "type": "Unified", "size": 8 << 20}]


def test_cache_level_of_a_working_set():
    assert [analysis.level_of(n, CACHES) for n in (16 << 10, 32 << 10, 33 << 10, 8 << 20,
                                                   9 << 20)] == ["L1", "L1", "L2", "L3",
                                                                 "memory"]
    assert analysis.level_of(1, []) == "unknown"


def test_drops_between_levels():
    rows = [{"kernel": "dot", "length": n, "level": lv, "mflops": v} for n, lv, v in
            [(1, "L1", 1000), (2, "L1", 1000), (3, "L2", 500), (4, "memory", 100)]]
    got = analysis.drops(rows)
    assert [(d["from"], d["to"], round(d["change_pct"])) for d in got] == [
        ("L1", "L2", -50), ("L2", "memory", -80)]


def test_robust_z_names_the_slow_node_only():
    values = {"n1": 100.0, "n2": 98.0, "n3": 97.0, "n4": 96.0, "n5": 20.0}
    got = analysis.robust_z(values)
    assert got["outliers"] == ["n5"] and got["z"]["n5"] < -analysis.THRESHOLD
    # a 4% wobble with a tiny MAD is not an outlier: the MAD is floored at 5% of the median
    assert analysis.robust_z({"a": 100.0, "b": 100.0, "c": 100.0, "d": 96.0})["outliers"] == []


def doc_with(samples: dict[str, list[float]], host: str = "h") -> dict:
    metrics = [node_doc.metric("stream", name, "GB/s", s, params={"threads": 1})
               for name, s in samples.items()]
    body = node_doc.body({}, {}, metrics, 5)
    return node_doc.make(body, {"host": host}).to_json()


def test_compare_node_documents(tmp_path):
    """One run a side: a doubled rate is better, an unchanged one cannot be told from a
    10% drift between runs; repeated runs (one label) narrow the interval."""
    base = doc_with({"copy": [10, 10.1, 9.9, 10.05, 9.95], "triad": [8, 8.1, 7.9, 8, 8.05]})
    new = doc_with({"copy": [20, 20.2, 19.8, 20.1, 19.9], "triad": [8.02, 8.1, 7.9, 7.95, 8]})
    for name, doc in (("a.json", base), ("b.json", new)):
        (tmp_path / name).write_text(json.dumps(doc))
    got = cli("compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--format",
              "json", "--label", "before", "--label", "after")
    assert got.status == 0, got.stderr
    rows = {r["id"]: r for r in got.json["body"]["rows"]}
    assert (got.json["kind"], got.json["schema_version"]) == ("node-comparison", 2)
    assert rows["stream.copy.t1"]["verdicts"][1] == "better"
    assert rows["stream.copy.t1"]["changes"][1] == pytest.approx(100.0, rel=0.01)
    low, high = rows["stream.copy.t1"]["intervals"][1]
    assert 0 < low < 100 < high
    assert rows["stream.triad.t1"]["verdicts"][1] == "cannot tell"
    table = cli("compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert "stream.copy.t1" in table.stdout and "+100.0% [+" in table.stdout
    assert cli("compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--format",
               "impact").status == 2


def test_compare_repeated_node_runs_by_label(tmp_path):
    rng = np.random.default_rng(3)
    paths, labels = [], []
    for i, (label, copy) in enumerate([("A", 10.0)] * 3 + [("B", 12.0)] * 3):
        level = float(rng.lognormal(0, 0.02))
        doc = doc_with({"copy": [copy * level * (1 + 0.005 * k) for k in range(5)]})
        path = tmp_path / f"r{i}.json"
        path.write_text(json.dumps(doc))
        paths.append(str(path))
        labels += ["--label", label]
    got = cli("compare", *paths, *labels, "--format", "json")
    assert got.status == 0, got.stderr
    body = got.json["body"]
    assert body["labels"] == ["A", "B"] and body["runs"] == [3, 3]
    (row,) = body["rows"]
    assert row["verdicts"] == [None, "better"] and row["intervals"][1][0] > 5
    text = cli("compare", *paths, *labels).stdout
    assert "A (3 runs)" in text and "B (3 runs)" in text


def test_node_comparisons_of_version_1_drop_their_verdicts():
    doc = model.load(FIXTURES / "documents" / "node-comparison-v1-issue13.json")
    assert doc.schema_version == 2 and "min_change" not in doc.body
    assert {v for r in doc.body["rows"] for v in r["verdicts"]} <= {None, "cannot tell"}
    assert "drifts between runs" in doc.body["test"]["statement"]


# ------------------------------------------------------------------ I/O files


def leftovers(path) -> list[str]:
    return [p.name for p in path.iterdir() if p.name.startswith(node_io.PREFIX)]


def test_io_never_opens_a_planted_name(tmp_path, monkeypatch):
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    names = iter(["aaaa", "bbbb"])
    monkeypatch.setattr(node_io.secrets, "token_hex", lambda _n: next(names))
    (tmp_path / (node_io.PREFIX + "aaaa")).symlink_to(victim)
    dfd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with node_io.scratch(dfd, str(tmp_path)) as (fd, name):
            assert name == node_io.PREFIX + "bbbb"
            os.write(fd, b"x" * 10)
    finally:
        os.close(dfd)
    assert victim.read_text() == "keep me"
    assert leftovers(tmp_path) == [node_io.PREFIX + "aaaa"]  # the planted link, untouched
    assert (tmp_path / (node_io.PREFIX + "aaaa")).is_symlink()


def test_io_files_are_removed_after_ctrl_c(tmp_path, monkeypatch):
    real, calls = _node.io, []

    def io_then_interrupt(*args, **kwargs):
        calls.append(args[1])
        if len(calls) == 5:  # (O_DIRECT probe,) layout, write, read, then stop
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(node_io._node, "io", io_then_interrupt)
    measured = suite.run(suite.Spec(parts=("io",), repeat=2, dirs=(str(tmp_path),),
                                    file_sizes=(64 << 10,)))
    assert measured.interrupt is not None and leftovers(tmp_path) == []
    body = checked(measured.document.to_json())["body"]
    assert body["status"] == "interrupted"
    # the patterns measured before the stop are kept (2, or 3 when the O_DIRECT probe,
    # one of the calls, was not made: a file system without O_DIRECT)
    names = [m["name"] for m in body["metrics"]]
    assert len(names) in (2, 3) and names == list(node_io.PATTERNS[:len(names)])


def test_io_files_are_removed_on_sigterm(tmp_path):
    argv = [sys.executable, "-m", "beoperf", "node", "io", "--dir", str(tmp_path),
            "--file-size", "32M", "--block", "4K", "--repeat", "50", "--no-progress",
            "--warm-cache", "-o", str(tmp_path / "out.json")]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not scratch_open(proc.pid, tmp_path) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert scratch_open(proc.pid, tmp_path), "the I/O file was never opened"
        assert leftovers(tmp_path) == [], "the I/O file has a name while it is open"
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err
    assert leftovers(tmp_path) == []
    saved = from_json(json.loads((tmp_path / "out.json").read_text()))
    assert saved.body["status"] == "interrupted" and "SIGTERM" in saved.body["status_reason"]



def test_io_checks_free_space_first(tmp_path):
    got = cli("node", "io", "--dir", str(tmp_path), "--file-size", "1000T", "--no-progress")
    assert got.status == 2 and "free" in got.stderr and leftovers(tmp_path) == []


def test_io_method_is_stated(tmp_path):
    measured = suite.run(suite.Spec(parts=("io",), repeat=1, dirs=(str(tmp_path),),
                                    file_sizes=(64 << 10,)))
    entry = measured.document.body["parts"]["io"]["dirs"][0]
    assert entry["method"][str(64 << 10)] in (node_io.DIRECT, node_io.DROP)
    assert entry["mount"]["fstype"]
    warm = suite.run(suite.Spec(parts=("io",), repeat=1, dirs=(str(tmp_path),),
                                file_sizes=(64 << 10,), cold=False))
    assert warm.document.body["parts"]["io"]["dirs"][0]["method"] == {str(64 << 10):
                                                                      node_io.WARM}


# ------------------------------------------------------------------ CLI


def test_cli_whole_suite_small(tmp_path):
    got = cli("node", *SMALL, "--dir", str(tmp_path), "--json", "-o", str(tmp_path / "n.json"))
    assert got.status == 0, got.stderr
    doc = got.json
    body = doc["body"]
    assert body["status"] == "complete" and leftovers(tmp_path) == []
    parts = {m["part"] for m in body["metrics"]}
    assert parts == set(node_doc.PARTS)
    for m in body["metrics"]:
        assert m["unit"] and m["repeat"] >= 3 and m["min"] <= m["mean"] <= m["max"]
        assert m["stdev"] >= 0 and m["ok"] is True
    c = body["conditions"]
    for key in ("cpu_model", "cores_used", "governor", "caches", "memory", "numa", "build",
                "blas"):
        assert key in c
    assert c["build"]["flags"] and "environment" in c["blas"]
    assert body["parts"]["io"]["dirs"][0]["mount"]["mount_point"]
    assert json.loads((tmp_path / "n.json").read_text())["kind"] == "node"


def test_cli_table_and_reference(tmp_path):
    got = cli("node", "kernels", "io", *SMALL, "--dir", str(tmp_path), "--lengths", "1K,4K",
              "--reference", "medusa")
    assert got.status == 0, got.stderr
    out = got.stdout
    assert "PEAK kernels" in out and "medusa daxpy" in out
    kernel_row = next(line for line in out.splitlines() if line.startswith("1,024"))
    assert kernel_row.split()[1] == "L1" and "1089" in kernel_row  # Medusa's daxpy at 1,024
    assert "drops between levels" in out or "L1" in out
    assert "sequential write" in out and "min/avg/max" in out


def test_cli_bad_input_is_one_line():
    for argv in (["node", "nothing"], ["node", "--repeat", "0"], ["node", "--lengths", "x"],
                 ["node", "--reference", "cray"], ["node", "stream", "--array-size", "64T"]):
        got = cli(*argv)
        assert got.status == 2 and len(got.error_lines) == 1, (argv, got.stderr)


def test_cli_failed_check_exits_5(monkeypatch):
    monkeypatch.setattr(node_kernels._node, "peak", lambda *a, **k: (1000, 0.0))
    got = cli("node", "kernels", "--lengths", "1K", "--repeat", "2", "--kernel-budget",
              "0.1", "--no-progress", "--json")
    assert got.status == 5
    assert got.json["body"]["status"] == "failed"


def test_fleet_node_args_drop_fleet_options():
    from beoperf.cli.node import node_args

    argv = ["beoperf", "node", "kernels", "-w", "n[1-3]", "--exec-template", "x %h",
            "--repeat", "3", "--json", "--fanout=2", "--threshold", "4"]
    assert node_args(argv) == ("kernels", "--repeat", "3")


def test_the_stream_title_says_the_warm_up_when_the_document_has_one():
    from beoperf.report.node import warm_phrase
    assert warm_phrase({"warm_s": 1.0}) == "after 1 s of untimed iterations, "
    assert warm_phrase({}) == "" and warm_phrase({"warm_s": 0}) == ""
    assert warm_phrase({"warm_s": "1; rm -rf /"}) == ""  # a crafted document: not printed
